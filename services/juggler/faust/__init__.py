"""The Faust runtime: the same job as `juggler worker` as a Faust app (`juggler.faust.app`),
and Faust codecs for the records the worker and this runtime write (`juggler.faust.records`).

Installed with `pip install juggler[faust]`; the worker never imports this package.
"""
