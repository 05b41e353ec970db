"""The `job_logs` suite passes good rows and fails each corruption on the expectation meant for it."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import polars as pl
import pytest

from gpucast.expectations import contract as c
from gpucast.expectations.suite import job_logs_suite
from gpucast.expectations.validate import validate_frame
from gpucast.tasks.ingest.normalize import normalize
from tests.sample_jobs import record


def typed(*records: dict) -> pl.DataFrame:
    """Records -> the typed frame the suite sees (through the real normaliser)."""
    raw = pl.DataFrame([{k: (None if v is None else str(v)) for k, v in r.items()} for r in records],
                       schema={k: pl.String for k in c.COLUMNS})
    raw = raw.with_columns(pl.int_range(1, pl.len() + 1).alias("_row"), pl.lit(None, dtype=pl.String).alias("_raw"),
                           pl.lit(None, dtype=pl.String).alias("_read_error"))
    return normalize(raw).select(c.COLUMNS)


GOOD_ROWS = [
    record(job_id="a"),
    record(job_id="b", status="PENDING", updated_at=None, gpu_demand_gflops=None, peak_gpu_mem_gb=None,
           runtime_hours=None, params_million=None, precision=None),
    record(job_id="c", status="FAILED", failure_reason="OOM", runtime_hours=None, gpu_demand_gflops=None),
]


def failed(validation) -> set[tuple[str, str | None]]:
    return {(o.expectation, o.column) for o in validation.outcomes if not o.success}


def test_good_fixture_passes():
    v = validate_frame(typed(*GOOD_ROWS))
    assert v.success, failed(v)
    assert v.reasons == {}


@pytest.mark.parametrize(
    "corruption, expectation, column",
    [
        ({"job_id": None}, "expect_column_values_to_not_be_null", c.JOB_ID),
        ({"job_id": "x" * 129}, "expect_column_value_lengths_to_be_between", c.JOB_ID),
        ({"arch": "resnet" * 22}, "expect_column_value_lengths_to_be_between", c.ARCH),  # 132 characters (v3)
        ({"submitted_at": None}, "expect_column_values_to_not_be_null", c.SUBMITTED_AT),
        ({"time_limit_hours": 0}, "expect_column_values_to_be_between", c.TIME_LIMIT_HOURS),  # v4
        ({"job_name": "n" * 257}, "expect_column_value_lengths_to_be_between", c.JOB_NAME),  # v4
        ({"status": "EXPLODED"}, "expect_column_values_to_be_in_set", c.STATUS),
        ({"precision": "FP12"}, "expect_column_values_to_be_in_set", c.PRECISION),
        ({"params_million": -1}, "expect_column_values_to_be_between", c.PARAMS_MILLION),
        ({"params_million": 1e30}, "expect_column_values_to_be_between", c.PARAMS_MILLION),
        ({"batch_size": 0}, "expect_column_values_to_be_between", c.BATCH_SIZE),
        ({"input_dim": -3}, "expect_column_values_to_be_between", c.INPUT_DIM),
        ({"num_layers": 0}, "expect_column_values_to_be_between", c.NUM_LAYERS),
        ({"iterations": 0}, "expect_column_values_to_be_between", c.ITERATIONS),
        ({"learning_rate": 0}, "expect_column_values_to_be_between", c.LEARNING_RATE),
        ({"gpu_demand_gflops": 0}, "expect_column_values_to_be_between", c.GPU_DEMAND_GFLOPS),
        ({"peak_gpu_mem_gb": -2}, "expect_column_values_to_be_between", c.PEAK_GPU_MEM_GB),
        ({"runtime_hours": 0}, "expect_column_values_to_be_between", c.RUNTIME_HOURS),
        ({"updated_at": "2026-10-01T00:00:00Z"}, "expect_column_pair_values_a_to_be_greater_than_b", c.UPDATED_AT),
    ],
)
def test_each_corruption_fails_its_expectation_only(corruption, expectation, column):
    v = validate_frame(typed(*GOOD_ROWS, record(**{"job_id": "bad", **corruption})))
    assert failed(v) == {(expectation, column)}
    assert list(v.reasons) == [3]  # the bad row, and only it
    (sentence,) = v.reasons[3]
    assert sentence.startswith(column)


def test_missing_column_fails_the_table_expectation():
    frame = typed(*GOOD_ROWS).drop(c.TEAM)
    v = validate_frame(frame)
    assert ("expect_table_columns_to_match_set", None) in failed(v)


def test_a_row_breaking_several_rules_lists_them_all():
    v = validate_frame(typed(record(batch_size=0, learning_rate=0, status="weird")))
    assert len(v.reasons[0]) == 3


def test_suite_is_generated_from_the_contract():
    spec = job_logs_suite()
    by_type: dict[str, set] = {}
    for e in spec["expectations"]:
        by_type.setdefault(e["type"], set()).add(e["kwargs"].get("column"))
        assert e["meta"]["rule"], "every expectation carries the sentence a rejected row shows"
    assert by_type["expect_column_values_to_not_be_null"] == set(c.REQUIRED)
    assert by_type["expect_column_values_to_be_between"] == set(c.FLOAT_COLUMNS + c.INT_COLUMNS)
    assert by_type["expect_column_values_to_be_in_set"] == {c.STATUS, c.PRECISION, c.SHARDING, c.CPU_OFFLOAD,
                                                             c.ACTIVATION_CHECKPOINTING, c.ADAPTER, c.LOSS_PRECISION,
                                                             c.TRAINED_MODULES, c.KERNELS}
    bounds = {e["kwargs"]["column"]: e["kwargs"]["max_value"] for e in spec["expectations"]
              if e["type"] == "expect_column_values_to_be_between"}
    assert bounds == c.PLAUSIBLE_MAX
    sets = {e["kwargs"]["column"]: tuple(e["kwargs"]["value_set"]) for e in spec["expectations"]
            if e["type"] == "expect_column_values_to_be_in_set"}
    assert sets == {c.STATUS: c.STATUSES, c.PRECISION: c.PRECISIONS, c.SHARDING: c.SHARDINGS,
                    c.CPU_OFFLOAD: c.CPU_OFFLOADS, c.ACTIVATION_CHECKPOINTING: c.CHECKPOINTINGS, c.ADAPTER: c.ADAPTERS,
                    c.LOSS_PRECISION: c.LOSS_PRECISIONS, c.TRAINED_MODULES: c.TRAINED_MODULE_WORDS,
                    c.KERNELS: c.KERNEL_WORDS}


def test_timestamps_survive_the_trip_to_pandas():
    frame = typed(record())
    assert frame[c.SUBMITTED_AT][0] == datetime(2026, 11, 1, 10, tzinfo=UTC)


def test_an_expectation_that_raises_is_a_failure_never_a_pass(monkeypatch, tmp_path):
    """GX reports an expectation that crashes as 'not successful' with an exception (issue #10738);
    it must fail validation loudly, and staging a file through it must stop, not load unchecked rows."""
    from gpucast.expectations import suite
    from gpucast.tasks.ingest import staging as ingest

    def broken() -> dict:
        spec = suite.job_logs_suite()
        spec["expectations"].append({"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "no_such"},
                                     "meta": {"rule": "a rule on a column that is not there"}})
        return {**spec, "name": "job_logs_broken"}

    monkeypatch.setitem(suite.SUITES, "job_logs_broken", broken)
    v = validate_frame(typed(*GOOD_ROWS), "job_logs_broken")
    (raised,) = [o for o in v.outcomes if o.column == "no_such"]
    assert raised.error and not raised.success and not v.success

    monkeypatch.setattr(ingest, "SUITE", "job_logs_broken")
    path = tmp_path / "a.jsonl"
    path.write_text(json.dumps(record()) + "\n")
    with pytest.raises(RuntimeError, match="could not run"):
        ingest.stage_file(path, tmp_path / "staging", 0)


def test_the_row_rules_count_what_great_expectations_judges(monkeypatch):
    """Each expectation's row rule finds exactly the rows that break it, and GX agrees it is broken."""
    bad = [record(job_id="x", batch_size=0), record(job_id="y", batch_size=-4, precision="FP12"),
           record(job_id="z", updated_at="2026-10-01T00:00:00Z")]
    v = validate_frame(typed(*GOOD_ROWS, *bad))
    counts = {(o.expectation, o.column): o.unexpected_count for o in v.outcomes if not o.success}
    assert counts == {("expect_column_values_to_be_between", c.BATCH_SIZE): 2,
                      ("expect_column_values_to_be_in_set", c.PRECISION): 1,
                      ("expect_column_pair_values_a_to_be_greater_than_b", c.UPDATED_AT): 1}
    assert sorted(v.reasons) == [3, 4, 5]
    assert v.reasons[3] == ["batch_size must be > 0 and at most 1e+07 (a value outside that is implausible) (got 0)"]
    assert len(v.reasons[4]) == 2


def test_a_row_rule_that_drifts_from_great_expectations_stops_validation(monkeypatch):
    """A row rule stricter than GX's expectation (here: any value above 8 'breaks' it) must not
    quietly reject rows GX accepts (the first such column here: params_million)."""
    from gpucast.expectations import validate

    drifted = dict(validate.ROW_RULES)
    drifted["expect_column_values_to_be_between"] = lambda kw: pl.col(kw["column"]) > 8
    monkeypatch.setattr(validate, "ROW_RULES", drifted)
    with pytest.raises(validate.RuleMismatch, match="on params_million: Great Expectations says it holds, the row rule found 2 row"):
        validate_frame(typed(*GOOD_ROWS))


def test_each_row_rule_picks_exactly_the_rows_great_expectations_picks(tmp_path):
    """The row rules against GX's own per-row answer (`result_format=COMPLETE`, the slow path the
    ingest no longer takes), expectation by expectation, on dirty simulated logs plus edge values:
    values at the bounds, a 128-character id, updated_at equal to submitted_at, a NaN."""
    from gpucast.expectations import validate
    from gpucast.tasks.ingest.readers import FileInfo, read_chunks
    from gpucast.tasks.simulate import SimConfig, write_logs

    path, *_ = write_logs(tmp_path, SimConfig(days=1, jobs_per_day=3000, dirty_fraction=0.1, seed=5))
    dirty = normalize(next(read_chunks(path, FileInfo(path))))
    dirty = dirty.filter(pl.col("_errors").list.len() == 0).select(c.COLUMNS)  # rows that parsed: the suite's input
    edges = typed(record(job_id="x" * 128, params_million=1e7, batch_size=10_000_000, learning_rate=100),
                  record(job_id="same-time", updated_at="2026-11-01T10:00:00Z"),
                  record(job_id="nan", precision="fp16"))
    frame = pl.concat([dirty, edges]).with_columns(  # a NaN, which pandas (and so GX) reads as missing
        pl.when(pl.col(c.JOB_ID) == "nan").then(float("nan")).otherwise(pl.col(c.PEAK_GPU_MEM_GB)).alias(c.PEAK_GPU_MEM_GB))

    ours = validate_frame(frame)
    result = _gx_on_pandas(frame, result_format={"result_format": "COMPLETE"})
    by_key = {validate._key(o.expectation, {"column": o.column}, o.rule): o for o in ours.outcomes}
    assert len(by_key) == len(result.results)
    compared = 0
    for res in result.results:
        cfg = res.expectation_config
        outcome = by_key[validate._key(cfg.type, cfg.kwargs, cfg.meta["rule"])]
        rule = validate._row_rule(cfg.type, dict(cfg.kwargs), frame.columns)
        if rule is None:
            continue
        gx_rows = sorted(int(i) for i in res.result.get("unexpected_index_list") or [])
        our_rows = frame.fill_nan(None).select(rule.fill_null(False)).to_series().arg_true().to_list()
        assert our_rows == gx_rows, (cfg.type, cfg.kwargs.get("column"))
        assert outcome.unexpected_count == len(gx_rows) and outcome.success == res.success
        compared += bool(gx_rows)
    assert compared >= 5, "the dirty logs should break several expectations"
    assert not any(pos >= dirty.height for pos in ours.reasons), "the edge rows are valid"


def _gx_on_pandas(frame: pl.DataFrame, result_format: dict):
    """GX's own per-row answer, on its pandas data source (the ingest's judge runs on DuckDB, where GX gives row
    indexes only with a key column): the oracle the row rules are checked against."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    suite = context.suites.add(gx.ExpectationSuite(**job_logs_suite()))
    batch = context.data_sources.add_pandas("frames").add_dataframe_asset("frame").add_batch_definition_whole_dataframe(
        "whole").get_batch(batch_parameters={"dataframe": frame.to_pandas()})
    return batch.validate(suite, result_format=result_format)


def test_a_warm_up_in_a_thread_and_a_validation_share_one_judge():
    """`gpucast ingest` starts GX's judge process in a thread while Prefect starts: a validation that comes
    meanwhile asks that same process (it waits for the build under way) instead of starting a second one."""
    import threading

    from gpucast.expectations import validate

    judge = validate._JUDGE
    before = judge.starts + (judge.process is None or judge.process.poll() is not None)  # one start if none runs
    warming = threading.Thread(target=validate.warm_up)
    warming.start()
    v = validate_frame(typed(*GOOD_ROWS))
    warming.join()
    assert v.success and judge.starts == before


def test_a_job_without_model_features_passes_as_unknown():
    """Contract v4: a scheduler's record (no model type, no features, a time limit and a name) is a valid job."""
    bare = record(job_id="slurm-1", model_type=None, params_million=None, batch_size=None, precision=None,
                  time_limit_hours=4, job_name="train_bert_042")
    rows = typed(*GOOD_ROWS, bare)
    v = validate_frame(rows)
    assert v.success, failed(v)
    assert rows.filter(pl.col(c.JOB_ID) == "slurm-1")[c.MODEL_TYPE].to_list() == [c.UNKNOWN_MODEL_TYPE]
    assert job_logs_suite()["meta"]["contract_version"] == c.CONTRACT_VERSION


LLM_JOB = dict(model_type="Transformer", arch="meta-llama/Llama-3.1-8B", params_million=8030, gpu_count=8,
               tensor_parallel=2, pipeline_parallel=2, context_parallel=1, sharding="FULL_SHARD", cpu_offload="optimizer",
               activation_checkpointing="true", adapter="QLoRA", lora_rank=16, micro_batch_size=1, precision="fp8")


def test_a_v5_job_on_many_gpus_passes_with_its_spellings_normalised():
    """Contract v5: FSDP's and DeepSpeed's words, true for full checkpointing, QLoRA's case and fp8 are read."""
    rows = typed(*GOOD_ROWS, record(job_id="llm", **LLM_JOB), record(job_id="ds", sharding="3", gpu_count=1,
                                                                       cpu_offload="all", adapter="PREFIX_TUNING"))
    v = validate_frame(rows)
    assert v.success, (failed(v), v.reasons)
    llm = rows.filter(pl.col(c.JOB_ID) == "llm").row(0, named=True)
    assert (llm[c.SHARDING], llm[c.ACTIVATION_CHECKPOINTING], llm[c.ADAPTER], llm[c.PRECISION]) == (
        "fsdp", "full", "qlora", "FP8")
    ds = rows.filter(pl.col(c.JOB_ID) == "ds").row(0, named=True)  # zero3 on one GPU: accepted (offload)
    assert (ds[c.SHARDING], ds[c.CPU_OFFLOAD], ds[c.ADAPTER]) == ("zero3", "all", "other")
    old = rows.filter(pl.col(c.JOB_ID) == "a").select(c.LLM_COLUMNS).row(0)
    assert old == (None,) * len(c.LLM_COLUMNS)  # a v4 record: nothing filled in (defaults apply where used)


@pytest.mark.parametrize("corruption, words", [
    ({"tensor_parallel": 0}, "tensor_parallel must be > 0"),
    ({"pipeline_parallel": 2.5}, "pipeline_parallel: 2.5 is not a whole number"),
    ({"context_parallel": -1}, "context_parallel must be > 0"),
    ({"lora_rank": 0}, "lora_rank must be > 0"),
    ({"lora_rank": 65_537}, "lora_rank must be > 0 and at most 65536"),
    ({"micro_batch_size": 0}, "micro_batch_size must be > 0"),
    ({"cpu_offload": "sometimes"}, "cpu_offload is one of none, optimizer, all"),
    ({"activation_checkpointing": "maybe"}, "activation_checkpointing is one of none, selective, full"),
    ({"tensor_parallel": 3, "gpu_count": 8}, "tensor_parallel x pipeline_parallel x context_parallel must divide "
                                             "gpu_count (got 3 x 1 x 1 = 3 on 8 GPUs)"),
    ({"pipeline_parallel": 2, "gpu_count": None}, "must divide gpu_count (got 1 x 2 x 1 = 2 on 1 GPUs)"),
])
def test_each_bad_v5_value_is_quarantined_with_its_field_named(corruption, words):
    rows = typed(*GOOD_ROWS, record(job_id="bad", **{**LLM_JOB, "tensor_parallel": None, "pipeline_parallel": None,
                                                     **corruption}))
    bad = rows.height - 1
    reasons = validate_frame(rows).reasons.get(bad, [])
    errors = _errors_of(corruption)  # the layout rule is judged with the parsing rules (normalize.py)
    assert any(words in r for r in [*reasons, *errors]), (reasons, errors)


def _errors_of(corruption: dict) -> list[str]:
    """The parsing-stage sentences (`_errors`) of one record with `corruption`."""
    rec = record(job_id="bad", **{**LLM_JOB, "tensor_parallel": None, "pipeline_parallel": None, **corruption})
    raw = pl.DataFrame([{k: (None if v is None else str(v)) for k, v in rec.items()}],
                       schema={k: pl.String for k in c.COLUMNS})
    raw = raw.with_columns(pl.lit(1).alias("_row"), pl.lit(None, dtype=pl.String).alias("_raw"),
                           pl.lit(None, dtype=pl.String).alias("_read_error"))
    return normalize(raw)["_errors"].to_list()[0]


def test_an_unknown_sharding_or_adapter_word_is_kept_as_unknown_not_rejected():
    rows = typed(*GOOD_ROWS, record(job_id="odd", sharding="megashard", adapter="magic-tuning"))
    v = validate_frame(rows)
    assert v.success, v.reasons
    odd = rows.filter(pl.col(c.JOB_ID) == "odd").row(0, named=True)
    assert (odd[c.SHARDING], odd[c.ADAPTER]) == (c.UNKNOWN_WORD, c.UNKNOWN_WORD)


@pytest.mark.parametrize(("logged", "read"), [
    ("fp32", "fp32"), ("Float32", "fp32"), ("half", "half"), ("bf16", "half"), ("FP16", "half"), ("fused", "fused"),
    ("Liger", "fused"), ("cut_cross_entropy", "fused"), ("chunked-ce", "fused"), ("sparse-magic", c.UNKNOWN_WORD),
    (None, None),
])
def test_a_v6_loss_precision_is_normalised_and_an_unknown_word_kept_as_unknown(logged, read):
    """Contract v6: the loss's precision in its spellings; another word is `unknown` (kept, counted), never a
    rejection; missing stays missing (`fp32` where used)."""
    rows = typed(*GOOD_ROWS, record(job_id="llm", **LLM_JOB, loss_precision=logged))
    v = validate_frame(rows)
    assert v.success, (failed(v), v.reasons)
    assert rows.filter(pl.col(c.JOB_ID) == "llm")[c.LOSS_PRECISION].to_list() == [read]


def test_lisa_is_an_adapter_word_of_its_own_since_v6():
    rows = typed(*GOOD_ROWS, record(job_id="lisa", adapter="LISA"), record(job_id="other", adapter="IA3"))
    assert validate_frame(rows).success
    assert dict(rows.select(c.JOB_ID, c.ADAPTER).iter_rows())["lisa"] == "lisa"
    assert dict(rows.select(c.JOB_ID, c.ADAPTER).iter_rows())["other"] == "other"


def test_the_suite_rejects_a_loss_precision_outside_the_contract():
    """The GX suite holds the allowed set (a value the normaliser did not read, written straight to the warehouse's
    frame, is judged by it)."""
    rows = typed(*GOOD_ROWS).with_columns(pl.lit("bf16").alias(c.LOSS_PRECISION))
    v = validate_frame(rows)
    assert not v.success and any("loss_precision" in r for rs in v.reasons.values() for r in rs), v.reasons


@pytest.mark.parametrize(("logged", "read"), [
    ("none", None), ("embeddings", "embeddings"), ("embed_tokens", "embeddings"), ("wte", "embeddings"),
    ("lm_head", "head"), ("Head", "head"), ("embeddings_and_head", "embeddings_and_head"),
    ("['embed_tokens', 'lm_head']", "embeddings_and_head"), ('["lm_head","embed_tokens"]', "embeddings_and_head"),
    ("wte, lm_head", "embeddings_and_head"), ("score", c.UNKNOWN_WORD), (None, None),
])
def test_v7_trained_modules_are_normalised_and_an_unknown_word_kept_as_unknown(logged, read):
    """Contract v7: the modules an adapter run trains in full, from PEFT's `modules_to_save` names (a list logged as
    text) or the contract's words; another word is `unknown` (kept, counted), never a rejection."""
    rows = typed(*GOOD_ROWS, record(job_id="llm", **LLM_JOB, trained_modules=logged))
    v = validate_frame(rows)
    assert v.success, (failed(v), v.reasons)
    assert rows.filter(pl.col(c.JOB_ID) == "llm")[c.TRAINED_MODULES].to_list() == [read]


def test_the_suite_rejects_trained_modules_outside_the_contract():
    rows = typed(*GOOD_ROWS).with_columns(pl.lit("lm_head").alias(c.TRAINED_MODULES))
    v = validate_frame(rows)
    assert not v.success and any("trained_modules" in r for rs in v.reasons.values() for r in rs), v.reasons


@pytest.mark.parametrize("corruption, words", [
    ({"expert_parallel": 0, "gpu_count": 8}, "expert_parallel must be > 0"),
    ({"expert_parallel": 3, "gpu_count": 8}, "expert_parallel x pipeline_parallel must divide gpu_count (got 3 x 1 = 3 "
                                             "on 8 GPUs)"),
    ({"expert_parallel": 4, "pipeline_parallel": 2, "gpu_count": 4}, "(got 4 x 2 = 8 on 4 GPUs)"),
    ({"expert_parallel": 2, "gpu_count": None}, "expert_parallel x pipeline_parallel must divide"),
])
def test_a_bad_v7_expert_parallel_is_quarantined_with_its_rule_named(corruption, words):
    rows = typed(*GOOD_ROWS, record(job_id="bad", **{**LLM_JOB, "tensor_parallel": None, "pipeline_parallel": None,
                                                     **corruption}))
    reasons = validate_frame(rows).reasons.get(rows.height - 1, [])
    errors = _errors_of(corruption)
    assert any(words in r for r in [*reasons, *errors]), (reasons, errors)


@pytest.mark.parametrize("layout", [
    {"expert_parallel": 8, "gpu_count": 16, "pipeline_parallel": 2},  # Megatron-SWIFT's PP2 x EP8 on 16 GPUs
    {"expert_parallel": 4, "gpu_count": 8, "context_parallel": 2},  # EP over the data-parallel x context ranks
    {"expert_parallel": 1, "gpu_count": 1},
    {"expert_parallel": 4, "tensor_parallel": 4, "gpu_count": 4},  # ms-swift's GLM-4.5-Air: expert tensor parallel 1
    {"expert_parallel": 8, "tensor_parallel": 2, "gpu_count": 8},  # quarantined before session 18 (review 68a S2-2)
])
def test_a_v7_expert_parallel_dividing_the_ranks_loads(layout):
    rows = typed(*GOOD_ROWS, record(job_id="moe", **{**LLM_JOB, "tensor_parallel": None, "pipeline_parallel": None,
                                                     "context_parallel": None, **layout}))
    assert not _errors_of({**layout, "context_parallel": layout.get("context_parallel")})
    v = validate_frame(rows)
    assert v.success, (failed(v), v.reasons)
    assert rows[c.EXPERT_PARALLEL].to_list()[-1] == layout["expert_parallel"]


@pytest.mark.parametrize(("logged", "read"), [
    ("auto", "auto"), ("AUTO", "auto"), ("dynamic", "auto"), ("cuda", "none"), ("static", "none"), ("cpu", "all"),
    ("all", "all"), (None, None),
])
def test_v8_gemini_placement_words_are_read_as_cpu_offload(logged, read):
    """Contract v8: ColossalAI Gemini's `placement_policy` words; `auto` is a `cpu_offload` word of its own (v7
    rejected it)."""
    rows = typed(*GOOD_ROWS, record(job_id="llm", **{**LLM_JOB, "cpu_offload": logged}))
    v = validate_frame(rows)
    assert v.success, (failed(v), v.reasons)
    assert rows.filter(pl.col(c.JOB_ID) == "llm")[c.CPU_OFFLOAD].to_list() == [read]


@pytest.mark.parametrize(("logged", "read"), [
    ("unsloth", "unsloth"), ("Unsloth", "unsloth"), ("liger-kernel", "liger"), ("hf", "none"), ("none", None),
    ("flash-magic", c.UNKNOWN_WORD), (None, None),
])
def test_v8_kernels_are_normalised_and_an_unknown_word_kept_as_unknown(logged, read):
    rows = typed(*GOOD_ROWS, record(job_id="llm", **LLM_JOB, kernels=logged))
    v = validate_frame(rows)
    assert v.success, (failed(v), v.reasons)
    assert rows.filter(pl.col(c.JOB_ID) == "llm")[c.KERNELS].to_list() == [read]
