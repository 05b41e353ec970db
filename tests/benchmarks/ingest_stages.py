"""Where an ingest's CPU goes: its stages called one after another in one process, CPU seconds each.

    PYTHONPATH=. .venv/bin/python tests/benchmarks/ingest_stages.py [--rows 1000000] [--workdir DIR]

`bench_ingest.py` times the `ingest-job-logs` flow whole and splits its wall clock by stage; on a shared machine the
wall clock mostly measures the other work, so this prints each stage's CPU seconds (this process, all its threads, and
the processes it started: GX's judge) instead: staging (`staging.stage_file`: read, normalise, the row rules, the
staged Parquet; its own wall clocks per step beside), GX's one validation (`staging.check_run`, the judge started and
waited for before), the warehouse load (`load.load_run`), the lake (`load.refresh_lake`) and the publish
(`publish.publish_snapshot`), on bench_ingest's simulated file (reused from a kept `--workdir`) into a fresh warehouse.
No Prefect: its engine and server are what the flow's figure holds beyond the sum of these.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_ingest import CPU, fresh_folder, input_options, simulated_input  # noqa: E402

from gpucast.expectations import validate  # noqa: E402
from gpucast.flows.settings import Settings  # noqa: E402
from gpucast.tasks.ingest import staging  # noqa: E402
from gpucast.warehouse import load, runs  # noqa: E402
from gpucast.warehouse.db import connect_writer  # noqa: E402
from gpucast.warehouse.publish import publish_snapshot  # noqa: E402


def _cpu_seconds() -> Callable[[], float]:
    """CPU seconds of this process and its children (running and ended), all threads: bench_ingest's one definition
    (`CPU`, the source its timed child processes run), executed here rather than written twice."""
    namespace: dict = {}
    exec(CPU, namespace)  # noqa: S102  (our own benchmark's source text)
    return namespace["cpu_seconds"]


cpu_seconds = _cpu_seconds()


def step(label: str, fn, *args, **kwargs):
    """Call `fn`, print its wall and CPU seconds, return what it returned."""
    t, cpu = time.perf_counter(), cpu_seconds()
    out = fn(*args, **kwargs)
    print(f"  {label:10} wall {time.perf_counter() - t:7.2f} s  CPU {cpu_seconds() - cpu:7.2f} s", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    input_options(ap)
    args = ap.parse_args()
    work, src, lines = simulated_input(args, "gpucast-ingest-stages-")
    validate.warm_up()  # GX's import and context, outside the stages (gpucast ingest has it while Prefect starts)
    with validate._JUDGE.lock:
        validate._JUDGE.answer()
    home, staged = fresh_folder(work / "home-stages"), fresh_folder(work / "staged-stages")
    storage = Settings.from_env({"GPUCAST_HOME": str(home)}).ensure().storage
    run_id = "ingest-stages"
    result = step("staging", staging.stage_file, src, staged, 0, not_after=datetime.now(UTC) + timedelta(hours=1))
    print("    its steps' wall clocks: " + ", ".join(f"{k} {v:.1f} s" for k, v in result.seconds.items()))
    step("gx", staging.check_run, staged, [result])
    with connect_writer(storage) as con:
        runs.start(con, runs.Run("ingest", run_id, datetime.now(UTC), staged), **load.start_columns(1))
        totals = step("warehouse", load.load_run, con, run_id, staged, [result])
        step("lake", load.refresh_lake, con, storage.lake_dir, run_id, staged)
    step("publish", publish_snapshot, storage)
    print(f"  rows read {totals.rows_read:,} = loaded {totals.rows_loaded:,} + rejected {totals.rows_rejected:,} + "
          f"duplicate {totals.rows_duplicate:,} ({lines:,} lines)")


if __name__ == "__main__":
    main()
