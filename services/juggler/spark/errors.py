"""The Spark jobs' own exceptions; the CLI turns them into messages and exit statuses."""

from __future__ import annotations


class JobError(RuntimeError):
    """A job that cannot run or finish (unreachable cluster, refused topic...): exit 1."""


class BadInput(JobError):
    """Arguments or input data the job cannot use (a bad archive, a bad query): exit 2,
    like `juggler eval`'s bad input. str() names what is wrong and where."""
