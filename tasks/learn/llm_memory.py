"""Per-GPU memory, and compute, of one LLM training or fine-tuning job spread over many GPUs (issue 51).

Pure arithmetic on a job's contract v5 fields (`expectations/contract.py`: tensor / pipeline / context parallel,
sharding, CPU offload, activation checkpointing, adapter, LoRA rank, micro-batch) and its architecture, looked up
in a typed table of LLM families (`llm_families.csv`, shipped as package data: each row's published
hyperparameters and the config.json it was read from; nothing is downloaded). An architecture the table does not
know is estimated from the parameter count (`estimate_arch`). Units: bytes inside, GB (1e9 bytes) out.

The GPUs: data parallel d = gpu_count / (t x p x c) with t, p, c the tensor, pipeline and context parallel sizes.
Each rank holds 1 / (t p) of the weights (Megatron's split; the embedding and the head are vocabulary-parallel).
The states are sharded (ZeRO, FSDP) or all-reduced (DDP) over the ranks that hold the same weights, d x c
(`Layout.state_ranks`): "over d" below means over those.

**Model states per rank** (`states`), per parameter of the rank's share:
* all weights trained (`adapter` none), by precision and sharding:
  - `sharding` none, 16-bit: *pure* 16-bit training, as Hugging Face Trainer, torchtune and ms-swift run a model
    loaded in bf16: weights 2 + gradients 2 + the optimizer's moments in the weights' dtype (AdamW 2 x 2): 8 bytes.
    FP16 cannot train in pure fp16 (the gradient scaler refuses fp16 weights), so FP16 is mixed precision below.
  - unsharded FP16 is torch AMP (the model in fp32 under autocast): fp32 weights 4 + their cached 16-bit casts 2 +
    fp32 gradients 4 + fp32 moments 8 = 18 bytes (`AMP_CAST_BYTES`); DDP over d > 1 ranks keeps a second copy of
    the gradients in its all-reduce buckets (`DDP_BUCKETS`), the adapters' too.
  - mixed precision (every sharded job: DeepSpeed ZeRO and FSDP keep fp32 masters): 16-bit weights 2 +
    16-bit gradients 2 + fp32 master 4 + fp32 moments 8 = 16 bytes (ZeRO's count, Rajbhandari et al. 2020, sec. 3.1).
    zero1 divides the 12 optimizer bytes by d, zero2 the gradients too, zero3 the weights too. FSDP keeps its
    sharded parameters in fp32 (4 + 4 gradients + 8 moments = 16, all over d), and all-gathers 16-bit units
    (`GATHERED_UNITS` transformer blocks in flight: the one computing and the one prefetched, and their gradients;
    and its root unit, the embedding and the head, gathered from the forward through the backward:
    `fsdp_root_params`).
  - FP32: 4 + 4 + 8 = 16 bytes, unsharded or as above; FP64 twice that; SGD keeps one moment instead of two,
    Adafactor none (factored); an 8-bit optimizer (bitsandbytes, `adamw_bnb_8bit`) keeps each moment at 1 byte;
    GaLore (`galore_adamw`...) keeps the moments of rank-128 projections of the blocks' gradients
    (`GALORE_OPTIMIZER`), `_layerwise` no model-sized gradient.
  - `cpu_offload` optimizer: the fp32 master and moments live on the CPU (DeepSpeed's ZeRO-Offload); all: the
    parameters too, the GPU keeping only the gathered units; `auto` (contract v8, ColossalAI Gemini's
    `placement_policy="auto"`): the states move between the CPU and the GPU as the GPU has room, so a job whose
    states fit keeps them all on the GPU (`none`), and one whose states do not fills the GPU to the placement's cap,
    `DYNAMIC_CUDA_CAP_RATIO` of its memory, never below what `all` leaves on it (`dynamic_placement`).
* adapters: the frozen base at 2 bytes a parameter (4 in FP32), `qlora` its linear weights at 4 bits with
  NF4's block constants (0.516 bytes: Dettmers et al. 2023, 0.127 bits a parameter of double-quantised
  constants), or at the width a pre-quantised checkpoint's name gives (`Int8`, `2bit`: `quantised_bytes`), and its
  embedding and head at 16 bits; no gradients or optimizer states for the base. The adapter's
  trainable parameters: r x (d_in + d_out) for every linear layer of every block (q, k, v, o and the MLP's, every
  expert's of a mixture of experts; PEFT's `target_modules="all-linear"`), r = `lora_rank` (missing: 8, PEFT's
  default; `other` methods counted as rank 8), kept in fp32 with AdamW: 16 bytes each. ZeRO-3 / FSDP shard the base over d too (FSDP-QLoRA).
  A `qlora` base quantised when loaded (bitsandbytes; the model's name does not say GPTQ / AWQ / AQLM / int4)
  goes through PEFT's `prepare_model_for_kbit_training`, which casts the 16-bit parameters left (embedding, head,
  norms) to fp32: the embedding and head at 4 bytes, and every block computes in fp32 (its activations at 4 bytes).
  A fine-tune whose checkpointing word is not known is taken as `full` (the adapter recipes' default). Under
  unsloth's kernels (contract v8 `kernels` `unsloth`) a k-bit base is not upcast: unsloth prepares it itself.
  The modules an adapter run also trains in full (contract v7 `trained_modules`, PEFT's `modules_to_save`: the
  embedding, the head or both, `trained_copy_params`): PEFT keeps the frozen original and a trained copy in the
  model's dtype (fp32 after a k-bit base's upcast), with its gradient and the optimizer's moments in that dtype
  (AdamW: 2 + 2 + 2 x 2 = 8 bytes a parameter in bf16, as torch keeps them), and the foreach step's copy of the
  second moments; sharded like the adapter's states.
* a job the prior takes for a Megatron-LM / Megatron-Core run (`megatron_count`: tensor parallel > 1, a proxy, see
  there), all weights trained in bf16, no sharding or the distributed optimizer (`zero1`): Megatron's own count,
  `MEGATRON_GRAD_BYTES`: bf16 weights 2 + the fp32 gradient buffer 4 (bf16 forces `accumulate_allreduce_grads_in_fp32`)
  + fp32 masters 4 and moments 8, over d x c under the distributed optimizer: 18 bytes unsharded, where the pure bf16
  count above is 8 (10 with DDP's buckets). No second gradient copy (the buffer is what is all-reduced) and no foreach
  step temporary (a fused Adam).
* mixture-of-experts under expert parallelism (contract v7 `expert_parallel` n, `expert_split`): each GPU holds
  1 / n of every block's experts (and so of their gradients and moments), the dense parts whole; the experts' sharded
  states are spread over the expert-data-parallel ranks, gpu_count / (e x n x p) (`expert_data_parallel`:
  Megatron-Core's and DeepSpeed's separate expert optimizer; d x c / n where e = t), not over d. The experts' matrices
  are split over the expert tensor-parallel ranks e (`Layout.expert_tensor_parallel`): t, unless gpu_count is not a
  multiple of t x n x p (Megatron-Core's rule), then the largest divisor of t for which it is.

**Activations per micro-batch** (`activations`): Korthikanti et al. 2022, "Reducing Activation Recomputation in
Large Transformer Models", sec. 4.1, eq. 1: a block keeps s b h (34 + 5 a s / h) bytes at 16 bits: attention
11 s b h + 5 a s^2 b, MLP 19 s b h, two layer norms 4 s b h. The 5 a s^2 b of the attention scores is gone under
flash / memory-efficient attention, which every LLM trainer of today uses, and the counts are generalised to
grouped-query attention (k and v of width kv_heads x head size) and to gated MLPs of width I (SwiGLU, GeGLU:
gate, up, their product and the activation, 8 s b I, where GPT's 4h MLP keeps 2 x 4 s b h + its input and mask).
With tensor parallel t, sequence parallel is assumed (Korthikanti's eq. 4: everything / t); context parallel c
splits the sequence. `selective` recomputation drops the attention core (already gone under flash attention);
`full` keeps only each block's input (2 s b h) and recomputes one block at a time in the backward pass.
A family trained with eager attention would keep the paper's 5 a s^2 b of scores, softmax and dropout mask
(`EAGER_ATTENTION_FAMILIES`: BLOOM, whose attention transformers runs eagerly with ALiBi; Gemma 2 trains with
flash attention's soft-cap). A family whose code builds an ALiBi bias of heads x s x s keeps it for the step
whichever kernel runs (`ALIBI_BIAS_FAMILIES`: Baichuan2-13B). Gemma 2's head soft-caps the
logits, which keeps tanh's output (`SOFTCAP_FAMILIES`). Under a k-bit base's fp32 upcast every block computes in
fp32 (bitsandbytes returns its input's dtype): the block's activations at 4 bytes. A
pipeline stage holds L / p blocks; its first stage keeps the activations of min(p, m) micro-batches in flight
(1F1B; m = micro-batches per optimizer step, from `batch_size`, else p). The head's logits are kept as 16-bit
logits, an fp32 copy for the loss and its fp32 gradient: `LOGIT_BYTES` per token and vocabulary entry (/ t), or what
the job's `loss_precision` says (contract v6, `LOSS_LOGIT_BYTES`: a loss on the 16-bit logits, a fused loss), else
what its kernel library computes (contract v8 `kernels`, `KERNEL_LOSS`: unsloth's loss in place on the 16-bit
logits, Liger's fused one). A job taken for Megatron (`megatron_count`) that logs no loss precision, or `fp32` (the
layout cannot tell the two apart: `job_of` reads a missing one as `fp32`), computes Megatron's vocabulary-parallel
cross-entropy, 6 bytes a logit (`LOSS_LOGIT_BYTES` `vocab_parallel`; review 66b S3-1).
`ACTIVATION_SCALE` is what eager PyTorch keeps beyond the fused kernels the paper counts (fp32 norms and
rotary embeddings, the casts autocast makes), fitted on the development set (docs/models.md).

**The optimizer step** (`step_temporary`): torch's foreach AdamW copies every second moment at once (the square
root) after the backward pass has freed the activations, so the peak is the states + the larger of the backward
pass's activations and logits and that copy; full training under DDP / FSDP / no sharding, not under DeepSpeed's or
Megatron's fused step, offload, 8-bit or adapters. Under DeepSpeed ZeRO-2 / ZeRO-3 (full training) the step flattens
the partition's 16-bit gradients and casts them to fp32 first: 6 bytes a partition parameter (ZeRO-3: of one sub-group
of at most `ZERO3_SUB_GROUP`; `ZERO_STEP_COPIES`).

**Overhead**: `FIXED_OVERHEAD_GB` (the CUDA context, cuBLAS / NCCL workspaces and the allocator's cached blocks),
and the caching allocator's fragmentation: reserved = allocated x `ALLOCATOR_FACTOR`.

**Compute** (`flops_per_token`): ~6 x the trained parameters' FLOPs a token (forward 2, backward 4); a frozen base
costs its forward 2 and the backward through it to the adapters 2 (the activation gradients, not the weight
gradients): 4 x P, + 6 x the adapter's; full checkpointing adds a forward (2 x P); attention's s^2 term:
12 x L x s x h a token for forward and backward (Narayanan et al. 2021, eq. 3). MoE: the active parameters.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from types import MappingProxyType

import numpy as np
import polars as pl

from gpucast.expectations import contract as c
from gpucast.records import catalog

GB = 1e9
# --- architecture ------------------------------------------------------------------------------------------
# Families whose MLP is gated (SwiGLU / GeGLU: three matrices of width I); the others have GPT's two.
GATED_FAMILIES = frozenset({"llama2", "llama3", "llama3.1", "llama3.2", "mistral", "mixtral", "qwen", "qwen1.5",
                            "qwen2", "qwen2.5", "qwen3", "qwen3.5", "gemma", "gemma2", "gemma3", "phi3", "yi", "chatglm",
                            "glm4", "glm4.5", "baichuan", "baichuan-alibi", "internlm2", "deepseek", "olmo", "smollm",
                            "stablelm", "flan-t5", "mt0"})
# Families trained with eager attention, which keeps the s x s scores (Korthikanti's 5 a s^2 b). None today: Gemma 2,
# whose attention logit soft-capping SDPA lacks, was counted here (transformers' default for it is `eager`), but
# flash-attn >= 2.6 has the soft-cap and transformers passes it for Gemma 2 under `flash_attention_2`, and the
# measured runs say the scores are not kept: on one trainer and one GPU (universal-llm-trainer's gpu_test.md, LoRA,
# 2 x 8,192 tokens) Gemma-2-9B peaks 9.7 GB above Gemma-7B, of which states and checkpoints explain 3.5 GB, leaving
# 6.2 GB where eager scores (10.7 GB) and the soft-capped head (8.4 GB, `SOFTCAP_FAMILIES`) would need 19 GB.
# BLOOM is: transformers' BloomAttention has no SDPA or flash path (no `_supports_sdpa`; ALiBi is added to the scores
# by `baddbmm`), and keeps per score the fp32 softmax (`F.softmax(..., dtype=torch.float32)`, saved for its
# backward) and its 16-bit cast (saved by the bmm with the values): 6 bytes, where Korthikanti's count is 5.
# Not counted, to measure first (session 25): InternLM2's remote code (modeling_internlm2.py) has only `eager` and
# `flash_attention_2` classes and its config falls back to `eager`, so a trainer that does not ask for flash
# attention may keep the scores (XTuner, InternLM's own, dispatches flash attention).
# Bytes a score, at 16 bits (x 2 under a k-bit base's fp32 blocks as every activation).
EAGER_ATTENTION_FAMILIES: dict[str, float] = {"bloom": 6.0}
# Families whose remote code holds an ALiBi bias of heads x s x s for the whole step, whichever attention kernel runs:
# Baichuan2-13B (`baichuan-alibi`; Baichuan2-7B is RoPE, `baichuan`). Its modeling_baichuan.py (baichuan-inc/
# Baichuan2-13B-Base), `BaichuanModel.forward` in training: `self.alibi_mask = self.get_alibi_mask(inputs_embeds,
# seq_length_with_past)` (`_buffered_future_mask(...).to(tensor)`: heads x s x s at the model's dtype, kept on the
# model), then, given the collator's attention mask, `attention_mask = inverted_mask + alibi_mask.unsqueeze(0)`
# (b x heads x s x s), handed to every (checkpointed) layer and, in `BaichuanAttention.forward`, to
# `F.scaled_dot_product_attention(..., attn_mask=attention_mask)` (the eager path adds it to the scores). Both live
# through the forward and the backward: (1 + b) heads s^2 values at 16 bits (`alibi_bias_bytes`).
ALIBI_BIAS_FAMILIES = frozenset({"baichuan-alibi"})
# Families whose head soft-caps the logits, logits = cap x tanh(logits / cap) over the whole vocabulary (Gemma 2:
# `final_logit_softcapping: 30.0` in its config.json; transformers' Gemma2ForCausalLM.forward). tanh's backward
# reads its output (torch's derivatives.yaml: `tanh_backward(grad, result)`), so one more logits-sized tensor is
# kept at the head's width (`SOFTCAP_LOGIT_BYTES`).
SOFTCAP_FAMILIES = frozenset({"gemma2"})
# Suffixes people add to a model's name that do not change its architecture (chat / instruct tunes, quantised
# checkpoints, Hugging Face's `-hf`, version tags, a context length such as `-32k`). Removed, with the organisation and
# any "(...)", before lookup.
NAME_NOISE = re.compile(r"(?:^|[-_ .])(?:instruct|chat|hf|base|it|sft|dpo|int4|int8|awq|gptq|bnb|4bit|8bit|nf4|"
                        r"gguf|aqlm.*|fp16|bf16|fp8|\d{4}|\d+k|moe)$")
# A path's last part that is only a size or a size word (torchtune's `llama3_1/8B`, `phi3/mini`): the family before it
# is part of the name, not an organisation
BARE_SIZE = re.compile(r"\d+(?:\.\d+)?[bm]|mini|small|medium|large")
# A version's dot written as an underscore (`llama3_1`, `qwen2_5-7b`, `llama3_2_1b`), but not a family's digit before
# a size (`gemma2_9b`): the minor number must end at a separator or the name's end
UNDERSCORED_VERSION = re.compile(r"([a-z]\d+)_(\d+)(?=$|[-_/ ])")
# A size's dot written as an underscore (`internlm2_5-1_8b`, `stablelm-2-1_6b`): `1.8b`
UNDERSCORED_SIZE = re.compile(r"(?<![a-z0-9.])(\d+)_(\d+)([bm])(?![a-z])", re.IGNORECASE)
# A tune's word before a version tag (`Mistral-7B-Instruct-v0.2`, `Mixtral-8x7B-Instruct-v0.1`,
# `TinyLlama-1.1B-Chat-v1.0`): removed, so the name reads as its base's version (`mistral-7b-v0.2`)
TUNE_BEFORE_VERSION = re.compile(r"[-_ .](?:instruct|chat)(?=[-_ .]v\d)")


@dataclass(frozen=True)
class Arch:
    """One architecture: the facts memory and compute depend on (`intermediate`: one expert's for MoE)."""

    name: str
    family: str
    params: float  # parameters, all experts
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    experts: int = 1
    experts_active: int = 1
    tied: bool = False
    source: str = ""  # the config.json it was read from; "estimated ..." for `estimate_arch`
    like: str = field(default="", compare=False)  # `estimate_arch`: the table row whose shape it scaled (`kin`), if any
    aliases: tuple[str, ...] = field(default=(), compare=False, repr=False)  # the table's other spellings of it

    @property
    def gated(self) -> bool:
        return self.family in GATED_FAMILIES

    @property
    def kv_width(self) -> float:
        return self.hidden * self.kv_heads / self.heads

    @property
    def embedding_params(self) -> float:
        """Input embedding + output head (one matrix when tied)."""
        return self.vocab * self.hidden * (1 if self.tied else 2)

    @property
    def expert_mlp_params(self) -> float:
        """One expert's MLP weights in one block (a dense model's MLP: its one expert)."""
        return (3 if self.gated else 2) * self.hidden * self.intermediate

    @property
    def experts_params(self) -> float:
        """Every block's experts' MLP weights (a dense model: its MLPs)."""
        return self.expert_mlp_params * self.layers * self.experts

    @property
    def block_params(self) -> float:
        """One transformer block's weights, all experts."""
        attn = 2 * self.hidden * self.hidden + 2 * self.hidden * self.kv_width
        return attn + self.expert_mlp_params * self.experts

    @property
    def active_params(self) -> float:
        """Parameters a token goes through (MoE: its active experts)."""
        if self.experts <= 1:
            return self.params
        return self.params - self.layers * self.expert_mlp_params * (self.experts - self.experts_active)

    def matrices(self) -> list[tuple[float, float]]:
        """(rows, columns) of one block's weight matrices, all experts: q, k, v, o and the MLP's."""
        h, kv, i = self.hidden, self.kv_width, self.intermediate
        mlp = [(h, i), (h, i), (i, h)] if self.gated else [(h, i), (i, h)]
        return [(h, h), (h, kv), (h, kv), (h, h)] + mlp * self.experts

    def adapter_params(self, rank: float, experts: int | None = None) -> float:
        """LoRA's trainable parameters on every linear layer of every block: r x (d_in + d_out) each. A mixture of
        experts has an adapter pair on each of `experts` experts' MLP matrices (default: all it holds, `self.experts`;
        an expert-parallel GPU's share after `expert_split`): `target_modules="all-linear"` selects every expert's
        linear layers, and Megatron-SWIFT's `LoraParallelLinear` gives an expert block (`TEGroupedLinear`) grouped
        adapters with one A and one B per local expert (`num_gemms`, swift/megatron/tuners/lora.py). A token's work
        goes through its active experts' only (`flops_per_token`: `experts_active`)."""
        h, kv, i = self.hidden, self.kv_width, self.intermediate
        attn = (h + h) + 2 * (h + kv) + (h + h)
        mlp = 3 * (h + i) if self.gated else 2 * (h + i)
        return rank * self.layers * (attn + mlp * (self.experts if experts is None else experts))


def _fold(name: str) -> str:
    return re.sub(r"[\s_\-]", "", name.lower())


def _plain(name: str) -> str:
    """A logged model name in lower case without its organisation (`meta-llama/`; but a family before a bare size stays:
    torchtune's `llama3_1/8B` is `llama3.1-8b`), any "(...)", a `meta-` prefix or underscores for a version's or a
    size's dot (`internlm2_5-1_8b` is `internlm2.5-1.8b`)."""
    parts = name.strip().lower().split("/")
    low = "-".join(parts[-2:]) if len(parts) > 1 and BARE_SIZE.fullmatch(parts[-1]) else parts[-1]
    low = UNDERSCORED_VERSION.sub(r"\1.\2", re.sub(r"\(.*?\)", "", low).strip())
    return UNDERSCORED_SIZE.sub(r"\1.\2\3", low.removeprefix("meta-").removeprefix("meta_"))


def canonical_name(name: str) -> str:
    """The spelling-free key of a logged model name: `meta-llama/Llama-3.1-8B`, `llama3.1-8b`, `Llama-3.1-8B-Instruct`,
    `Meta-Llama-3.1-8B`, torchtune's `llama3_1/8B` and `llama3_1-8b` all give `llama3.18b`."""
    low = TUNE_BEFORE_VERSION.sub("", _plain(name))
    while True:
        shorter = NAME_NOISE.sub("", low).strip(" -_.")
        if shorter == low:
            break
        low = shorter
    return _fold(low)


@cache
def families() -> dict[str, Arch]:
    """The table of LLM families (`llm_families.csv`), keyed by every spelling's `canonical_name`."""
    text = resources.files("gpucast.tasks.learn").joinpath("llm_families.csv").read_text()
    out: dict[str, Arch] = {}
    for row in csv.DictReader(text.splitlines()):
        arch = Arch(name=row["name"], family=row["family"], params=float(row["params_billion"]) * 1e9,
                    hidden=int(row["hidden"]), layers=int(row["layers"]), heads=int(row["heads"]),
                    kv_heads=int(row["kv_heads"]), intermediate=int(row["intermediate"]), vocab=int(row["vocab"]),
                    experts=int(row["experts"]), experts_active=int(row["experts_active"]), tied=row["tied"] == "1",
                    source=row["source"], aliases=tuple(filter(None, row["aliases"].split(";"))))
        for spelling in [arch.name, *arch.aliases]:
            out[canonical_name(spelling)] = arch
    return out


def lookup(name: str | None) -> Arch | None:
    """The table's architecture for a logged name, or None."""
    return families().get(canonical_name(name)) if name else None


@cache
def hidden_power_law() -> tuple[float, float]:
    """(a, b) of hidden = a x params^b, least squares in log space over the table's dense decoder models."""
    dense = {a.name: a for a in families().values() if a.experts == 1 and a.family not in ("t5", "flan-t5", "mt0")}
    p = np.log([a.params for a in dense.values()])
    h = np.log([a.hidden for a in dense.values()])
    b, log_a = np.polyfit(p, h, 1)
    return float(math.exp(log_a)), float(b)


DEFAULT_VOCAB = 50_000  # an unknown model's vocabulary (GPT-2's 50,257; the table's median is 65,024)


def _stems(name: str) -> list[str]:
    """A model name's words before its size, joined and folded one more word at a time (`Qwen2.5-Coder-3B-Instruct`
    -> `qwen2.5`, `qwen2.5coder`); none when the name gives no size."""
    base = _plain(name)
    sizes = [m.start() for pattern in (NAMED_EXPERTS, NAMED_BILLIONS, NAMED_MILLIONS) if (m := pattern.search(base))]
    words = [w for w in re.split(r"[\s_\-]+", base[:min(sizes)]) if w] if sizes else []
    return ["".join(words[:k]) for k in range(1, len(words) + 1)]


@cache
def _kin_rows() -> dict[str, list[Arch]]:
    """The table's rows by their names' and aliases' words before the size (`Llama-3.2-1B`, `Llama-3.2-3B` ->
    `llama3.2`; `Yi-34B` under `yi1.5` too, by its alias `yi-1.5-34b`)."""
    out: dict[str, list[Arch]] = {}
    for arch in {a.name: a for a in families().values()}.values():
        for spelling in (arch.name, *arch.aliases):
            if (stems := _stems(spelling)) and arch not in out.setdefault(stems[-1], []):
                out[stems[-1]].append(arch)
    return out


def kin(name: str | None, params: float) -> Arch | None:
    """The table's row a model the table lacks is most like: of the rows named (or aliased) by the longest run of the
    name's first words (`Qwen2.5-Coder-3B` -> the `Qwen2.5-*` rows; `Llama-3.2-11B-Vision` -> `Llama-3.2-*`;
    `Optimus-7B` matches no `OPT-*`), the one nearest in size; a mixture of experts' row for a mixture's name where the
    family has one (else a dense row: its vocabulary and heads still fit), a dense row for a dense name. None when no
    row's words fit or the parameters are not a positive number."""
    if not name or not (params > 0 and math.isfinite(params)):
        return None
    fits = [s for s in _stems(name) if s in _kin_rows()]
    if not fits:
        return None
    moe = bool(NAMED_EXPERTS.search(name) or re.search(r"(?<![\w.])a\d+(?:\.\d+)?b(?![a-z])", name, re.IGNORECASE))
    rows = [a for a in _kin_rows()[fits[-1]] if (a.experts > 1) == moe] or _kin_rows()[fits[-1]]
    return min(rows, key=lambda a: abs(math.log(a.params / params)))


def estimate_arch(params: float, layers: float | None = None, name: str | None = None) -> Arch:
    """An architecture for a model the table does not know. When its name's family is in the table (`kin`): that
    row's vocabulary, tying, family (gated MLP or not), head width and key-value and MLP ratios, its hidden size
    scaled by the table's power law (`hidden_power_law`'s exponent) to the parameters. Otherwise: hidden size from
    the parameter count by the power law, GPT-style blocks (12 h^2 weights, a 4h MLP, heads of 128). The depth is
    the one logged or what the parameters leave after the embedding."""
    a, b = hidden_power_law()
    if (near := kin(name, params)) is not None:
        hidden = max(64.0, near.hidden * (params / near.params) ** b)
        heads = max(1, round(hidden / (near.hidden / near.heads)))
        shape = Arch(name="estimated", family=near.family, params=params, hidden=round(hidden), layers=1, heads=heads,
                     kv_heads=max(1, round(heads * near.kv_heads / near.heads)),
                     intermediate=round(hidden * near.intermediate / near.hidden), vocab=near.vocab,
                     experts=near.experts, experts_active=near.experts_active, tied=near.tied,
                     source=f"estimated from {near.name}'s shape: hidden x (params ratio)^{b:.3f}", like=near.name)
        if not layers or layers <= 0:
            layers = max(1.0, (params - shape.embedding_params) / shape.block_params)
        return replace(shape, layers=round(layers))
    hidden = max(64.0, a * params**b)
    if not layers or layers <= 0:
        layers = max(1.0, (params - DEFAULT_VOCAB * hidden) / (12 * hidden * hidden))
    heads = max(1, round(hidden / 128))
    return Arch(name="estimated", family="estimated", params=params, hidden=round(hidden), layers=round(layers),
                heads=heads, kv_heads=heads, intermediate=round(4 * hidden), vocab=DEFAULT_VOCAB,
                source=f"estimated: hidden = {a:.4g} x params^{b:.3f}")


# The size a model's name gives, by the Hugging Face naming convention: `Qwen3-235B-A22B` (235 billion, of which 22
# active), `SmolLM2-135M`, `Mixtral-8x22B` (8 experts of a 22B model: 176B, above the 141B they share attention and
# embeddings to, so the estimate errs toward more memory), `llama-2-7b-chat`. The billions win over the millions
# (`Qwen2.5-7B-Instruct-1M`: 1M is its context length); an active size (`A22B`) is not the total. An underscore
# separates words as a dash does (`gemma2_9b`, `internlm2_5-1_8b` after `_plain`).
NAMED_EXPERTS = re.compile(r"(?<![a-z0-9.])(\d+)x(\d+(?:\.\d+)?)b(?![a-z])", re.IGNORECASE)
NAMED_BILLIONS = re.compile(r"(?<![a-z0-9.])(\d+(?:\.\d+)?)b(?![a-z])", re.IGNORECASE)
NAMED_MILLIONS = re.compile(r"(?<![a-z0-9.])(\d+(?:\.\d+)?)m(?![a-z])", re.IGNORECASE)


def params_from_name(name: str | None) -> float | None:
    """Parameters a model's name says (`NAMED_BILLIONS`...), or None: for a job whose `arch` the table does not know
    and that logs no `params_million` (a new MoE's name, e.g. `Qwen3-235B-A22B`), so it still gets a per-GPU prior
    (`estimate_arch`) rather than none."""
    if not name:
        return None
    base = _plain(name)
    if said := NAMED_EXPERTS.search(base):
        return int(said[1]) * float(said[2]) * 1e9
    if said := NAMED_BILLIONS.search(base):
        return float(said[1]) * 1e9
    if said := NAMED_MILLIONS.search(base):
        return float(said[1]) * 1e6
    return None


# --- the job's layout --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Layout:
    """How one job runs (contract v5 fields with their defaults applied)."""

    gpu_count: int = 1
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    context_parallel: int = 1
    sharding: str = "none"  # none | zero1 | zero2 | zero3 | fsdp (unknown: none)
    cpu_offload: str = "none"  # none | optimizer | all | auto (contract v8: `dynamic_placement`)
    activation_checkpointing: str = "none"  # none | selective | full
    adapter: str = "none"  # none | lora | qlora | other | lisa (unknown: none)
    lora_rank: int | None = None
    micro_batch_size: int = 1
    seq_len: int = 2048
    precision: str = "BF16"
    optimizer: str | None = "AdamW"
    micro_batches: int | None = None  # per optimizer step and data-parallel rank (gradient accumulation)
    # `qlora` on a base quantised when loaded (bitsandbytes), not a pre-quantised checkpoint (GPTQ, AWQ, AQLM):
    # PEFT's `prepare_model_for_kbit_training` casts every 16-bit parameter left (embedding, head, norms) to fp32
    # (peft/utils/other.py: "cast all non INT8 parameters to fp32", skipped for GPTQ / AQLM / EETQ / HQQ), so the
    # embedding and head take 4 bytes a parameter and the residual stream, which the fp32 norms and embedding
    # produce, is kept at 4 bytes a value
    kbit_upcast: bool = False
    # bytes a linear weight of a `qlora` base takes: 4 bits with their constants unless the model's name says another
    # width (`quantised_bytes`: a GPTQ Int8 or an AQLM 2-bit checkpoint)
    base_bytes: float = 0.516
    loss_precision: str = "fp32"  # fp32 | half | fused (contract v6; unknown: fp32): `LOSS_LOGIT_BYTES`
    expert_parallel: int = 1  # contract v7: the GPUs a mixture-of-experts model's experts are split over (`expert_split`)
    # contract v7: none | embeddings | head | embeddings_and_head (unknown: none), trained in full beside an adapter
    # (`trained_copy_params`)
    trained_modules: str = "none"
    kernels: str = "none"  # contract v8: none | unsloth | liger (unknown: none); read through `job_of` (`KERNEL_LOSS`)
    # the memory of the job's GPU type (the catalogue's GB, null when the job logs no known type): what `cpu_offload`
    # `auto` fills (`dynamic_placement`); no other part of the prior reads it
    gpu_memory_gb: float | None = None

    @property
    def data_parallel(self) -> int:
        return max(1, self.gpu_count // max(1, self.tensor_parallel * self.pipeline_parallel * self.context_parallel))

    @property
    def state_ranks(self) -> int:
        """The ranks that hold the same weights and so shard (ZeRO, FSDP) or all-reduce (DDP) the model states: the
        data-parallel x context-parallel ranks, d x c. Context parallelism splits the sequence, not the weights, and the
        frameworks shard over both: Megatron-Core's gradient buffers and distributed optimizer take
        `get_data_parallel_group(with_context_parallel=True)`, torchtitan applies FSDP over the flattened `dp_shard_cp`
        mesh, DeepSpeed's ZeRO partitions over its sequence-data-parallel group under Ulysses (review 63 S3-6)."""
        return self.data_parallel * max(1, self.context_parallel)

    @property
    def expert_tensor_parallel(self) -> int:
        """The GPUs each expert's matrices are split over (Megatron-Core's `expert_tensor_parallel_size`, e): the
        tensor size t by default, but megatron/core/parallel_state.py `initialize_model_parallel` raises unless the
        world is divisible by e x expert parallel x pipeline, so a job on fewer GPUs than t x n x p set it lower
        (ms-swift's GLM-4.5-Air scripts: TP4 x EP4 on 4 GPUs with `--expert_tensor_parallel_size 1`): the largest
        divisor of t that fits (1 if none does)."""
        n, p = max(1, self.expert_parallel), max(1, self.pipeline_parallel)
        fits = [e for e in range(1, max(1, self.tensor_parallel) + 1)
                if self.tensor_parallel % e == 0 and self.gpu_count % (e * n * p) == 0]
        return max(fits, default=1)


# --- constants (bytes) --------------------------------------------------------------------------------------
HALF_BYTES = {"FP16": 2, "BF16": 2, "FP8": 2, "FP32": 4, "FP64": 8}  # FP8 training keeps 16-bit weights (TE)
MASTER_BYTES = {"FP64": 8}  # else 4: fp32 masters and moments
MOMENTS = {"sgd": 1, "rmsprop": 1, "adagrad": 1, "adafactor": 0}  # lower-case name; else 2 (Adam, AdamW, unknown)
# Adafactor (Shazeer & Stern 2018; transformers' default `beta1=None`) keeps no first moment and factors the second
# into a row and a column vector per matrix: ~0 bytes a parameter.
# 8-bit optimizer states (Dettmers et al. 2022, "8-bit Optimizers via Block-wise Quantization": each moment at 1 byte
# plus an fp32 constant per 2,048-value block): bitsandbytes' Adam8bit / AdamW8bit / PagedAdamW8bit, logged as
# Hugging Face's `adamw_bnb_8bit`, `paged_adamw_8bit`, `adamw_8bit`
EIGHT_BIT_OPTIMIZER = re.compile(r"8[-_ ]?bit|bnb", re.IGNORECASE)
# GaLore (Zhao et al. 2024, "GaLore: Memory-Efficient LLM Training by Gradient Low-Rank Projection", sec. 4 and
# table 1), as Hugging Face Trainer logs it (`optim`: galore_adamw, galore_adamw_8bit, galore_adafactor, each with
# `_layerwise`): all weights are trained, but the optimizer keeps, per block matrix of m x n (m <= n), a projector
# m x r and its moments of the projected gradient r x n (Adam: two), instead of two m x n moments; the embedding,
# head and vectors keep the plain optimizer's. `_layerwise` steps each parameter in its gradient hook and frees
# its gradient there, so no model-sized gradient is held. r: `GALORE_RANK`, Hugging Face's default (`optim_args`
# rank=128); its states take the weights' dtype (galore_torch's AdamW: `zeros_like` the projected gradient), 8-bit
# moments under `_8bit`.
# Unsharded FP16 training is torch AMP (Hugging Face Trainer `fp16=True`, Lightning `precision=16`: the model in fp32
# under `torch.autocast`): fp32 weights, gradients and moments, and the 16-bit casts of the weights, which autocast
# caches for the forward and the matmuls save for the backward (2 bytes a parameter): 4 + 2 + 4 + 8 = 18 bytes, where
# DeepSpeed's count (16-bit weights and gradients beside an fp32 master) is 16.
AMP_CAST_BYTES = 2
# DDP (`sharding` none over d > 1 ranks) all-reduces the gradients through buckets that are a second copy of them
# (torch.nn.parallel.DistributedDataParallel's default `gradient_as_bucket_view=False`; its docs: setting it True saves
# "the total gradients size"); Megatron's DDP likewise keeps a contiguous gradient buffer beside the parameters.
DDP_BUCKETS = 2
# The optimizer step's temporary (`step_temporary`): torch.optim.AdamW's default on GPUs is the foreach
# implementation (`_multi_tensor_adamw`), whose `exp_avg_sq_sqrt = torch._foreach_sqrt(device_exp_avg_sqs)` is a
# copy of every second moment at once (all the parameters of one device and dtype are one group), freed after the
# step; activations are freed by then, so the step's peak is states + that copy. A fused step (`adamw_torch_fused`,
# apex's / DeepSpeed's FusedAdam) has none.
FUSED_OPTIMIZER = re.compile(r"fused", re.IGNORECASE)
# DeepSpeed ZeRO-2's step (`zero2`; runtime/zero/stage_1_and_2.py `DeepSpeedZeroOptimizer.step`, per param group:
# `single_grad_partition = self.flatten(self.averaged_gradients[i]).to(self.single_partition_of_fp32_groups[i].dtype)`,
# then `.grad =` it, `free_grad_in_param_list`, `_optimizer_step(i)`) flattens the partition's 16-bit gradients into a
# new 16-bit tensor and casts that to fp32 while the gradients are still held: 2 + 4 bytes a parameter of the
# partition at once, after the backward pass (its fused Adam adds nothing). Hugging Face Trainer's second group (no
# weight decay: biases and norms) is small, so it is the whole partition. ZeRO-3 (`zero3`; stage3.py
# `_prepare_fp32_grad_for_sub_group`: the same `self.flatten(self.averaged_gradients[sub_group_id]).to(...)`) steps
# one sub-group at a time and releases it after its step: at most `ZERO3_SUB_GROUP` parameters at once (DeepSpeed's
# `sub_group_size` default, which Qwen's and ms-swift's ZeRO-3 configs keep; Lightning's `DeepSpeedStrategy` defaults
# it to 1e12, so its ZeRO-3 runs copy their whole partition: undercounted here, review 67b L3). With fp32 weights the
# flat copy is fp32 already and `.to` copies nothing (4 bytes, not 8). Not `zero1`: the word also names Megatron's
# distributed optimizer, whose fp32 gradient buffer `.float()` does not copy; DeepSpeed's own ZeRO-1 runs the same
# stage_1_and_2.py step and is knowingly undercounted by these 6 bytes (the set's `zero1` runs are Megatron's). Not
# with the optimizer offloaded (the fp32 gradients are made on the CPU). ColossalAI's Gemini, logged `zero3` too,
# steps its own chunks.
ZERO_STEP_COPIES = frozenset({"zero2", "zero3"})  # the `sharding` words whose step makes those copies
ZERO3_SUB_GROUP = 1e9
GALORE_OPTIMIZER = re.compile(r"galore", re.IGNORECASE)
GALORE_LAYERWISE = re.compile(r"layerwise", re.IGNORECASE)
GALORE_RANK = 128
QLORA_BYTES = 0.516  # NF4 weight (0.5) + double-quantised block constants (0.127 bits / 8)
# The width of a checkpoint quantised before training, as its name says (Hugging Face's naming: `Qwen-7B-Chat-Int8`,
# `Llama-2-7b-AQLM-2Bit-1x16-hf`, `...-GPTQ-Int4`, `...-bnb-4bit`): b bits a weight + the group constants (GPTQ / AWQ: an
# fp16 scale and a packed zero point per group of 128 weights, 0.02 bytes; AQLM 1x16: a 2^16 x 8 fp16 codebook per
# layer, < 0.01 bytes a weight). A name that gives no width: 4 bits (`QLORA_BYTES`, NF4 with its constants).
QUANTISED_BITS = re.compile(r"(?<![a-z])int([2-8])(?![0-9])|(?<![0-9])([2-8])[-_ ]?bit", re.IGNORECASE)  # not 16bit
GROUP_CONSTANT_BYTES = 0.02
ADAPTER_STATE_BYTES = 16  # fp32 adapter weights 4 + gradients 4 + AdamW moments 8
DEFAULT_LORA_RANK = 8  # PEFT's LoraConfig default
GATHERED_UNITS = 3  # FSDP / ZeRO-3: the block computing, the one prefetched, and a block's gathered gradients
LOGIT_BYTES = 10  # 16-bit logits 2 + their fp32 copy for the loss 4 + its fp32 gradient 4
# Bytes a logit at the logits' peak by the job's `loss_precision` (contract v6). `fp32`: `LOGIT_BYTES`. `half`: a loss
# on the 16-bit logits (a script's own shifted `nn.CrossEntropyLoss` under DeepSpeed's or Gemini's fp16 engine, which
# runs the model in fp16 without autocast; Megatron's `fp16_lm_cross_entropy`): 6.12, traced on CPU at once over a
# 16-bit head, a shifted cross-entropy and its backward (tests/benchmarks/bench_llm_memory.py `logit_bytes(False)`;
# 12.12 for a loss on fp32 logits, where `LOGIT_BYTES` is the fitted 10). `fused`: a fused linear cross-entropy
# (Liger's `LigerFusedLinearCrossEntropyLoss`, Apple's Cut Cross-Entropy) computes the loss and the head's gradient
# chunk by chunk and never holds the logits: 0 (its chunk, a few hundred MB at most, is in the overhead).
# `inplace` (no contract word: what contract v8's `kernels` `unsloth` gives where `loss_precision` is not logged):
# unsloth's Triton cross-entropy (unsloth/kernels/cross_entropy_loss.py `Fast_CrossEntropyLoss`) reads the 16-bit
# logits the head returns, keeps one fp32 logsumexp a token, and its backward writes the gradient into the logits'
# own storage: the 16-bit logits, 2 bytes.
# `vocab_parallel` (no contract word: what a job taken for Megatron computes where it logs no `loss_precision` or
# `fp32`, which `job_of` cannot tell apart; `megatron_count`; not Megatron's fused loss under
# `--cross-entropy-loss-fusion` (`fused_vocab_parallel_cross_entropy`, or Transformer Engine's `parallel_cross_entropy`
# from `compute_language_model_loss` in megatron/core/models/common/language_module/language_module.py), whose memory
# is not traced here: review 66b S3-2): Megatron-Core's `_VocabParallelCrossEntropy` (NVIDIA/Megatron-LM
# megatron/core/tensor_parallel/cross_entropy.py) takes the head's 16-bit logits [s, b, V / t] and makes one fp32
# copy (`calculate_logits_max`: `vocab_parallel_logits.float()`), in which it subtracts the max, exponentiates and
# normalises in place (`-=`, `torch.exp(..., out=exp_logits)`, `exp_logits.div_`) and saves it for the backward; the
# backward writes the gradient into that same buffer (`grad_2d[...] -= softmax_update`, `grad_input.mul_`) and autograd
# casts it to the logits' 16 bits for the head's backward: 2 + 4 at the forward's copy, 4 + 2 at the backward's cast,
# 6 bytes a logit either way (the 16-bit logits are not saved: the head's linear saves its input and weight).
LOSS_LOGIT_BYTES = {"fp32": LOGIT_BYTES, "half": 6.12, "fused": 0.0, "inplace": 2.0, "vocab_parallel": 6.0}
# Megatron-LM's count of a bf16 job's gradients (`megatron_count`): megatron/training/arguments.py (NVIDIA/Megatron-LM,
# `validate_args`) sets `accumulate_allreduce_grads_in_fp32 = True` under `--bf16` ("bfloat16 requires gradient
# accumulation and all-reduce to be done in fp32"; only `--grad-reduce-in-bf16` turns it off), which the training loop
# hands to Megatron-Core's DDP as `grad_reduce_in_fp32`, and megatron/core/distributed/distributed_data_parallel.py
# allocates each parameter's gradient buffer as `grad_dtype = torch.float if self.ddp_config.grad_reduce_in_fp32 else
# param.dtype` (the backward hook adds `param.grad` into `param.main_grad`, a view of that buffer, and drops
# `param.grad`): 4 bytes a parameter, whole on every rank (the distributed optimizer reduce-scatters in place). The
# optimizer keeps fp32 masters and Adam's fp32 moments (megatron/core/optimizer/distrib_optimizer.py:
# `shard_main_param = shard_model_param.clone().float()` for each bf16 parameter's shard, over the data x
# context-parallel group; without `--use-distributed-optimizer`, `Float16OptimizerWithFloat16Params` in
# megatron/core/optimizer/optimizer.py keeps every parameter's fp32 copy): 4 + 8 bytes.
MEGATRON_GRAD_BYTES = 4
# The loss a kernel library computes (contract v8 `kernels`) where the job logs no `loss_precision`: unsloth's in place
# on the 16-bit logits, Liger's fused linear cross-entropy (`use_liger_kernel` swaps it in for a causal LM's loss)
KERNEL_LOSS = {"unsloth": "inplace", "liger": "fused"}
# LISA (Pan et al. 2024, algorithm 1; ms-swift's and LMFlow's `lisa_activated_layers`): the embedding and the head are
# always trained, with `LISA_ACTIVATED_LAYERS` sampled blocks at a time; the rest is frozen at 16 bits. The trained
# parameters take the model's 16-bit gradients and two 16-bit AdamW moments (the model is trained in its 16-bit dtype
# by ms-swift's and LMFlow's full-training path, no fp32 master), and torch's foreach AdamW step copies their second
# moments (`step_temporary`). The contract carries no count of activated layers: 2, LMFlow's documented example and
# ms-swift's examples' value (its Benchmark.md also has a run of 4: one block pair more, ~2.4 GB on Qwen-7B, is missed).
LISA_ACTIVATED_LAYERS = 2
# The soft-capped head's saved tanh output, bytes a logit at the head's width: 2 at 16 bits, 4 for an fp32 head
# (a k-bit base, `Layout.kbit_upcast`). Traced on CPU (a TorchDispatchMode counting live storages over the head,
# transformers' ForCausalLMLoss and the backward, 1,024 tokens x 32,000 entries): peak bytes a logit 12.5 plain,
# 14.5 soft-capped (bf16 head); 13.0 and 17.0 with an fp32 head.
SOFTCAP_LOGIT_BYTES = {False: 2, True: 4}
# Fitted on tests/benchmarks' development set (../shared/data/llm_memory_dev.csv, 295 measured runs; a grid over
# LOGIT_BYTES 8-32, ACTIVATION_SCALE 1-3, ALLOCATOR_FACTOR 1.05-1.3, FIXED_OVERHEAD_GB 0.8-3.5 moved the mean of
# the sources' P50 APE between 19% and 26%: the errors left are the sources' own, not these constants).
ACTIVATION_SCALE = 1.0  # eager PyTorch over the paper's fused count (see the module's docstring)
FIXED_OVERHEAD_GB = 2.0  # the CUDA context (~0.8 GB), cuBLAS / NCCL workspaces and the allocator's cached blocks
ALLOCATOR_FACTOR = 1.05  # reserved over allocated (the caching allocator's rounding and fragmentation)
# P90 / P50 of the prior alone: exp of the 90th percentile of |log(measured / prior)| on the development set.
P90_FACTOR = 1.7
# `cpu_offload` `auto` (contract v8): ColossalAI Gemini's `AutoPlacementPolicy` (colossalai/gemini/placement_policy.py)
# evicts parameter chunks to the CPU whenever the model data on the GPU would pass `cuda_capacity x
# _steady_cuda_cap_ratio` (0.9, fixed in its code) less the non-model data (activations) it measured in the warm-up
# step, and its optimizer keeps states on the GPU in the room left (`gpu_margin_mem_ratio`): a job whose states do not
# fit fills its GPU to 0.9 of the device's capacity. `cuda_capacity` is torch's `total_memory` in bytes, and the
# catalogue's sizes are the vendors' binary ones (an "A100 40GB" reports 40 GiB less the driver's share), so the
# capacity is memory_gb GiB (`GIB`).
DYNAMIC_CUDA_CAP_RATIO = 0.9
GIB = 2**30
SHARDED = ("zero3", "fsdp")
# a model name that says its checkpoint was quantised before training (GPTQ, AWQ, AQLM, int4 / int8 exports):
# PEFT does not upcast those (`Layout.kbit_upcast`)
PREQUANTISED = re.compile(r"gptq|awq|aqlm|int4|int8|eetq|hqq", re.IGNORECASE)


def quantised_bytes(name: str | None) -> float:
    """Bytes a linear weight of a quantised base takes, from the width its name gives (`QUANTISED_BITS`), else
    `QLORA_BYTES` (4 bits)."""
    said = QUANTISED_BITS.search(name or "")
    if not said:
        return QLORA_BYTES
    return int(said.group(1) or said.group(2)) / 8 + GROUP_CONSTANT_BYTES


@dataclass(frozen=True)
class PerGpu:
    """One GPU's memory of a job, GB, by part."""

    weights_gb: float
    gradients_gb: float
    optimizer_gb: float
    activations_gb: float
    logits_gb: float
    overhead_gb: float

    @property
    def states_gb(self) -> float:
        return self.weights_gb + self.gradients_gb + self.optimizer_gb

    @property
    def total_gb(self) -> float:
        return self.states_gb + self.activations_gb + self.logits_gb + self.overhead_gb


def megatron_count(job: Layout, states: bool = True) -> bool:
    """Whether the prior counts `job` as Megatron-LM / Megatron-Core runs it: its loss (`states` False; Megatron's
    vocabulary-parallel cross-entropy, `LOSS_LOGIT_BYTES` `vocab_parallel`) and, for all weights trained in bf16 with no
    sharding or the distributed optimizer (`zero1`) and nothing but the optimizer offloaded, its states
    (`MEGATRON_GRAD_BYTES`).

    The trigger is a proxy: tensor parallel > 1. No contract field names the framework, and among the trainers that
    log a layout, tensor parallelism is Megatron's (Megatron-LM, Megatron-SWIFT, NeMo); Hugging Face Trainer,
    DeepSpeed, FSDP, torchtune and unsloth runs log t = 1. What it gets wrong: a torchtitan (or other DTensor) job
    with t > 1, or Hugging Face's own tensor parallel (`tp_plan="auto"`, accelerate's TP plugin), runs torch's loss
    and FSDP2's or DDP's states, and is counted as Megatron here; a Megatron job with t = 1 (data or pipeline parallel
    only) is not. Pipeline or expert parallel do not trigger it: Hugging Face
    `device_map` runs log `pipeline_parallel` too (the development set's Benchmark.md runs, +80..+94% with it, docs/
    models.md issue 51 session 15 H4), and they are not Megatron."""
    if job.tensor_parallel <= 1:
        return False
    return (not states or (job.adapter == "none" and job.precision == "BF16" and job.sharding in ("none", "zero1")
                           and job.cpu_offload in ("none", "optimizer")
                           and not GALORE_OPTIMIZER.search(job.optimizer or "")))


def states(arch: Arch, job: Layout, experts: float = 0.0) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes on one GPU. `experts`: the parameters of `arch.params` that are an
    expert-parallel job's experts (`experts_held`), whose sharded states are spread over the expert-data-parallel
    ranks (`expert_data_parallel`) instead of the data-parallel ones."""
    split = job.tensor_parallel * job.pipeline_parallel
    d = job.state_ranks  # data x context parallel (`Layout.state_ranks`)
    d_experts = expert_data_parallel(job)

    def over_ranks(value: float, expert_share: float) -> float:
        """`value` sharded over the data x context-parallel ranks, the share of it that is experts over the
        expert-data-parallel ranks"""
        if not experts:
            return value / d
        return value * (1.0 - expert_share) / d + value * expert_share / d_experts

    share = experts / arch.params if arch.params else 0.0  # of the parameters (full training's states)
    params = arch.params / split
    unit = arch.block_params / job.tensor_parallel  # one gathered block, per tensor-parallel rank
    half = HALF_BYTES.get(job.precision, 2)
    master = MASTER_BYTES.get(job.precision, 4)
    moments = MOMENTS.get((job.optimizer or "").lower(), 2)
    eight_bit = bool(EIGHT_BIT_OPTIMIZER.search(job.optimizer or ""))
    sharded = job.sharding in SHARDED
    unit_bytes = job.base_bytes if job.adapter == "qlora" else min(half, 2)  # a gathered block at its stored width
    # the blocks all-gathered to compute (over d ranks, or from the CPU when the parameters are offloaded)
    gathered = GATHERED_UNITS * unit * unit_bytes if sharded and (d > 1 or job.cpu_offload == "all") else 0.0
    if gathered and job.sharding == "fsdp":
        gathered += fsdp_root_params(arch, job) * (4 if job.kbit_upcast else min(half, 2))  # `fsdp_root_params`
    galore = bool(GALORE_OPTIMIZER.search(job.optimizer or ""))
    if job.adapter == "lisa":  # the frozen rest at 16 bits, the trained part's gradients and moments too (`lisa_params`)
        base = (over_ranks(params, share) if sharded else params) * (0.0 if job.cpu_offload == "all" else half)
        trained = lisa_params(arch) / split / (d if job.sharding != "none" else 1)
        optim = 0.0 if job.cpu_offload != "none" else trained * MOMENTS.get((job.optimizer or "").lower(), 2) * (
            1 if eight_bit else half)
        return base + gathered, trained * half, optim
    # GaLore trains every weight: a job logged as `other` (a parameter-efficient method) with it is full training
    if job.adapter in ("lora", "qlora") or (job.adapter == "other" and not galore):
        rank = job.lora_rank if (job.adapter != "other" and job.lora_rank) else DEFAULT_LORA_RANK
        if job.adapter == "qlora":
            base = (arch.params - arch.embedding_params) * job.base_bytes + arch.embedding_params * (
                4 if job.kbit_upcast else 2)
        else:
            base = arch.params * half
        base /= split
        if sharded:  # the frozen experts' share of the base (at the base's width) over the expert-data-parallel ranks
            base = over_ranks(base, experts / split * (job.base_bytes if job.adapter == "qlora" else half) / base)
        if job.cpu_offload == "all":
            base = 0.0
        trainable = arch.adapter_params(rank) / split  # fp32 weights 4 + gradients 4 + AdamW moments 8 (8-bit: 2)
        if job.sharding != "none":  # the experts' adapters over the expert-data-parallel ranks
            trainable = over_ranks(trainable, 1.0 - arch.adapter_params(rank, 0) / arch.adapter_params(rank))
        buckets = DDP_BUCKETS if job.sharding == "none" and d > 1 else 1  # DDP's all-reduce buckets (`DDP_BUCKETS`)
        # the modules trained in full beside the adapter (contract v7): weights, gradients and moments in their dtype
        copies, width = trained_copy_params(arch, job), trained_copy_bytes(job)
        cw = copies * width / (d if sharded else 1) * (0.0 if job.cpu_offload == "all" and job.sharding != "none" else 1)
        cg = copies * width / (d if job.sharding in ("zero2", "zero3", "fsdp") else 1) * buckets
        co = 0.0 if job.cpu_offload != "none" else copies * moments * (1 if eight_bit else width) / (
            d if job.sharding != "none" else 1)
        return (base + gathered + cw, trainable * 4 * buckets + cg,
                trainable * (ADAPTER_STATE_BYTES - 4 - (6 if eight_bit else 0)) + co)
    if megatron_count(job):  # bf16 weights, the fp32 gradient buffer, fp32 masters and moments (`MEGATRON_GRAD_BYTES`)
        optim = 0.0 if job.cpu_offload != "none" else params * (master + moments * (1 if eight_bit else master))
        return (params * half, params * MEGATRON_GRAD_BYTES,
                over_ranks(optim, share) if job.sharding == "zero1" else optim)  # the distributed optimizer over d x c
    unsharded = job.sharding not in ("zero1", "zero2", "zero3", "fsdp")
    pure = unsharded and job.precision in ("BF16", "FP8")
    if pure or job.precision in ("FP32", "FP64"):
        weights, grads, optim = half, half, moments * (1 if eight_bit else half)
    elif unsharded:  # torch AMP (`AMP_CAST_BYTES`): fp32 weights and gradients, their 16-bit casts, fp32 moments
        weights, grads, optim = master + AMP_CAST_BYTES, master, moments * (1 if eight_bit else master)
    else:  # mixed precision: 16-bit weights and gradients, fp32 master + moments
        weights, grads, optim = half, half, master + moments * (1 if eight_bit else master)
    if job.sharding == "fsdp":  # sharded fp32 (or the job's) parameters, gathered 16-bit blocks
        weights, grads, optim = master, master, moments * (1 if eight_bit else master)
    w, g, o = params * weights, params * grads, params * optim
    if galore:  # projected moments for the blocks' matrices (module docstring's `GALORE_OPTIMIZER`)
        moment_bytes = 1 if eight_bit else (half if (pure or job.precision in ("FP32", "FP64")) else master)
        dense = arch.layers * sum(r * k for r, k in arch.matrices())
        projected = arch.layers * sum(min(r, k) * GALORE_RANK * half + max(r, k) * GALORE_RANK * moments * moment_bytes
                                      for r, k in arch.matrices())
        o = (params * optim - dense / split * moments * moment_bytes + projected / split)
        if GALORE_LAYERWISE.search(job.optimizer or ""):  # one parameter's gradient at a time: the largest
            g = max(arch.vocab * arch.hidden, max(r * k for r, k in arch.matrices())) * grads / job.tensor_parallel
    if job.sharding in ("zero1", "zero2", "zero3", "fsdp"):
        o = over_ranks(o, share)
    if job.sharding in ("zero2", "zero3", "fsdp"):
        g = over_ranks(g, share)
    if sharded:
        w = over_ranks(w, share)
    if job.cpu_offload in ("optimizer", "all"):
        o = 0.0
    if job.cpu_offload == "all":
        w, g = 0.0, g if job.sharding == "none" else 0.0
    if job.sharding == "none" and d > 1:  # DDP's all-reduce buckets: a second copy of the gradients (`DDP_BUCKETS`)
        g *= DDP_BUCKETS
    return w + gathered, g, o


def expert_split(arch: Arch, job: Layout) -> Arch:
    """`arch` as one GPU of an expert-parallel job holds it (contract v7 `expert_parallel` n), before the prior's
    tensor x pipeline split: 1 / n of each block's experts (their weights, and so their gradients and optimizer
    states), the attention, norms, embedding and head whole, as Megatron's and DeepSpeed MoE's expert parallelism
    place them. The experts are split over the expert tensor-parallel ranks e (`Layout.expert_tensor_parallel`), not
    over t: where e < t the GPU's experts are counted t / e times here, so that the prior's division by t leaves it
    1 / e of them. A dense model, or n = 1: `arch` itself."""
    n = job.expert_parallel
    if n <= 1 or arch.experts <= 1:
        return arch
    widen = max(1, job.tensor_parallel) // job.expert_tensor_parallel  # e divides t
    return replace(arch, params=arch.params - arch.experts_params + experts_held(arch, job),
                   experts=max(1, arch.experts // n) * widen)


def experts_held(arch: Arch, job: Layout) -> float:
    """Parameters of the experts one GPU of an expert-parallel job holds, before the tensor x pipeline split: 1 / n of
    `arch`'s (the unsplit model's) experts, x t / e where the experts' tensor split e is below t (`expert_split`); 0
    for a dense model or n = 1."""
    n = job.expert_parallel
    if n <= 1 or arch.experts <= 1:
        return 0.0
    return arch.experts_params / n * (max(1, job.tensor_parallel) // job.expert_tensor_parallel)


def expert_data_parallel(job: Layout) -> int:
    """The ranks an expert-parallel job shards its experts' states over: the data-parallel x context-parallel ranks
    over n. Megatron-Core builds a separate optimizer for the expert parameters (megatron/core/optimizer/__init__.py
    `get_megatron_optimizer`: "We use separate optimizers for expert parameters and non-expert parameters", the
    expert one's `data_parallel_group` the intra expert-data-parallel group), of world / (expert tensor x n x
    pipeline) ranks (megatron/core/parallel_state.py: `expert_data_parallel_size = world_size //
    expert_tensor_model_pipeline_parallel_size`; the expert tensor size e, `Layout.expert_tensor_parallel`, is the
    tensor size by default, which makes it d x c / n). DeepSpeed's ZeRO 1-2 partitions an MoE parameter group over its
    expert-data-parallel group likewise. So under EP8 over 8 data-parallel ranks each GPU keeps its experts' optimizer
    states whole, not 1 / 8 of them."""
    return max(1, job.gpu_count // (job.expert_tensor_parallel * max(1, job.expert_parallel)
                                    * max(1, job.pipeline_parallel)))


# Matrices (vocabulary x hidden) an adapter run trains in full by its contract v7 `trained_modules`: PEFT's
# `ModulesToSaveWrapper` keeps the frozen original (counted in the base) and a trained deep copy of each module named
# in `modules_to_save`, so the embedding and the head are two copies even when the model ties them
TRAINED_MATRICES = {"none": 0, "embeddings": 1, "head": 1, "embeddings_and_head": 2}


def trained_copy_params(arch: Arch, job: Layout) -> float:
    """Parameters of the modules an adapter run (lora, qlora, other but GaLore) also trains in full (contract v7
    `trained_modules`, PEFT's `modules_to_save`) on one GPU: vocabulary-parallel over t; under pipeline parallel the
    embedding sits on the first stage and the head on the last, so one of them."""
    galore = bool(GALORE_OPTIMIZER.search(job.optimizer or ""))
    if not (job.adapter in ("lora", "qlora") or (job.adapter == "other" and not galore)):
        return 0.0
    matrices = TRAINED_MATRICES.get(job.trained_modules, 0)
    if job.pipeline_parallel > 1:
        matrices = min(matrices, 1)
    return matrices * arch.vocab * arch.hidden / job.tensor_parallel


def trained_copy_bytes(job: Layout) -> float:
    """Bytes a parameter of a trained copy (`trained_copy_params`) is kept in: the model's 16-bit dtype (fp32 under
    a k-bit base's `prepare_model_for_kbit_training`, which casts the embedding and head before PEFT copies them)."""
    return 4.0 if job.kbit_upcast else float(HALF_BYTES.get(job.precision, 2))


def lisa_params(arch: Arch) -> float:
    """Parameters LISA trains at a time (`LISA_ACTIVATED_LAYERS`): the embedding and the head, and the sampled
    blocks."""
    return arch.embedding_params + LISA_ACTIVATED_LAYERS * arch.block_params


def fsdp_root_params(arch: Arch, job: Layout) -> float:
    """Parameters of FSDP's root unit on one GPU, which stay all-gathered from their forward through the backward pass:
    what the per-block wrapping leaves to the root (`transformer_auto_wrap_policy` / torchtitan's `fully_shard` of each
    block, then of the model): the embedding and the head (one matrix when tied; the first pipeline stage holds the
    embedding, the last the head: one of them). FSDP2's `fully_shard` docs: the root's `reshard_after_forward` "is
    specially set to False as a heuristic since its parameters would typically be immediately all-gathered for
    backward"; FSDP1 likewise (`_runtime_utils._post_forward_reshard`: the root's flat parameter is not freed after
    the forward). The traced FSDP2 step (`llm_trace.py`, Llama-3.1-70B over 64 ranks) holds 5.91 GB gathered at its
    peak: one block (1.71 GB) and the embedding and head (4.20 GB). Under tensor parallel, 1 / t of them."""
    matrices = 1 if (arch.tied or job.pipeline_parallel > 1) else 2
    return matrices * arch.vocab * arch.hidden / job.tensor_parallel


def block_activation_bytes(arch: Arch, job: Layout) -> float:
    """Bytes one transformer block keeps for the backward pass, one micro-batch, no recomputation, at 16 bits
    (Korthikanti et al. 2022 eq. 1 without the attention scores, generalised; see the module's docstring)."""
    h, kv, i = arch.hidden, arch.kv_width, arch.intermediate
    stream = 2  # bytes of a residual-stream value (the block's input, its norms) at 16 bits
    attn = stream * h + 2 * h + 4 * kv + 2 * h + h  # input, q, k + v, output, dropout mask  (= 11 h when kv = h)
    mlp = (stream * h + 8 * i) if arch.gated else (stream * h + 4 * i + h)  # (= 19 h for GPT's 4h MLP)
    norms = 2 * stream * h
    act_scale = HALF_BYTES.get(job.precision, 2) / 2
    if job.kbit_upcast:
        # PEFT's k-bit preparation leaves the embedding and norms in fp32, so every block's input and norm output is
        # fp32, and bitsandbytes' Linear4bit casts its output back to its input's dtype (`Linear4bit.forward`:
        # `matmul_4bit(x.to(compute_dtype), ...).to(inp_dtype)`; PEFT's LoRA on it adds in that dtype): the block's
        # values, eager attention's scores included, are kept at 4 bytes (flash attention's own inputs are cast
        # back to 16 bits, a small part)
        act_scale = max(act_scale, 2.0)
    tokens = job.micro_batch_size * job.seq_len / job.context_parallel
    scores = 0.0
    if arch.family in EAGER_ATTENTION_FAMILIES:  # Korthikanti's 5 a s^2 b (scores 2, softmax 2, dropout mask 1)
        scores = EAGER_ATTENTION_FAMILIES[arch.family] * arch.heads * job.seq_len / job.context_parallel * tokens
    return (tokens * (attn + mlp + norms) + scores) * act_scale / job.tensor_parallel


def alibi_bias_bytes(arch: Arch, job: Layout) -> float:
    """Bytes of the ALiBi bias a family's code keeps for the step (`ALIBI_BIAS_FAMILIES`): the cached heads x s x s
    mask and the b x heads x s x s attention mask made from it, at the model's 16 bits; 0 for every other family."""
    if arch.family not in ALIBI_BIAS_FAMILIES:
        return 0.0
    s = job.seq_len / job.context_parallel
    return (1 + job.micro_batch_size) * arch.heads * s * s * HALF_BYTES.get(job.precision, 2)


def activations(arch: Arch, job: Layout) -> tuple[float, float]:
    """(blocks' activations, the head's logits) bytes on the most loaded GPU."""
    p = job.pipeline_parallel
    per_block = block_activation_bytes(arch, job) * ACTIVATION_SCALE
    blocks = arch.layers / p
    if job.activation_checkpointing == "full":
        tokens = job.micro_batch_size * job.seq_len / job.context_parallel
        stream = 4 if job.kbit_upcast else 2  # the block input's bytes (fp32 under k-bit preparation)
        kept = blocks * tokens * stream * arch.hidden / job.tensor_parallel + per_block
    else:
        kept = blocks * per_block
    in_flight = min(p, job.micro_batches) if job.micro_batches else p
    tokens = job.micro_batch_size * job.seq_len / job.context_parallel
    loss = "vocab_parallel" if job.loss_precision == "fp32" and megatron_count(job, states=False) else job.loss_precision
    per_logit = LOSS_LOGIT_BYTES.get(loss, LOGIT_BYTES)
    if per_logit and arch.family in SOFTCAP_FAMILIES:
        per_logit += SOFTCAP_LOGIT_BYTES[job.kbit_upcast]
    logits = tokens * arch.vocab * per_logit / job.tensor_parallel
    bias = alibi_bias_bytes(arch, job)
    if p > 1:  # the first stage keeps `in_flight` micro-batches; the last one the logits
        first, last = kept * in_flight, kept + logits
        return (first + bias, 0.0) if first >= last else (kept + bias, logits)
    return kept + bias, logits


def step_temporary(arch: Arch, job: Layout) -> float:
    """Bytes the optimizer step allocates beside the states on one GPU (`FOREACH_TEMPORARY`): torch's foreach AdamW
    takes the square root of every second moment at once, a copy of them; DeepSpeed ZeRO-2's and ZeRO-3's step, full
    training, a flat 16-bit and an fp32 copy of its partition's gradients (ZeRO-3: of one sub-group,
    `ZERO3_SUB_GROUP`; `ZERO_STEP_COPIES`, whatever the tensor parallelism); else 0 where a fused kernel steps
    (DeepSpeed's Adam under zero1, Megatron's apex / Transformer Engine Adam, which tensor parallelism implies), on
    the CPU (offload), for 8-bit, factored or
    one-moment optimizers, and for adapters' own states (small); LISA's trained part copies its 16-bit second moments
    (`lisa_params`), an adapter run those of the modules it trains in full (contract v7 `trained_modules`:
    `trained_copy_params`)."""
    optimizer = job.optimizer or ""
    if job.sharding in ZERO_STEP_COPIES and job.adapter == "none" and job.cpu_offload == "none":
        partition = arch.params / (job.tensor_parallel * job.pipeline_parallel) / job.state_ranks
        at_once = min(partition, ZERO3_SUB_GROUP) if job.sharding == "zero3" else partition
        flat, master = HALF_BYTES.get(job.precision, 2), MASTER_BYTES.get(job.precision, 4)
        return at_once * (flat + (master if master != flat else 0))  # fp32 weights: `.to(fp32)` copies nothing
    if (job.sharding in ("zero1", "zero2", "zero3")
            or job.tensor_parallel > 1
            or job.cpu_offload != "none" or MOMENTS.get(optimizer.lower(), 2) != 2
            or EIGHT_BIT_OPTIMIZER.search(optimizer) or GALORE_OPTIMIZER.search(optimizer)
            or FUSED_OPTIMIZER.search(optimizer)):
        return 0.0
    if job.adapter in ("lora", "qlora", "other"):
        return trained_copy_params(arch, job) * trained_copy_bytes(job) / (
            job.state_ranks if job.sharding == "fsdp" else 1)
    if job.adapter == "lisa":
        return lisa_params(arch) / (job.tensor_parallel * job.pipeline_parallel) * HALF_BYTES.get(job.precision, 2) / (
            job.state_ranks if job.sharding == "fsdp" else 1)
    pure = job.sharding == "none" and job.precision in ("BF16", "FP8")
    moment_bytes = HALF_BYTES.get(job.precision, 2) if pure or job.precision in ("FP32", "FP64") else MASTER_BYTES.get(
        job.precision, 4)
    params = arch.params / (job.tensor_parallel * job.pipeline_parallel)
    return params * moment_bytes / (job.state_ranks if job.sharding == "fsdp" else 1)


def amp_casts(arch: Arch, job: Layout) -> float:
    """Bytes of the 16-bit weight casts torch AMP holds through the backward pass (`AMP_CAST_BYTES`, counted in the
    weights), freed before the optimizer step."""
    if job.adapter != "none" or job.sharding != "none" or job.precision != "FP16":
        return 0.0
    return arch.params / (job.tensor_parallel * job.pipeline_parallel) * AMP_CAST_BYTES


def per_gpu(arch: Arch, job: Layout) -> PerGpu:
    """One GPU's peak memory of `job` on `arch`, by part: the states, and then the larger of what the backward
    pass holds (activations and logits) and what the optimizer step allocates (`step_temporary`), which come one
    after the other. An expert-parallel job's GPU holds its share of the experts (`expert_split`); a job placed as
    room allows (`cpu_offload` `auto`) fills its GPU between the two (`dynamic_placement`)."""
    if job.cpu_offload == "auto":
        return dynamic_placement(arch, job)
    held = experts_held(arch, job)
    arch = expert_split(arch, job)
    w, g, o = states(arch, job, held)
    acts, logits = activations(arch, job)
    # the part of the step's peak above the backward pass's (which also held AMP's casts)
    step = max(0.0, step_temporary(arch, job) - acts - logits - amp_casts(arch, job))
    allocated = w + g + o + acts + logits + step
    overhead = allocated * (ALLOCATOR_FACTOR - 1.0) + FIXED_OVERHEAD_GB * GB
    return PerGpu(w / GB, g / GB, o / GB + step / GB, acts / GB, logits / GB, overhead / GB)


def dynamic_placement(arch: Arch, job: Layout) -> PerGpu:
    """One GPU of a job whose states move between the CPU and the GPU as room allows (contract v8 `cpu_offload`
    `auto`, ColossalAI Gemini's `placement_policy="auto"`): all on the GPU (`none`) when that fits under
    `DYNAMIC_CUDA_CAP_RATIO` of the GPU's memory; else the GPU filled to that cap with model data, never below what
    the job keeps on the GPU with everything offloaded (`all`). A GPU type the catalogue does not know: `all`'s
    figure, the least the job needs to run."""
    whole = per_gpu(arch, replace(job, cpu_offload="none"))
    least = per_gpu(arch, replace(job, cpu_offload="all"))
    if not job.gpu_memory_gb:
        return least
    cap = DYNAMIC_CUDA_CAP_RATIO * job.gpu_memory_gb * GIB / GB
    if whole.total_gb <= cap:
        return whole
    if least.total_gb >= cap:
        return least
    return replace(least, weights_gb=least.weights_gb + cap - least.total_gb)  # the chunks kept on the GPU


def model_states_baseline_gb(params: float, job: Layout) -> float:
    """The estimate DeepSpeed's and accelerate's calculators print: 16 bytes a parameter (mixed-precision Adam),
    divided by the ranks that share them (ZeRO-3 / FSDP: all; zero1 / zero2: the optimizer / + gradients), no
    activations. The named baseline of tests/benchmarks/bench_llm_memory.py."""
    split = job.tensor_parallel * job.pipeline_parallel
    d = job.data_parallel
    w, g, o = 2.0, 2.0, 12.0
    if job.adapter in ("lora", "qlora", "other", "lisa"):  # a calculator counts the frozen base's weights
        w, g, o = (0.5 if job.adapter == "qlora" else 2.0), 0.0, 0.0
    if job.sharding in ("zero1", "zero2", "zero3", "fsdp"):
        o /= d
    if job.sharding in ("zero2", "zero3", "fsdp"):
        g /= d
    if job.sharding in SHARDED:
        w /= d
    return params / split * (w + g + o) / GB


def flops_per_token(arch: Arch, job: Layout) -> float:
    """Training FLOPs per token (module docstring: 6 P, or 4 P + 6 x the adapter's, + 2 P under full
    checkpointing, + attention's 12 L s h)."""
    active = arch.active_params
    if job.adapter == "lisa":  # the frozen rest's forward and backward to the activations, the trained part's weights
        flops = 4.0 * active + 2.0 * lisa_params(arch)
    elif job.adapter in ("lora", "qlora", "other"):
        rank = job.lora_rank if (job.adapter != "other" and job.lora_rank) else DEFAULT_LORA_RANK
        flops = 4.0 * active + 6.0 * arch.adapter_params(rank, arch.experts_active)
    else:
        flops = 6.0 * active
    if job.activation_checkpointing == "full":
        flops += 2.0 * active
    return flops + 12.0 * arch.layers * job.seq_len * arch.hidden


# --- the feature frame's side: jobs with contract v5 fields ------------------------------------------------------
LLM_MEM_GB = "llm_mem_gb"  # the per-GPU prior of a job with LLM fields (null for the others)
LLM_PRIOR = "llm_prior"  # the `model` of a memory forecast that is this prior itself (`ood.llm_unlearned`)
LLM_STATE_GB, LLM_ACTIVATION_GB, LLM_GFLOP_PER_ITER = "llm_state_gb", "llm_activation_gb", "llm_gflop_per_iter"
LLM_PRIOR_COLUMNS = (LLM_MEM_GB, LLM_STATE_GB, LLM_ACTIVATION_GB, LLM_GFLOP_PER_ITER)
DEFAULT_SEQ_LEN = 2048  # tokens a sample, when a job with LLM fields logs no `input_dim`
DEFAULT_PRECISION = "BF16"  # what LLM training runs in when a job with LLM fields logs none


def is_llm(rows: pl.DataFrame) -> pl.Series:
    """Jobs that log a contract v5 layout field (parallelism, sharding, offload, checkpointing, adapter, rank):
    their memory is the per-GPU prior of this module. A micro-batch alone (Hugging Face Trainer logs one for every
    model) marks one only when its `arch` is in the LLM table."""
    alone = (c.MICRO_BATCH_SIZE, c.LOSS_PRECISION, c.TRAINED_MODULES, c.KERNELS)  # any trainer may log them
    layout = [n for n in c.LLM_COLUMNS if n in rows.columns and n not in alone]
    if rows.is_empty():
        return pl.Series([], dtype=pl.Boolean)
    marked = [pl.col(n).is_not_null() for n in layout]
    said = [pl.col(n).is_not_null() for n in alone if n in rows.columns]
    if said and c.ARCH in rows.columns:
        names = rows.filter(pl.any_horizontal(said))[c.ARCH].drop_nulls().unique().to_list()
        llms = [a for a in names if lookup(a) is not None]  # once per distinct name
        marked.append(pl.any_horizontal(said) & pl.col(c.ARCH).is_in(llms))
    if not marked:
        return pl.Series([False] * rows.height, dtype=pl.Boolean)
    return rows.select(pl.any_horizontal(marked).fill_null(False)).to_series()


def layout_group(rows: pl.DataFrame) -> pl.Series:
    """Each job's layout group, the unit by which out-of-fold evidence decides whether the champion's learned
    correction of the per-GPU prior is applied (`ood.LlmCorrection`): what is trained (`full` when the adapter is
    `none`, missing or unknown, else the adapter word: `lora`, `qlora`, `other`) and on how many GPUs (`one GPU`,
    `many GPUs`: gpu_count > 1), e.g. "lora on many GPUs". The two fields every source logs and the prior's error
    differs by most (a frozen base's states vs all weights' states, one GPU vs sharded or replicated states)."""
    adapter = (pl.col(c.ADAPTER).cast(pl.String) if c.ADAPTER in rows.columns else pl.lit(None, dtype=pl.String))
    trained = pl.when(adapter.is_in(["lora", "qlora", "other", "lisa"])).then(adapter).otherwise(pl.lit("full"))
    gpus = pl.col(c.GPU_COUNT).cast(pl.Float64).fill_null(1.0) if c.GPU_COUNT in rows.columns else pl.lit(1.0)
    where = pl.when(gpus > 1).then(pl.lit("many GPUs")).otherwise(pl.lit("one GPU"))
    return rows.select(pl.concat_str([trained, pl.lit(" on "), where]).alias("layout_group")).to_series()


def _value(row: dict, name: str, default=None):
    v = row.get(name)
    return default if v is None or (isinstance(v, float) and not math.isfinite(v)) else v


def arch_of(row: dict) -> Arch | None:
    """The architecture one job's per-GPU prior reads: its `arch`'s row of the LLM table, else one estimated from its
    logged parameter count or the size its name gives (`estimate_arch`), else None."""
    if (arch := lookup(_value(row, c.ARCH))) is not None:
        return arch
    params = _value(row, c.PARAMS_MILLION)
    params = float(params) * 1e6 if params else params_from_name(_value(row, c.ARCH))
    if not params or not math.isfinite(params):
        return None
    return estimate_arch(params, _value(row, c.NUM_LAYERS), _value(row, c.ARCH))


def read_as(arch: Arch) -> str:
    """What a per-GPU prior read, in the words a forecast's `ood_reason` gives it (so a planner sees a wrong match:
    `llama-3-70b` read as an 8B row would say so): the LLM table's row by name; a model the table lacks by the row
    whose shape was scaled to its size (`kin`); else the GPT-style shape of its parameter count."""
    size = f"{arch.params / 1e9:.3g}B" if arch.params >= 1e9 else f"{arch.params / 1e6:.3g}M"
    size += " parameters"
    if arch.name != "estimated":
        return f"the LLM table's {arch.name}"
    if arch.like:
        return f"{arch.like}'s shape scaled to {size}"
    return f"a GPT-style shape for {size} (no table row of its family)"


def job_of(row: dict) -> tuple[Arch, Layout] | None:
    """The architecture and layout of one job's contract row (v5 defaults applied; unknown words as the plain
    case), or None when its `arch` is not in the table and neither its parameter count is logged nor its name gives one
    (`params_from_name`)."""
    if (arch := arch_of(row)) is None:
        return None
    gpus = int(_value(row, c.GPU_COUNT, 1))
    tp, pp, cp = (int(_value(row, n, 1)) for n in c.PARALLELISM)
    d = max(1, gpus // max(1, tp * pp * cp))
    batch = _value(row, c.BATCH_SIZE)
    micro = _value(row, c.MICRO_BATCH_SIZE) or (max(1, round(batch / d)) if batch else 1)
    steps = max(1, round(batch / (micro * d))) if batch else None
    word = lambda name, known: v if (v := _value(row, name, c.LLM_DEFAULTS.get(name))) in known else "none"  # noqa: E731
    adapter = word(c.ADAPTER, c.ADAPTERS[:-1])
    kernels = word(c.KERNELS, c.KERNEL_WORDS[:-1])
    loss = _value(row, c.LOSS_PRECISION)
    checkpointing = word(c.ACTIVATION_CHECKPOINTING, c.CHECKPOINTINGS)
    if adapter != "none" and _value(row, c.ACTIVATION_CHECKPOINTING) not in (None, *c.CHECKPOINTINGS):
        # a fine-tune whose checkpointing was logged but not as a known word: the adapter recipes checkpoint by
        # default (PEFT's `prepare_model_for_kbit_training(use_gradient_checkpointing=True)`, LLaMA-Factory's
        # `disable_gradient_checkpointing=False`, unsloth's `use_gradient_checkpointing="unsloth"`), so `full`
        checkpointing = "full"
    layout = Layout(gpu_count=gpus, tensor_parallel=tp, pipeline_parallel=pp, context_parallel=cp,
                    sharding=word(c.SHARDING, c.SHARDINGS[:-1]), cpu_offload=word(c.CPU_OFFLOAD, c.CPU_OFFLOADS),
                    activation_checkpointing=checkpointing, adapter=adapter, lora_rank=_value(row, c.LORA_RANK),
                    micro_batch_size=int(micro), seq_len=int(_value(row, c.INPUT_DIM, DEFAULT_SEQ_LEN)),
                    precision=_value(row, c.PRECISION, DEFAULT_PRECISION), optimizer=_value(row, c.OPTIMIZER),
                    micro_batches=steps,
                    # unsloth prepares a k-bit base itself (unsloth/models/_utils.py `prepare_model_for_kbit_training`:
                    # the base frozen, only the LoRA weights cast to fp32, no fp32 upcast of the embedding, head or norms)
                    kbit_upcast=adapter == "qlora" and not PREQUANTISED.search(str(_value(row, c.ARCH, "")))
                    and kernels != "unsloth",
                    base_bytes=quantised_bytes(_value(row, c.ARCH)),
                    loss_precision=loss if loss in c.LOSS_PRECISIONS[:-1] else KERNEL_LOSS.get(kernels, "fp32"),
                    expert_parallel=int(_value(row, c.EXPERT_PARALLEL, 1)),
                    trained_modules=word(c.TRAINED_MODULES, TRAINED_MATRICES), kernels=kernels,
                    gpu_memory_gb=gpu_memory_gb(_value(row, c.GPU_TYPE)))
    return arch, layout


def gpu_memory_gb(name: str | None) -> float | None:
    """The catalogue's memory of a logged GPU type (null when it does not know the type)."""
    known = catalog.canonical(name) if name else None
    return catalog.gpus()[known].memory_gb if known else None


def frame_priors(rows: pl.DataFrame) -> pl.DataFrame:
    """`LLM_PRIOR_COLUMNS` for every row of `rows` (contract columns): the per-GPU memory (GB) and the training
    FLOPs of one optimizer step over all GPUs (GFLOP; tokens = micro-batch x data parallel x micro-batches x
    sequence) of jobs with LLM fields, null for the others. Computed once per distinct job, and only the jobs with
    LLM fields are visited (a pending set of 1M jobs with none of them: 1.2 CPU-s to none, issue 52 item 5)."""
    schema = {n: pl.Float64 for n in LLM_PRIOR_COLUMNS}
    at = np.flatnonzero(is_llm(rows).to_numpy())  # the rows with LLM fields, in order
    names = [n for n in (c.ARCH, c.PARAMS_MILLION, c.NUM_LAYERS, c.BATCH_SIZE, c.INPUT_DIM, c.PRECISION, c.OPTIMIZER,
                         c.GPU_COUNT, c.GPU_TYPE, *c.LLM_COLUMNS) if n in rows.columns]
    every = pl.DataFrame(schema=schema).clear(rows.height)  # null for the jobs without LLM fields
    if not len(at):
        return every
    seen: dict[tuple, tuple] = {}
    out = []
    for values in rows.select(names)[at].iter_rows():
        if values not in seen:
            job = job_of(dict(zip(names, values, strict=True)))
            if job is None:
                seen[values] = (None,) * 4
            else:
                arch, layout = job
                mem = per_gpu(arch, layout)
                tokens = layout.micro_batch_size * layout.data_parallel * (layout.micro_batches or 1) * layout.seq_len
                seen[values] = (mem.total_gb, mem.states_gb, mem.activations_gb + mem.logits_gb,
                                flops_per_token(arch, layout) * tokens / 1e9)
        out.append(seen[values])
    found = pl.DataFrame(out, schema=schema, orient="row")
    return every.with_columns(every[n].scatter(at, found[n]) for n in LLM_PRIOR_COLUMNS)


def use_llm_prior(df: pl.DataFrame) -> pl.DataFrame:
    """`df` (with the analytic and traced priors) with `LLM_PRIOR_COLUMNS` added and, for the jobs with LLM fields,
    the memory priors (`prior_mem_gb`, `prior_state_gb`, `prior_activation_gb`), the FLOPs of a step and through
    it the run time the per-GPU ones: the learned correction of a memory model sits on them. Jobs without LLM
    fields keep every prior as it was (the same features, the same forecasts)."""
    df = df.drop([n for n in LLM_PRIOR_COLUMNS if n in df.columns])
    llm = frame_priors(df)
    df = pl.concat([df, llm], how="horizontal")
    if llm[LLM_MEM_GB].null_count() == llm.height:  # no job with a per-GPU prior: every prior as it was
        return df
    has = pl.col(LLM_MEM_GB).is_not_null()
    iterations = pl.col(c.ITERATIONS).cast(pl.Float64).fill_null(1.0) if c.ITERATIONS in df.columns else pl.lit(1.0)
    runtime = iterations * pl.col(LLM_GFLOP_PER_ITER) / pl.col("prior_gflops") / 3600.0
    return df.with_columns(
        pl.when(has).then(pl.col(LLM_MEM_GB)).otherwise(pl.col("prior_mem_gb")).alias("prior_mem_gb"),
        pl.when(has).then(pl.col(LLM_STATE_GB)).otherwise(pl.col("prior_state_gb")).alias("prior_state_gb"),
        pl.when(has).then(pl.col(LLM_ACTIVATION_GB)).otherwise(pl.col("prior_activation_gb")).alias("prior_activation_gb"),
        pl.when(has).then(pl.col(LLM_GFLOP_PER_ITER)).otherwise(pl.col("prior_gflop_per_iter")).alias("prior_gflop_per_iter"),
        pl.when(has).then(runtime).otherwise(pl.col("prior_runtime_hours")).alias("prior_runtime_hours"))


# --- utilisation learned from the history (issue 51 item 5) --------------------------------------------------------
MFU_PRIOR = 0.40  # the stated prior: priors.MFU["transformer"], where the history has no measured LLM job
MIN_UTILISATION_JOBS = 3  # measured jobs a (precision, GPU type) group needs before its median replaces the prior
UTILISATION_RANGE = (0.01, 1.0)  # an achieved share outside it is a logging error (wrong iterations, GPUs, unit)


@dataclass(frozen=True)
class Utilisation:
    """The achieved share of the catalogue's peak FLOPs of LLM jobs, learned from their measured run times: the median
    per (precision, GPU type), else per precision, else `MFU_PRIOR`. `jobs`: how many measured jobs it learned from.
    Read-only: its tables are mappings that cannot be changed once made (`Utilisation()`: nothing learned)."""

    by_type: Mapping[tuple[str, str], float] = field(default_factory=dict)
    by_precision: Mapping[str, float] = field(default_factory=dict)
    jobs: int = 0

    def __post_init__(self):
        # copies behind read-only views: the record a saved encoder parses once is the one every scoring uses
        object.__setattr__(self, "by_type", MappingProxyType(dict(self.by_type)))
        object.__setattr__(self, "by_precision", MappingProxyType(dict(self.by_precision)))

    def __reduce__(self):
        """Pickled (and deep-copied) as its plain tables: a read-only view cannot be pickled itself."""
        return (type(self), (dict(self.by_type), dict(self.by_precision), self.jobs))

    def share(self, precision: str | None, gpu_type: str | None) -> tuple[float, str]:
        """(share of peak, where it came from: `learned <precision> <gpu type>`, `learned <precision>`, `prior`)."""
        precision, gpu_type = precision or DEFAULT_PRECISION, gpu_key(gpu_type)
        if (precision, gpu_type) in self.by_type:
            return self.by_type[precision, gpu_type], f"learned {precision} {gpu_type}"
        if precision in self.by_precision:
            return self.by_precision[precision], f"learned {precision}"
        return MFU_PRIOR, "prior"

    def to_json(self) -> dict:
        """JSON-ready (the saved feature encoder carries it: `features.FeatureEncoder.to_dict`)."""
        return {"by_type": [[p, g, s] for (p, g), s in sorted(self.by_type.items())],
                "by_precision": dict(sorted(self.by_precision.items())), "jobs": self.jobs}

    @classmethod
    def from_json(cls, data: dict | None) -> Utilisation:
        """`to_json`'s dict; none (an encoder saved before it existed): nothing learned, the stated prior."""
        if not data:
            return cls()
        return cls({(str(p), str(g)): float(s) for p, g, s in data.get("by_type", [])},
                   {str(k): float(v) for k, v in data.get("by_precision", {}).items()}, int(data.get("jobs", 0)))


def gpu_key(name: str | None) -> str | None:
    """A logged GPU type as the catalogue names it (`a100 80gb` and `A100-80GB` are one group), else as logged."""
    return (catalog.canonical(name) or name) if name else None


def achieved_share(rows: pl.DataFrame) -> pl.Series:
    """Each row's achieved share of peak: the FLOPs its iterations did (`LLM_GFLOP_PER_ITER` x `iterations`) over its
    measured GPU time at the catalogue's peak (`runtime_hours` x `prior_peak_tflops` x GPUs); null where any is
    missing. `rows`: a built feature frame (features.build)."""
    gpus = pl.col(c.GPU_COUNT).cast(pl.Float64).fill_null(1.0).clip(1.0)
    done = pl.col(c.ITERATIONS).cast(pl.Float64) * pl.col(LLM_GFLOP_PER_ITER) * 1e9
    possible = pl.col(c.RUNTIME_HOURS) * 3600.0 * pl.col("prior_peak_tflops") * 1e12 * gpus
    return rows.select((done / possible).alias("share")).to_series()


def fit_utilisation(rows: pl.DataFrame, min_jobs: int = MIN_UTILISATION_JOBS) -> Utilisation:
    """`Utilisation` from the LLM jobs of `rows` (a built feature frame) with a measured run time and iterations: the
    median achieved share (robust to the odd job that waited on I/O or logged its iterations wrong; shares outside
    `UTILISATION_RANGE` dropped as logging errors) per (precision, GPU type) with at least `min_jobs` jobs, and per
    precision likewise."""
    needed = (LLM_MEM_GB, LLM_GFLOP_PER_ITER, "prior_peak_tflops", c.RUNTIME_HOURS, c.ITERATIONS)
    if rows.is_empty() or any(n not in rows.columns for n in needed):
        return Utilisation()
    lo, hi = UTILISATION_RANGE
    rows = rows.filter(pl.col(LLM_MEM_GB).is_not_null() & pl.col(c.RUNTIME_HOURS).is_not_null())  # first: it is cheap
    if rows.is_empty():
        return Utilisation()
    measured = rows.with_columns(
        achieved_share(rows).alias("_share"),
        _column_or(c.PRECISION, rows.columns, pl.String, None).fill_null(DEFAULT_PRECISION).alias("_precision"),
        (pl.col(c.GPU_TYPE).map_elements(gpu_key, return_dtype=pl.String) if c.GPU_TYPE in rows.columns
         else pl.lit(None, dtype=pl.String)).alias("_gpu"),
    ).filter(pl.col("_share").is_between(lo, hi) & pl.col(LLM_MEM_GB).is_not_null())
    by_type = {(p, g): float(s) for p, g, s, n in measured.filter(pl.col("_gpu").is_not_null())
               .group_by("_precision", "_gpu").agg(pl.col("_share").median(), pl.len()).iter_rows() if n >= min_jobs}
    by_precision = {p: float(s) for p, s, n in measured.group_by("_precision")
                    .agg(pl.col("_share").median(), pl.len()).iter_rows() if n >= min_jobs}
    return Utilisation(by_type, by_precision, measured.height)


def llm_runtime_hours(rows: pl.DataFrame, utilisation: Utilisation) -> pl.Series:
    """The run-time prior of the LLM jobs of `rows` (a built feature frame) at the utilisation learned from the history:
    iterations x FLOPs a step / (the catalogue's peak at the job's precision x the learned share x its GPUs); null
    for the other jobs. GPU-hours = this x `gpu_count`."""
    return rows.select(runtime_expr(utilisation, rows.columns).alias("llm_runtime_hours")).to_series()


def _column_or(name: str, columns: Collection[str], dtype: pl.DataType, default) -> pl.Expr:
    """Column `name` as `dtype` where the frame has it, else `default` for every row (a frame built without it)."""
    return pl.col(name).cast(dtype) if name in columns else pl.repeat(default, pl.len(), dtype=dtype)


def runtime_expr(utilisation: Utilisation, columns: Collection[str]) -> pl.Expr:
    """`llm_runtime_hours` as an expression over a built feature frame whose columns are `columns` (`LLM_GFLOP_PER_ITER`,
    `prior_peak_tflops`, and the contract's): the share of each distinct (precision, GPU type) looked up once. The
    optional contract columns may be missing: no `gpu_type`, the share per precision; no `precision`, the default
    one's; no `iterations`, one; no `gpu_count`, one GPU (the same as where they are null)."""

    def shares(cols: list[pl.Series]) -> pl.Series:
        keys = pl.DataFrame({"p": cols[0], "g": cols[1]})
        distinct = keys.unique()
        distinct = distinct.with_columns(pl.Series("s", [utilisation.share(p, g)[0] for p, g in distinct.rows()],
                                                   dtype=pl.Float64))
        return keys.join(distinct, on=["p", "g"], how="left", nulls_equal=True, maintain_order="left")["s"]

    share = pl.map_batches([_column_or(c.PRECISION, columns, pl.String, None),
                            _column_or(c.GPU_TYPE, columns, pl.String, None)], shares, return_dtype=pl.Float64)
    gpus = _column_or(c.GPU_COUNT, columns, pl.Float64, 1.0).fill_null(1.0).clip(1.0)
    iterations = _column_or(c.ITERATIONS, columns, pl.Float64, 1.0).fill_null(1.0)
    return iterations * pl.col(LLM_GFLOP_PER_ITER) * 1e9 / (pl.col("prior_peak_tflops") * 1e12 * share * gpus) / 3600.0


def with_learned_utilisation(runtime: pl.Expr, utilisation: Utilisation, columns: Collection[str]) -> pl.Expr:
    """The run-time prior column `runtime` (`prior_runtime_hours`) of a frame whose columns are `columns` with its LLM
    jobs' at the utilisation learned from the history (`runtime_expr`) where it learned any (`jobs` > 0); as it was
    otherwise (the stated prior), and for a frame without the LLM prior's columns (no LLM job in it)."""
    if not utilisation.jobs or any(n not in columns for n in (LLM_MEM_GB, LLM_GFLOP_PER_ITER, "prior_peak_tflops")):
        return runtime
    learned = runtime_expr(utilisation, columns)
    return pl.when(pl.col(LLM_MEM_GB).is_not_null() & learned.is_finite()).then(learned).otherwise(runtime)
