"""Turn a chunk of string columns into typed contract columns, naming every value that will not parse.

Parsing rules live here (a value that is not a number, a whole number, a boolean or a timestamp);
quality rules on the typed values (ranges, allowed sets, required fields) live in the Great
Expectations suite `job_logs` (generated in `expectations/suite.py`). Each broken parsing rule adds a sentence
to the row's `_errors` list.
"""

from __future__ import annotations

import itertools
from datetime import datetime
from functools import cache

import polars as pl

from gpucast.expectations import contract as c

MISSING_TOKENS = ("", "null", "none", "na", "n/a")
TRUE_TOKENS = ("true", "t", "yes", "y", "1", "on", "1.0")
FALSE_TOKENS = ("false", "f", "no", "n", "0", "off", "0.0", "none")

STATUS_SYNONYMS = {
    "QUEUED": "PENDING",
    "SUBMITTED": "PENDING",
    "WAITING": "PENDING",
    "STARTED": "RUNNING",
    "SUCCEEDED": "COMPLETED",
    "SUCCESS": "COMPLETED",
    "DONE": "COMPLETED",
    "FINISHED": "COMPLETED",
    "ERROR": "FAILED",
    "OOM": "FAILED",
    "CANCELED": "CANCELLED",
    "KILLED": "CANCELLED",
}
PRECISION_SYNONYMS = {
    **dict.fromkeys(("fp16", "float16", "half", "16", "f16", "amp", "mixed", "fp16-mixed"), "FP16"),
    **dict.fromkeys(("bf16", "bfloat16", "bf16-mixed"), "BF16"),
    **dict.fromkeys(("fp32", "float32", "single", "float", "32", "f32", "tf32"), "FP32"),
    **dict.fromkeys(("fp64", "float64", "double", "64", "f64"), "FP64"),
    **dict.fromkeys(("fp8", "float8", "8", "f8", "e4m3", "fp8_e4m3", "e5m2", "fp8_e5m2", "hybrid", "fp8-mixed",
                     "transformer-engine", "te"), "FP8"),  # contract v5 (TransformerEngine's recipes: e4m3, hybrid)
}
# Contract v5 words, matched on the lower-cased value with spaces, dashes and underscores removed ("FULL_SHARD",
# "full-shard" and "fullshard" alike). A sharding or adapter word not here is `unknown` (kept, counted); an
# offload or checkpointing word not here is rejected by the contract's allowed set.
_NO = ("none", "no", "false", "off", "0", "disabled", "null")
SHARDING_SYNONYMS = {
    **dict.fromkeys((*_NO, "noshard", "ddp", "stage0", "zero0", "zerostage0", "ds0", "z0", "dp"), "none"),
    **dict.fromkeys(("zero1", "1", "stage1", "zerostage1", "ds1", "z1", "distributedoptimizer", "distoptimizer"),
                    "zero1"),
    **dict.fromkeys(("zero2", "2", "stage2", "zerostage2", "ds2", "z2", "shardgradop"), "zero2"),
    **dict.fromkeys(("zero3", "3", "stage3", "zerostage3", "ds3", "z3"), "zero3"),
    # FSDP's FULL_SHARD shards params, grads and optimizer states (ZeRO-3 memory); HYBRID_SHARD does so within a
    # node (the prior shards over the data-parallel ranks, the node's share of them being the common case)
    **dict.fromkeys(("fsdp", "fsdp1", "fsdp2", "fullshard", "fullyshard", "hybridshard", "hybridshardzero2"), "fsdp"),
}
CPU_OFFLOAD_SYNONYMS = {
    **dict.fromkeys(_NO, "none"),
    **dict.fromkeys(("optimizer", "optim", "opt", "optimizerstates", "offloadoptimizer", "cpuoptimizer"), "optimizer"),
    **dict.fromkeys(("all", "true", "yes", "1", "on", "params", "param", "parameters", "offloadparam", "offloadparams",
                     "full", "cpuoffload"), "all"),
    # contract v8: ColossalAI Gemini's `placement_policy` words. `cuda` keeps every chunk on the GPU; `cpu` keeps them
    # on the CPU; `static` places by GeminiPlugin's `offload_param_frac` / `offload_optim_frac`, both 0.0 by default
    # (all on the GPU: a fraction the run changed is not logged with it); `auto` moves chunks as the GPU has room
    **dict.fromkeys(("cuda", "gpu", "static"), "none"),
    **dict.fromkeys(("cpu",), "all"),
    **dict.fromkeys(("auto", "dynamic", "autoplacement"), "auto"),
}
CHECKPOINTING_SYNONYMS = {
    **dict.fromkeys(_NO, "none"),
    **dict.fromkeys(("selective", "sel", "partial", "op"), "selective"),
    **dict.fromkeys(("full", "true", "yes", "1", "on", "all", "uniform", "block"), "full"),
}
ADAPTER_SYNONYMS = {
    **dict.fromkeys((*_NO, "full", "fullft", "fullfinetune", "fullfinetuning", "fft", "pretrain", "pretraining"),
                    "none"),
    **dict.fromkeys(("lora", "rslora", "loraplus", "lora+", "pissa", "olora"), "lora"),
    **dict.fromkeys(("qlora", "qlora4bit", "lora4bit", "qlora8bit", "gptqlora", "awqlora"), "qlora"),
    # PEFT's peft_type names (and a few others' methods) other than LoRA
    **dict.fromkeys(("other", "adalora", "dora", "prefixtuning", "prompttuning", "ptuning", "ptuningv2", "ia3", "loha",
                     "lokr", "oft", "boft", "vera", "fourierft", "hra", "bone", "lntuning", "poly", "adaptionprompt",
                     "llamaadapter", "adapter", "adapters", "longlora", "galore", "reft", "loreft", "qdora",
                     "xlora", "vblora", "cpt", "multitaskprompttuning", "boneft", "miss", "randlora", "shira", "c3a"),
                    "other"),
    **dict.fromkeys(("lisa", "lmflowlisa", "uselisa"), "lisa"),  # contract v6 (v5 read it as `other`)
}
# Contract v6: the loss's precision. `fp32` for the loss on fp32 logits (the default), `half` for a loss on the 16-bit
# logits (Megatron's `fp16_lm_cross_entropy`), `fused` for a fused linear cross-entropy (Liger, Apple's Cut
# Cross-Entropy, chunked losses) that never holds the logits.
LOSS_PRECISION_SYNONYMS = {
    **dict.fromkeys(("fp32", "float32", "float", "single", "32", "f32", "full", "default", "upcast"), "fp32"),
    **dict.fromkeys(("half", "fp16", "bf16", "float16", "bfloat16", "16", "16bit", "f16"), "half"),
    **dict.fromkeys(("fused", "liger", "ligerkernel", "fusedlinearcrossentropy", "ligerfusedlinearcrossentropy",
                     "cutcrossentropy", "cce", "chunked", "chunkedce", "chunkedcrossentropy"), "fused"),
}
# Contract v7: the modules an adapter run also trains in full, from PEFT's `modules_to_save` names (a list logged as
# text: `['embed_tokens', 'lm_head']`, brackets, quotes and spaces dropped) or the contract's words. The input
# embedding: Llama's / Qwen2's `embed_tokens`, GPT-2's `wte`, GPT-NeoX's `embed_in`, BLOOM's `word_embeddings`, Qwen's
# (v1) `wte`; the head: `lm_head`, GPT-NeoX's `embed_out`, ChatGLM's `output_layer`; either order of the two.
_EMBEDDINGS = ("embeddings", "embedding", "embed", "embedtokens", "wte", "embedin", "wordembeddings", "tokembeddings",
               "tokenembeddings", "input", "inputembeddings")
_HEADS = ("head", "lmhead", "embedout", "outputlayer", "output", "outputembeddings")
TRAINED_MODULES_SYNONYMS = {
    **dict.fromkeys((*_NO, ""), "none"),
    **dict.fromkeys(_EMBEDDINGS, "embeddings"),
    **dict.fromkeys(_HEADS, "head"),
    **dict.fromkeys(("embeddingsandhead", "both", "embeddingandhead", "embeddings+head", "embedandhead"),
                    "embeddings_and_head"),
    **{f"{a},{b}": "embeddings_and_head" for e in _EMBEDDINGS for h in _HEADS for a, b in ((e, h), (h, e))},
}
# Contract v8: the kernel library a job trains with; `hf`, `eager`, `torch` are the model's own modules (`none`)
KERNEL_SYNONYMS = {
    **dict.fromkeys((*_NO, "hf", "huggingface", "transformers", "eager", "torch", "pytorch", "default"), "none"),
    **dict.fromkeys(("unsloth", "unslothai", "fastlanguagemodel", "unslothzoo"), "unsloth"),
    **dict.fromkeys(("liger", "ligerkernel", "ligerkernels"), "liger"),
}
LLM_WORDS = {c.SHARDING: SHARDING_SYNONYMS, c.CPU_OFFLOAD: CPU_OFFLOAD_SYNONYMS,
             c.ACTIVATION_CHECKPOINTING: CHECKPOINTING_SYNONYMS, c.ADAPTER: ADAPTER_SYNONYMS,
             c.LOSS_PRECISION: LOSS_PRECISION_SYNONYMS, c.TRAINED_MODULES: TRAINED_MODULES_SYNONYMS,
             c.KERNELS: KERNEL_SYNONYMS}
# What a word's key drops before the table is read: spaces, dashes and underscores; for `trained_modules` also a
# logged list's brackets and quotes
WORD_NOISE = {c.TRAINED_MODULES: r"[\s_\-\[\]'\"()]"}
MODEL_TYPE_SYNONYMS = {
    **{m.lower(): m for m in c.KNOWN_MODEL_TYPES},
    "convnet": "CNN",
    "resnet50": "ResNet",
    "transformers": "Transformer",
    c.UNKNOWN_MODEL_TYPE: c.UNKNOWN_MODEL_TYPE,  # any case: `Unknown`, `UNKNOWN`
}
OPTIMIZER_SYNONYMS = {o.lower(): o for o in c.KNOWN_OPTIMIZERS}

# After "Z" -> "+00:00" and "T" -> " " (see `normalize`); the first is the common one.
TIMESTAMP_FORMATS = (
    "%Y-%m-%d %H:%M:%S%.f%z",
    "%Y-%m-%d %H:%M:%S%.f",
    "%Y-%m-%d %H:%M%z",
    "%Y-%m-%d %H:%M",
    "%Y-%m-%d",
)


@cache
def spellings(tokens: tuple[str, ...]) -> tuple[str, ...]:
    """Every upper/lower-case spelling of `tokens` (`null`: `null`, `Null`, `NULL`, ... 16 of them): a value is one of
    `tokens` in any case exactly when it is one of these, so the missing-token test needs no lower-cased copy of every
    value of every column (a new string per value: 14% of `normalize`'s CPU at 100,000 rows). The tokens are ASCII, and
    of the characters outside ASCII only two lower-case to anything holding an ASCII letter (the Kelvin sign: `k`;
    `İ`: `i` and a combining dot), neither one of the tokens' letters, so the two tests agree on every text."""
    out: set[str] = set()
    for token in tokens:
        out.update("".join(p) for p in itertools.product(*[(ch.lower(), ch.upper()) if ch.isalpha() else (ch,)
                                                          for ch in token]))
    return tuple(sorted(out))


def _text(name: str, missing: tuple[str, ...] = MISSING_TOKENS) -> pl.Expr:
    """The stripped value, or null for a missing token (any case). `replace` with null, not `when(is_in)`: the same
    values, in 0.07 CPU-s per 100,000 rows of the 36 contract columns against 0.12 (issue 52)."""
    return pl.col(name).str.strip_chars().replace(list(spellings(missing)), None)


# Work happens in stages so that each value is parsed once: texts, then values, then errors
# that compare the two (a value that is null where its text was not failed to parse).
def _t(name: str) -> str:
    return f"__t_{name}"


def _v(name: str) -> str:
    return f"__v_{name}"


def _bad(name: str, cond: pl.Expr, what: str) -> pl.Expr:
    """`"<name>: '<value>' <what>"` where `cond` holds, else null."""
    shown = pl.col(name).str.strip_chars().str.slice(0, 60)  # the value as given
    return pl.when(cond).then(pl.format("{}: '{}' " + what, pl.lit(name), shown))


# The largest whole number a contract column holds (Int64's range, rounded down): a larger one is a parsing error, not a
# value quietly lost (session 22: `1e20` in `batch_size` loaded as missing; in `tensor_parallel` it stopped the file)
INT_LIMIT = 9.0e18


def _number_conditions(name: str, integer: bool) -> list[pl.Expr]:
    """Not a number; not finite; (for a whole-number column) not whole, out of range: in the order they are named."""
    t, v = pl.col(_t(name)), pl.col(_v(name))
    conditions = [t.is_not_null() & v.is_null(), v.is_not_null() & ~v.is_finite()]
    if not integer:
        return conditions
    whole = v.is_finite() & (v == v.round(0))
    return conditions + [v.is_finite() & (v != v.round(0)), whole & (v.abs() >= INT_LIMIT)]


def _number_errors(name: str, integer: bool) -> pl.Expr:
    t = pl.col(_t(name))
    nan, infinite, *whole = _number_conditions(name, integer)
    err = _bad(name, nan, "is not a number").when(infinite).then(pl.format("{}: {} is not a finite number", pl.lit(name), t))
    if whole:
        fraction, too_large = whole
        err = err.when(fraction).then(pl.format("{}: {} is not a whole number", pl.lit(name), t))
        err = err.when(too_large).then(pl.format("{}: {} is out of range (a whole number within ±9e18)", pl.lit(name), t))
    return err


def _number_flag(name: str, integer: bool) -> pl.Expr:
    return pl.any_horizontal(_number_conditions(name, integer))


def _number_value(name: str, integer: bool) -> pl.Expr:
    v = pl.col(_v(name))
    if integer:
        ok = v.is_finite() & (v == v.round(0)) & (v.abs() < INT_LIMIT)
        return pl.when(ok).then(v).otherwise(None).cast(pl.Int64)
    return pl.when(v.is_finite()).then(v).otherwise(None)


def _canonical(name: str, synonyms: dict[str, str], upper: bool = False) -> pl.Expr:
    s = pl.col(_t(name))
    fallback = s.str.to_uppercase() if upper else s
    return s.str.to_lowercase().replace_strict(synonyms, default=fallback, return_dtype=pl.String)


def normalize(chunk: pl.DataFrame, not_after: datetime | None = None) -> pl.DataFrame:
    """Typed contract columns + `_row`, `_raw` and `_errors` (list of parsing-rule sentences).

    `not_after`: the latest believable time (the ingest's own clock plus GPUCAST_FUTURE_TOLERANCE_HOURS,
    passed in by the caller, never read here); a timestamp after it breaks the time rule."""
    # one memory chunk per column: Polars 2.1 panics ("assertion failed: i < self.len()") filtering a
    # string column read in several chunks (the NDJSON reader's threads) before the sentences below
    chunk = chunk.rechunk().with_row_index("__pos")  # rows come back in input order, whatever `_row` holds
    missing = [n for n in c.COLUMNS if n not in chunk.columns]
    chunk = chunk.with_columns([pl.lit(None, dtype=pl.String).alias(n) for n in missing])
    numbers = c.FLOAT_COLUMNS + c.INT_COLUMNS
    # "none" is an answer for a yes/no column (no regularization), not a missing value
    bool_missing = tuple(t for t in MISSING_TOKENS if t != "none")

    # 1. texts
    frame = chunk.with_columns(
        *[_text(n).alias(_t(n)) for n in c.COLUMNS if n not in c.BOOL_COLUMNS],
        *[_text(n, bool_missing).str.to_lowercase().alias(_t(n)) for n in c.BOOL_COLUMNS],
    )
    # timestamps: one layout ("2026-11-01 10:00:00+00:00") for the formats below
    frame = frame.with_columns(
        pl.col(_t(n)).str.replace(r"[Zz]$", "+00:00").str.replace("T", " ", literal=True).alias(_t(n))
        for n in c.TIMESTAMP_COLUMNS
    )
    # 2. values; a timestamp is tried in the common layout first, the rest only where that failed
    first, *others = TIMESTAMP_FORMATS
    frame = frame.with_columns(
        *[pl.col(_t(n)).cast(pl.Float64, strict=False).alias(_v(n)) for n in numbers],
        *[_to_datetime(pl.col(_t(n)), first).alias(_v(n)) for n in c.TIMESTAMP_COLUMNS],
    )
    frame = frame.with_columns(
        pl.coalesce(
            pl.col(_v(n)),
            *[_to_datetime(pl.when(pl.col(_v(n)).is_null()).then(pl.col(_t(n))), f) for f in others],
        ).alias(_v(n))
        for n in c.TIMESTAMP_COLUMNS
    )

    # 3. which rows break a parsing rule (cheap masks on every row); the sentences only for those,
    # since formatting a sentence per rule and row was half of this function's time
    values, errors, flags = _values_and_errors(not_after)
    frame = frame.with_columns(pl.any_horizontal(flags).fill_null(False).alias("__flagged"))
    typed = ["__pos", "_row", "_raw", *[values[n].alias(n) for n in c.COLUMNS]]
    clean = frame.filter(~pl.col("__flagged")).select(*typed, pl.lit([], dtype=pl.List(pl.String)).alias("_errors"))
    flagged = frame.filter(pl.col("__flagged")).select(
        *typed, pl.concat_list([e.cast(pl.String) for e in errors]).list.drop_nulls().alias("_errors"))
    if not flagged.height:
        return clean.drop("__pos")
    return pl.concat([clean, flagged]).sort("__pos").drop("__pos")


EARLIEST = datetime.fromisoformat(c.EARLIEST_TIME)  # (`fromisoformat` reads the Z since Python 3.11)


def _values_and_errors(not_after: datetime | None = None) -> tuple[dict[str, pl.Expr], list[pl.Expr], list[pl.Expr]]:
    """Per contract column, the expression of its typed value; every parsing-rule sentence; and the
    rules' conditions (true where a row breaks one: the sentences are built for those rows only)."""
    values: dict[str, pl.Expr] = {}
    errors: list[pl.Expr] = [pl.col("_read_error")]
    flags: list[pl.Expr] = [pl.col("_read_error").is_not_null()]
    for name in c.FLOAT_COLUMNS + c.INT_COLUMNS:
        integer = name in c.INT_COLUMNS
        values[name] = _number_value(name, integer)
        errors.append(_number_errors(name, integer))
        flags.append(_number_flag(name, integer))
    for name in c.BOOL_COLUMNS:
        t = pl.col(_t(name))
        values[name] = pl.when(t.is_in(TRUE_TOKENS)).then(True).when(t.is_in(FALSE_TOKENS)).then(False).otherwise(None)
        bad = t.is_not_null() & ~t.is_in(TRUE_TOKENS) & ~t.is_in(FALSE_TOKENS)
        errors.append(_bad(name, bad, "is not a yes/no value (true/false, yes/no, 1/0)"))
        flags.append(bad)
    for name in c.TIMESTAMP_COLUMNS:
        values[name] = pl.col(_v(name))
        bad = pl.col(_t(name)).is_not_null() & pl.col(_v(name)).is_null()
        errors.append(_bad(name, bad, "is not an ISO 8601 timestamp (e.g. 2026-11-01T10:00:00Z)"))
        flags.append(bad)
        past = pl.col(_v(name)) < pl.lit(EARLIEST).dt.cast_time_unit("us")
        errors.append(_bad(name, past, f"is before {c.EARLIEST_TIME[:10]}: a default or typing error (epoch 0 for a "
                                       "missing time?)"))
        flags.append(past.fill_null(False))
        if not_after is not None:  # the time rule: a record from the future is a clock or typing error
            future = pl.col(_v(name)) > pl.lit(not_after).dt.convert_time_zone("UTC").dt.cast_time_unit("us")
            errors.append(_bad(name, future, f"is in the future: after {not_after:%Y-%m-%d %H:%M} UTC, the ingest's "
                                             "time plus GPUCAST_FUTURE_TOLERANCE_HOURS"))
            flags.append(future.fill_null(False))

    status = pl.col(_t(c.STATUS)).str.to_uppercase()
    values[c.STATUS] = status.replace_strict(STATUS_SYNONYMS, default=status, return_dtype=pl.String)
    values[c.PRECISION] = _canonical(c.PRECISION, PRECISION_SYNONYMS, upper=True)
    # contract v4: a job without a model type is `unknown` (forecast from the scheduler's facts), like a
    # missing queue is `default`
    values[c.MODEL_TYPE] = _canonical(c.MODEL_TYPE, MODEL_TYPE_SYNONYMS).fill_null(c.UNKNOWN_MODEL_TYPE)
    values[c.OPTIMIZER] = _canonical(c.OPTIMIZER, OPTIMIZER_SYNONYMS)
    values[c.QUEUE] = pl.col(_t(c.QUEUE)).fill_null(c.DEFAULT_QUEUE)
    for name in (c.JOB_ID, c.TEAM, c.FAILURE_REASON, c.GPU_TYPE, c.ARCH, c.JOB_NAME):
        values[name] = pl.col(_t(name))
    for name, synonyms in LLM_WORDS.items():  # contracts v5 to v7
        t = pl.col(_t(name))
        key = t.str.to_lowercase().str.replace_all(WORD_NOISE.get(name, r"[\s_\-]"), "")
        fallback = pl.when(t.is_not_null()).then(pl.lit(c.UNKNOWN_WORD)) if name in c.UNKNOWN_KEPT else t
        values[name] = key.replace_strict(synonyms, default=fallback, return_dtype=pl.String)
    error, flag = _layout_rule()
    errors.append(error)
    flags.append(flag)

    return values, errors, flags


def _layout_rule() -> tuple[pl.Expr, pl.Expr]:
    """Contract v5's one rule across fields, which Great Expectations has no expectation for: tensor x pipeline x
    context parallel must divide `gpu_count` (missing: 1 each), since data parallel = gpu_count / their product.
    Contract v7 adds the experts' rule: expert x pipeline parallel must divide `gpu_count`. Megatron-Core's
    `initialize_model_parallel` lays the experts out on their own grid, expert tensor x expert x pipeline parallel,
    and refuses a world it does not divide; the expert tensor size may be set below the tensor size (ms-swift's
    GLM-4.5-Air scripts: TP4 x EP4 on 4 GPUs with expert tensor parallel 1), so the loosest layout any job can run is
    expert x pipeline dividing the GPUs (session 18, review 68a S2-2; until then the rule asked `expert_parallel` to
    divide gpu_count / (tensor x pipeline), which quarantined those jobs). DeepSpeed MoE's `ep_size` divides its
    data-parallel world, which the same rule admits. Judged only where all parse as whole numbers > 0 (a bad one is
    named by its own rule instead); a row breaking the first is named by it alone."""
    parts = [pl.col(_v(n)).fill_null(1.0) for n in (*c.PARALLELISM, c.GPU_COUNT, c.EXPERT_PARALLEL)]
    tp, pp, cp, gpus, ep = parts
    # whole numbers in range only (a larger one is named by its own rule); the casts below are not strict, since Polars
    # evaluates the sentence for every row, also those this condition leaves out (a `1e20` raised there: session 22)
    whole = pl.all_horizontal([(p.is_finite() & (p > 0) & (p == p.round(0)) & (p < INT_LIMIT)) for p in parts])
    split = tp * pp * cp
    broken = whole & pl.any_horizontal([pl.col(_v(n)).is_not_null() for n in c.PARALLELISM]) & ((gpus % split) != 0)
    sentence = pl.format("tensor_parallel x pipeline_parallel x context_parallel must divide gpu_count (got {} x {} x {}"
                         " = {} on {} GPUs)", *[p.cast(pl.Int64, strict=False) for p in (tp, pp, cp, split, gpus)])
    experts = whole & ~broken & pl.col(_v(c.EXPERT_PARALLEL)).is_not_null() & ((gpus % (ep * pp)) != 0)
    said = pl.format("expert_parallel x pipeline_parallel must divide gpu_count (got {} x {} = {} on {} GPUs)",
                     *[p.cast(pl.Int64, strict=False) for p in (ep, pp, ep * pp, gpus)])
    return (pl.when(broken).then(sentence).when(experts).then(said),
            (broken.fill_null(False) | experts.fill_null(False)))


def _to_datetime(text: pl.Expr, fmt: str) -> pl.Expr:
    return text.str.to_datetime(format=fmt, strict=False, time_zone="UTC", time_unit="us")
