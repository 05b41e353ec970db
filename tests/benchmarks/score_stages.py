"""`gpucast score` as users run it, with each stage's CPU and wall seconds (issue 52 item 5: the fixed costs apart from
the per-row ones).

    GPUCAST_HOME=<a warehouse with champions and pending jobs> GPUCAST_TRACE_NIGHT_SECONDS=0 \
        /usr/bin/time -f "wall %e s, CPU user %U + sys %S s" .venv/bin/python tests/benchmarks/score_stages.py \
        [--serial-targets] [--warm-up-without-skops]

The command runs in this process (the same `main` as `.venv/bin/gpucast score`), with the stages' functions wrapped
by a clock: CPU is `time.process_time` (every thread of this process: the forests' predict threads included), so the
temporary Prefect server, a child process, is `/usr/bin/time`'s total less this process's. Wrapping ~15 functions
costs nothing measurable (unlike cProfile, which inflated the Python-heavy stages 2-5x here). The stages print at exit.
`bench_score.py --home PATH --per-row N` splits the targets' stage further, per champion.
The three targets are scored at once (threads, `flows/score.py`): a target stage's CPU then counts every thread's,
so those stages overlap and only the process's total is additive; `--serial-targets` scores them one after another
(the flow's task runner with one worker), the way before, to compare side by side. `--warm-up-without-skops`: the
warm-up a command with a running Prefect server does (`warm_up(skops=False)`: skops only where a champion's load needs
it), here with the temporary server. At exit: which heavy libraries the command imported.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import resource
import sys
import time

T0 = (time.process_time(), time.perf_counter())
CLOCK: dict[str, tuple[float, float]] = {}  # stage -> (CPU s, wall s)
PEAK: dict[str, tuple[int, int]] = {}  # stage -> (RSS, peak RSS so far) in KiB when it last ended: where the peak rose


def vm_kib(field: str = "VmHWM") -> int:
    """This process's resident set now (Linux's VmRSS) or its peak so far (VmHWM), KiB; 0 where /proc is not there."""
    try:
        with open("/proc/self/status") as f:
            return next((int(line.split()[1]) for line in f if line.startswith(f"{field}:")), 0)
    except OSError:
        return 0


def timed(name: str, f):
    @functools.wraps(f)  # (Prefect reads a task's signature for its run name)
    def run(*args, **kwargs):
        t, w = time.process_time(), time.perf_counter()
        try:
            return f(*args, **kwargs)
        finally:
            cpu, wall = CLOCK.get(name, (0.0, 0.0))
            CLOCK[name] = (cpu + time.process_time() - t, wall + time.perf_counter() - w)
            PEAK[name] = (vm_kib("VmRSS"), vm_kib())
    return run


import polars as pl  # noqa: E402

import gpucast.flows.score as flow  # noqa: E402
import gpucast.flows.stage as stage  # noqa: E402
from gpucast.flows.cli import main  # noqa: E402
from gpucast.tasks.learn import features, score  # noqa: E402
from gpucast.tasks.learn.models import estimators  # noqa: E402
from gpucast.warehouse import db, forecast, training  # noqa: E402

T1 = (time.process_time(), time.perf_counter())
_warm_up = (functools.partial(score.warm_up, skops=False) if "--warm-up-without-skops" in sys.argv else score.warm_up)
score.warm_up = timed("imports: warm_up (the estimators, scikit-learn, skops)", lambda **_: _warm_up())
flow.read_champions.fn = timed("read champions", flow.read_champions.fn)
training.read_pending = timed("stage: read the pending jobs from DuckDB", training.read_pending)
stage._trace = timed("stage: traces (recognition, cache)", stage._trace)
features.build = timed("stage: features.build", features.build)
flow.stage_pending.fn = timed("stage: total (stage_pending: read, traces, features; kept in memory)", flow.stage_pending.fn)
score.Scorer.__init__ = timed("targets: load the champions", score.Scorer.__init__)
estimators.LogTarget.predict = timed("targets: predict", estimators.LogTarget.predict)
score.Scorer.score = timed("targets: Scorer.score (predict included)", score.Scorer.score)
score.target_forecasts = timed("targets: memory advice and stamps", score.target_forecasts)
pl.DataFrame.write_parquet = timed("Parquet writes (the 3 targets' forecasts)", pl.DataFrame.write_parquet)
flow.score_target.fn = timed("targets: total (score_target x 3)", flow.score_target.fn)
forecast.prune = timed("publish: prune (the retention query, deletes)", forecast.prune)
forecast.publish = timed("publish: forecast.publish (insert, checks, prune, commit)", forecast.publish)
db.connect_writer = timed("every writer's open (connect_writer)", db.connect_writer)
_writer = db.writer


@contextlib.contextmanager
def _timed_writer(*args, **kwargs):
    """`db.writer`, its close (the lock's release and DuckDB's close: a checkpoint) timed as a stage."""
    held = _writer(*args, **kwargs)
    con = held.__enter__()
    try:
        yield con
    except BaseException:
        if not held.__exit__(*sys.exc_info()):
            raise
    else:
        timed("every writer's close (DuckDB's checkpoint)", held.__exit__)(None, None, None)


db.writer = _timed_writer
flow.publish_forecasts.fn = timed("publish: total (the writer's open and close included)", flow.publish_forecasts.fn)
flow.publish_if = timed("the planners' copy (publish_if)", flow.publish_if)


@atexit.register
def report() -> None:
    end = (time.process_time(), time.perf_counter())
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"\nimports before the command (gpucast.flows.score, polars, Prefect...): CPU {T1[0] - T0[0]:.2f} s, "
          f"wall {T1[1] - T0[1]:.2f} s", file=sys.stderr)
    for name, (cpu, wall) in CLOCK.items():
        print(f"{name}: CPU {cpu:.2f} s, wall {wall:.2f} s; RSS at its end {PEAK[name][0] / 1024:,.0f} MiB "
              f"(peak so far {PEAK[name][1] / 1024:,.0f})",
              file=sys.stderr)
    heavy = ("skops", "crepes", "sklearn", "scipy.stats", "pandas", "torch")
    print("imported: " + ", ".join(f"{m} {'yes' if m in sys.modules else 'no'}" for m in heavy), file=sys.stderr)
    print(f"this process: CPU {end[0] - T0[0]:.2f} s, wall {end[1] - T0[1]:.2f} s, peak RSS {vm_kib() / 1024:,.0f} MiB "
          f"(children reaped before this line: CPU {children.ru_utime + children.ru_stime:.2f} s)", file=sys.stderr)


if __name__ == "__main__":
    if "--serial-targets" in sys.argv:
        from prefect.task_runners import ThreadPoolTaskRunner

        flow.score_pending = flow.score_pending.with_options(task_runner=ThreadPoolTaskRunner(max_workers=1))
        print("the targets one after another (--serial-targets)", file=sys.stderr)
    sys.argv = ["gpucast", "score"]
    sys.exit(main())
