"""The HTTP port of a runtime: the small pages (`/health`, `/queries`, `/progress`,
`/metrics`), the results API over the results index, and the bearer token in front of
them. The worker's port is a process of its own (`page_process`), fed by a thread of
the worker (`page_feed`); the Faust runtime's pages are Faust's web server with the
results page of `http_api`. It reads a runtime through the read-only views the runtime
publishes (`juggler.runtime.pages`) and never the other way round: the worker is
handed `serve_apart` by the CLI."""
