"""Job-log contract v7: every column name, type, unit, allowed value and bound, defined once.

v2 added the optional hardware context (`gpu_type`, `gpu_count`, `gpu_peak_tflops`), v3 the optional
architecture name (`arch`: `resnet50`, `bert-large-uncased`, ...), v4 the scheduler's own facts
(`time_limit_hours`, `job_name`) and made `model_type` optional (missing: `unknown`, kept as such: a
job known only by its scheduler still counts in demand and plans), v5 the layout of a job on many GPUs
(`tensor_parallel`, `pipeline_parallel`, `context_parallel`, `sharding`, `cpu_offload`,
`activation_checkpointing`, `adapter`, `lora_rank`, `micro_batch_size`; `precision` gains FP8: LLM training
and fine-tuning, issue 51), v6 the loss's precision (`loss_precision`: `fp32`, `half`, `fused`) and the adapter
word `lisa` (issue 51 session 10), v7 the expert-parallel size (`expert_parallel`) and the modules a parameter-efficient
run trains in full beside its adapter (`trained_modules`: PEFT's `modules_to_save`; issue 51 session 11), v8 the
`cpu_offload` word `auto` (a placement that moves states between the CPU and the GPU as room allows: ColossalAI
Gemini's `placement_policy="auto"`) and the kernel library a job trains with (`kernels`: `unsloth`, `liger`; issue
51 session 12). A v1-v7 log reads exactly as
before, and records loaded under an older version keep their identity (each version's columns enter
the record hash only when one of them is set, see `record_hash_sql`).

This is the data contract of the pipeline, so it lives with the expectations and imports nothing
of ours. Readers, the normaliser, the simulator, features and models import these names; the
Great Expectations suite (`expectations/suite.py`) and the warehouse DDL (`warehouse/schema.py`)
are *generated* from `FIELDS`, so a bound or an allowed value is written here and nowhere else.
The README's contract table lists the same fields (a test checks it).
"""

from __future__ import annotations

from dataclasses import dataclass

CONTRACT_VERSION = 8


@dataclass(frozen=True)
class Field:
    """One column of the job-log contract: its type, and the rules a present value must keep."""

    name: str
    kind: str  # "string" | "timestamp" | "float" | "int" | "bool" | "status" | "precision"
    unit: str
    allowed: str  # the README's words for the allowed values
    required: bool = False
    values: tuple[str, ...] = ()  # the allowed set (after normalising spellings), if any
    maximum: float | None = None  # > 0 and at most this: above it a value is a unit or typing error
    max_length: int | None = None  # characters
    measured: bool = False  # an outcome measured after the job ran (a forecast target)
    since: int = 1  # the contract version that added the field


# Identity and lifecycle -------------------------------------------------------------------------
JOB_ID = "job_id"
SUBMITTED_AT = "submitted_at"
UPDATED_AT = "updated_at"
STATUS = "status"
QUEUE = "queue"
TEAM = "team"
FAILURE_REASON = "failure_reason"

STATUSES = ("PENDING", "RUNNING", "COMPLETED", "FAILED", "CANCELLED")
FINISHED_STATUSES = ("COMPLETED", "FAILED", "CANCELLED")  # a run that ended: its run time is known, its GPUs free
DEFAULT_QUEUE = "default"

# The 11 input features ------------------------------------------------------------------------
MODEL_TYPE = "model_type"
PARAMS_MILLION = "params_million"
BATCH_SIZE = "batch_size"
INPUT_DIM = "input_dim"
NUM_LAYERS = "num_layers"
ITERATIONS = "iterations"
PRECISION = "precision"
OPTIMIZER = "optimizer"
LEARNING_RATE = "learning_rate"
REGULARIZATION = "regularization"
DATA_AUGMENTATION = "data_augmentation"

FEATURES = (
    MODEL_TYPE,
    PARAMS_MILLION,
    BATCH_SIZE,
    INPUT_DIM,
    NUM_LAYERS,
    ITERATIONS,
    PRECISION,
    OPTIMIZER,
    LEARNING_RATE,
    REGULARIZATION,
    DATA_AUGMENTATION,
)

PRECISIONS = ("FP16", "BF16", "FP32", "FP64", "FP8")  # FP8 since v5
KNOWN_MODEL_TYPES = ("MLP", "CNN", "ResNet", "RNN", "LSTM", "GRU", "Transformer")
# A job logged without a model type (contract v4: a scheduler's accounting has none) is `unknown`: its
# memory, compute and run time are forecast from the scheduler's facts (tasks/learn/history.py).
UNKNOWN_MODEL_TYPE = "unknown"
KNOWN_OPTIMIZERS = ("Adam", "AdamW", "SGD", "RMSprop", "Adagrad")

# Hardware context (contract v2, optional) ------------------------------------------------------
GPU_TYPE = "gpu_type"
GPU_COUNT = "gpu_count"
GPU_PEAK_TFLOPS = "gpu_peak_tflops"
HARDWARE = (GPU_TYPE, GPU_COUNT, GPU_PEAK_TFLOPS)

# The architecture's name (contract v3, optional): kept as logged (trimmed); the model zoo
# (tasks/learn/zoo.py) canonicalises it where it is used, to trace the traced prior.
ARCH = "arch"

# The scheduler's own facts (contract v4, optional): the run time the job asked for (Slurm's `Timelimit`)
# and its name (`JobName`), which forecast the run time of jobs without model features.
TIME_LIMIT_HOURS = "time_limit_hours"
JOB_NAME = "job_name"
SCHEDULER = (TIME_LIMIT_HOURS, JOB_NAME)

# One job on many GPUs (contract v5, optional): how the model and its states are split over the job's
# `gpu_count` GPUs, and what is trained. Data parallel = gpu_count / (tensor x pipeline x context parallel);
# a job logging none of them is a plain data-parallel job, read exactly as before (tasks/learn/llm_memory.py
# computes the per-GPU memory of the ones that do).
TENSOR_PARALLEL = "tensor_parallel"
PIPELINE_PARALLEL = "pipeline_parallel"
CONTEXT_PARALLEL = "context_parallel"
SHARDING = "sharding"
CPU_OFFLOAD = "cpu_offload"
ACTIVATION_CHECKPOINTING = "activation_checkpointing"
ADAPTER = "adapter"
LORA_RANK = "lora_rank"
MICRO_BATCH_SIZE = "micro_batch_size"
PARALLELISM = (TENSOR_PARALLEL, PIPELINE_PARALLEL, CONTEXT_PARALLEL)
# The allowed words (after the normaliser's spellings: FSDP's FULL_SHARD / SHARD_GRAD_OP / NO_SHARD / HYBRID_SHARD,
# DeepSpeed's stage numbers 0-3, PEFT's peft_type names; tasks/ingest/normalize.py). A sharding or adapter word
# nobody knows is kept as `unknown` (and counted in the nightly's feature summary), never a rejection: the job
# still loads and is forecast as the plain case (no sharding, all weights trained).
UNKNOWN_WORD = "unknown"
SHARDINGS = ("none", "zero1", "zero2", "zero3", "fsdp", UNKNOWN_WORD)
# `auto` (since v8): the states move between the CPU and the GPU as the GPU has room (ColossalAI Gemini's
# `placement_policy="auto"`), so the job fills its GPU up to the framework's cap (tasks/learn/llm_memory.py
# `DYNAMIC_CUDA_CAP_RATIO`) when its states do not fit
CPU_OFFLOADS = ("none", "optimizer", "all", "auto")
CHECKPOINTINGS = ("none", "selective", "full")
ADAPTERS = ("none", "lora", "qlora", "other", "lisa", UNKNOWN_WORD)  # `lisa` since v6
LORA_RANK_MAX = 65_536
# Contract v6: the precision of the training loss, which decides the bytes the head's logits take at the peak
# (tasks/learn/llm_memory.py `LOSS_LOGIT_BYTES`): `fp32` (the default: the loss on an fp32 copy of the logits,
# transformers' `ForCausalLMLoss`, autocast's cross-entropy), `half` (the loss on the 16-bit logits: a script's own
# loss under an fp16 engine without autocast, Megatron's `fp16_lm_cross_entropy`), `fused` (a fused or chunked
# linear cross-entropy that never holds the logits: Liger's, Apple's Cut Cross-Entropy). Another word: `unknown`.
LOSS_PRECISION = "loss_precision"
LOSS_PRECISIONS = ("fp32", "half", "fused", UNKNOWN_WORD)
# Contract v7: the expert-parallel size of a mixture-of-experts model (Megatron's `expert_model_parallel_size`,
# DeepSpeed MoE's `ep_size`, torchtitan's `expert_parallel_degree`): each GPU holds 1 / n of the experts (their
# weights, gradients and optimizer states), the dense parts as before. Megatron requires it to divide the
# data-parallel x context-parallel ranks (gpu_count / (tensor x pipeline)): a row that breaks it is quarantined with
# that rule (tasks/ingest/normalize.py `_layout_rule`).
EXPERT_PARALLEL = "expert_parallel"
# Contract v7: the modules a parameter-efficient run (`adapter` lora, qlora, other) also trains in full: PEFT's
# `modules_to_save` (LLaMA-Factory's `additional_target`, axolotl's `lora_modules_to_save`), whose wrapper keeps the
# frozen original and a trained copy with its gradient and optimizer states. `none`, `embeddings` (the input
# embedding: `embed_tokens`, `wte`), `head` (the LM head: `lm_head`, `embed_out`), `embeddings_and_head`. Another
# word: `unknown` (forecast as `none`).
TRAINED_MODULES = "trained_modules"
TRAINED_MODULE_WORDS = ("none", "embeddings", "head", "embeddings_and_head", UNKNOWN_WORD)
# Contract v8: the kernel library that replaces the model's own modules and loss (unsloth's `FastLanguageModel`, which
# writes `unsloth_version` into the model config that Hugging Face's MLflow callback logs, LLaMA-Factory's
# `use_unsloth`, ms-swift's `--tuner_backend unsloth`; Liger's kernels, `use_liger_kernel`): `none`, `unsloth`, `liger`.
# What it changes in the per-GPU prior (tasks/learn/llm_memory.py `KERNEL_LOSS`): the loss's bytes a logit where
# `loss_precision` is not logged, and unsloth's own k-bit preparation (no fp32 upcast). Another word: `unknown`
# (forecast as `none`).
KERNELS = "kernels"
KERNEL_WORDS = ("none", "unsloth", "liger", UNKNOWN_WORD)
# The word fields whose unknown words are kept as `unknown` (and counted in the nightly's feature summary), never
# rejected
UNKNOWN_KEPT = (SHARDING, ADAPTER, LOSS_PRECISION, TRAINED_MODULES, KERNELS)
# What a missing value means (the contract's defaults, applied where the value is used, never stored: a v1-v4
# record keeps its nulls, its hash and its features).
LLM_DEFAULTS = {TENSOR_PARALLEL: 1, PIPELINE_PARALLEL: 1, CONTEXT_PARALLEL: 1, SHARDING: "none", CPU_OFFLOAD: "none",
                ACTIVATION_CHECKPOINTING: "none", ADAPTER: "none", LOSS_PRECISION: "fp32", EXPERT_PARALLEL: 1,
                TRAINED_MODULES: "none", KERNELS: "none"}

# Measured outcomes (the forecast targets) ------------------------------------------------------
GPU_DEMAND_GFLOPS = "gpu_demand_gflops"
PEAK_GPU_MEM_GB = "peak_gpu_mem_gb"
RUNTIME_HOURS = "runtime_hours"
TARGETS = (GPU_DEMAND_GFLOPS, PEAK_GPU_MEM_GB, RUNTIME_HOURS)

JOB_ID_MAX_LEN = 128
# Caps on the other free-text fields: longer values are rejected with the length rule, never cut
# (a 3,000,000-character queue name is an exporter bug, and would bloat every table it reaches).
NAME_MAX_LEN = 128  # queue, team, model type, optimizer, GPU type, architecture
JOB_NAME_MAX_LEN = 256  # a scheduler's job name (Slurm allows long ones; a longer one is an exporter bug)
TEXT_MAX_LEN = 2_000  # failure_reason

# `maximum` is the plausibility ceiling: above it a value is a unit or typing error, not a real job
# (1e7 million parameters = 10 trillion; 1e7 GFLOP/s = 10 PFLOP/s, far beyond any one accelerator).
FIELDS: tuple[Field, ...] = (
    Field(JOB_ID, "string", "", f"1-{JOB_ID_MAX_LEN} characters; the key", required=True, max_length=JOB_ID_MAX_LEN),
    Field(SUBMITTED_AT, "timestamp", "UTC", "ISO 8601; no zone means UTC", required=True),
    Field(UPDATED_AT, "timestamp", "UTC", "ISO 8601; the latest record of a job wins by it"),
    Field(STATUS, "status", "", ", ".join(STATUSES) + " (any case)", required=True, values=STATUSES),
    Field(QUEUE, "string", "", f"any, 1-{NAME_MAX_LEN} characters; missing means `{DEFAULT_QUEUE}`",
          max_length=NAME_MAX_LEN),
    Field(TEAM, "string", "", f"any, 1-{NAME_MAX_LEN} characters", max_length=NAME_MAX_LEN),
    Field(MODEL_TYPE, "string", "", ", ".join(KNOWN_MODEL_TYPES) + f", ...; unknown kept; 1-{NAME_MAX_LEN} characters; "
          f"missing means `{UNKNOWN_MODEL_TYPE}` (v4)", max_length=NAME_MAX_LEN),
    Field(PARAMS_MILLION, "float", "millions of parameters", "> 0", maximum=1e7),
    Field(BATCH_SIZE, "int", "samples", "> 0", maximum=1e7),
    Field(INPUT_DIM, "int", "features, pixels per side or tokens", "> 0", maximum=1e8),
    Field(NUM_LAYERS, "int", "layers", "> 0", maximum=1e5),
    Field(ITERATIONS, "float", "optimizer steps", "> 0", maximum=1e10),
    Field(PRECISION, "precision", "", ", ".join(PRECISIONS) + " (fp16, float16, half, ... accepted)", values=PRECISIONS),
    Field(OPTIMIZER, "string", "", ", ".join(KNOWN_OPTIMIZERS) + f", ...; unknown kept; 1-{NAME_MAX_LEN} characters",
          max_length=NAME_MAX_LEN),
    Field(LEARNING_RATE, "float", "", "> 0", maximum=100.0),
    Field(REGULARIZATION, "bool", "", "true/false, yes/no, 1/0, none"),
    Field(DATA_AUGMENTATION, "bool", "", "true/false, yes/no, 1/0"),
    Field(GPU_TYPE, "string", "", "e.g. `A100-80GB`; matched to the GPU catalogue, unknown kept and reported",
          max_length=NAME_MAX_LEN, since=2),
    Field(GPU_COUNT, "int", "GPUs", "> 0; missing means 1", maximum=1e5, since=2),
    Field(GPU_PEAK_TFLOPS, "float", "TFLOP/s", "> 0; the GPU's peak dense throughput at the job's precision",
          maximum=1e5, since=2),
    Field(ARCH, "string", "", "e.g. `resnet50`, `bert-large-uncased`; a name the model zoo knows gets the traced prior, "
          f"unknown kept and reported; 1-{NAME_MAX_LEN} characters", max_length=NAME_MAX_LEN, since=3),
    Field(GPU_DEMAND_GFLOPS, "float", "GFLOP/s", "> 0; sustained GPU compute drawn", maximum=1e7, measured=True),
    Field(PEAK_GPU_MEM_GB, "float", "GB", "> 0; peak GPU memory as the GPU reports it", maximum=1e4, measured=True),
    Field(RUNTIME_HOURS, "float", "hours", "> 0; GPU wall time", maximum=1e5, measured=True),
    Field(FAILURE_REASON, "string", "", f"free text, e.g. `OOM`; 1-{TEXT_MAX_LEN:,} characters", max_length=TEXT_MAX_LEN),
    # v4 fields last: a warehouse made under v3 gains them at the end of its tables (warehouse/schema.py)
    Field(TIME_LIMIT_HOURS, "float", "hours", "> 0; the wall time the job asked for (Slurm `Timelimit`)",
          maximum=1e5, since=4),
    Field(JOB_NAME, "string", "", f"the scheduler's job name (Slurm `JobName`); 1-{JOB_NAME_MAX_LEN} characters",
          max_length=JOB_NAME_MAX_LEN, since=4),
    # v5 fields: a job on many GPUs (LLM training and fine-tuning)
    Field(TENSOR_PARALLEL, "int", "GPUs", ">= 1; missing means 1; tensor x pipeline x context parallel divides "
          "`gpu_count`", maximum=1e5, since=5),
    Field(PIPELINE_PARALLEL, "int", "stages", ">= 1; missing means 1", maximum=1e5, since=5),
    Field(CONTEXT_PARALLEL, "int", "GPUs", ">= 1; missing means 1", maximum=1e5, since=5),
    Field(SHARDING, "string", "", ", ".join(SHARDINGS[:-1]) + " (states sharded over the data-parallel ranks; FSDP "
          "FULL_SHARD / SHARD_GRAD_OP / NO_SHARD / HYBRID_SHARD and DeepSpeed stages 0-3 accepted); another word "
          "kept as `unknown`; missing means `none`", values=SHARDINGS, since=5),
    Field(CPU_OFFLOAD, "string", "", ", ".join(CPU_OFFLOADS) + " (v8: placed as the GPU has room, ColossalAI Gemini's "
          "`auto`); missing means `none`", values=CPU_OFFLOADS, since=5),
    Field(ACTIVATION_CHECKPOINTING, "string", "", ", ".join(CHECKPOINTINGS) + " (true/false accepted: full/none); "
          "missing means `none`", values=CHECKPOINTINGS, since=5),
    Field(ADAPTER, "string", "", "none (all weights trained), lora, qlora, other (any other parameter-efficient "
          "method; PEFT's peft_type names accepted), lisa (v6: LISA's sampled blocks, embedding and head trained); "
          "another word kept as `unknown`; missing means `none`",
          values=ADAPTERS, since=5),
    Field(LORA_RANK, "int", "", f"> 0 and at most {LORA_RANK_MAX:,}; the adapter's rank r", maximum=LORA_RANK_MAX,
          since=5),
    Field(MICRO_BATCH_SIZE, "int", "samples", "> 0; samples per GPU per forward pass", maximum=1e7, since=5),
    # v6
    Field(LOSS_PRECISION, "string", "", "fp32 (the loss on fp32 logits), half (on the 16-bit logits), fused (a fused "
          "linear cross-entropy that never holds the logits: Liger, Cut Cross-Entropy); another word kept as "
          "`unknown`; missing means `fp32`", values=LOSS_PRECISIONS, since=6),
    # v7
    Field(EXPERT_PARALLEL, "int", "GPUs", ">= 1; missing means 1; the GPUs a mixture-of-experts model's experts are "
          "split over; divides gpu_count / (tensor x pipeline parallel)", maximum=1e5, since=7),
    Field(TRAINED_MODULES, "string", "", "none, embeddings, head, embeddings_and_head: the modules an adapter run also "
          "trains in full (PEFT modules_to_save names accepted); another word kept as `unknown`; missing means `none`",
          values=TRAINED_MODULE_WORDS, since=7),
    # v8
    Field(KERNELS, "string", "", "none, unsloth, liger: the kernel library the job trains with (unsloth's "
          "`unsloth_version`, `use_unsloth`, `tuner_backend` unsloth; Liger's `use_liger_kernel`); another word kept as "
          "`unknown`; missing means `none`", values=KERNEL_WORDS, since=8),
)

FIELD_BY_NAME = {f.name: f for f in FIELDS}
COLUMNS = tuple(f.name for f in FIELDS)
REQUIRED = tuple(f.name for f in FIELDS if f.required)
FLOAT_COLUMNS = tuple(f.name for f in FIELDS if f.kind == "float")
INT_COLUMNS = tuple(f.name for f in FIELDS if f.kind == "int")
BOOL_COLUMNS = tuple(f.name for f in FIELDS if f.kind == "bool")
TIMESTAMP_COLUMNS = tuple(f.name for f in FIELDS if f.kind == "timestamp")
STRING_COLUMNS = tuple(f.name for f in FIELDS if f.kind in ("string", "status", "precision"))

PLAUSIBLE_MAX = {f.name: f.maximum for f in FIELDS if f.maximum is not None}
# The earliest believable time of a job-log timestamp, ISO 8601 UTC: an earlier one is a default or typing error (epoch
# 0 for a missing time; year 0), a parsing rule's like a time in the future (review 77 S1-4, S1-6: a year-0 time
# stopped the load, and one job of 1970 stretched its demand series to 20,000 zero days, 15+ minutes a night).
EARLIEST_TIME = "2000-01-01T00:00:00Z"
V1_COLUMNS = tuple(f.name for f in FIELDS if f.since == 1)
ADDED_COLUMNS = tuple(f.name for f in FIELDS if f.since > 1)
# The columns each later version added, by version: {2: (gpu_type, gpu_count, gpu_peak_tflops), 3: (arch,),
# 4: (time_limit_hours, job_name), 5: (tensor_parallel, ..., micro_batch_size), 6: (loss_precision,),
# 7: (expert_parallel, trained_modules)}.
# The fields of a job on many GPUs (v5's layout, v6's loss precision, v7's experts and trained modules).
LLM_COLUMNS = tuple(f.name for f in FIELDS if f.since >= 5)
ADDED_BY_VERSION = {v: tuple(f.name for f in FIELDS if f.since == v) for v in range(2, CONTRACT_VERSION + 1)}


def record_hash_sql() -> str:
    """SQL for a record's identity: md5 of its contract values. The columns a later version added count
    only when one of them is set, one block per version, so a record loaded under v1 or v2 hashes the
    same after each upgrade (a v2 record: v1 columns + the v2 block, as v2 hashed it).

    A block's text is DuckDB's JSON array of its values in contract order (`to_json(row(...))`: strings quoted and
    escaped, so no two records share a text; a double in its shortest round-trip form, the same for the same value
    whichever file format brought it; a timestamp as its epoch microseconds, whatever the session's time zone). Until
    session 13 a block was `to_json(struct_pack(...))`, the column names in every text: 3.0 CPU-s a million records
    against 1.3 (issue 52); a warehouse hashed that way is hashed again once (`warehouse/schema.py` `rehash_stored`)."""
    def value(name: str) -> str:
        return f"epoch_us({name})" if FIELD_BY_NAME[name].kind == "timestamp" else name

    def block(names: tuple[str, ...]) -> str:
        return f"CAST(to_json(row({', '.join(value(n) for n in names)})) AS VARCHAR)"

    later = "".join(f" || CASE WHEN {' OR '.join(f'{n} IS NOT NULL' for n in names)} THEN {block(names)} ELSE '' END"
                    for names in ADDED_BY_VERSION.values() if names)  # a version may add words, no column
    return f"md5({block(V1_COLUMNS)}{later})"


# Seed-paper table: its 12 columns, normalised (lower case, underscores), mapped to the contract.
SEED_COLUMNS = {
    "model_type": MODEL_TYPE,
    "parameters_million": PARAMS_MILLION,
    "batch_size": BATCH_SIZE,
    "input_dimension": INPUT_DIM,
    "num_layers": NUM_LAYERS,
    "iterations": ITERATIONS,
    "precision": PRECISION,
    "optimizer": OPTIMIZER,
    "regularization": REGULARIZATION,
    "data_augmentation": DATA_AUGMENTATION,
    "learning_rate": LEARNING_RATE,
    "gpu_demand_gflops": GPU_DEMAND_GFLOPS,
}
SEED_QUEUE = "seed"
# The seed table has no dates: its rows are dated the earliest time the time rule accepts (`EARLIEST_TIME`; 1970 until
# session 26, which that rule now rejects), so they never fall into a planning window nor the demand's history.
SEED_SUBMITTED_AT = EARLIEST_TIME

# Column-name spellings accepted from other exporters (after lower-casing and `_` for spaces).
COLUMN_ALIASES = {
    "id": JOB_ID,
    "jobid": JOB_ID,
    "submit_time": SUBMITTED_AT,
    "submitted": SUBMITTED_AT,
    "updated": UPDATED_AT,
    "state": STATUS,
    "partition": QUEUE,
    "model": MODEL_TYPE,
    "parameters_million": PARAMS_MILLION,
    "params_m": PARAMS_MILLION,
    "input_dimension": INPUT_DIM,
    "layers": NUM_LAYERS,
    "lr": LEARNING_RATE,
    "gpu": GPU_TYPE,
    "gpu_model": GPU_TYPE,
    "gpu_name": GPU_TYPE,
    "gpus": GPU_COUNT,
    "num_gpus": GPU_COUNT,
    "n_gpus": GPU_COUNT,
    "peak_tflops": GPU_PEAK_TFLOPS,
    "architecture": ARCH,
    "model_name": ARCH,
    "arch_name": ARCH,
    "jobname": JOB_NAME,
    # v5: the names Megatron, torchtitan, DeepSpeed and Hugging Face use
    "tp": TENSOR_PARALLEL,
    "tensor_model_parallel_size": TENSOR_PARALLEL,
    "tensor_parallel_size": TENSOR_PARALLEL,
    "tensor_parallel_degree": TENSOR_PARALLEL,
    "pp": PIPELINE_PARALLEL,
    "pipeline_model_parallel_size": PIPELINE_PARALLEL,
    "pipeline_parallel_size": PIPELINE_PARALLEL,
    "pipeline_parallel_degree": PIPELINE_PARALLEL,
    "cp": CONTEXT_PARALLEL,
    # v7
    "expert_model_parallel_size": EXPERT_PARALLEL,
    "expert_parallel_size": EXPERT_PARALLEL,
    "expert_parallel_degree": EXPERT_PARALLEL,
    "ep_size": EXPERT_PARALLEL,
    "modules_to_save": TRAINED_MODULES,
    "lora_modules_to_save": TRAINED_MODULES,
    "additional_target": TRAINED_MODULES,
    "context_parallel_size": CONTEXT_PARALLEL,
    "context_parallel_degree": CONTEXT_PARALLEL,
    "zero_stage": SHARDING,
    "deepspeed_stage": SHARDING,
    "sharding_strategy": SHARDING,
    "fsdp_sharding_strategy": SHARDING,
    "offload": CPU_OFFLOAD,
    # v8: ColossalAI Gemini's placement (GeminiPlugin `placement_policy`, its older `tensor_placement_policy`)
    "placement_policy": CPU_OFFLOAD,
    "tensor_placement_policy": CPU_OFFLOAD,
    "kernel": KERNELS,
    "kernel_library": KERNELS,
    "gradient_checkpointing": ACTIVATION_CHECKPOINTING,
    "recompute_granularity": ACTIVATION_CHECKPOINTING,
    "activation_checkpoint": ACTIVATION_CHECKPOINTING,
    "peft_type": ADAPTER,
    "lora_r": LORA_RANK,
    "micro_batch": MICRO_BATCH_SIZE,
    "per_device_train_batch_size": MICRO_BATCH_SIZE,
}
