"""MLflow runs as contract rows: one row per run, its features from params and tags, two targets from
its times and its system metrics.

Pure logic: `MlflowRun` (what `mlflow_client.py` reads with MLflow's own client) in, a Polars frame of
contract fields (text, as any file's values) out; the flow stages it and ingests it like any file.
Nothing here imports MLflow. The decisions are written out in docs/sources.md, "MLflow runs".
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import polars as pl

from gpucast.expectations import contract as c
from gpucast.records import catalog
from gpucast.tasks.ingest.readers import SOURCE_ERROR, header_key, normalise_name
from gpucast.tasks.sources.mapping import Mapping, named_fields
from gpucast.tasks.sources.slurm import NO_CLUSTER

# MLflow's run status -> the contract's. A SCHEDULED run has not started: PENDING.
STATUSES = {"FINISHED": "COMPLETED", "FAILED": "FAILED", "KILLED": "CANCELLED", "RUNNING": "RUNNING",
            "SCHEDULED": "PENDING"}
FINISHED = c.FINISHED_STATUSES
# MLflow's system metric for one GPU's memory in use: MB (decimal: NVML's bytes / 1e6, mlflow/system_metrics).
GPU_MEMORY_METRIC = re.compile(r"^system/gpu_(\d+)_memory_usage_megabytes$")
MB_PER_GB = 1000  # the contract's GB are decimal, like MLflow's MB

# Param and tag names common in training scripts -> contract fields (matched as `header_key` spells them),
# on top of the contract's own names and aliases. A mapping file's `fields` win over these.
PARAM_FIELDS = {
    **dict.fromkeys(("bs", "train_batch_size", "batch", "global_batch_size"), c.BATCH_SIZE),
    # contract v5 (issue 51): Hugging Face Trainer's TrainingArguments and model config, Megatron's and torchtitan's
    # names (a dotted name, `parallelism.tensor_parallel_degree`, is also tried by its last part)
    **dict.fromkeys(("per_device_train_batch_size", "micro_batch_size", "train_micro_batch_size_per_gpu",
                     "local_batch_size"), c.MICRO_BATCH_SIZE),
    **dict.fromkeys(("_name_or_path", "name_or_path", "model_name_or_path", "pretrained_model_name_or_path"), c.ARCH),
    **dict.fromkeys(("tensor_parallel_degree", "tensor_model_parallel_size", "tp_size"), c.TENSOR_PARALLEL),
    **dict.fromkeys(("pipeline_parallel_degree", "pipeline_model_parallel_size", "pp_size"), c.PIPELINE_PARALLEL),
    **dict.fromkeys(("context_parallel_degree", "context_parallel_size", "cp_size"), c.CONTEXT_PARALLEL),
    # contract v7 (the contract's aliases also apply): Megatron's `expert_model_parallel_size`, DeepSpeed MoE's `ep_size`,
    # torchtitan's `parallelism.expert_parallel_degree`; PEFT's `modules_to_save` (a list logged as text), axolotl's
    # `lora_modules_to_save`, LLaMA-Factory's `additional_target` (comma-separated), read by the normaliser's word table
    **dict.fromkeys(("expert_model_parallel_size", "expert_parallel_degree", "ep_size"), c.EXPERT_PARALLEL),
    **dict.fromkeys(("modules_to_save", "lora_modules_to_save", "additional_target"), c.TRAINED_MODULES),
    **dict.fromkeys(("seq_length", "max_length", "cutoff_len", "model_max_length"), c.INPUT_DIM),
    **dict.fromkeys(("lora_r", "lora_rank", "lora_dim"), c.LORA_RANK),
    **dict.fromkeys(("learning_rate", "lr", "base_lr"), c.LEARNING_RATE),
    **dict.fromkeys(("optimizer_name", "optim", "opt"), c.OPTIMIZER),
    **dict.fromkeys(("model_type", "model", "model_family"), c.MODEL_TYPE),
    **dict.fromkeys(("arch", "architecture", "model_name"), c.ARCH),
    **dict.fromkeys(("n_layers", "num_layers", "depth", "num_hidden_layers", "layers"), c.NUM_LAYERS),
    **dict.fromkeys(("max_steps", "iterations", "num_steps", "total_steps", "train_steps"), c.ITERATIONS),
    **dict.fromkeys(("precision", "mixed_precision", "dtype"), c.PRECISION),
    **dict.fromkeys(("params_million", "params_m", "num_params_million"), c.PARAMS_MILLION),
    **dict.fromkeys(("input_dim", "image_size", "img_size", "seq_len", "max_seq_length", "block_size"), c.INPUT_DIM),
    **dict.fromkeys(("gpu_type", "gpu", "gpu_name"), c.GPU_TYPE),
    **dict.fromkeys(("queue", "partition"), c.QUEUE),
    **dict.fromkeys(("team", "account", "project"), c.TEAM),
}
# Parameter counts logged as a count (not millions): divided by 10^6 into params_million.
PARAM_COUNTS = ("num_params", "n_params", "num_parameters", "param_count", "parameters")
# Boolean precision flags (Hugging Face's `fp16`/`bf16` arguments): true sets the precision.
PRECISION_FLAGS = {"fp16": "FP16", "bf16": "BF16"}
MIXED_PRECISION_OFF = ("no", "none", "false")  # accelerate's `mixed_precision=no`: full precision
# The tag naming the Slurm job a run ran in (`gpucast import slurm --mlflow-uri`), and what the run gives it.
JOIN_TAG = "slurm_job_id"
# The tag naming the cluster the job ran on (`SLURM_CLUSTER_NAME`): needed only where the clusters of one export
# (`sacct -M all`) number jobs alike; a run with it joins only that cluster's job.
CLUSTER_TAG = "slurm_cluster"
JOINED_FIELDS = (*c.FEATURES, c.ARCH)  # the run's params win over the sacct line's (the training code logged them)
FILLED_FIELDS = (c.GPU_TYPE, c.PEAK_GPU_MEM_GB)  # the run's fill these where sacct has none
# Fields the runs' own attributes and metrics fill: a param or tag of that name is ignored.
FROM_THE_RUN = (c.JOB_ID, c.SUBMITTED_AT, c.UPDATED_AT, c.STATUS, c.RUNTIME_HOURS, c.PEAK_GPU_MEM_GB)


@dataclass(frozen=True)
class MlflowRun:
    """One MLflow run as the importer read it (times in ms since the epoch, as MLflow keeps them)."""

    run_id: str
    status: str
    start_ms: int | None
    end_ms: int | None
    params: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    gpu_mem_mb: dict[int, float | None] = field(default_factory=dict)  # GPU index -> `series_peak` of its series


@dataclass
class MlflowImport:
    """The jobs made from a batch of runs, and what happened to them."""

    jobs: pl.DataFrame  # contract fields, text (None = missing), one row per run
    no_gpu_metrics: list[str] = field(default_factory=list)  # finished runs without GPU memory: loaded without it
    not_started: list[str] = field(default_factory=list)  # runs without a start time: not loaded


def series_peak(samples: Iterable[float]) -> float | None:
    """One GPU's memory series as one figure: the largest finite sample (a NaN or infinite sample is one
    NVML did not take: ignored wherever it is in the series); None when no sample is finite (no
    measurement for that GPU); the smallest sample when one is negative (no memory reading can be: the
    run is quarantined, `run_record`)."""
    finite = [v for v in samples if math.isfinite(v)]
    if not finite:
        return None
    return min(finite) if min(finite) < 0 else max(finite)


def gpu_memory_keys(metric_keys: list[str] | set[str]) -> dict[int, str]:
    """{GPU index: metric key} of a run's GPU memory series."""
    return {int(m[1]): k for k in metric_keys if (m := GPU_MEMORY_METRIC.match(k))}


def param_field(name: str) -> str:
    """A param's or tag's contract field: the MLflow names above, else the contract's spelling ("" for
    MLflow's own tags, `mlflow.*`)."""
    if name.startswith("mlflow."):
        return ""
    key = header_key(name)
    return PARAM_FIELDS.get(key) or normalise_name(name)


def runs_to_jobs(runs: list[MlflowRun], mapping: Mapping | None = None) -> MlflowImport:
    """One contract row per run that has started."""
    out = MlflowImport(pl.DataFrame())
    records = []
    for run in runs:
        if run.start_ms is None:
            out.not_started.append(run.run_id)
            continue
        record = run_record(run, mapping)
        if record[c.PEAK_GPU_MEM_GB] is None and record[c.STATUS] in FINISHED and SOURCE_ERROR not in record:
            out.no_gpu_metrics.append(run.run_id)
        records.append(record)
    schema = {n: pl.String for n in (*c.COLUMNS, SOURCE_ERROR)}
    out.jobs = pl.DataFrame([{SOURCE_ERROR: None, **r} for r in records], schema=schema) if records else \
        pl.DataFrame(schema=schema)
    return out


def run_record(run: MlflowRun, mapping: Mapping | None = None) -> dict[str, str | None]:
    """A run's contract record: params and tags for the features (params first), the run for the rest."""
    status = STATUSES.get(run.status, run.status)  # another word: left for the contract to reject
    finished = status in FINISHED and run.end_ms is not None
    record: dict[str, str | None] = dict.fromkeys(c.COLUMNS)
    record.update(run_features(run, mapping))
    record.update({
        c.JOB_ID: f"mlflow-{run.run_id}", c.SUBMITTED_AT: _iso(run.start_ms), c.STATUS: status,
        c.UPDATED_AT: _iso(run.end_ms if finished else run.start_ms),
        c.RUNTIME_HOURS: repr((run.end_ms - run.start_ms) / 3.6e6) if finished and run.end_ms > run.start_ms else None,
        c.PEAK_GPU_MEM_GB: repr(peak / MB_PER_GB) if finished and (peak := _peak_mb(run)) else None,
    })
    negative = {gpu: mb for gpu, mb in sorted(run.gpu_mem_mb.items()) if mb is not None and mb < 0}
    if negative:  # not loaded: the reason names the series (`SOURCE_ERROR` rejects the row at the ingest)
        gpu, mb = next(iter(negative.items()))
        record[SOURCE_ERROR] = (f"system/gpu_{gpu}_memory_usage_megabytes: {mb:g} MB is a negative memory reading "
                                "(MLflow's system metrics are broken for this run)")
    if run.gpu_mem_mb:
        record[c.GPU_COUNT] = str(len(run.gpu_mem_mb))
    if record[c.GPU_TYPE]:  # `L4` -> `L4-24GB`, as the Slurm import names a GPU; unknown kept as written
        record[c.GPU_TYPE] = catalog.canonical(record[c.GPU_TYPE]) or record[c.GPU_TYPE]
    return record


def _peak_mb(run: MlflowRun) -> float | None:
    """The run's peak memory on one GPU (MB): the largest of its GPUs' series peaks, those measured; None when
    no GPU's series has a finite sample, when one is negative (quarantined), or when it is 0 (nothing measured)."""
    measured = [mb for mb in run.gpu_mem_mb.values() if mb is not None]
    if not measured or min(measured) < 0 or max(measured) <= 0:
        return None
    return max(measured)


def run_features(run: MlflowRun, mapping: Mapping | None = None) -> dict[str, str]:
    """Contract fields from a run's params and tags (a param wins over a tag of the same field)."""
    source = {**{k: v for k, v in run.tags.items() if k not in run.params}, **run.params}
    flags = {}
    for key in list(source):
        name = header_key(key)
        if _mapped(key, mapping):
            continue
        if name in PARAM_COUNTS:
            flags[c.PARAMS_MILLION] = _millions(source.pop(key))
        elif name in PRECISION_FLAGS:
            if source.pop(key).strip().lower() in ("true", "1", "yes"):
                flags[c.PRECISION] = PRECISION_FLAGS[name]
        elif name == "mixed_precision" and source[key].strip().lower() in MIXED_PRECISION_OFF:
            source[key] = "FP32"
    unmapped = {k: v for k, v in source.items() if not _mapped(k, mapping)}
    flags.update(llm_fields(unmapped))  # reads (pops, rewrites) the params it understands
    source = {k: unmapped.get(k, v) for k, v in source.items() if k in unmapped or _mapped(k, mapping)}
    out = named_fields(source, mapping, lambda k: param_field(k) if param_field(k) in c.COLUMNS else _dotted(k))
    for name, value in flags.items():
        out.setdefault(name, value)
    return {k: v for k, v in out.items() if k not in FROM_THE_RUN}


# Contract v5 from the values trainers log (issue 51): each parser reads one param's text (a DeepSpeed config's
# path or JSON, FSDP's option list, Lightning's strategy name) into the fields it says.
_STAGE = re.compile(r"""["']stage["']\s*:\s*(\d)""")
_STAGE_IN_NAME = re.compile(r"(?:zero|stage|z)[_-]?(\d)")
_DEVICE_OF = r"""{}["']?\s*:\s*\{{[^}}]*["']device["']\s*:\s*["'](cpu|nvme)"""
_TRUE = ("true", "1", "yes")


def _deepspeed(text: str) -> dict[str, str]:
    """`deepspeed` (a config's path, or its JSON as HF logs a dict): sharding `zero<stage>` and the offload."""
    out = {}
    low = text.lower()
    stage = _STAGE.search(text) or _STAGE_IN_NAME.search(low.rsplit("/", 1)[-1])
    if stage:
        out[c.SHARDING] = stage[1]  # the normaliser reads DeepSpeed's stage numbers
    if re.search(_DEVICE_OF.format("offload_param"), text):
        out[c.CPU_OFFLOAD] = "all"
    elif re.search(_DEVICE_OF.format("offload_optimizer"), text):
        out[c.CPU_OFFLOAD] = "optimizer"
    elif "offload" in low.rsplit("/", 1)[-1]:  # `ds_z3_offload.json`: stage 3 offloads both, stage 2 the optimizer
        out[c.CPU_OFFLOAD] = "all" if out.get(c.SHARDING) == "3" else "optimizer"
    return out


def _fsdp(text: str) -> dict[str, str]:
    """`fsdp` (`full_shard auto_wrap`, `['full_shard', 'offload']`): the sharding and, with `offload`, all offloaded."""
    low = text.lower()
    out = {}
    for word, sharding in (("full_shard", "fsdp"), ("hybrid_shard", "fsdp"), ("shard_grad_op", "zero2"),
                           ("no_shard", "none")):
        if word in low:
            out[c.SHARDING] = sharding
            break
    if "offload" in low and out:
        out[c.CPU_OFFLOAD] = "all"
    return out


def _fsdp_config(text: str) -> dict[str, str]:
    """`fsdp_config`: `offload_params: true` offloads all."""
    m = re.search(r"""offload_params["']?\s*[:=]\s*["']?(\w+)""", text)
    return {c.CPU_OFFLOAD: "all"} if m and m[1].lower() in _TRUE else {}


def _strategy(text: str) -> dict[str, str]:
    """Lightning's `strategy`: `fsdp`, `deepspeed_stage_2_offload`, `ddp`."""
    low = text.lower()
    if low.startswith("deepspeed"):
        out = {c.SHARDING: m[1]} if (m := re.search(r"stage_(\d)", low)) else {}
        if "offload" in low:
            out[c.CPU_OFFLOAD] = "all" if out.get(c.SHARDING) == "3" else "optimizer"
        return out
    if low.startswith("fsdp"):
        return {c.SHARDING: "fsdp"}
    return {c.SHARDING: "none"} if low.startswith("ddp") else {}


LLM_PARSERS: dict[str, Callable[[str], dict[str, str]]] = {
    "deepspeed": _deepspeed, "fsdp": _fsdp, "fsdp_config": _fsdp_config, "strategy": _strategy,
    "use_distributed_optimizer": lambda t: {c.SHARDING: "zero1"} if t.strip().lower() in _TRUE else {},
}
# LISA (Pan et al. 2024, "LISA: Layerwise Importance Sampling for Memory-Efficient Large Language Model Fine-Tuning")
# trains a few sampled blocks at a time over a frozen rest, launched as full training (ms-swift: `--train_type full
# --lisa_activated_layers 2`; LMFlow: `--lisa_activated_layers 1`, both 0 = off; a LLaMA-Factory fork: `--use_lisa`),
# so the run logs no `peft_type`: read as adapter `lisa` (contract v6; v5 read it as `other`), never `none`, which
# the per-GPU prior reads as full training (+143% to +149% on ms-swift's two LISA runs of Benchmark.md)
LISA_PARAMS = ("lisa_activated_layers", "use_lisa")
# The loss's precision (contract v6 `loss_precision`) from the switches that set it, when switched on: Hugging Face
# TrainingArguments' `use_liger_kernel` (its MLflow callback logs every TrainingArgument) and axolotl's
# `liger_fused_linear_cross_entropy` / `cut_cross_entropy` swap in a fused linear cross-entropy that never holds the
# logits; Megatron's `fp16_lm_cross_entropy` computes the loss on the 16-bit logits. Off (or absent) says nothing:
# the contract's default, `fp32`.
LOSS_FLAGS = {"use_liger_kernel": "fused", "liger_fused_linear_cross_entropy": "fused", "cut_cross_entropy": "fused",
              "fp16_lm_cross_entropy": "half"}
# The kernel library (contract v8 `kernels`): unsloth's `FastLanguageModel` writes `unsloth_version` into the model
# config, which Hugging Face's MLflow callback logs with the TrainingArguments; LLaMA-Factory's `use_unsloth` and
# ms-swift's `tuner_backend` name it; Hugging Face's `use_liger_kernel` swaps in Liger's kernels
KERNEL_FLAGS = {"use_unsloth": "unsloth", "use_liger_kernel": "liger"}
QUANTISED = re.compile(r"""load_in_4bit["']?\s*[:=]\s*["']?true|quant_method["']?\s*[:=]\s*["']?(gptq|awq|bitsandbytes)""",
                       re.IGNORECASE)


def llm_fields(source: dict[str, str]) -> dict[str, str]:
    """Contract v5 and v6 fields from a run's params that need more than a name: the parsers above; PEFT's `r` (a rank
    only beside a `peft_type`); a LISA run as adapter `lisa` (`LISA_PARAMS`); the kernel library (v8, `KERNEL_FLAGS`,
    `unsloth_version`, `tuner_backend`); the loss's precision (`LOSS_FLAGS`); a
    quantised base turning LoRA into `qlora`; `batch_size` = micro-batch x `gradient_accumulation_steps` x
    `world_size` where no global batch is logged. Pops what it reads."""
    keys = {header_key(k): k for k in source}
    out: dict[str, str] = {}
    for name, parse in LLM_PARSERS.items():
        if name in keys and (value := source.pop(keys[name]).strip()) and value.lower() not in ("false", "none", "", "[]"):
            for field_name, v in parse(value).items():
                out.setdefault(field_name, v)
    if "peft_type" in keys and "r" in keys:
        out[c.LORA_RANK] = source.pop(keys["r"])
    lisa = [source.pop(keys[k]).strip().lower() for k in LISA_PARAMS if k in keys]
    if any(_switched_on(v) for v in lisa) and not any(k in keys for k in ("peft_type", c.ADAPTER)):
        out[c.ADAPTER] = "lisa"  # a LISA run (`LISA_PARAMS`), unless the run names its method itself
    kernels = [KERNEL_FLAGS[k] for k in KERNEL_FLAGS if k in keys and _switched_on(source[keys[k]].strip().lower())]
    if source.get(keys.get("unsloth_version", ""), "").strip() or source.get(
            keys.get("tuner_backend", ""), "").strip().lower() == "unsloth":
        kernels.insert(0, "unsloth")
    if kernels and c.KERNELS not in keys:  # a run's own `kernels` wins
        out[c.KERNELS] = kernels[0]
    loss = [LOSS_FLAGS[k] for k in LOSS_FLAGS if k in keys and _switched_on(source.pop(keys[k]).strip().lower())]
    if loss and c.LOSS_PRECISION not in keys:  # a run's own `loss_precision` wins; fused before half
        out[c.LOSS_PRECISION] = min(loss, key=["fused", "half"].index)
    peft = source.get(keys.get("peft_type", ""), "")
    if peft.strip().lower() == "lora" and any(QUANTISED.search(f"{k}: {v}") for k, v in source.items()):
        source[keys["peft_type"]] = "qlora"
    micro = source.get(keys.get("per_device_train_batch_size", ""))
    if micro and not any(k in keys for k in ("bs", "train_batch_size", "batch", "global_batch_size", "batch_size")):
        try:
            steps = int(float(source.get(keys.get("gradient_accumulation_steps", ""), "1")))
            world = int(float(source.get(keys.get("world_size", ""), "1")))
            out[c.BATCH_SIZE] = str(int(float(micro)) * steps * world)
        except ValueError:
            pass  # left for the contract to judge the micro-batch itself
    return out


def _switched_on(text: str) -> bool:
    """A flag or a count that turns a method on: `true`, or a number above 0 (LISA's activated layers)."""
    if text in _TRUE:
        return True
    try:
        return float(text) > 0
    except ValueError:
        return False


def _dotted(name: str) -> str:
    """A dotted param (`parallelism.tensor_parallel_degree`, torchtitan's sections) by its last part."""
    return param_field(name.rsplit(".", 1)[-1]) if "." in name else ""


def _mapped(key: str, mapping: Mapping | None) -> bool:
    """Whether the mapping file's `fields` name this param or tag (then it is read as the mapping says)."""
    return mapping is not None and header_key(key) in {header_key(s) for s in mapping.columns}


def _millions(text: str) -> str:
    try:
        return repr(float(text) / 1e6)
    except ValueError:
        return text  # left for the contract's rule to name ("'abc' is not a number")


def _iso(ms: int | None) -> str | None:
    """A run's time (ms since the epoch) as ISO 8601; one no date can hold (year 10000) as the words the contract's
    time rule then names, so that run is quarantined and the others load (review 77 S2-4: it failed the import)."""
    if ms is None:
        return None
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    except (ValueError, OverflowError, OSError):
        return f"{ms} ms since the epoch"


@dataclass(frozen=True)
class MlflowJoin:
    """Where the runs of Slurm jobs are (`gpucast import slurm --mlflow-uri`, a sources file's `mlflow_uri`):
    tracking URI, experiments (none: all), the tag naming the job."""

    tracking_uri: str
    experiments: tuple[str, ...] = ()
    tag: str = JOIN_TAG


@dataclass(frozen=True)
class JobRuns:
    """The runs that name a Slurm job (their tag `tag`), by that JobID, the latest started last. Built once per
    import (`job_runs`), then asked for each job (`find`)."""

    by_id: dict[str, list[MlflowRun]]

    def find(self, cluster: str, job_id: str, shared: bool) -> tuple[MlflowRun | None, bool]:
        """(the run of `cluster`'s job `job_id`, whether the JobID alone could not tell): the latest run tagged with
        that cluster (`CLUSTER_TAG`), else the latest tagged with none, unless other clusters of the output have a
        job `job_id` too (`shared`): then none, and True. A job of an output that names no cluster takes the latest
        run of the JobID, tagged or not."""
        runs = self.by_id.get(job_id, [])
        if cluster == NO_CLUSTER:
            return (runs[-1] if runs else None), False
        untagged = None
        for run in reversed(runs):
            if (named := run.tags.get(CLUSTER_TAG, "").strip()) == cluster:
                return run, False
            if not named and untagged is None:
                untagged = run
        if untagged is not None and shared:
            return None, True
        return untagged, False


def job_runs(runs: Iterable[MlflowRun], tag: str = JOIN_TAG) -> JobRuns:
    """The runs whose tag `tag` names a Slurm job (the JobID as sacct prints it), by that JobID."""
    by_id: dict[str, list[MlflowRun]] = {}
    for run in sorted(runs, key=lambda r: r.start_ms or 0):
        if (value := run.tags.get(tag, "").strip()):
            by_id.setdefault(value, []).append(run)
    return JobRuns(by_id)


@dataclass(frozen=True)
class Joined:
    """Slurm jobs joined to their runs (`join_runs`)."""

    jobs: pl.DataFrame
    joined: int  # jobs whose model features came from their run
    ambiguous: int  # jobs not joined: their JobID is several clusters' and the run names no cluster (`CLUSTER_TAG`)


def join_runs(jobs: pl.DataFrame, runs: JobRuns, shared: Callable[[str], bool] = lambda _: False,
              mapping: Mapping | None = None) -> Joined:
    """Slurm jobs (`parse_sacct`'s rows, `slurm-<cluster>-<JobID>`) with the model features of their run (`JobRuns.find`:
    keyed by cluster and JobID; `shared(JobID)`: whether jobs of several clusters of the output have it). A JobID
    has no `-`, so it is what follows the id's last `-`, the cluster what comes between. Rows the import
    quarantined (`SOURCE_ERROR`, maybe without a job id) are handed on as they are."""
    rows, joined, ambiguous = [], 0, 0
    for row in jobs.iter_rows(named=True):
        rows.append(row)
        if row[c.JOB_ID] is None or row.get(SOURCE_ERROR) is not None:
            continue
        prefix, job_id = row[c.JOB_ID].rsplit("-", 1)
        run, unsure = runs.find(prefix.removeprefix("slurm-"), job_id, shared(job_id))
        ambiguous += unsure
        if run is not None:
            joined += 1
            found = run_record(run, mapping)
            row.update({k: found[k] for k in JOINED_FIELDS if found[k] is not None})
            row.update({k: found[k] for k in FILLED_FIELDS if row[k] is None and found[k] is not None})
    return Joined(pl.DataFrame(rows, schema=jobs.schema, orient="row") if rows else jobs, joined, ambiguous)
