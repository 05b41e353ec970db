"""The public set's maker (tests/data/make_gpumemnet_sample.py) and the shipped sample it wrote."""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl
import pytest

from gpucast.expectations import contract as c
from tests.measured import gpumemnet

sys.path.insert(0, str(Path(__file__).resolve().parent / "data"))
import make_gpumemnet_sample as maker  # noqa: E402

CNN_HEADER = ("Filename,Depth,Activations-Params,Activation Function,Total Activations,Total Parameters,Batch Size,"
              "Max GPU Memory (MiB),Avg GPUTL,Avg GRACT,Avg SMACT,Avg SMOCC,Avg FP32A,Conv2d Count,BatchNorm2d Count,"
              "Dropout Count,AdaptiveAvgPool2d Count,Linear Count,Status")


def cnn_line(size: int, dropout: bool, params: int, mib: int, status: str = "SUCCESSFUL", depth: int = 3) -> str:
    name = (f"input_channels:3_num_classes:10_depth:{depth}_arch:uniform_base_filters:8_batch:4_input_size:{size}"
            f"_act:relu_dropout:0.2_dropout:{dropout}_batchnorm:False.out")
    return f'{name},{depth},"[(\'conv2d\', 1, 2)]",ReLU,100,{params},4,{mib},-1,-1,-1,-1,-1,{depth},0,0,1,1,{status}'


def test_a_window_keeps_only_the_lines_between_its_first_and_last_newline() -> None:
    # the first piece may be the header or the tail of a line cut by the offset; the last, a line cut by the end
    assert maker.whole_lines("tail of a row\nrow 1\nrow 2\nhead of a r") == ["row 1", "row 2"]
    assert maker.whole_lines("no newline at all") == []


def test_the_maker_maps_runs_to_contract_rows_and_leaves_out_what_says_nothing_of_the_need(tmp_path: Path) -> None:
    lines = [cnn_line(32, True, 2_000_000, 2048),  # kept: 2048 MiB = 2.147484 GB
             cnn_line(64, False, 3_000_000, 39_000),  # SUCCESSFUL but at the card's capacity: censored
             cnn_line(64, False, 3_000_000, 38_000, "OOM_CRASH"),  # failed: its maximum is the card's
             cnn_line(2, False, 0, 0, depth=0)]  # the upstream parser read nothing
    text = "\n".join([CNN_HEADER, *lines, "input_channels:3_cut"])
    source = maker.Source("CNN", "cnn_data_step1.csv", "0" * 40, (0,))
    found = list(maker.runs(source, text))
    assert [r.index for r in found] == [0, 1, 2, 3]
    assert [maker.kept(r) for r in found] == [True, False, False, False]
    first = found[0]
    assert (first.input_dim, first.dropout, first.params, first.max_mib) == (32, True, 2_000_000, 2048)
    n = maker.write(found, tmp_path / "sample.csv")
    row = pl.read_csv(tmp_path / "sample.csv").row(0, named=True)
    assert n == 1
    assert row["job_id"] == "gpumemnet-cnn-0-0"
    assert row["peak_gpu_mem_gb"] == pytest.approx(2048 * 1_048_576 / 1e9, abs=1e-6)
    assert (row["params_million"], row["input_dim"], row["num_layers"], row["regularization"]) == (2.0, 32, 3, True)


def test_the_shipped_sample_loads_as_contract_rows() -> None:
    rows = gpumemnet()
    assert rows.height == 349
    assert set(c.FEATURES) <= set(rows.columns)
    assert rows.group_by(c.MODEL_TYPE).len().sort(c.MODEL_TYPE).rows() == [("CNN", 182), ("MLP", 167)]
    assert rows["job_id"].n_unique() == rows.height
    assert rows[c.PEAK_GPU_MEM_GB].min() > 1.0  # every run holds a CUDA context (about 1.45 GiB here)
    assert rows["max_gpu_memory_mib"].max() < maker.CENSORED_MIB
    offsets = {s.path: set(s.offsets) for s in maker.SOURCES}
    assert all(o in offsets[p] for p, o in rows.select("source_path", "source_offset").iter_rows())
