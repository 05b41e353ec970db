"""The nightly's steps, in the order they run: the one list the flow (`flows/nightly.py`), the CLI's help, the demo
and `prefect.yaml`'s description are written from (tests/test_one_definition.py fails when one drifts).

Light on purpose (no Prefect, no gpucast imports): the command line reads it for `--help`.
"""

from __future__ import annotations

# `ingest` also pulls sources.yaml's sources on an inbox night; `train` is left out with `--no-train`.
NIGHTLY_STEPS = ("ingest", "quality-gate", "backtest", "features", "train", "score", "demand", "plan", "publish", "page")
NIGHTLY_CHAIN = " -> ".join(NIGHTLY_STEPS)
