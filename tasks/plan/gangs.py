"""A multi-GPU job's GPUs reserved as one gang, on one node when it fits (issue 51 item 6).

A job of `gpu_count` k > 1 (data parallel, FSDP, tensor / pipeline parallel) runs all its ranks in lock step: it
starts when k GPUs are free **at once** and holds all k until it ends (Slurm allocates a job's GRES together).
Tensor parallelism and FSDP's all-gathers need the node's NVLink / NVSwitch, so a job that fits one node is placed on
one node: never on GPUs of two nodes while one node could hold it. The inventory says how many GPUs a node holds
(`gpus_per_node` of an entry, records/inventory.py); without it a type's GPUs are one pool (`starts.fcfs`).

`fcfs_nodes` is `starts.fcfs` (first come, first served, whole GPUs, no backfill) on nodes:

* k <= GPUs a node holds: the node on which k GPUs are free earliest; between nodes free at the same time, the one
  with the fewest GPUs free then (best fit: whole nodes stay free for the larger gangs);
* k > GPUs a node holds: the fewest nodes, those whose GPUs are all free earliest, whole but the last, which gives
  the GPUs left to take (the gang spans nodes: `one_node` False);
* k > the GPUs owned: never starts (NaN), as in `starts.fcfs`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Placement:
    """Where one job runs: its start (hours from the plan's start; NaN: never) and the nodes it holds."""

    start: float
    nodes: tuple[int, ...]

    @property
    def one_node(self) -> bool:
        return len(self.nodes) == 1


def nodes_of(gpus: int, per_node: int) -> list[int]:
    """GPUs of every node: `gpus` owned in nodes of `per_node` (the last one holding what is left)."""
    full, rest = divmod(gpus, per_node)
    return [per_node] * full + ([rest] if rest else [])


def nodes_needed(gpu_count: int, per_node: int | None) -> int | None:
    """The nodes a gang of `gpu_count` GPUs holds: 1 when it fits one node, else whole nodes (None: not known)."""
    return math.ceil(gpu_count / per_node) if per_node else None


def fcfs_nodes(held: np.ndarray, gpus: int, per_node: int, hours: np.ndarray,
               counts: np.ndarray) -> tuple[list[Placement], np.ndarray]:
    """First come, first served on `gpus` GPUs in nodes of `per_node` (see the module doc): each job's placement and
    every GPU's free time after them all. `held`: the free times of GPUs running jobs hold (at most `gpus`), placed on
    the first nodes, the others free at 0."""
    sizes = nodes_of(gpus, per_node)
    flat = np.zeros(gpus)
    flat[:len(held)] = np.sort(np.asarray(held, dtype=np.float64))[::-1]
    free = [np.sort(part) for part in np.split(flat, np.cumsum(sizes)[:-1])]  # per node, ascending
    out = []
    for h, k in zip(hours.tolist(), counts.tolist(), strict=True):
        if k > gpus:
            out.append(Placement(float("nan"), ()))
            continue
        if k <= per_node:
            fits = [n for n, f in enumerate(free) if len(f) >= k]
            if fits:
                # earliest k-th free GPU; then the node with the fewest GPUs free by then (best fit)
                node = min(fits, key=lambda n: (free[n][k - 1], int(np.sum(free[n] <= free[n][k - 1])), n))
                start = float(free[node][k - 1])
                free[node][:k] = start + h
                free[node].sort()
                out.append(Placement(start, (node,)))
                continue
        # spans nodes: whole nodes, those whose last GPU is free earliest
        by_end = sorted(range(len(free)), key=lambda n: (float(free[n][-1]), n))
        chosen, got = [], 0
        for n in by_end:
            chosen.append(n)
            got += len(free[n])
            if got >= k:
                break
        take = [min(len(free[n]), k - sum(len(free[m]) for m in chosen[:i])) for i, n in enumerate(chosen)]
        start = max(float(free[n][t - 1]) for n, t in zip(chosen, take, strict=True))
        for n, t in zip(chosen, take, strict=True):  # the last node gives what is left, its earliest GPUs
            free[n][:t] = start + h
            free[n].sort()
        out.append(Placement(start, tuple(sorted(chosen))))
    return out, np.concatenate(free) if free else np.zeros(0)
