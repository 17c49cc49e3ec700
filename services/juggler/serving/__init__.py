"""The HTTP port of a runtime: the small pages (`/health`, `/queries`, `/progress`,
`/metrics`), the results API over the results index, and the bearer token in front of
them. It reads a runtime through the read-only views the runtime publishes
(`juggler.runtime.pages`) and never the other way round: the worker is handed `serve`
by the CLI."""
