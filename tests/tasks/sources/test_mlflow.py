"""MLflow runs as contract rows (`tasks/sources/mlflow.py`): pure logic, no MLflow store."""

from __future__ import annotations

import polars as pl
import pytest

from gpucast.expectations import contract as c
from gpucast.tasks.ingest.readers import SOURCE_ERROR
from gpucast.tasks.sources.mapping import load_mapping
from gpucast.tasks.sources.mlflow import MlflowRun, gpu_memory_keys, job_runs, join_runs, run_record, runs_to_jobs, series_peak
from gpucast.tasks.sources.slurm import SacctReader
from tests.conftest import write

T0 = 1_795_000_000_000  # ms: 2026-11-18T11:06:40Z


def run(status="FINISHED", end=T0 + 2 * 3_600_000, params=None, tags=None, gpus=None, run_id="r1") -> MlflowRun:
    return MlflowRun(run_id, status, T0, end, params or {}, tags or {}, gpus or {})


def test_a_finished_run_field_by_field():
    r = run(params={"bs": "64", "learning_rate": "3e-4", "optimizer_name": "AdamW", "model": "Transformer",
                    "arch": "bert-base-uncased", "n_layers": "12", "max_steps": "5000", "num_params": "110000000",
                    "bf16": "True", "image_size": "224", "epochs": "3"},
            tags={"queue": "gpu-a100", "team": "nlp", "gpu_type": "A100-80GB", "mlflow.user": "alice"},
            gpus={0: 61_000.0, 1: 65_500.0, 2: 64_000.0})
    got = {k: v for k, v in run_record(r).items() if v is not None}
    assert got == {
        c.JOB_ID: "mlflow-r1", c.SUBMITTED_AT: "2026-11-18T11:06:40.000000Z", c.UPDATED_AT: "2026-11-18T13:06:40.000000Z",
        c.STATUS: "COMPLETED", c.QUEUE: "gpu-a100", c.TEAM: "nlp", c.MODEL_TYPE: "Transformer", c.ARCH: "bert-base-uncased",
        c.BATCH_SIZE: "64", c.LEARNING_RATE: "3e-4", c.OPTIMIZER: "AdamW", c.NUM_LAYERS: "12", c.ITERATIONS: "5000",
        c.PARAMS_MILLION: "110.0", c.PRECISION: "BF16", c.INPUT_DIM: "224", c.GPU_TYPE: "A100-80GB",
        c.GPU_COUNT: "3", c.PEAK_GPU_MEM_GB: "65.5", c.RUNTIME_HOURS: "2.0",
    }  # epochs are not steps: not mapped (a mapping file may name a steps param)


@pytest.mark.parametrize(("status", "end", "want"), [
    ("FAILED", T0 + 1_800_000, ("FAILED", "0.5", "40.0")),
    ("KILLED", T0 + 900_000, ("CANCELLED", "0.25", "40.0")),
    ("RUNNING", None, ("RUNNING", None, None)),  # a run going: no measured targets yet
    ("SCHEDULED", None, ("PENDING", None, None)),
])
def test_statuses_and_what_a_run_not_finished_lacks(status, end, want):
    got = run_record(run(status=status, end=end, gpus={0: 40_000.0}))
    assert (got[c.STATUS], got[c.RUNTIME_HOURS], got[c.PEAK_GPU_MEM_GB]) == want
    assert got[c.UPDATED_AT] == ("2026-11-18T11:06:40.000000Z" if end is None else got[c.UPDATED_AT])
    assert got[c.GPU_COUNT] == "1"


def test_a_failure_reason_the_training_code_tagged():
    assert run_record(run(status="FAILED", tags={"failure_reason": "OOM"}))[c.FAILURE_REASON] == "OOM"
    assert run_record(run(status="FAILED"))[c.FAILURE_REASON] is None


def test_runs_without_gpu_metrics_or_a_start_are_counted():
    out = runs_to_jobs([run(run_id="a"), run(run_id="b", gpus={0: 1000.0}), MlflowRun("c", "SCHEDULED", None, None)])
    assert out.jobs[c.JOB_ID].to_list() == ["mlflow-a", "mlflow-b"]
    assert out.jobs[c.PEAK_GPU_MEM_GB].to_list() == [None, "1.0"]
    assert out.jobs[c.GPU_COUNT].to_list() == [None, "1"]  # no series: the contract's default (1) applies
    assert (out.no_gpu_metrics, out.not_started) == (["a"], ["c"])


def test_values_are_left_as_written_for_the_contract_to_judge():
    got = run_record(run(params={"batch_size": "large", "num_params": "many", "mixed_precision": "no",
                                 "precision": "fp16"}))
    assert (got[c.BATCH_SIZE], got[c.PARAMS_MILLION], got[c.PRECISION]) == ("large", "many", "FP32")


def test_a_param_wins_over_a_tag_and_run_attributes_over_both():
    got = run_record(run(params={"queue": "from-param", "status": "COMPLETED", "runtime_hours": "99"},
                         tags={"queue": "from-tag", "job_id": "x"}))
    assert (got[c.QUEUE], got[c.STATUS], got[c.RUNTIME_HOURS], got[c.JOB_ID]) == ("from-param", "COMPLETED", "2.0",
                                                                                  "mlflow-r1")


def test_a_mapping_file_overrides_the_built_in_names(tmp_path):
    mapping = load_mapping(write(tmp_path / "m.yaml", "fields:\n  batch_size: global_bs\n  iterations: epochs\n"
                                 "values:\n  optimizer: {adam_w: AdamW}\nconstants:\n  team: research\n"))
    got = run_record(run(params={"global_bs": "256", "bs": "32", "epochs": "10", "optimizer": "adam_w"},
                         tags={"team": "nlp"}), mapping)
    assert (got[c.BATCH_SIZE], got[c.ITERATIONS], got[c.OPTIMIZER], got[c.TEAM]) == ("256", "10", "AdamW", "research")


def test_gpu_memory_keys():
    keys = ["system/gpu_0_memory_usage_megabytes", "system/gpu_3_memory_usage_megabytes",
            "system/gpu_0_utilization_percentage", "loss"]
    assert gpu_memory_keys(keys) == {0: keys[0], 3: keys[1]}


def test_the_join_gives_slurm_jobs_the_runs_model_features():
    jobs = pl.DataFrame([{**dict.fromkeys(c.COLUMNS), c.JOB_ID: "slurm-hpc-1-1001", c.STATUS: "COMPLETED",
                          c.MODEL_TYPE: "CNN", c.PEAK_GPU_MEM_GB: "30.0"},
                         {**dict.fromkeys(c.COLUMNS), c.JOB_ID: "slurm-hpc-1-1002", c.STATUS: "FAILED"},
                         {**dict.fromkeys(c.COLUMNS), c.JOB_ID: "slurm-hpc-1-1010_7", c.STATUS: "COMPLETED"}],
                        schema={n: pl.String for n in c.COLUMNS})
    runs = [run(run_id="old", params={"model": "LSTM"}, tags={"slurm_job_id": "1001"}),
            MlflowRun("new", "FINISHED", T0 + 1, T0 + 60_000, {"model": "Transformer", "bs": "8"},
                      {"slurm_job_id": "1001", "queue": "ignored"}, {0: 50_000.0}),
            run(run_id="arr", status="FAILED", params={"lr": "0.1"}, tags={"slurm_job_id": "1010_7", "gpu_type": "L4"},
                gpus={0: 20_000.0}),
            run(run_id="none", params={"bs": "1"})]
    done = join_runs(jobs, job_runs(runs))
    rows = {r[c.JOB_ID]: r for r in done.jobs.iter_rows(named=True)}
    assert (done.joined, done.ambiguous) == (2, 0)
    a, b, arr = rows["slurm-hpc-1-1001"], rows["slurm-hpc-1-1002"], rows["slurm-hpc-1-1010_7"]
    # the latest run naming the job; its features win, Slurm's memory and queue stay
    assert (a[c.MODEL_TYPE], a[c.BATCH_SIZE], a[c.PEAK_GPU_MEM_GB], a[c.QUEUE]) == ("Transformer", "8", "30.0", None)
    assert (b[c.MODEL_TYPE], b[c.BATCH_SIZE]) == (None, None)
    assert (arr[c.LEARNING_RATE], arr[c.GPU_TYPE], arr[c.PEAK_GPU_MEM_GB]) == ("0.1", "L4-24GB", "20.0")


SACCT = "JobID|Cluster|Partition|State|Submit|AllocTRES|Comment\n"


def joined_import(text: str, runs: list[MlflowRun]) -> tuple[dict[str, dict], int, int]:
    """A sacct output read as `gpucast import slurm --mlflow-uri` reads it (each chunk joined as it is handed on):
    {job id: row}, jobs joined, jobs not joined because their JobID is several clusters'."""
    reader, index, got, counts = SacctReader("s.txt", chunk_rows=2), job_runs(runs), [], [0, 0]

    def emit(rows: pl.DataFrame) -> None:
        done = join_runs(rows, index, reader.shared)
        got.extend(done.jobs.iter_rows(named=True))
        counts[0] += done.joined
        counts[1] += done.ambiguous

    reader.read(text.splitlines(keepends=True), emit)
    return {r[c.JOB_ID]: r for r in got}, *counts


def job(job_id: str, cluster: str) -> str:
    return f"{job_id}|{cluster}|gpu|COMPLETED|2026-11-01T00:00:00|gres/gpu=1|\n"


def test_a_run_joins_only_its_own_cluster_s_job():
    """Review of issue 48 (W 6): the join keyed on JobID alone, so slurm-hpc1-5001 and slurm-hpc2-5001 (`sacct -M
    all`) both took the one run tagged 5001. A run tagged with its cluster joins that cluster's job; a run that names
    no cluster joins a JobID only one cluster has, and is counted, not joined, where several have it."""
    text = SACCT + job("5001", "hpc1") + job("5001", "hpc2") + job("5002", "hpc1") + job("6001", "hpc2") \
        + job("6001", "hpc1")
    runs = [run(run_id="a", params={"model": "CNN"}, tags={"slurm_job_id": "5001"}),
            run(run_id="b", params={"model": "LSTM"}, tags={"slurm_job_id": "5002"}),
            run(run_id="c", params={"model": "GRU"}, tags={"slurm_job_id": "6001", "slurm_cluster": "hpc2"})]
    rows, joined, ambiguous = joined_import(text, runs)
    assert {k: r[c.MODEL_TYPE] for k, r in rows.items()} == {
        "slurm-hpc1-5001": None, "slurm-hpc2-5001": None,  # which cluster's 5001 ran `a` is not known: neither
        "slurm-hpc1-5002": "LSTM",  # only hpc1 has a 5002
        "slurm-hpc2-6001": "GRU", "slurm-hpc1-6001": None}  # `c` names hpc2
    assert (joined, ambiguous) == (2, 2)


def test_an_output_without_clusters_joins_by_the_jobid_alone():
    text = "JobID|Partition|State|Submit|AllocTRES\n7|gpu|COMPLETED|2026-11-01T00:00:00|gres/gpu=1\n"
    rows, joined, ambiguous = joined_import(text, [run(params={"model": "CNN"},
                                                       tags={"slurm_job_id": "7", "slurm_cluster": "hpc1"})])
    assert (rows["slurm-local-7"][c.MODEL_TYPE], joined, ambiguous) == ("CNN", 1, 0)


def test_a_quarantined_line_without_its_jobid_is_handed_on_not_joined():
    """Review of issue 48 (W 6): a line too short to reach its JobID field is quarantined with no job id; the join
    then raised AttributeError (`None.rsplit`), so `--mlflow-uri` stopped the import with a traceback."""
    text = ("State|Submit|Partition|AllocTRES|JobID\nCOMPLETED|2026-11-01T00:00:00|gpu|gres/gpu=1|1\n"
            "COMPLETED|2026-11-01\nCOMPLETED|2026-11-01T00:00:00|gpu|gres/gpu=1|3\n")
    rows, joined, _ = joined_import(text, [run(params={"model": "CNN"}, tags={"slurm_job_id": "3"})])
    assert rows[None][SOURCE_ERROR] == "s.txt line 3: 2 fields where its header has 5"
    assert (rows["slurm-local-3"][c.MODEL_TYPE], rows["slurm-local-1"][c.MODEL_TYPE], joined) == ("CNN", None, 1)


# Issue 38, defect 7: NaN samples. [5000, NaN] loaded 5.0 GB and [NaN, 5000] null (Python's max stops at a NaN
# first); two GPUs with one all-NaN series loaded null or 40.0 by their order; a negative series loaded null.
NAN = float("nan")


@pytest.mark.parametrize(("samples", "peak"), [
    ([5000.0, NAN], 5000.0), ([NAN, 5000.0], 5000.0), ([NAN, 3000.0, NAN, 5000.0, NAN], 5000.0),
    ([float("inf"), 2000.0], 2000.0), ([NAN, NAN], None), ([], None), ([-512.0, 3000.0], -512.0), ([0.0], 0.0),
])
def test_a_series_peak_ignores_nan_samples_wherever_they_are(samples, peak):
    assert series_peak(samples) == peak


@pytest.mark.parametrize("order", [(40_000.0, None), (None, 40_000.0)])
def test_a_gpu_without_a_finite_sample_is_no_measurement_whatever_the_order(order):
    """The run's peak is that of the GPUs measured; the count is still both GPUs (both series exist)."""
    record = run_record(run(gpus=dict(enumerate(order))))
    assert (record[c.PEAK_GPU_MEM_GB], record[c.GPU_COUNT], record.get(SOURCE_ERROR)) == ("40.0", "2", None)
    assert run_record(run(gpus={0: None, 1: None}))[c.PEAK_GPU_MEM_GB] is None


def test_a_negative_memory_series_quarantines_the_run_naming_the_metric():
    out = runs_to_jobs([run(run_id="neg", gpus={0: 20_000.0, 1: -512.0}), run(run_id="ok", gpus={0: 1000.0})])
    reasons = dict(zip(out.jobs[c.JOB_ID], out.jobs[SOURCE_ERROR], strict=True))
    assert reasons == {"mlflow-neg": "system/gpu_1_memory_usage_megabytes: -512 MB is a negative memory reading "
                                    "(MLflow's system metrics are broken for this run)", "mlflow-ok": None}
    assert out.no_gpu_metrics == []  # quarantined, not "loaded without GPU memory"


def test_hugging_face_trainer_args_map_to_contract_v5():
    """Issue 51: what Trainer's MLflow callback logs (TrainingArguments, the model config, PEFT's config)."""
    r = run(params={"per_device_train_batch_size": "2", "gradient_accumulation_steps": "8", "world_size": "4",
                    "bf16": "True", "gradient_checkpointing": "True", "_name_or_path": "meta-llama/Llama-3.1-8B",
                    "num_hidden_layers": "32", "max_seq_length": "4096", "peft_type": "LORA", "r": "16",
                    "quantization_config": "{'load_in_4bit': True, 'bnb_4bit_quant_type': 'nf4'}",
                    "deepspeed": '{"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}}'},
            gpus={0: 30_000.0, 1: 31_000.0, 2: 30_500.0, 3: 30_000.0})
    got = run_record(r)
    assert (got[c.MICRO_BATCH_SIZE], got[c.BATCH_SIZE], got[c.PRECISION], got[c.ACTIVATION_CHECKPOINTING]) == (
        "2", "64", "BF16", "True")
    assert (got[c.ARCH], got[c.NUM_LAYERS], got[c.INPUT_DIM]) == ("meta-llama/Llama-3.1-8B", "32", "4096")
    assert (got[c.ADAPTER], got[c.LORA_RANK], got[c.SHARDING], got[c.CPU_OFFLOAD]) == ("qlora", "16", "3", "optimizer")


@pytest.mark.parametrize(("params", "want"), [
    ({"fsdp": "full_shard auto_wrap offload"}, {c.SHARDING: "fsdp", c.CPU_OFFLOAD: "all"}),
    ({"fsdp": "['shard_grad_op']", "fsdp_config": "{'offload_params': True}"}, {c.SHARDING: "zero2", c.CPU_OFFLOAD: "all"}),
    ({"fsdp": "", "deepspeed": "configs/ds_z2_offload.json"}, {c.SHARDING: "2", c.CPU_OFFLOAD: "optimizer"}),
    ({"strategy": "deepspeed_stage_3_offload"}, {c.SHARDING: "3", c.CPU_OFFLOAD: "all"}),
    ({"tensor_model_parallel_size": "4", "pipeline_model_parallel_size": "2", "use_distributed_optimizer": "true",
      "recompute_granularity": "selective", "global_batch_size": "512", "micro_batch_size": "1"},
     {c.TENSOR_PARALLEL: "4", c.PIPELINE_PARALLEL: "2", c.SHARDING: "zero1", c.ACTIVATION_CHECKPOINTING: "selective",
      c.BATCH_SIZE: "512", c.MICRO_BATCH_SIZE: "1"}),
    ({"parallelism.tensor_parallel_degree": "8", "parallelism.context_parallel_degree": "2"},  # torchtitan
     {c.TENSOR_PARALLEL: "8", c.CONTEXT_PARALLEL: "2"}),
    ({"r": "8"}, {c.LORA_RANK: None}),  # a bare `r` is not a rank without a peft_type beside it
    # LISA (review 57 N11): ms-swift's / LMFlow's `lisa_activated_layers` above 0 (a fork's `use_lisa`) is a
    # parameter-efficient method launched as full training: adapter `lisa` (contract v6; v5: `other`), never `none`
    ({"train_type": "full", "lisa_activated_layers": "2", "lisa_step_interval": "20"}, {c.ADAPTER: "lisa"}),
    ({"use_lisa": "True", "lisa_activated_layers": "1"}, {c.ADAPTER: "lisa"}),
    ({"lisa_activated_layers": "0"}, {c.ADAPTER: None}),  # 0 is LISA off: nothing said
    ({"lisa_activated_layers": "2", "peft_type": "LORA", "r": "8"}, {c.ADAPTER: "LORA"}),  # the method it names wins
    ({"lisa_activated_layers": "2", "adapter": "none"}, {c.ADAPTER: "none"}),  # as does an adapter logged itself
])
def test_deepspeed_fsdp_lightning_megatron_and_torchtitan_names(params, want):
    got = run_record(run(params=params))
    assert {k: got[k] for k in want} == want


@pytest.mark.parametrize(("params", "want"), [
    ({"use_liger_kernel": "True", "per_device_train_batch_size": "2"}, "fused"),  # Hugging Face TrainingArguments
    ({"liger_fused_linear_cross_entropy": "true"}, "fused"),  # axolotl's Liger plugin
    ({"cut_cross_entropy": "True"}, "fused"),  # axolotl's Cut Cross-Entropy plugin
    ({"fp16_lm_cross_entropy": "True", "tensor_model_parallel_size": "2"}, "half"),  # Megatron
    ({"use_liger_kernel": "False"}, None),  # off says nothing: the contract's `fp32`
    ({"fp16_lm_cross_entropy": "true", "use_liger_kernel": "true"}, "fused"),  # the logits never held
    ({"use_liger_kernel": "true", "loss_precision": "fp32"}, "fp32"),  # a run's own field wins
])
def test_the_loss_precision_is_read_from_the_switches_that_set_it(params, want):
    """Contract v6 `loss_precision` from Hugging Face's, axolotl's and Megatron's switches (`mlflow.LOSS_FLAGS`)."""
    assert run_record(run(params=params))[c.LOSS_PRECISION] == want


def test_a_mapping_file_can_name_the_loss_precision_and_the_lisa_adapter(tmp_path):
    """A site's own param names map to the v6 field and word like any contract field."""
    mapping = load_mapping(write(tmp_path / "m.yaml", "fields:\n  loss_precision: ce_kind\n  adapter: method\n"))
    got = run_record(run(params={"ce_kind": "liger", "method": "LISA"}), mapping)
    assert (got[c.LOSS_PRECISION], got[c.ADAPTER]) == ("liger", "LISA")  # the normaliser reads them (fused, lisa)


@pytest.mark.parametrize(("params", "want"), [
    ({"expert_model_parallel_size": "8", "pipeline_model_parallel_size": "2"}, {c.EXPERT_PARALLEL: "8"}),  # Megatron
    ({"ep_size": "4"}, {c.EXPERT_PARALLEL: "4"}),  # DeepSpeed MoE
    ({"parallelism.expert_parallel_degree": "2"}, {c.EXPERT_PARALLEL: "2"}),  # torchtitan's section
    ({"modules_to_save": "['embed_tokens', 'lm_head']", "peft_type": "LORA"},  # PEFT's LoraConfig, as text
     {c.TRAINED_MODULES: "['embed_tokens', 'lm_head']"}),
    ({"additional_target": "embed_tokens,lm_head"}, {c.TRAINED_MODULES: "embed_tokens,lm_head"}),  # LLaMA-Factory
    ({"lora_modules_to_save": "lm_head"}, {c.TRAINED_MODULES: "lm_head"}),  # axolotl
    ({"placement_policy": "auto"}, {c.CPU_OFFLOAD: "auto"}),  # contract v8: ColossalAI's GeminiPlugin
    ({"tensor_placement_policy": "cuda"}, {c.CPU_OFFLOAD: "cuda"}),  # its older ZeRO config (the normaliser: none)
    # contract v8 `kernels`: unsloth's version in the model config, LLaMA-Factory's and ms-swift's switches, Liger's
    ({"unsloth_version": "2024.8", "peft_type": "LORA", "r": "16"}, {c.KERNELS: "unsloth"}),
    ({"use_unsloth": "True"}, {c.KERNELS: "unsloth"}),
    ({"tuner_backend": "unsloth"}, {c.KERNELS: "unsloth"}),
    ({"use_liger_kernel": "true"}, {c.KERNELS: "liger", c.LOSS_PRECISION: "fused"}),
    ({"use_unsloth": "false", "use_liger_kernel": "false"}, {c.KERNELS: None}),
    ({"unsloth_version": "2024.8", "kernels": "none"}, {c.KERNELS: "none"}),  # a run's own field wins
])
def test_the_v7_fields_are_read_from_megatron_deepspeed_torchtitan_and_peft_names(params, want):
    """Contract v7: the expert-parallel size and the modules trained in full beside an adapter; the normaliser reads
    the module names into the contract's words (tests/expectations: `embeddings_and_head`, `head`)."""
    got = run_record(run(params=params))
    assert {k: got[k] for k in want} == want


def test_a_mapping_file_can_name_the_v7_fields(tmp_path):
    mapping = load_mapping(write(tmp_path / "m.yaml", "fields:\n  expert_parallel: moe_ep\n  trained_modules: extra\n"))
    got = run_record(run(params={"moe_ep": "4", "extra": "embed_tokens"}), mapping)
    assert (got[c.EXPERT_PARALLEL], got[c.TRAINED_MODULES]) == ("4", "embed_tokens")


def test_a_run_time_no_date_can_hold_is_that_runs_rule_not_the_imports_failure():
    """Review 77 S2-4: a run started in year 10000 (`datetime.fromtimestamp` raises) failed the whole import, every
    night, naming no run. Its times are kept as words the contract's time rule then rejects; the other runs load."""
    import polars as pl

    from gpucast.tasks.ingest.normalize import normalize

    odd = run_record(MlflowRun("far", "FINISHED", 253_402_300_800_000, 253_402_304_400_000, {}, {}, {}))
    assert odd[c.SUBMITTED_AT] == "253402300800000 ms since the epoch"
    typed = normalize(pl.DataFrame([odd], schema={k: pl.String for k in odd}).with_columns(
        pl.lit(1, pl.Int64).alias("_row"), pl.lit(None, pl.String).alias("_raw"), pl.lit(None, pl.String).alias("_read_error")))
    assert any(e.startswith("submitted_at: '253402300800000 ms since the epoch' is not an ISO 8601") for e in typed["_errors"][0])
