"""The traced prior (`tasks/learn/traced.py`): cache, bounds, unknown names, failures, and the prior it sets.

The tracers here stand in for the zoo's (`traced.zoo_trace`) so that the cache and the bounds are tested
in seconds: they are module-level functions because each trace runs in a spawned child process, which
imports them by name. One test traces a real (small) torchvision network through the zoo.
"""

from __future__ import annotations

import contextlib
import json
import time

import numpy as np
import polars as pl
import pytest

from gpucast.expectations import contract as c
from gpucast.tasks.learn import features, ood, traced
from gpucast.tasks.learn.traced import TRACE_STATUS, Bounds

FAKE = {"params": 25_000_000, "layers": 50, "input_dim": 224, "peak_bytes": 3_000_000_000, "flops": 800_000_000_000,
        "seconds": 0.01}


def fake_tracer(config: traced.Config) -> dict:
    return dict(FAKE)


def failing_tracer(config: traced.Config) -> dict:
    raise RuntimeError(f"no kernel for {config.arch}")


def sleeping_tracer(config: traced.Config) -> dict:
    time.sleep(60)
    return dict(FAKE)


PARAMS = 10_000_000


def line_tracer(config: traced.Config) -> dict:
    """A step whose tensor peak is 1 GB + 10 MB a sample (Adam's state included) and 5 GFLOP a sample."""
    return {"params": PARAMS, "layers": 18, "input_dim": config.input_dim, "peak_bytes": 1e9 + 1e7 * config.batch_size,
            "flops": 5e9 * config.batch_size, "seconds": 0.01}


def jobs(**columns) -> pl.DataFrame:
    """Pending jobs: 2 x ResNet-50 (one configuration, logged in two spellings), an unknown name, no name."""
    base = {c.JOB_ID: ["a", "b", "c", "d"], c.STATUS: ["PENDING"] * 4, c.MODEL_TYPE: ["ResNet", "ResNet", "CNN", "MLP"],
            c.ARCH: ["resnet50", "ResNet-50", "MyNet-7", None], c.PARAMS_MILLION: [None, 25.6, 3.0, 1.0],
            c.BATCH_SIZE: [32, 32, 16, 64], c.INPUT_DIM: [None, 224, 64, 100], c.NUM_LAYERS: [None, 50, 8, 3],
            c.ITERATIONS: [1000.0] * 4, c.PRECISION: ["FP16", "FP16", "FP32", "FP32"],
            c.OPTIMIZER: ["AdamW", "AdamW", "SGD", "Adam"], c.REGULARIZATION: [None] * 4}
    return pl.DataFrame({**base, **columns}, schema_overrides={c.REGULARIZATION: pl.Boolean})


def statuses(frame: pl.DataFrame) -> list[str | None]:
    return frame[TRACE_STATUS].to_list()


def test_a_configuration_is_traced_once_then_read_from_the_cache(tmp_path):
    cache = tmp_path / "traces.json"
    lines: list[str] = []
    first = traced.trace_jobs(jobs(), cache, Bounds(30, 60), lines.append, tracer=fake_tracer)
    # 'resnet50' and 'ResNet-50' (same batch, precision, optimizer; the input size defaults to 224) are one
    # configuration, read off the two basis traces of resnet50 at 224 px in FP16
    assert statuses(first) == ["traced", "traced", "unknown arch", None]
    assert len(json.loads(cache.read_text())["entries"]) == 2 and len(lines) == 2 and "resnet50" in lines[0]
    assert first[traced.TRACED_MEM_GB].to_list()[:2] == [traced.reported_gb(3e9)] * 2
    assert first[traced.TRACED_GFLOP_PER_ITER][0] == pytest.approx(800.0)
    # a second night: the cache answers, so a tracer that would fail is never called
    second = traced.trace_jobs(jobs(), cache, Bounds(30, 60), tracer=failing_tracer)
    assert statuses(second) == ["cached", "cached", "unknown arch", None]
    assert second.drop(TRACE_STATUS).equals(first.drop(TRACE_STATUS))


def test_a_trace_past_its_bound_is_killed_recorded_and_not_retried_under_the_same_bound(tmp_path):
    cache = tmp_path / "traces.json"
    t0 = time.monotonic()
    out = traced.trace_jobs(jobs(), cache, Bounds(1.5, 60), tracer=sleeping_tracer)
    assert time.monotonic() - t0 < 20  # killed at 1.5 s, not left to sleep its 60
    assert statuses(out)[:2] == ["timed out after 1.5 s"] * 2 and out[traced.TRACED_MEM_GB].null_count() == 4
    again = traced.trace_jobs(jobs(), cache, Bounds(1.5, 60), tracer=fake_tracer)
    assert statuses(again)[:2] == ["timed out after 1.5 s"] * 2  # cached: not paid again every night
    longer = traced.trace_jobs(jobs(), cache, Bounds(30, 60), tracer=fake_tracer)
    assert statuses(longer)[:2] == ["traced"] * 2  # a longer bound tries again


def test_a_failed_trace_is_recorded_with_its_reason_and_the_analytic_prior_is_used(tmp_path):
    cache = tmp_path / "traces.json"
    trace = traced.trace_jobs(jobs(), cache, Bounds(30, 60), tracer=failing_tracer)
    assert statuses(trace)[:2] == ["failed: RuntimeError: no kernel for resnet50"] * 2
    assert json.loads(cache.read_text())["entries"].popitem()[1]["reason"] == "RuntimeError: no kernel for resnet50"
    built = features.build(jobs(), trace)
    analytic = features.build(jobs())
    assert built["prior_mem_gb"].to_list() == analytic["prior_mem_gb"].to_list() == built["analytic_mem_gb"].to_list()
    # the same torch version: the failure stands (a fake tracer that would succeed is not called)
    assert statuses(traced.trace_jobs(jobs(), cache, Bounds(30, 60), tracer=fake_tracer))[:2] == statuses(trace)[:2]


def test_an_unknown_name_is_kept_reported_and_gets_the_analytic_prior(tmp_path):
    rows = jobs(**{c.ARCH: ["MyNet-7", "resnet-5O", "MyNet-7", None]})
    trace = traced.trace_jobs(rows, tmp_path / "traces.json", Bounds(30, 60), tracer=failing_tracer)
    assert statuses(trace) == ["unknown arch", "unknown arch", "unknown arch", None]
    assert not (tmp_path / "traces.json").exists()  # nothing to trace, nothing written
    built = features.build(rows, trace)
    assert built[c.ARCH].to_list() == rows[c.ARCH].to_list()  # kept as logged
    assert built["prior_mem_gb"].to_list() == built["analytic_mem_gb"].to_list()
    assert traced.summary(rows, trace).unknown_archs == {"MyNet-7": 2, "resnet-5O": 1}


def test_the_traced_values_are_the_prior_and_fill_the_missing_features(tmp_path):
    trace = traced.trace_jobs(jobs(), tmp_path / "t.json", Bounds(30, 60), tracer=fake_tracer)
    built, analytic = features.build(jobs(), trace), features.build(jobs())
    assert built["prior_mem_gb"].to_list()[:2] == [traced.reported_gb(3e9)] * 2
    assert built["prior_mem_gb"].to_list()[2:] == analytic["prior_mem_gb"].to_list()[2:]
    assert built["analytic_mem_gb"][1] == analytic["prior_mem_gb"][1]
    assert built["prior_gflop_per_iter"][0] == pytest.approx(800.0)
    # run time: 1000 steps x 800 GFLOP at the job's achieved GFLOP/s
    assert built["prior_runtime_hours"][0] == pytest.approx(1000 * 800.0 / built["prior_gflops"][0] / 3600)
    # job a logged no size: the trace's fills it; job b logged its own, kept
    assert built.select(c.PARAMS_MILLION, c.NUM_LAYERS, c.INPUT_DIM).row(0) == (25.0, 50, 224)
    assert built.select(c.PARAMS_MILLION, c.NUM_LAYERS, c.INPUT_DIM).row(1) == (25.6, 50, 224)
    assert features.build(built).equals(built)  # idempotent: a built frame keeps its trace


def test_data_parallel_jobs_trace_one_gpus_share_of_the_batch(tmp_path):
    rows = jobs(**{c.GPU_COUNT: [4, 1, 1, 1]})
    configs = traced.job_configs(rows)
    assert (configs[0].batch_size, configs[1].batch_size) == (8, 32)
    trace = traced.trace_jobs(rows, tmp_path / "t.json", Bounds(30, 60), tracer=fake_tracer)
    assert trace[traced.TRACED_GFLOP_PER_ITER].to_list()[:2] == pytest.approx([3200.0, 800.0])


def test_the_nights_budget_leaves_the_rest_for_a_later_night(tmp_path):
    rows = jobs(**{c.ARCH: ["resnet50", "vgg16", "resnet18", None]})
    trace = traced.trace_jobs(rows, tmp_path / "t.json", Bounds(1.0, 1.0), tracer=sleeping_tracer)
    assert statuses(trace)[:3] == ["timed out after 1 s", traced.NIGHT_SPENT, traced.NIGHT_SPENT]
    entries = json.loads((tmp_path / "t.json").read_text())["entries"]
    assert len(entries) == 1  # the configurations not reached are not cached


def test_a_night_budget_of_zero_traces_nothing_new_and_still_reads_the_cache(tmp_path):
    """GPUCAST_TRACE_NIGHT_SECONDS=0 (the test suite's default, tests/conftest.py): no tracer is started; what
    an earlier night traced is still used."""
    cache = tmp_path / "t.json"
    traced.trace_jobs(jobs(), cache, Bounds(30, 60), tracer=fake_tracer)  # an earlier night traced resnet50
    rows = jobs(**{c.ARCH: ["resnet50", "vgg16", "resnet18", None]})
    trace = traced.trace_jobs(rows, cache, Bounds(30, 0), tracer=failing_tracer)
    assert statuses(trace)[:3] == ["cached", traced.NIGHT_SPENT, traced.NIGHT_SPENT]
    assert len(json.loads(cache.read_text())["entries"]) == 2  # resnet50's two basis traces, nothing new


def test_a_missing_batch_size_is_not_traced(tmp_path):
    rows = jobs(**{c.BATCH_SIZE: [None, 32, 16, 64]})
    trace = traced.trace_jobs(rows, tmp_path / "t.json", Bounds(30, 60), tracer=fake_tracer)
    assert statuses(trace)[:2] == [traced.NO_BATCH, "traced"]


@pytest.mark.parametrize("content", ["{not json", '{"version": 99, "entries": {}}', "[1, 2]"])
def test_an_unreadable_cache_is_reported_and_replaced(tmp_path, content):
    cache = tmp_path / "traces.json"
    cache.write_text(content)
    lines: list[str] = []
    trace = traced.trace_jobs(jobs(), cache, Bounds(30, 60), lines.append, tracer=fake_tracer)
    assert statuses(trace)[:2] == ["traced", "traced"]
    assert "unreadable" in lines[0] and json.loads(cache.read_text())["version"] == traced.CACHE_VERSION


def _folder(cache):
    (cache / "x").mkdir(parents=True)  # traces.json a folder (with something in it)


def _models_a_file(cache):
    cache.parent.write_text("not a folder")


def _not_text(cache):
    cache.parent.mkdir()
    cache.write_bytes(b"\xff\xfe\x00 not UTF-8")


@pytest.mark.parametrize("spoil", [_folder, _models_a_file, _not_text])
def test_a_cache_that_cannot_be_read_or_written_costs_no_trace_and_no_error(tmp_path, spoil):
    """Issue 48, item 8: `models/traces.json` a folder (or `models` a file) failed the score when the first new trace
    was saved (IsADirectoryError); the cache is taken as empty, the night's traces are used, and a line says so."""
    cache = tmp_path / "models" / "traces.json"
    spoil(cache)
    lines: list[str] = []
    trace = traced.trace_jobs(jobs(), cache, Bounds(30, 60), lines.append, tracer=fake_tracer)
    assert statuses(trace)[:2] == ["traced", "traced"]
    assert any("resnet50" in line for line in lines)
    warnings = [line for line in lines if line.startswith("trace cache")]
    assert warnings and all("\n" not in w and str(tmp_path / "models") in w for w in warnings), lines
    assert not list(tmp_path.glob("models/.traces.json.*.tmp"))  # nothing half-written left behind


def test_a_name_contradicting_the_logged_parameters_is_flagged(tmp_path):
    rows = jobs(**{c.PARAMS_MILLION: [None, 200.0, 3.0, 1.0]})  # job b: 'ResNet-50' with 200 M parameters?
    built = features.build(rows, traced.trace_jobs(rows, tmp_path / "t.json", Bounds(30, 60), tracer=fake_tracer))
    nothing = ood.Detector({}, (), {})
    assert list(ood._arch_mismatch(built, nothing, None)) == [(1, "params_million 200 contradicts arch 'ResNet-50' (25 million "
                                                             "parameters built; more than 2x apart)")]
    detector = ood.Detector(categories={}, numbers=(), ranges={})
    flags, reasons = ood.flag(built, detector)
    assert flags.tolist() == [False, True, False, False] and "contradicts arch" in reasons[1]


def test_a_real_architecture_is_traced_through_the_zoo(tmp_path):
    """resnet18 at batch 2, 64 px, FP32, SGD: the zoo's real trace in a child process, well inside 60 s."""
    rows = jobs(**{c.ARCH: ["resnet18", None, None, None], c.BATCH_SIZE: [2, 1, 1, 1], c.INPUT_DIM: [64, 1, 1, 1],
                   c.PRECISION: ["FP32"] * 4, c.OPTIMIZER: ["SGD"] * 4})
    trace = traced.trace_jobs(rows, tmp_path / "t.json", Bounds(120, 120))
    assert statuses(trace)[0] == "traced", statuses(trace)[0]
    assert trace[traced.TRACED_PARAMS_MILLION][0] == pytest.approx(11.69, abs=0.01)  # torchvision's resnet18
    # weights + grads + momentum at FP32 are 3 x 4 bytes x 11.7 M = 0.14 GB; the activations of 2 images add a little
    tensor_gb = (trace[traced.TRACED_MEM_GB][0] - traced.TRACED_CONTEXT_GB) / traced.RESERVED_OVER_TENSOR
    assert 0.14 < tensor_gb < 0.3
    assert np.isfinite(trace[traced.TRACED_GFLOP_PER_ITER][0]) and trace[traced.TRACED_GFLOP_PER_ITER][0] > 0


def test_the_nightly_report_lists_trace_statuses_and_unknown_names(tmp_path):
    from gpucast.records.results import FeaturesResult, FeatureSummary, NightResult, TraceSummary
    from gpucast.tasks.report.render import nightly_report

    rows = jobs(**{c.ARCH: ["resnet50", "My|Net", "My|Net", None]})
    trace = traced.trace_jobs(rows, tmp_path / "t.json", Bounds(30, 60), tracer=fake_tracer)
    summary = traced.summary(rows, trace)
    assert summary == TraceSummary(trace_statuses={"unknown arch": 2, "traced": 1}, unknown_archs={"My|Net": 2})
    feats = FeaturesResult.of(None, None, summary, FeatureSummary(labelled_jobs=0, pending=4))
    report = nightly_report(NightResult(features=feats), None)
    assert "Traced prior, jobs naming an architecture: unknown arch 2, traced 1" in report
    line = next(x for x in report.splitlines() if x.startswith("Architecture names the model zoo does not know"))
    assert "(2 jobs)" in line and "My|Net" not in line  # the name is escaped for the Markdown page


def test_a_traced_peak_becomes_what_a_gpu_reports():
    """The H100 measurements' constants (tests/data/gpu_archs_h100.csv): x1.15 the tensor peak + 0.83 GB."""
    assert traced.reported_gb(10e9) == pytest.approx(10 * 1.15 + 0.83)
    assert traced.reported_gb(0) == pytest.approx(0.83)


def test_the_gpu_constants_are_the_shipped_h100_measurements():
    """RESERVED_OVER_TENSOR and TRACED_CONTEXT_GB are the medians of tests/data/gpu_archs_h100.csv's runs."""
    from pathlib import Path

    runs = pl.read_csv(Path(__file__).resolve().parents[2] / "data" / "gpu_archs_h100.csv").filter(pl.col("status") == "ok")
    assert runs.height >= 40
    assert traced.RESERVED_OVER_TENSOR == pytest.approx(runs["reserved_over_traced"].median(), abs=0.01)
    assert traced.TRACED_CONTEXT_GB == pytest.approx(runs["cuda_context_gb"].median(), abs=0.02)
    reported = traced.reported_gb(runs["traced_peak_gb"].to_numpy() * 1e9)
    errors = np.abs(np.log(runs["device_used_gb"].to_numpy() / reported))
    assert np.log(traced.REPORTED_INTERVAL) == pytest.approx(np.quantile(errors, ood.INTERVAL_QUANTILE), abs=0.01)


def test_a_traced_prior_the_champion_never_learned_to_correct_is_used_as_it_is(tmp_path):
    rows = features.build(jobs(), traced.trace_jobs(jobs(), tmp_path / "t.json", Bounds(30, 60), tracer=fake_tracer))
    named = rows[traced.TRACED_MEM_GB].is_not_null().to_list()
    assert named == [True, True, False, False]
    assert ood.traced_unlearned(rows, ood.Detector({}, (), {}, traced_rows=0)).tolist() == named
    saved_before = ood.Detector.from_json({"categories": {}, "numbers": [], "ranges": {}})  # before traces were counted
    assert ood.traced_unlearned(rows, saved_before).tolist() == named
    assert not ood.traced_unlearned(rows, ood.Detector({}, (), {}, traced_rows=ood.MIN_TRACED_ROWS)).any()  # it learned from traced jobs
    assert not ood.traced_unlearned(rows.drop(traced.TRACED_MEM_GB), ood.Detector({}, (), {})).any()


def test_the_detector_counts_the_training_jobs_with_a_traced_prior(tmp_path):
    logged = jobs().with_columns(pl.lit(1e-3).alias(c.LEARNING_RATE), pl.lit(True).alias(c.DATA_AUGMENTATION))
    rows = features.build(logged, traced.trace_jobs(logged, tmp_path / "t.json", Bounds(30, 60), tracer=fake_tracer))
    assert ood.fit(rows, "residual").traced_rows == 2
    assert ood.fit(features.build(logged), "residual").traced_rows == 0


def marking_tracer(config: traced.Config) -> dict:
    """Says it started (its pid, in the file TRACE_MARK names), then traces for a minute."""
    import os
    from pathlib import Path

    Path(os.environ["TRACE_MARK"]).write_text(str(os.getpid()))
    time.sleep(60)
    return dict(FAKE)


PARENT = """
from gpucast.tasks.learn import traced
from tests.tasks.learn.test_traced import marking_tracer
traced.run_trace(traced.Config("resnet50", 32, 224, "FP32", None, None), 120, marking_tracer)
"""


def test_a_trace_child_dies_with_its_parent_killed_by_sigkill(tmp_path):
    """Issue 48, item 11: `kill -9` of the process tracing left the trace's child running until its trace ended."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    import psutil

    mark = tmp_path / "child.pid"
    root = Path(__file__).resolve().parents[3]
    parent = subprocess.Popen([sys.executable, "-c", PARENT], cwd=root, env={**os.environ, "TRACE_MARK": str(mark)})
    try:
        deadline = time.monotonic() + 60
        while not mark.exists() or not mark.read_text():  # the child is in its trace
            assert parent.poll() is None and time.monotonic() < deadline, "the trace's child did not start"
            time.sleep(0.1)
        child = psutil.Process(int(mark.read_text()))
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        assert _gone_within(child, 3.0), "the trace's child outlived its parent's SIGKILL"
    finally:
        parent.kill()
        with contextlib.suppress(psutil.Error, OSError, ValueError):
            psutil.Process(int(mark.read_text())).kill()


def _gone_within(process, seconds: float) -> bool:
    """Whether `process` (not our child) has exited within `seconds`: gone, or a zombie its new parent has not
    reaped yet (a container's pid 1 may never reap)."""
    import psutil

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_a_configuration_is_read_off_the_line_through_two_batch_sizes(tmp_path):
    """Issue 52 item 6: one architecture x input size x precision is traced at the two basis batches with Adam; a job
    at batch 32 with SGD gets the line's value at 32, SGD's momentum (4 bytes a parameter) in place of Adam's two
    moments (8 bytes), and FLOPs at 32; a job with 4 GPUs reads the line at its per-GPU batch."""
    rows = jobs(**{c.ARCH: ["resnet18", "resnet18", "resnet18", None], c.BATCH_SIZE: [32, 128, 512, 64],
                   c.OPTIMIZER: ["SGD", "Adam", "AdamW", "Adam"], c.GPU_COUNT: [1, 1, 4, 1],
                   c.INPUT_DIM: [64, 64, 64, 1], c.PRECISION: ["FP32"] * 4})
    lines: list[str] = []
    trace = traced.trace_jobs(rows, tmp_path / "t.json", Bounds(30, 60), lines.append, tracer=line_tracer)
    entries = json.loads((tmp_path / "t.json").read_text())["entries"]
    assert sorted(json.loads(k)[1] for k in entries) == list(traced.BASIS_BATCHES) and len(lines) == 2
    assert all(json.loads(k)[4] == traced.BASIS_OPTIMIZER for k in entries)
    sgd_32 = 1e9 + 1e7 * 32 + PARAMS * (4 - 8)
    assert trace[traced.TRACED_MEM_GB].to_list()[:3] == pytest.approx(
        [traced.reported_gb(sgd_32), traced.reported_gb(1e9 + 1e7 * 128), traced.reported_gb(1e9 + 1e7 * 128)])
    assert trace[traced.TRACED_GFLOP_PER_ITER].to_list()[:3] == pytest.approx([160.0, 640.0, 4 * 640.0])
    assert statuses(trace)[:3] == ["traced"] * 3


def test_a_configuration_traced_directly_before_keeps_its_trace(tmp_path):
    """A cache written when every configuration was traced on its own: its entries stand (no new trace)."""
    cache = tmp_path / "t.json"
    config = traced.job_configs(jobs())[0]
    traced.save_cache(cache, {config.key: {"status": "traced", **FAKE}})
    trace = traced.trace_jobs(jobs(), cache, Bounds(30, 60), tracer=failing_tracer)
    assert statuses(trace)[:2] == ["cached", "cached"] and trace[traced.TRACED_MEM_GB][0] == traced.reported_gb(3e9)


def test_score_alone_waits_at_most_a_minute_on_traces_and_leaves_the_rest_to_the_night(tmp_path):
    """`gpucast score` on its own: 60 s of new traces at most (a fake clock: each trace takes 40 s), whatever the
    night's budget; the configurations not reached are scored untraced with the reason, not cached."""
    assert traced.run_bounds(60, 600).night_seconds == 600  # the nightly's budget is its own
    alone = traced.run_bounds(60, 600, score_alone=True)
    assert alone.night_seconds == traced.SCORE_ALONE_SECONDS == 60 and traced.run_bounds(60, 30, True).night_seconds == 30
    now = [0.0]

    def clock() -> float:
        now[0] += 40.0  # read at a trace's start and end: 40 s each
        return now[0]

    configs = [traced.Config(arch, 32, 224, "FP16", "Adam", None) for arch in ("resnet50", "vgg16", "resnet18")]
    cache: dict = {}
    out = traced.resolve(configs, cache, alone, fake_tracer, cache_path=tmp_path / "t.json", clock=clock)
    assert out[configs[0].key][0]["status"] == "traced"  # its two basis traces: 80 s, the second begun at 40 s
    assert [out[k.key] for k in configs[1:]] == [traced.SCORE_SPENT] * 2 and "next night" in traced.SCORE_SPENT
    assert len(cache) == 2
