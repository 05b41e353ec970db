"""Writes `gpumemnet_sample.csv`: a deterministic sample of GPUMemNet's public, measured MLP and CNN training runs.

GPUMemNet (github.com/itu-rad/GPUMemNet; code Apache-2.0, data sets CC BY 4.0 per its NOTICE) trained thousands of
generated MLPs and CNNs for one minute each, one at a time, on one GPU, and logged the largest GPU memory in use
(`Max GPU Memory (MiB)`, from nvidia-smi / dcgmi, so it includes the CUDA context and the caching allocator's
reserve). Its training scripts (`NeuroNetGen_scripts/MLP/mlp.py`, `NeuroNetGen_scripts/CNN/cnn.py`) train in FP32
with `torch.optim.Adam` at its default learning rate (0.001), without data augmentation.

The sample: each upstream file is read in fixed windows of `WINDOW` characters at the offsets in `SOURCES`, and
a window's *whole lines* are the ones between its first and its last newline (the window's first and last
pieces, partial lines or the header, are dropped). That is what a maintainer can redo with the upstream files
at the commits below, and what was read here (through a file index serving 16,000 characters a call, which is
why the sample is windows and not the whole 20 MB).

Mapping to gpucast's job-log contract (docs/contract.md):

| contract column | from |
|---|---|
| `model_type` | `MLP` (the MLP file), `CNN` (the CNN file) |
| `params_million` | `Total Parameters` / 1e6 |
| `batch_size` | `Batch Size` |
| `input_dim` | MLP: `input:N` in `Filename` (input features); CNN: `input_size:N` (pixels per side) |
| `num_layers` | `Depth` (the parser's count of Linear layers for an MLP, of conv layers for a CNN) |
| `iterations` | missing: every run was cut at a time limit (60-75 s), not a step count |
| `precision`, `optimizer`, `learning_rate` | `FP32`, `Adam`, `0.001` (the training scripts) |
| `regularization` | `_dropout:True` in `Filename` (dropout layers; no weight decay) |
| `data_augmentation` | `false` |
| `peak_gpu_mem_gb` | `Max GPU Memory (MiB)` x 1,048,576 / 1e9 (GB, as the contract's unit) |

Rows left out: a CNN run whose `Status` is not `SUCCESSFUL` (`OOM_CRASH`: its maximum is the card's capacity, not
the run's need); a run the upstream parser could not read (`Depth`, `Total Parameters` or the memory 0); and a run
whose maximum is `CENSORED_MIB` or more: the card had 40,960 MiB (the smallest maximum of an `OOM_CRASH` run in
the sample is 36,831 MiB), and several `SUCCESSFUL` runs report 38-40 GB while their own activations alone would
exceed the card, so a maximum that close to capacity says what the card had, not what the job needed.

    .venv/bin/python tests/data/make_gpumemnet_sample.py --upstream DIR   # DIR: the two upstream CSVs, by name
"""

from __future__ import annotations

import argparse
import csv
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

OUT = Path(__file__).resolve().parent / "gpumemnet_sample.csv"
REPO = "itu-rad/GPUMemNet"
WINDOW = 16_000  # characters a window holds
CENSORED_MIB = 36_000  # a maximum at or above this is the 40,960 MiB card's capacity, not the job's need
MIB_GB = 1_048_576 / 1e9


@dataclass(frozen=True)
class Source:
    model_type: str
    path: str  # in the upstream repository
    commit: str
    offsets: tuple[int, ...]  # of the windows, in characters


SOURCES = (
    Source("MLP", "Datasets/MLP/mlp_data_step2.csv", "4fe157bcd00b3bd82f8697da35a62ee2870a3fbc",
           tuple(range(0, 1_890_001, 270_000))),  # 8 windows over the whole file (2.17 million characters)
    Source("CNN", "cnn_data_step1.csv", "a79a76af7733da8ce4f5c648e992938f077cd5a1",
           tuple(range(0, 2_714_001, 118_000))),  # 24 windows over the whole file (2.84 million characters)
)


@dataclass(frozen=True)
class Run:
    """One upstream row, the fields the sample uses."""

    model_type: str
    offset: int  # its window
    index: int  # its place among the window's whole lines
    params: int  # Total Parameters
    batch_size: int
    input_dim: int
    depth: int
    dropout: bool
    max_mib: int
    status: str  # CNN: SUCCESSFUL / OOM_CRASH; MLP: SUCCESSFUL (the file has no status)


def whole_lines(window: str) -> list[str]:
    """The lines between the window's first and last newline."""
    return window.split("\n")[1:-1]


def parse(source: Source, offset: int, index: int, line: str, header: list[str]) -> Run:
    """One whole line of `source` as a `Run`."""
    row = dict(zip(header, next(csv.reader(io.StringIO(line))), strict=True))
    name = row["Filename"]
    size = re.search(r"input:(\d+)_" if source.model_type == "MLP" else r"input_size:(\d+)_", name)
    return Run(source.model_type, offset, index, int(row["Total Parameters"]), int(row["Batch Size"]),
               int(size.group(1)) if size else 0, int(row["Depth"]), "_dropout:True_" in name,
               int(float(row["Max GPU Memory (MiB)"])), row.get("Status", "SUCCESSFUL"))


def runs(source: Source, text: str) -> Iterator[Run]:
    """Every whole line of every window of `source` in the upstream file's `text`."""
    header = next(csv.reader(io.StringIO(text.split("\n", 1)[0])))
    for offset in source.offsets:
        for index, line in enumerate(whole_lines(text[offset:offset + WINDOW])):
            yield parse(source, offset, index, line, header)


def kept(run: Run) -> bool:
    """A completed run whose maximum says what it needed (the module's docstring, "Rows left out")."""
    return (run.status == "SUCCESSFUL" and run.params > 0 and run.depth > 0 and run.input_dim > 0
            and 0 < run.max_mib < CENSORED_MIB)


COLUMNS = ("job_id", "model_type", "params_million", "batch_size", "input_dim", "num_layers", "iterations",
           "precision", "optimizer", "learning_rate", "regularization", "data_augmentation", "peak_gpu_mem_gb",
           "max_gpu_memory_mib", "source_path", "source_offset")


def contract_row(run: Run) -> dict[str, object]:
    """`run` as a row of the sample: the contract's columns, then where it came from."""
    source = next(s for s in SOURCES if s.model_type == run.model_type)
    return {"job_id": f"gpumemnet-{run.model_type.lower()}-{run.offset}-{run.index}", "model_type": run.model_type,
            "params_million": f"{run.params / 1e6:.6f}", "batch_size": run.batch_size, "input_dim": run.input_dim,
            "num_layers": run.depth, "iterations": "", "precision": "FP32", "optimizer": "Adam",
            "learning_rate": 0.001, "regularization": str(run.dropout).lower(), "data_augmentation": "false",
            "peak_gpu_mem_gb": f"{run.max_mib * MIB_GB:.6f}", "max_gpu_memory_mib": run.max_mib,
            "source_path": source.path, "source_offset": run.offset}


def write(all_runs: list[Run], out: Path = OUT) -> int:
    """Writes the kept runs to `out`; returns how many."""
    rows = [contract_row(r) for r in all_runs if kept(r)]
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    return len(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--upstream", type=Path, required=True,
                    help="a folder holding mlp_data_step2.csv and cnn_data_step1.csv at the commits in SOURCES")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    found = [r for s in SOURCES for r in runs(s, (args.upstream / Path(s.path).name).read_text())]
    print(f"{len(found)} whole lines read, {write(found, args.out)} kept -> {args.out}")


if __name__ == "__main__":
    main()
