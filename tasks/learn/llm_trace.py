"""One FSDP training step of an LLM traced for its per-GPU peak memory, on CPU, without a GPU (issue 51 item 4).

The way torchtitan's memory estimator does it (scripts/estimate/estimation.py): the model is built under
`FakeTensorMode` (tensors with shapes and dtypes, no storage), sharded with FSDP2's `fully_shard` over a *fake*
process group (`torch.testing._internal.distributed.fake_pg`: every collective returns at once) of the job's
data-parallel size, and torch's `FSDPMemTracker` (torch.distributed._tools.fsdp2_mem_tracker) follows every tensor
one rank allocates through forward, backward and the optimizer step: sharded and all-gathered parameters,
gradients, activations, temporaries, all-gather / reduce-scatter buffers and AdamW's states. Its peak is what
one GPU holds at most (allocated memory: no CUDA context, no caching allocator).

The model is the architecture of the LLM table (`llm_memory.Arch`: hidden, layers, heads, grouped key / value heads,
MLP width, vocabulary), written here as a plain decoder (`Decoder`: RMSNorm, attention through
`scaled_dot_product_attention`, a gated or GPT MLP, untied head; nothing downloaded, no transformers import), so a
table row traces without its checkpoint. Parameters in fp32 with bf16 compute (FSDP2's `MixedPrecisionPolicy`, as
torchtitan trains), one FSDP unit per block plus the root, AdamW, full activation checkpointing per block or none.
Tensor / pipeline parallelism and adapters are not traced: the analytic prior (`llm_memory.per_gpu`) covers them.

Optimizer states are created before the traced step (a step on zero gradients, outside the tracker's window but in
its accounting), so one forward-backward-step gives the steady-state peak: torchtitan runs two iterations for it.
Each configuration's result is cached (`trace_peak(..., cache=folder)`: one JSON file per configuration).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from gpucast.records import files
from gpucast.tasks.learn.llm_memory import Arch

GB = 1e9


@dataclass(frozen=True)
class TraceConfig:
    """What the trace depends on (the cache key)."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    gated: bool
    data_parallel: int
    micro_batch_size: int
    seq_len: int
    checkpointing: bool

    @classmethod
    def of(cls, arch: Arch, data_parallel: int, micro_batch_size: int, seq_len: int, checkpointing: bool) -> TraceConfig:
        return cls(arch.hidden, arch.layers, arch.heads, arch.kv_heads, arch.intermediate, arch.vocab, arch.gated,
                   data_parallel, micro_batch_size, seq_len, checkpointing)

    def key(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class TracedPeak:
    """One rank's peak (GB, allocated) and its parts at their own peaks (FSDPMemTracker's categories, GB)."""

    total_gb: float
    parts_gb: dict[str, float]
    cpu_seconds: float  # what the trace cost (0 when read from the cache)
    cached: bool = False


def _decoder(cfg: TraceConfig):
    """The plain decoder of `cfg` (see the module doc), a torch module."""
    import torch
    import torch.nn.functional as F
    from torch import nn
    from torch.utils.checkpoint import checkpoint

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            h, hd = cfg.hidden, cfg.hidden // cfg.heads
            self.norm1, self.norm2 = nn.RMSNorm(h), nn.RMSNorm(h)
            self.q, self.o = nn.Linear(h, h, bias=False), nn.Linear(h, h, bias=False)
            self.k, self.v = nn.Linear(h, cfg.kv_heads * hd, bias=False), nn.Linear(h, cfg.kv_heads * hd, bias=False)
            self.up, self.down = nn.Linear(h, cfg.intermediate, bias=False), nn.Linear(cfg.intermediate, h, bias=False)
            self.gate = nn.Linear(h, cfg.intermediate, bias=False) if cfg.gated else None

        def block(self, x):
            b, t, h = x.shape  # (micro-batch, tokens, hidden)
            y = self.norm1(x)
            q = self.q(y).view(b, t, cfg.heads, -1).transpose(1, 2)  # (b, heads, t, head size)
            k = self.k(y).view(b, t, cfg.kv_heads, -1).transpose(1, 2)  # (b, kv heads, t, head size)
            v = self.v(y).view(b, t, cfg.kv_heads, -1).transpose(1, 2)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=cfg.kv_heads != cfg.heads)
            x = x + self.o(a.transpose(1, 2).reshape(b, t, h))
            y = self.norm2(x)
            mlp = F.silu(self.gate(y)) * self.up(y) if self.gate is not None else F.gelu(self.up(y))
            return x + self.down(mlp)

        def forward(self, x):
            return checkpoint(self.block, x, use_reentrant=False) if cfg.checkpointing else self.block(x)

    class Decoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(cfg.vocab, cfg.hidden)
            self.blocks = nn.ModuleList(Block() for _ in range(cfg.layers))
            self.norm, self.head = nn.RMSNorm(cfg.hidden), nn.Linear(cfg.hidden, cfg.vocab, bias=False)

        def forward(self, ids):
            x = self.embed(ids)  # (b, t, hidden)
            for block in self.blocks:
                x = block(x)
            logits = self.head(self.norm(x)).float()  # (b, t, vocab), the loss in fp32
            return F.cross_entropy(logits.view(-1, cfg.vocab), ids.view(-1))

    return Decoder(), torch


def trace(cfg: TraceConfig) -> TracedPeak:
    """Trace one FSDP training step of `cfg` (see the module doc). Initialises, and destroys again, a fake default
    process group of `cfg.data_parallel` ranks: run it where no other process group is live."""
    import torch.distributed as dist
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.testing._internal.distributed.fake_pg import FakeStore

    started = time.process_time()
    dist.init_process_group("fake", rank=0, world_size=cfg.data_parallel, store=FakeStore())
    try:
        mesh = init_device_mesh("cpu", (cfg.data_parallel,))
        with FakeTensorMode():
            model, torch = _decoder(cfg)
            policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
            for block in model.blocks:
                fully_shard(block, mesh=mesh, mp_policy=policy)
            fully_shard(model, mesh=mesh, mp_policy=policy)
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
            ids = torch.randint(0, cfg.vocab, (cfg.micro_batch_size, cfg.seq_len))
            tracker = FSDPMemTracker(mod=model, optm=optimizer)
            tracker.track_inputs((ids,))
            with tracker:
                for p in model.parameters():  # AdamW's states made before the traced step (module doc)
                    p.grad = torch.zeros_like(p)
                optimizer.step()
                optimizer.zero_grad()
                tracker.reset_mod_stats()
                model(ids).backward()
                optimizer.step()
                optimizer.zero_grad()
            peak = next(iter(tracker.get_tracker_snapshot("peak").values()))
    finally:
        dist.destroy_process_group()
    parts = {str(getattr(k, "value", k)): v / GB for k, v in peak.items() if str(getattr(k, "value", k)) != "Total"}
    return TracedPeak(peak["Total"] / GB, parts, time.process_time() - started)


def trace_peak(arch: Arch, data_parallel: int, micro_batch_size: int, seq_len: int, checkpointing: bool = True,
               cache: Path | None = None) -> TracedPeak:
    """The traced peak of one rank of `arch` under FSDP over `data_parallel` ranks, read from `cache` (a folder) when
    this configuration was traced before, else traced and written there."""
    cfg = TraceConfig.of(arch, data_parallel, micro_batch_size, seq_len, checkpointing)
    path = cache / f"fsdp-{cfg.key()}.json" if cache else None
    if path is not None and path.exists():
        try:
            saved = json.loads(path.read_text())
            return TracedPeak(saved["total_gb"], saved["parts_gb"], 0.0, cached=True)
        except (json.JSONDecodeError, KeyError):  # an unreadable entry (an older format): traced again, replaced
            pass
    result = trace(cfg)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # atomic: a trace killed mid-write leaves no half entry
        files.write_text(path, json.dumps({"config": asdict(cfg), "total_gb": result.total_gb,
                                           "parts_gb": result.parts_gb, "cpu_seconds": result.cpu_seconds}, indent=1))
    return result
