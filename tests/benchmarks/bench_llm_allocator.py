"""What ms-swift v1's Benchmark.md measured beyond what its LoRA steps allocate (issue 50 / 51, session 19): a Qwen-1
LoRA step traced on meta tensors, replayed through a model of torch 2.1's CUDA caching allocator, over a run of samples
whose lengths vary below the cap.

The set's 107 Benchmark.md rows are `torch.cuda.max_memory_reserved` of `swift sft` runs on cls-fudan-news-zh (3,234
+- 2,548 tokens a sample, max_length a cap; swift v1's default `truncation_strategy` 'delete' drops the longer ones).
What the step allocates is what docs/models.md counts (the head's chain ~12 B a logit). What the allocator reserves
grows each time a sample longer than every one before arrives: its logits-sized requests find no cached block large
enough, so new segments are made, and the smaller ones stay cached (nothing is released while the GPU has room).

* `trace_steps`: the allocation and free of every storage, in order, of training steps on `lengths` tokens (a
  `TorchDispatchMode` on meta tensors, so nothing is computed). The model mirrors Qwen-1's remote modeling_qwen.py:
  fp32 RMSNorm cast back, `c_attn` with bias and a rank-8 LoRA (fp32 weights, dropout) on it, fp32 rotary, flash
  attention (out and its fp32 log-sum-exp saved; its backward's fp32 dq accumulator), the w1 / w2 / c_proj MLP, every
  block under reentrant checkpointing with PEFT's `enable_input_require_grads`, `lm_head`, the shifted `.contiguous()`
  logits and a cross-entropy on their fp32 cast (torch autocast); around it accelerate's `convert_outputs_to_fp32` and
  swift v1's `compute_loss` (`outputs.logits.argmax(dim=2)`), then foreach AdamW over the LoRA weights.
* `Allocator`: c10/cuda/CUDACachingAllocator.cpp as of torch 2.1, one stream, default settings: sizes rounded up to
  512 B; requests <= 1 MiB from the small pool in 2 MiB segments, 1-10 MiB ones from 20 MiB segments, larger ones
  from segments of their size rounded up to 2 MiB; best fit (the smallest free block of the pool large enough, the
  lowest address on ties); a block split when the rest is >= 512 B (small pool) or > 1 MiB (large); a freed block
  merged with the free neighbours of its segment; no segment released.
* `run`: a long run without tracing every step: each allocation of a step is a x tokens + b, read off the same event
  of two traced lengths (exact for these shapes: tests/tasks/learn/test_bench_llm_allocator.py).

    PYTHONPATH=$PWD .venv/bin/python tests/benchmarks/bench_llm_allocator.py --model Qwen-7B --cap 2048 --samples 1000
"""

from __future__ import annotations

import argparse
import bisect
import weakref
from dataclasses import dataclass

import numpy as np

from gpucast.tasks.learn import llm_memory as m

MIB = 1 << 20
SMALL, SMALL_SEGMENT, MID_SEGMENT, MID_LIMIT, ROUND_LARGE = MIB, 2 * MIB, 20 * MIB, 10 * MIB, 2 * MIB
LORA_RANK = 8  # swift v1's default `lora_rank`, on `c_attn` (its DEFAULT target for Qwen)
# cls-fudan-news-zh's tokens a sample by Qwen's tokenizer (Benchmark.md: 3234.4 +- 2547.5, min 91): a log-normal of
# that mean and deviation
MEAN_TOKENS, SD_TOKENS, MIN_TOKENS = 3234.4, 2547.5, 91


# --- the trace ------------------------------------------------------------------------------------------------
def _mode():
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class Trace(TorchDispatchMode):
        """Every new storage an op returns (`("a", key, bytes)`) and its end (`("f", key, 0)`), in order."""

        def __init__(self):
            super().__init__()
            self.events: list[tuple] = []
            self.keys: dict[int, int] = {}

        def note(self, t) -> None:
            storage = t.untyped_storage()
            if id(storage) in self.keys:
                return
            key = len(self.events)
            self.keys[id(storage)] = key
            self.events.append(("a", key, storage.nbytes()))
            weakref.finalize(storage, self._end, id(storage), key)

        def _end(self, sid: int, key: int) -> None:
            self.keys.pop(sid, None)
            self.events.append(("f", key, 0))

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor):
                    self.note(t)
            return out

    return Trace()


def _qwen(arch: m.Arch):
    """Qwen-1's LoRA training model on meta tensors (the module docstring)."""
    import torch
    import torch.nn.functional as F
    from torch.utils.checkpoint import checkpoint

    bf16 = torch.bfloat16

    def param(*shape, dtype=bf16, trained=False):
        return torch.nn.Parameter(torch.empty(*shape, dtype=dtype, device="meta"), requires_grad=trained)

    def rms(x, w):  # modeling_qwen.py RMSNorm without the fused kernel: in fp32, cast back
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).type_as(x) * w

    class Flash(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v):
            q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
            out = torch.empty_like(q)
            lse = torch.empty(q.shape[0], q.shape[2], q.shape[1], dtype=torch.float32, device=q.device)
            ctx.save_for_backward(q, k, v, out, lse)
            return out

        @staticmethod
        def backward(ctx, grad):
            q, k, v, out, lse = ctx.saved_tensors
            dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
            softmax_d, dq_accum = torch.empty_like(lse), torch.empty(q.shape, dtype=torch.float32, device=q.device)
            del softmax_d, dq_accum
            return dq, dk, dv

    h, inner = arch.hidden, arch.intermediate

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = param(h), param(h)
            self.c_attn, self.c_attn_bias, self.c_proj = param(3 * h, h), param(3 * h), param(h, h)
            self.lora_A = param(LORA_RANK, h, dtype=torch.float32, trained=True)
            self.lora_B = param(3 * h, LORA_RANK, dtype=torch.float32, trained=True)
            self.w1, self.w2, self.mlp_proj = param(inner, h), param(inner, h), param(h, inner)

        def rotary(self, t):  # apply_rotary_pos_emb in fp32
            tf = t.float()
            half = tf.shape[-1] // 2
            return (tf * 0.5 + torch.cat((-tf[..., half:], tf[..., :half]), dim=-1) * 0.5).type_as(t)

        def forward(self, x):
            b, s, _ = x.shape  # [batch, tokens, hidden]
            y = rms(x, self.ln_1)
            lora = F.linear(F.linear(F.dropout(y, 0.05, True), self.lora_A.to(bf16)), self.lora_B.to(bf16)) * 4.0
            qkv = F.linear(y, self.c_attn, self.c_attn_bias) + lora  # [b, s, 3h]
            q, k, v = (t.reshape(b, s, arch.heads, h // arch.heads) for t in qkv.split(h, dim=2))
            x = x + F.linear(Flash.apply(self.rotary(q), self.rotary(k), v).reshape(b, s, h), self.c_proj)
            y = rms(x, self.ln_2)
            return x + F.linear(F.linear(y, self.w1) * F.silu(F.linear(y, self.w2)), self.mlp_proj)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.lm_head, self.ln_f = param(arch.vocab, h), param(arch.vocab, h), param(h)
            self.blocks = torch.nn.ModuleList(Block() for _ in range(arch.layers))

        def forward(self, ids):
            x = F.embedding(ids, self.wte).requires_grad_(True)  # PEFT's enable_input_require_grads
            for block in self.blocks:
                x = checkpoint(block, x, use_reentrant=True)
            logits = F.linear(rms(x, self.ln_f), self.lm_head)  # [b, s, vocab], 16-bit
            shift = logits[..., :-1, :].contiguous()
            loss = F.cross_entropy(shift.view(-1, arch.vocab).float(), ids[..., 1:].reshape(-1))  # autocast: fp32
            return loss, logits

    return Model()


def trace_steps(arch: m.Arch, lengths: list[int], batch: int = 1) -> list[tuple]:
    """The allocation events of the weights, then one training step per entry of `lengths` (tokens a sample, each
    step a micro-batch of `batch` such samples), each step opened by a `("m", step, tokens)` mark and the last closed
    by `("m", len(lengths), 0)`."""
    import torch

    trace = _mode()
    with trace:
        model = _qwen(arch)
        for weight in model.parameters():
            trace.note(weight)
        lora = [w for w in model.parameters() if w.requires_grad]
        moments = []
        for step, n in enumerate(lengths):
            trace.events.append(("m", step, n))
            ids = torch.zeros(batch, n, dtype=torch.long, device="meta")
            loss, logits = model(ids)
            logits = logits.float()  # accelerate's convert_outputs_to_fp32 on the model's outputs
            accuracy = (logits.argmax(dim=2)[..., :-1] == ids[..., 1:]).float().mean()  # swift v1's compute_loss
            del logits, accuracy
            loss.backward()
            del loss
            if not moments:
                moments = [(torch.zeros_like(w), torch.zeros_like(w)) for w in lora]
            roots = [torch.sqrt(v) for _, v in moments]  # foreach AdamW's temporary
            del roots
            for w in lora:
                w.grad = None
        trace.events.append(("m", len(lengths), 0))  # the end: what is freed after it is the model's teardown
    return trace.events


# --- the allocator --------------------------------------------------------------------------------------------
class Block:
    __slots__ = ("ptr", "size", "free", "prev", "next", "small")

    def __init__(self, ptr: int, size: int, small: bool):
        self.ptr, self.size, self.free, self.prev, self.next, self.small = ptr, size, True, None, None, small


class Allocator:
    """torch 2.1's CUDA caching allocator, one stream, default settings (the module docstring). `reserved`: the bytes
    of its segments; `allocated`: of its blocks in use (rounded sizes, as torch counts them); `peak_*` their maxima."""

    def __init__(self):
        self.free_blocks: dict[bool, list[tuple[int, int, int]]] = {True: [], False: []}  # (size, ptr, id) sorted
        self.blocks: dict[int, Block] = {}
        self.next_ptr = 0
        self.reserved = self.allocated = self.peak_reserved = self.peak_allocated = 0

    def _cache(self, b: Block) -> None:
        bisect.insort(self.free_blocks[b.small], (b.size, b.ptr, id(b)))
        self.blocks[id(b)] = b

    def _uncache(self, b: Block) -> None:
        pool = self.free_blocks[b.small]
        pool.pop(bisect.bisect_left(pool, (b.size, b.ptr, id(b))))

    def malloc(self, nbytes: int) -> Block:
        size = 512 if nbytes < 512 else 512 * -(-nbytes // 512)
        small = size <= SMALL
        pool = self.free_blocks[small]
        at = bisect.bisect_left(pool, (size, -1, -1))
        if at < len(pool):  # best fit
            b = self.blocks[pool[at][2]]
            self._uncache(b)
        else:  # a new segment
            segment = SMALL_SEGMENT if small else MID_SEGMENT if size < MID_LIMIT else ROUND_LARGE * -(-size // ROUND_LARGE)
            b = Block(self.next_ptr, segment, small)
            self.next_ptr += segment + (1 << 40)  # segments are never neighbours
            self.reserved += segment
        rest = b.size - size
        if rest >= 512 if small else rest > SMALL:
            r = Block(b.ptr + size, rest, small)
            r.prev, r.next = b, b.next
            if b.next:
                b.next.prev = r
            b.next, b.size = r, size
            self._cache(r)
        b.free = False
        self.allocated += b.size
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        return b

    def release(self, b: Block) -> None:
        b.free = True
        self.allocated -= b.size
        if b.prev is not None and b.prev.free:  # merge into the free block before
            b = self._absorb(b.prev, b, cached=b.prev)
        if b.next is not None and b.next.free:  # and take in the free one after
            b = self._absorb(b, b.next, cached=b.next)
        self._cache(b)

    def _absorb(self, left: Block, right: Block, cached: Block) -> Block:
        """`left` grown by its neighbour `right`; `cached`, the one of them in the cache, leaves it."""
        self._uncache(cached)
        left.size, left.next = left.size + right.size, right.next
        if right.next:
            right.next.prev = left
        return left


def replay(events: list[tuple]) -> list[tuple[float, float]]:
    """(peak allocated, peak reserved) bytes after each step of a trace (`trace_steps`) replayed through `Allocator`."""
    allocator, live, out, steps = Allocator(), {}, [], sum(e[0] == "m" for e in events) - 1
    for kind, key, size in events:
        if kind == "m":
            if key:
                out.append((allocator.peak_allocated, allocator.peak_reserved))
            if key == steps:
                break
        elif kind == "a":
            live[key] = allocator.malloc(size) if size else None
        elif (block := live.pop(key, None)) is not None:
            allocator.release(block)
    return out


# --- a long run -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Peak:
    samples: int
    longest: int  # tokens a step, the largest so far
    allocated_gb: float
    reserved_gb: float


def _templates(events: list[tuple]) -> tuple[list, list[list]]:
    """(the weights' events, [the first, second and third step's events]) of a three-step trace, each step's events as
    (kind, ref, size). The first step's and the weights' storages are named by their trace key: ("abs", key). The
    second's and third's by their place in their step: a free's ref is ("self", place) for one of its own step,
    ("prev", place) for one of the step before (the second and third steps are alike, place for place)."""
    marks = [i for i, e in enumerate(events) if e[0] == "m"]
    pre = events[: marks[0]]
    spans = [events[marks[i] + 1: marks[i + 1]] for i in range(3)]
    places = [{e[1]: j for j, e in enumerate(span) if e[0] == "a"} for span in spans]
    out = []
    for i, span in enumerate(spans):
        steps = []
        for j, (kind, key, size) in enumerate(span):
            if i == 0:
                steps.append((kind, ("abs", key), size))
            elif kind == "a":
                steps.append(("a", ("self", j), size))
            elif key in places[i]:
                steps.append(("f", ("self", places[i][key]), 0))
            elif i == 2 and key in places[1]:
                steps.append(("f", ("prev", places[1][key]), 0))
            else:
                steps.append(("f", ("abs", key), 0))
        out.append(steps)
    return pre, out


def run(arch: m.Arch, lengths: list[int], batch: int = 1, at: tuple[int, ...] = (10, 30, 100, 300, 1000, 3000),
        traced: tuple[int, int] = (1000, 2000)) -> list[Peak]:
    """Peak allocated and reserved after the steps of `lengths` (tokens a sample; each step `batch` of them, padded to
    the longest): every step's events as a x tokens + b from two traced lengths (`traced`), replayed through
    `Allocator`. One `Peak` at each count of steps in `at` and at the end."""
    n1, n2 = traced
    pre, one = _templates(trace_steps(arch, [n1] * 3, batch))
    _, two = _templates(trace_steps(arch, [n2] * 3, batch))

    def affine(a, b):
        assert [e[:2] for e in a] == [e[:2] for e in b], "the two traces differ in their events"
        return [(kind, ref, s1 - (s2 - s1) / (n2 - n1) * n1, (s2 - s1) / (n2 - n1))
                for (kind, ref, s1), (_, _, s2) in zip(a, b, strict=True)]

    templates = [affine(a, b) for a, b in zip(one, two, strict=True)]
    allocator = Allocator()
    absolute: dict = {("abs", key): allocator.malloc(size) for kind, key, size in pre if kind == "a" and size}
    before: dict[tuple, Block | None] = {}
    peaks, longest = [], 0
    for step, n in enumerate(lengths):
        longest = max(longest, n)
        now: dict[tuple, Block | None] = {}
        for kind, ref, b, a in templates[min(step, 2)]:
            held = absolute if ref[0] == "abs" else now
            if kind == "a":
                size = max(0, round(b + a * n))
                held[ref] = allocator.malloc(size) if size else None
                continue
            block = before.pop(("self", ref[1]), None) if ref[0] == "prev" else held.pop(ref, None)
            if block is not None:
                allocator.release(block)
        before = now
        if step + 1 in at or step + 1 == len(lengths):
            peaks.append(Peak(step + 1, longest, allocator.peak_allocated / 1e9, allocator.peak_reserved / 1e9))
    return peaks


def sample_lengths(cap: int, samples: int, seed: int = 0, batch: int = 1) -> list[int]:
    """Tokens a step of `samples` samples of the benchmark's dataset (`MEAN_TOKENS` +- `SD_TOKENS`, log-normal),
    those over `cap` deleted, `batch` a step padded to its longest."""
    sigma2 = np.log1p((SD_TOKENS / MEAN_TOKENS) ** 2)
    drawn = np.random.default_rng(seed).lognormal(np.log(MEAN_TOKENS) - sigma2 / 2, np.sqrt(sigma2), samples * 200)
    kept = drawn[(drawn <= cap) & (drawn >= MIN_TOKENS)].astype(int)[:samples]
    return [int(kept[i: i + batch].max()) for i in range(0, len(kept) - batch + 1, batch)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="Qwen-7B", help="a Qwen-1 model of the LLM families table")
    ap.add_argument("--cap", type=int, default=2048, help="max_length: samples above it are deleted")
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--fixed", action="store_true", help="every sample exactly `--cap` tokens (no variation)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    arch = m.lookup(args.model)
    lengths = [args.cap] * (args.samples // args.batch) if args.fixed else sample_lengths(args.cap, args.samples, args.seed,
                                                                                          args.batch)
    for p in run(arch, lengths, args.batch):
        print(f"{args.model} cap {args.cap} batch {args.batch}{' fixed' if args.fixed else ''}: after {p.samples:5d} steps "
              f"(longest {p.longest}): peak allocated {p.allocated_gb:6.2f} GB, peak reserved {p.reserved_gb:6.2f} GB")


if __name__ == "__main__":
    main()
