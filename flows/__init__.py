"""Prefect flows (wiring only) and the `gpucast` command line. Call `gpucast.flows.environment.configure()`
before importing a flow module outside the CLI (the CLI and the tests do)."""
