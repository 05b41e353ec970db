"""Per-GPU peak memory of LLM training and fine-tuning jobs on many GPUs (issue 51), on measured runs.

Reads `../shared/data/llm_memory_dev.csv` (300 runs from public repositories, per-GPU peak measured on GPUs; its
README lists the sources), maps each row to a contract v5 job (`job_rows`: `arch` = the model's name, the layout
fields as logged (context parallel: a `context_parallel` column, else the Ulysses `sequence_parallel_size` the notes
give), `input_dim` = the sequence, `batch_size` = micro-batch x data parallel) and prints, per source and
overall: P50 MAPE, P90 coverage (P90 >= measured) and the runs that went out of memory flagged (P50 above their
GPU's memory), for
  (a) `prior`: the analytic per-GPU prior alone (tasks/learn/llm_memory.py; P90 = P50 x its stated factor);
  (b) `states_only`: DeepSpeed's / accelerate's model-states arithmetic (16 bytes a parameter for full training,
      the base's bytes for adapters, divided by the ranks that shard them; no activations): the named baseline;
  (c) `product`: a night on the usual single-GPU history (tests/data/measured_jobs.csv, 840 measured PyTorch
      networks), the champion chosen, saved and loaded by the `Scorer`, the LLM rows scored as pending jobs (a
      champion that learned from fewer than 20 LLM jobs forecasts them by the per-GPU prior itself:
      `ood.llm_unlearned`);
  (d) `product_half` (`--half`): the same with half of each source's runs (seeded) in the history, scored on the
      other half (the (a)-(c) figures of that half are printed beside it), and `correction`: the champion's own
      forecast, its learned correction applied to every held-out run (no fall-back to the prior where the night's
      out-of-fold evidence says it did not beat the prior: `ood.llm_correction`, printed per layout group); then (d)
      again with every run as the set's columns give it, nothing read off the notes (`INFERRED`: review 60 S4).
Beside them (`as_logged`), the prior's P50 and mean APE with what the benchmark reads off the notes, without each of
those values and without all of them: what a set that carries only the columns (a judge's file) sees.

    .venv/bin/python tests/benchmarks/bench_llm_memory.py [--data PATH] [--models lightgbm,prior] [--half] [--rows OUT.csv]
        [--breakdown] [--unseen-models]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import polars as pl

from gpucast.expectations import contract as c
from gpucast.records import catalog
from gpucast.tasks.ingest import normalize
from gpucast.tasks.learn import features
from gpucast.tasks.learn import llm_memory as m
from gpucast.tasks.learn.options import TrainOptions

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a script: make `tests` importable
from tests.measured import load  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "llm_memory_dev.csv"
# The context-parallel size of a run whose set has no `context_parallel` column: the Ulysses sequence-parallel size
# its notes give (ms-swift's `--sequence_parallel_size N` splits every sequence over N GPUs, which contract v5 calls
# context parallel)
SEQUENCE_PARALLEL = re.compile(r"sequence_parallel_size (\d+)")
# The checkpoint a run loaded when its notes name one (ms-swift's quantisation table: "GPTQ int4 quantized checkpoint
# (qwen-7b-chat-int4, ...)" for a row whose `model` is Qwen-7B-Chat): the name a log carries (Hugging Face's
# `_name_or_path`), which says the base was quantised before training and to how many bits
CHECKPOINT = re.compile(r"quantized checkpoint \(([\w.\-]+)")
# The optimizer a run's notes name, as Hugging Face Trainer logs `optim`: GaLore (ms-swift's `--use_galore`, and its
# 8-bit "quantize" and Q-GaLore variants as `_8bit`); every other run is AdamW. ms-swift's
# `--galore_optim_per_parameter` ("a separate optimizer for each GaLore target parameter", its docs) does not say the
# gradients are freed in their hooks as Hugging Face's `_layerwise` does, so it is not read as `_layerwise`.
GALORE = re.compile(r"galore", re.IGNORECASE)
# LISA (Pan et al. 2024, "LISA: Layerwise Importance Sampling for Memory-Efficient Large Language Model Fine-Tuning";
# ms-swift's `--lisa_activated_layers`) trains a few sampled blocks at a time over a frozen rest: contract v6's
# `adapter` `lisa`, as `gpucast import mlflow` reads `lisa_activated_layers` (the set logs its example script's run
# `other`, its two Benchmark.md rows `none`; all three notes say LISA)
LISA = re.compile(r"\bLISA\b")
# The loss's precision (contract v6 `loss_precision`) as a log would carry it. `fused`: the 8 runs whose notes say
# Liger's kernel is on (ms-swift's `--use_liger_kernel`, Hugging Face's TrainingArguments `use_liger_kernel`, which
# `gpucast import mlflow` reads); the notes' "no liger kernel" / "liger not used" are off. `half`: ColossalAI's
# Lightning benchmark's 6 ZeRO-3 / Gemini runs, by source: its `model.py` computes its own loss (`GPTLMLoss`, a
# shifted `nn.CrossEntropyLoss` on the logits the model returns) under DeepSpeed's and Gemini's fp16 engines, which
# run the model in fp16 without autocast, so the loss is on the 16-bit logits (docs/models.md, issue 51 session 8's
# table); its DDP run is under AMP's autocast, which casts cross-entropy's input to fp32 (`fp32`, the default).
# `half` too: universal-llm-trainer's single-GPU runs (docs/gpu_test.md), by source. Its models' `forward`
# (src/models/*.py) call the Hugging Face model without labels and apply their own `nn.CrossEntropyLoss` to
# `output.logits[:, :-1, :].reshape(...)`; its trainer wraps the step in `torch.autocast(enabled=self.amp)` with
# `self.amp = amp_training or load_unnecessary_half`, both `False` in the LoRA and full configs the table links
# (config/llm_*_lora.yaml, llm_*_full.yaml: `bit: bfloat16`), so the model, its logits and the loss stay bf16
# (transformers 4.49's causal LMs upcast logits only inside their own loss, which a call without labels skips). Not
# its 4-bit runs (`bit: 4` loads the unquantised modules, the head among them, as `torch.float32`: fp32 logits) nor
# its FSDP runs (`fsdp_hyperparameters.amp_training: True`).
OWN_LOSS_16BIT = ("universal-llm-trainer",)
# `half` also for the Qwen README's runs under DeepSpeed (their notes name it: `finetune_qlora_single_gpu.sh` and the
# `*_ds.sh` scripts pass `--deepspeed finetune/ds_config_zero{2,3}.json`), by source: Qwen-1's remote code
# (`QWenLMHeadModel.forward`) computes its own shifted `CrossEntropyLoss` on `lm_head`'s 16-bit output with no
# `.float()`, and under DeepSpeed nothing casts it: accelerate sets `native_amp` only when the distributed type is
# not DeepSpeed (or Megatron), so the Trainer's model gets no autocast (DeepSpeed runs the module in fp16 / bf16
# itself). Its single-GPU LoRA runs ("no DeepSpeed") are under accelerate's autocast, which casts cross-entropy's
# input to fp32 (`fp32`, the default; llm51e's trace of the same code under ms-swift: 12.12 bytes a logit).
DEEPSPEED_OWN_LOSS = ("Qwen",)
DEEPSPEED = re.compile(r"(?<!no )DeepSpeed|ds_config_zero")
LIGER = re.compile(r"liger", re.IGNORECASE)
NO_LIGER = re.compile(r"no liger|without liger|liger not used", re.IGNORECASE)
# Contract v7, as a log would carry it where the set has no column for it: the expert-parallel size (Megatron's and
# ms-swift's `expert_model_parallel_size`, the notes' "EPn") and the modules a LoRA run trains in full (PEFT's
# `modules_to_save`: Qwen's `finetune.py` trains the embedding and the output layer, "embedding + output layer also
# trainable (modules_to_save)": `embeddings_and_head`)
EXPERT_PARALLEL = re.compile(r"\bEP(\d+)")
# Contract v8: ColossalAI Gemini's placement as its plugin logs it (`placement_policy`, the notes' "placement_policy=
# auto"), read by the normaliser's words (`auto`; `cuda` none; `cpu` all). The set's column says `all` for the one
# `auto` run (run 245), as DeepSpeed's static offload of the same benchmark does
PLACEMENT = re.compile(r"placement_policy=(\w+)")
# Contract v8's `kernels`, as a log carries it (unsloth's `unsloth_version` in the model config, LLaMA-Factory's
# `use_unsloth`, ms-swift's `--tuner_backend unsloth`): the runs whose notes name unsloth as their method or backend
# (the unsloth README's "Unsloth+FA2" rows of LLaMA-Factory's table, ms-swift's "unsloth backend"); Liger's runs carry
# `loss_precision` `fused` already (`LIGER`)
UNSLOTH = re.compile(r"\bunsloth\b", re.IGNORECASE)
MODULES_TO_SAVE = re.compile(r"modules_to_save")


def expert_parallel_of(logged, notes: str) -> int | None:
    """`expert_parallel` as the set's column gives it, else as the notes say ("EPn"); missing (1) otherwise."""
    if logged:
        return int(logged)
    said = EXPERT_PARALLEL.search(notes)
    return int(said.group(1)) if said else None


def trained_modules_of(logged: str | None, adapter: str | None, notes: str) -> str | None:
    """`trained_modules` as the set's column gives it, else `embeddings_and_head` for an adapter run whose notes say
    it trains `modules_to_save` (every such run of the set trains the embedding and the output layer)."""
    if logged:
        return logged
    return "embeddings_and_head" if MODULES_TO_SAVE.search(notes) and adapter in ("lora", "qlora", "other") else None


def cpu_offload_of(logged: str | None, notes: str) -> str | None:
    """`cpu_offload` as a log following contract v8 would carry it: Gemini's `placement_policy` word where the notes
    give one (`PLACEMENT`), else the set's column."""
    said = PLACEMENT.search(notes)
    return normalize.CPU_OFFLOAD_SYNONYMS.get(said.group(1).lower(), logged) if said else logged


def adapter_of(logged: str | None, notes: str) -> str | None:
    """`adapter` as a log following contract v6 would carry it: the set's word, `lisa` for a LISA run."""
    return "lisa" if LISA.search(notes) and logged in (None, "none", "other") else logged


def loss_precision_of(source: str, sharding: str | None, notes: str, adapter: str | None = None) -> str | None:
    """`loss_precision` as a log would carry it (`LIGER`; ColossalAI's own loss under its fp16 sharded engines;
    universal-llm-trainer's own loss on its 16-bit model without autocast, `OWN_LOSS_16BIT`; Qwen-1's own loss under
    DeepSpeed, `DEEPSPEED_OWN_LOSS`); missing (the contract's `fp32`) for every other run."""
    if LIGER.search(notes) and not NO_LIGER.search(notes):
        return "fused"
    if source.startswith("ColossalAI") and sharding == "zero3":
        return "half"
    if source in OWN_LOSS_16BIT and sharding == "none" and adapter in ("none", "lora"):
        return "half"
    return "half" if source in DEEPSPEED_OWN_LOSS and DEEPSPEED.search(notes) else None


def optimizer_of(notes: str) -> str:
    """`optim` as Hugging Face Trainer would log it for a run with these notes."""
    if not GALORE.search(notes):
        return "AdamW"
    eight_bit = re.search(r"8-bit|q-galore|galore_quantization", notes, re.IGNORECASE)
    return "galore_adamw" + ("_8bit" if eight_bit else "") + ("_layerwise" if "layerwise" in notes.lower() else "")


DEFAULT_GPU_GB = 80.0  # a run whose GPU the catalogue does not know (RTX PRO 6000 96GB, A800, H20): an 80 GB card


def source_of(repo: str, path: str) -> str:
    """The README's sources: ms-swift's Benchmark.md, Megatron-SWIFT tables and example scripts, and one per repo."""
    name = repo.split("/")[1]
    if name == "ms-swift":
        return "ms-swift examples" if path.startswith("examples/") else (
            "ms-swift Megatron" if "Megatron" in path else "ms-swift Benchmark.md")
    return name


# What `job_rows` reads off a run's notes or source, not off the set's columns (the set has none for them; a log that
# carries the field gives it: review 60 S4): the checkpoint's name (`CHECKPOINT`), the context-parallel size
# (`SEQUENCE_PARALLEL`), the optimizer (`GALORE`), the adapter word `lisa` (`LISA`) and `loss_precision` (`LIGER`, and
# ColossalAI's, universal-llm-trainer's and the Qwen README's DeepSpeed runs' `half` by source, `OWN_LOSS_16BIT`,
# `DEEPSPEED_OWN_LOSS`, which no importer produces) and contract v7's `expert_parallel` and `trained_modules`
# (`EXPERT_PARALLEL`, `MODULES_TO_SAVE`; the set's own columns win where it has them), and contract v8's `cpu_offload`
# `auto` (`PLACEMENT`) and `kernels` (`UNSLOTH`). `as_logged` prints the figures without each and without all of
# them: what a set carrying only the columns sees.
INFERRED = ("checkpoint", "context_parallel", "optimizer", "adapter", "loss_precision", "expert_parallel",
            "trained_modules", "cpu_offload", "kernels")


def job_rows(path: Path, inferred: tuple[str, ...] = INFERRED) -> pl.DataFrame:
    """The measured runs as contract v5 rows (COMPLETED, `peak_gpu_mem_gb` = the measured peak; OOM runs without
    one), with `source`, `oom` and `gpu_mem_gb` (their GPU's memory) beside them; the values of `INFERRED` read off
    the notes only for the names in `inferred` (else as the set's columns give them)."""
    raw = pl.read_csv(path)
    rows = []
    for i, r in enumerate(raw.iter_rows(named=True)):
        notes = r.get("other") or ""
        named = CHECKPOINT.search(notes) if "checkpoint" in inferred else None
        name = named.group(1) if named else r["model"]
        arch = m.lookup(name)
        gpus = int(r["gpu_count"] or 1)
        tp, pp = int(r["tensor_parallel"] or 1), int(r["pipeline_parallel"] or 1)
        said = SEQUENCE_PARALLEL.search(notes) if "context_parallel" in inferred else None
        cp = int(r.get("context_parallel") or (said.group(1) if said else 1))
        dp = max(1, gpus // (tp * pp * cp))
        micro = int(r["micro_batch_size"] or 1)
        known = catalog.canonical(r["gpu_type"]) if r["gpu_type"] else None
        rows.append({
            c.JOB_ID: f"llm-{i:03d}", c.SUBMITTED_AT: "2026-11-20T00:00:00Z", c.STATUS: "COMPLETED",
            c.MODEL_TYPE: "Transformer", c.ARCH: name,
            c.PARAMS_MILLION: (r["params_billion"] or (arch.params / 1e9 if arch else None) or np.nan) * 1e3,
            c.BATCH_SIZE: micro * dp, c.INPUT_DIM: int(r["seq_len"] or m.DEFAULT_SEQ_LEN),
            c.NUM_LAYERS: arch.layers if arch else None, c.PRECISION: r["precision"],
            c.OPTIMIZER: optimizer_of(notes) if "optimizer" in inferred else None,
            c.GPU_TYPE: r["gpu_type"], c.GPU_COUNT: gpus, c.TENSOR_PARALLEL: tp, c.PIPELINE_PARALLEL: pp, c.CONTEXT_PARALLEL: cp,
            c.SHARDING: r["sharding"],
            c.CPU_OFFLOAD: cpu_offload_of(r["cpu_offload"], notes) if "cpu_offload" in inferred else r["cpu_offload"],
            c.ACTIVATION_CHECKPOINTING: r["activation_checkpointing"],
            c.ADAPTER: adapter_of(r["adapter"], notes) if "adapter" in inferred else r["adapter"],
            c.LORA_RANK: r["lora_rank"], c.MICRO_BATCH_SIZE: micro, c.PEAK_GPU_MEM_GB: r["peak_gb"],
            c.LOSS_PRECISION: loss_precision_of(source_of(r["source_repo"], r["source_path"]), r["sharding"], notes,
                                                r["adapter"])
            if "loss_precision" in inferred else None,
            c.EXPERT_PARALLEL: expert_parallel_of(r.get(c.EXPERT_PARALLEL), notes if "expert_parallel" in inferred
                                                  else ""),
            c.TRAINED_MODULES: trained_modules_of(r.get(c.TRAINED_MODULES), r["adapter"],
                                                  notes if "trained_modules" in inferred else ""),
            c.KERNELS: "unsloth" if "kernels" in inferred and UNSLOTH.search(notes) else None,
            "source": source_of(r["source_repo"], r["source_path"]), "oom": bool(r["oom"]),
            "params_logged": r["params_billion"] is not None,
            "gpu_mem_gb": catalog.gpus()[known].memory_gb if known else DEFAULT_GPU_GB})
    df = pl.DataFrame(rows, infer_schema_length=None).with_columns(
        pl.col(c.SUBMITTED_AT).str.to_datetime(time_zone="UTC"), pl.col(c.PARAMS_MILLION).fill_nan(None),
        pl.col(c.OPTIMIZER, c.LOSS_PRECISION, c.TRAINED_MODULES, c.KERNELS).cast(pl.String),
        pl.col(c.EXPERT_PARALLEL).cast(pl.Int64))  # words even when none is read (`inferred` empty)
    return df


def contract_frame(rows: pl.DataFrame) -> pl.DataFrame:
    """`rows` with every contract column (missing ones empty), features built."""
    kinds = {"bool": pl.Boolean, "float": pl.Float64, "int": pl.Int64, "timestamp": pl.Datetime("us", "UTC")}
    extra = [pl.lit(None, dtype=kinds.get(c.FIELD_BY_NAME[n].kind, pl.String)).alias(n)
             for n in c.COLUMNS if n not in rows.columns]
    return features.build(rows.with_columns(extra))


def estimates(rows: pl.DataFrame) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(a) and (b): P50 and P90 of every row."""
    built = contract_frame(rows)
    prior = built[m.LLM_MEM_GB].to_numpy().astype(np.float64)
    states = []
    for row in built.iter_rows(named=True):
        job = m.job_of(row)
        states.append(m.model_states_baseline_gb(job[0].params, job[1]) if job else np.nan)
    states = np.asarray(states)
    return {"prior": (prior, prior * m.P90_FACTOR), "states_only": (states, states)}


def product(history: pl.DataFrame, pending: pl.DataFrame, options: TrainOptions, folder: Path) -> tuple[np.ndarray, ...]:
    """(c): a night on `history`, the pending LLM jobs scored by the `Scorer`: P50, P90, flagged, and the champion's
    own P50 and P90 (its learned correction applied to every job, no fallback). Prints where the night's out-of-fold
    evidence keeps the correction (`ood.llm_correction`)."""
    import json

    from tests.benchmarks.bench_accuracy import champion_pipeline

    scored, champion = champion_pipeline(history, contract_frame(pending.drop("source", "oom", "gpu_mem_gb")),
                                         c.PEAK_GPU_MEM_GB, options, folder)
    print(f"  champion: {champion}; flagged out of distribution: {scored['ood'].mean():.0%}", flush=True)
    for meta in sorted(folder.rglob("metadata.json")):
        said = (json.loads(meta.read_text()).get("ood") or {}).get("llm_correction")
        for group, e in ({"all LLM jobs": said["pooled"], **said["by_group"]} if said else {}).items():
            print(f"  out of fold, {group:20s}: {e['rows']:3d} jobs, correction P50 MAPE {e['model_mape']:5.1f}%, "
                  f"prior {e['prior_mape']:5.1f}%, closer on {e['closer']} (sign test p {e['p_value']:.2g}) -> "
                  f"{'correction kept' if e['keep'] else 'per-GPU prior'}")
    return (scored["pipeline_p50"].to_numpy(), scored["pipeline_p90"].to_numpy(), scored["ood"].to_numpy(),
            scored["champion_p50"].to_numpy(), scored["champion_p90"].to_numpy())


def table(rows: pl.DataFrame, methods: dict[str, tuple[np.ndarray, np.ndarray]], title: str) -> None:
    """Per source and overall, per method: runs, P50 MAPE (median APE), mean APE, P90 coverage, OOM runs flagged."""
    print(f"\n{title}")
    print(f"  {'source':24s} {'method':12s} {'runs':>4s} {'P50 MAPE %':>10s} {'MAPE %':>8s} {'P90 cov':>8s} {'OOM flagged':>11s}")
    truth = rows[c.PEAK_GPU_MEM_GB].to_numpy().astype(np.float64)
    oom = rows["oom"].to_numpy()
    gpu = rows["gpu_mem_gb"].to_numpy()
    sources = rows["source"].to_numpy()
    for source in [*sorted(set(sources)), "all"]:
        pick = np.ones(len(sources), bool) if source == "all" else sources == source
        for name, (p50, p90) in methods.items():
            measured = pick & np.isfinite(truth) & np.isfinite(p50)
            ape = np.abs(p50[measured] - truth[measured]) / truth[measured] * 100
            cover = np.mean(p90[measured] >= truth[measured]) if measured.any() else np.nan
            went = pick & oom
            flagged = int(np.sum(p50[went] > gpu[went])) if went.any() else 0
            print(f"  {source:24s} {name:12s} {measured.sum():4d} {np.median(ape):10.1f} {np.mean(ape):8.1f} "
                  f"{cover:8.1%} {f'{flagged}/{went.sum()}':>11s}")
    # the goal's ratio on the same runs: those every method forecasts
    both = np.isfinite(truth) & np.logical_and.reduce([np.isfinite(p50) for p50, _ in methods.values()])
    median = {k: np.median(np.abs(p50[both] - truth[both]) / truth[both]) for k, (p50, _) in methods.items()}
    print(f"  P50 MAPE on the {both.sum()} runs every method forecasts: " + ", ".join(
        f"{k} {v:.1%}" + (f" ({median['states_only'] / v:.2f}x better than states_only)" if k != "states_only" else "")
        for k, v in median.items()))


def learned_half(rows: pl.DataFrame, seed: int) -> np.ndarray:
    """The runs (d) puts in the history: half of each source's, seeded (the rest are held out)."""
    rng = np.random.default_rng(seed)
    keep = np.zeros(rows.height, bool)
    for source in sorted(rows["source"].unique().to_list()):  # a fixed order: the same split each run
        idx = np.flatnonzero((rows["source"] == source).to_numpy())
        keep[rng.permutation(idx)[: len(idx) // 2]] = True
    return keep


def signed_by_half(rows: pl.DataFrame, methods: dict[str, tuple[np.ndarray, np.ndarray]], seed: int) -> None:
    """Per source, on the whole set and on (d)'s two halves (L: the runs a night learns from, H: held out): runs, the
    prior's P50 MAPE and its median signed error (negative = under the measured peak), and each half's ratio of the
    states-only estimate's P50 MAPE to the prior's: what a change of the prior moves, and where."""
    truth = rows[c.PEAK_GPU_MEM_GB].to_numpy().astype(np.float64)
    prior, states = methods["prior"][0], methods["states_only"][0]
    keep = learned_half(rows, seed)
    sources = rows["source"].to_numpy()
    measured = np.isfinite(truth) & np.isfinite(prior) & np.isfinite(states)
    print(f"\nthe prior per source on the whole set / the learned half L / the held-out half H (seed {seed}): runs, "
          "P50 MAPE %, median signed error %")
    for source in [*sorted(set(sources)), "all"]:
        cells = []
        for half in (np.ones_like(keep), keep, ~keep):
            pick = measured & half & (True if source == "all" else sources == source)
            err = (prior[pick] - truth[pick]) / truth[pick] * 100
            cells.append(f"{pick.sum():4d} {np.median(np.abs(err)):6.1f} {np.median(err):+7.1f}" if pick.any() else
                         f"{0:4d} {'':6s} {'':7s}")
        print(f"  {source:24s} " + " | ".join(cells))
    for name, half in (("whole", np.ones_like(keep)), ("L", keep), ("H", ~keep)):
        pick = measured & half
        a, b = (np.median(np.abs(p50[pick] - truth[pick]) / truth[pick]) for p50 in (prior, states))
        print(f"  {name:5s}: prior {a:.2%}, states-only {b:.2%}: {b / a:.2f}x")


def apes(rows: pl.DataFrame, p50: np.ndarray) -> np.ndarray:
    """Each run's absolute percentage error (NaN where it has no measured peak or no forecast)."""
    truth = rows[c.PEAK_GPU_MEM_GB].to_numpy().astype(np.float64)
    return np.abs(p50 - truth) / truth * 100


def as_logged(path: Path, seed: int) -> None:
    """The prior's P50 and mean APE on the whole set and the held-out half H, and each source's mean APE on H, with the
    values `job_rows` reads off the notes (`INFERRED`), without each of them, and without all of them (review 60 S4:
    what a set carrying only the columns sees)."""
    print(f"\nthe prior with and without what the benchmark reads off the notes (`INFERRED`; seed {seed}): P50 / mean "
          "APE % (x better than states-only at P50), whole and held-out half H; H per source: mean APE %")
    for label, inferred in (("with all (the headline)", INFERRED),
                            *((f"without {name}", tuple(n for n in INFERRED if n != name)) for name in INFERRED),
                            ("without all (as logged)", ())):
        rows = job_rows(path, inferred)
        figures = estimates(rows)
        ape, states = apes(rows, figures["prior"][0]), apes(rows, figures["states_only"][0])
        keep = learned_half(rows, seed)
        ok = np.isfinite(ape) & np.isfinite(states)
        held = ok & ~keep
        sources = rows["source"].to_numpy()
        per = " ".join(f"{x[:12]} {np.mean(ape[held & (sources == x)]):.1f}" for x in sorted(set(sources)))
        print(f"  {label:26s} whole {np.median(ape[ok]):4.1f} / {np.mean(ape[ok]):4.1f} "
              f"({np.median(states[ok]) / np.median(ape[ok]):.2f}x)  H {np.median(ape[held]):4.1f} / "
              f"{np.mean(ape[held]):4.1f} ({np.median(states[held]) / np.median(ape[held]):.2f}x) | {per}")


# The configurations `breakdown` prints the prior's error by: the layout fields, and the GPU and its generation
CONFIGURATIONS = (c.ADAPTER, c.SHARDING, c.CPU_OFFLOAD, c.ACTIVATION_CHECKPOINTING, c.PRECISION, c.OPTIMIZER, "gpu",
                  "split", c.GPU_COUNT)
WORST = 20


def breakdown(rows: pl.DataFrame, methods: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
    """Where the error is: per configuration, each method's runs and P50 MAPE (and the prior's median signed error:
    negative = under the measured peak), and the prior's `WORST` runs with their fields."""
    truth = rows[c.PEAK_GPU_MEM_GB].to_numpy().astype(np.float64)
    frame = rows.with_columns(
        pl.col(c.GPU_TYPE).map_elements(lambda g: catalog.canonical(g) or g, return_dtype=pl.String).fill_null("?")
        .alias("gpu"),
        pl.format("t{}p{}c{}", c.TENSOR_PARALLEL, c.PIPELINE_PARALLEL, c.CONTEXT_PARALLEL).alias("split"),
        *[pl.Series(f"{k}_ape", np.abs(p50 - truth) / truth * 100) for k, (p50, _) in methods.items()],
        pl.Series("prior_p50", methods["prior"][0]),
        pl.Series("prior_err", (methods["prior"][0] - truth) / truth * 100)).filter(pl.col("prior_ape").is_not_nan())
    names = [f"{k}_ape" for k in methods]
    print(f"\nper configuration: runs, P50 MAPE % of {', '.join(methods)}; the prior's median signed error %")
    for field in CONFIGURATIONS:
        groups = frame.group_by(pl.col(field).cast(pl.String).fill_null("(none)").alias("value")).agg(
            pl.len().alias("runs"), *[pl.col(n).median() for n in names], pl.col("prior_err").median()).sort("value")
        for value, runs, *figures, signed in groups.iter_rows():
            shown = " ".join(f"{f:7.1f}" for f in figures)
            print(f"  {field:24s} {value:22s} {runs:4d} {shown} {signed:+8.1f}")
    print(f"\nthe prior's {WORST} worst runs (APE %)")
    cols = ["source", c.ARCH, c.ADAPTER, c.LORA_RANK, c.SHARDING, c.CPU_OFFLOAD, "split", c.GPU_COUNT, "gpu",
            c.PRECISION, c.OPTIMIZER, c.MICRO_BATCH_SIZE, c.INPUT_DIM, c.ACTIVATION_CHECKPOINTING, c.PEAK_GPU_MEM_GB,
            "prior_p50", "prior_err"]
    with pl.Config(tbl_rows=WORST, tbl_cols=len(cols), tbl_width_chars=400, fmt_str_lengths=28,
                   tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True, tbl_formatting="NOTHING"):
        print(frame.sort("prior_ape", descending=True).head(WORST).select(cols).with_columns(
            pl.col("source").str.slice(0, 22), pl.col("prior_p50").round(1), pl.col("prior_err").round(0)))


@contextmanager
def without(name: str):
    """The family table without one row, every spelling of it: what runs of a model the table lacks see (the
    fallbacks `kin` and the power law then read the other rows only). Swaps the module's table for the block."""
    full, saved = m.families(), m.families
    kept = {k: a for k, a in full.items() if a.name != name}
    m.families = lambda: kept
    m._kin_rows.cache_clear()
    m.hidden_power_law.cache_clear()
    try:
        yield
    finally:
        m.families = saved
        m._kin_rows.cache_clear()
        m.hidden_power_law.cache_clear()


def unseen_models(rows: pl.DataFrame) -> None:
    """Leave one model out: each table row the set's runs resolve to is taken out of the table in turn and those runs'
    per-GPU prior is computed again (their depth not given, as a log of an unlisted model carries none), by the family
    of the name (`kin`) and by the parameters' power law alone (the name not read): the prior an outside set of
    models the table lacks gets. Prints the prior's mean and median APE and R² on those runs, the table's beside."""
    names = rows[c.ARCH].to_list()
    by_row: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        if (arch := m.lookup(name)) is not None:
            by_row.setdefault(arch.name, []).append(i)
    listed = sorted(i for idx in by_row.values() for i in idx)
    ways = {"the table (as shipped)": estimates(rows[listed])["prior"][0]}
    kin, power = np.full(rows.height, np.nan), np.full(rows.height, np.nan)
    estimate = m.estimate_arch
    for name, idx in by_row.items():
        # no depth, and no parameter count but the one logged or the name's (`job_rows` lends the table's to a run
        # that logs none)
        runs = rows[idx].with_columns(
            pl.lit(None, dtype=pl.Int64).alias(c.NUM_LAYERS),
            pl.when(pl.col("params_logged")).then(pl.col(c.PARAMS_MILLION)).otherwise(
                pl.col(c.ARCH).map_elements(lambda n: (m.params_from_name(n) or float("nan")) / 1e6,
                                            return_dtype=pl.Float64)).fill_nan(None).alias(c.PARAMS_MILLION))
        with without(name):
            kin[idx] = estimates(runs)["prior"][0]
            m.estimate_arch = lambda params, layers=None, _name=None: estimate(params, layers, None)
            try:
                power[idx] = estimates(runs)["prior"][0]
            finally:
                m.estimate_arch = estimate
    ways["left out: the family's nearest row (kin)"], ways["left out: the power law alone"] = kin[listed], power[listed]
    truth = rows[listed][c.PEAK_GPU_MEM_GB].to_numpy().astype(np.float64)
    ok = np.isfinite(truth) & np.logical_and.reduce([np.isfinite(p50) for p50 in ways.values()])
    print(f"\nLeave one model out: {len(listed)} runs of {len(by_row)} table models, each model's row taken out in turn; "
          f"{ok.sum()} runs with a measured peak and a prior every way (a left-out run whose set logs no size and whose "
          f"name gives none has no prior)")
    for label, p50 in ways.items():
        ape = np.abs(p50[ok] - truth[ok]) / truth[ok] * 100
        r2 = 1 - ((p50[ok] - truth[ok]) ** 2).sum() / ((truth[ok] - truth[ok].mean()) ** 2).sum()
        print(f"  {label:42s} runs {ok.sum():3d}  mean APE {ape.mean():6.2f}%  median {np.median(ape):6.2f}%  R² {r2:.3f}")


def _live_storages():
    """A torch dispatch mode counting the bytes of the storages alive at once (`.peak`), on CPU."""
    import weakref

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class Live(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.live, self.peak = {}, 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor) and (key := t.untyped_storage().data_ptr()) not in self.live:
                    self.live[key] = t.untyped_storage().nbytes()
                    weakref.finalize(t.untyped_storage(), self.live.pop, key, None)
            self.peak = max(self.peak, sum(self.live.values()))
            return out

    return Live()


def logit_bytes(upcast: bool, tokens: int = 1024, vocab: int = 32_000, hidden: int = 64) -> float:
    """Bytes a logit alive at once over a 16-bit head, a shifted cross-entropy loss and its backward (a dispatch mode
    counting live storages, on CPU), with the loss on fp32 logits (`upcast`: transformers' `ForCausalLMLoss`,
    `logits.float()`; torch AMP's autocast casts cross-entropy's input to fp32 likewise) or on the 16-bit logits
    themselves (a loss of the training script's own over a model trained in fp16 without autocast: DeepSpeed's and
    ColossalAI Gemini's fp16 engines, ColossalAI-Pytorch-lightning's `GPTLMLoss`). `llm_memory.LOGIT_BYTES` (10) lies
    between the two."""
    import torch

    head = torch.nn.Linear(hidden, vocab, bias=False).to(torch.bfloat16)
    x = torch.randn(1, tokens, hidden, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, vocab, (1, tokens))
    with _live_storages() as mode:
        logits = head(x)
        shifted = (logits.float() if upcast else logits)[..., :-1, :].contiguous()
        loss = torch.nn.functional.cross_entropy(shifted.view(-1, vocab), labels[..., 1:].reshape(-1))
        del logits, shifted  # the training step returns the loss; the backward runs after
        loss.backward()
    return mode.peak / (tokens * vocab)


def step_bytes(**adamw) -> float:
    """Bytes a parameter of the new tensors alive at once during one torch AdamW step over bf16 parameters (a
    dispatch mode counting live storages, on CPU): the source of `llm_memory.step_temporary`."""
    import torch

    params = [torch.nn.Parameter(torch.randn(1024, 1024, dtype=torch.bfloat16)) for _ in range(16)]
    for p in params:
        p.grad = torch.randn_like(p)
    opt = torch.optim.AdamW(params, lr=1e-3, **adamw)
    opt.step()  # the moments made
    with _live_storages() as mode:
        opt.step()
    return mode.peak / sum(p.numel() for p in params)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--models", default=None, help="comma-separated registry models for (c) (default: every model)")
    ap.add_argument("--half", action="store_true", help="also (d): half of each source's runs in the history")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rows", type=Path, default=None, help="also write each run's P50s (and the product's P90, OOD flag) here")
    ap.add_argument("--breakdown", action="store_true",
                    help="also the prior's and the baseline's error per configuration and the worst runs (no night)")
    ap.add_argument("--unseen-models", action="store_true",
                    help="only the prior with each model's table row left out in turn (no night; `unseen_models`)")
    args = ap.parse_args()
    options = TrainOptions(models=tuple(args.models.split(",")) if args.models else None)
    t0 = time.perf_counter()
    rows = job_rows(args.data)
    history = load()
    if args.unseen_models:
        unseen_models(rows)
        return
    methods = estimates(rows)
    if args.breakdown:
        table(rows, methods, f"{args.data.name}: {rows.height} runs, the prior and the baseline")
        breakdown(rows, methods)
        signed_by_half(rows, methods, args.seed)
        as_logged(args.data, args.seed)
        print(f"\ntorch AdamW, new tensors at once during a step over 16M bf16 parameters (bytes a parameter): "
              f"foreach {step_bytes(foreach=True):.2f}, fused {step_bytes(fused=True):.2f}")
        print(f"a 16-bit head, a shifted cross-entropy loss and its backward, bytes a logit at once: loss on fp32 "
              f"logits {logit_bytes(True):.2f}, on the 16-bit logits {logit_bytes(False):.2f} "
              f"(the prior counts {m.LOGIT_BYTES})")
        return
    with tempfile.TemporaryDirectory() as tmp:
        *methods["product"], ood, _, _ = product(history, rows, options, Path(tmp) / "c")
        if args.rows:  # every run's figures, to read the misses one by one
            rows.select("source", c.ARCH, c.PEAK_GPU_MEM_GB, "oom", "gpu_mem_gb").with_columns(
                *[pl.Series(f"{k}_p50", p50) for k, (p50, _) in methods.items()],
                pl.Series("product_p90", methods["product"][1]), pl.Series("product_ood", ood)).write_csv(args.rows)
        table(rows, methods, f"{args.data.name}: {rows.height} runs, history {history.height} single-GPU jobs "
                             f"({time.perf_counter() - t0:.0f} s)")
        as_logged(args.data, args.seed)
        if args.half:
            held_out(rows, methods, history, options, Path(tmp) / "d", args.seed, "")
            # the same night and held-out half with the set's columns alone (review 60 S4: what a set carrying only
            # them sees; `INFERRED`)
            logged = job_rows(args.data, ())
            held_out(logged, estimates(logged), history, options, Path(tmp) / "e", args.seed,
                     ", every run as logged (nothing read off the notes)")


def held_out(rows: pl.DataFrame, methods: dict[str, tuple[np.ndarray, np.ndarray]], history: pl.DataFrame,
             options: TrainOptions, folder: Path, seed: int, said: str) -> None:
    """(d): a night on the history and half of each source's runs, the other half scored, beside `methods` on it."""
    keep = learned_half(rows, seed)
    learned = rows.filter(pl.Series(keep)).filter(pl.col(c.PEAK_GPU_MEM_GB).is_not_null())
    rest = rows.filter(pl.Series(~keep))
    both = pl.concat([history, contract_frame(learned.drop("source", "oom", "gpu_mem_gb"))], how="diagonal_relaxed")
    half = {k: (p50[~keep], p90[~keep]) for k, (p50, p90) in methods.items()}
    p50, p90, _, own50, own90 = product(both, rest, options, folder)
    half["product_half"], half["correction"] = (p50, p90), (own50, own90)  # the latter: no fall-back at all
    table(rest, half, f"(d) half of each source's runs in the history ({learned.height} of them, seed "
                      f"{seed}){said}; scored on the other {rest.height}")

if __name__ == "__main__":
    main()
