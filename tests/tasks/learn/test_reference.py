"""The zoo's reference set as training rows (`tasks/learn/reference.py`): the shipped file, and the bad files
training must go on without (with a warning naming the file and the row)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucast.expectations import contract as c
from gpucast.tasks.learn import reference, traced

SHIPPED = Path(__file__).resolve().parents[2] / "data" / "reference_archs.csv"


def test_the_shipped_reference_set_loads_as_traced_training_rows():
    ref = reference.load(SHIPPED)
    assert ref.warning is None and ref.rows.height >= 300
    rows = ref.rows
    assert rows[c.STATUS].unique().to_list() == ["COMPLETED"] and rows[c.JOB_ID].str.starts_with("zoo-").all()
    assert rows[traced.TRACED_MEM_GB].null_count() == 0 and rows["prior_mem_gb"].equals(rows[traced.TRACED_MEM_GB], check_names=False)
    first = rows.row(0, named=True)
    assert first[traced.TRACED_MEM_GB] == pytest.approx(traced.reported_gb(float(first["tensor_peak_gb"]) * 1e9))


def head(n: int) -> str:
    return "".join(SHIPPED.read_text().splitlines(keepends=True)[:n])


@pytest.mark.parametrize(("content", "words"), [
    (None, "is missing"),
    ("", "unreadable"),
    (head(1), "no rows"),
    ("job_id,arch\nref-1,vgg16\n", "missing column(s) model_type"),
    (head(3) + "ref-x,vgg16,vgg,CNN,,,\n", "line 4: params_million must be a positive number"),  # a truncated row
])
def test_a_missing_or_corrupt_reference_set_is_a_warning_not_an_error(tmp_path, content, words):
    path = tmp_path / "reference_archs.csv"
    if content is not None:
        path.write_text(content)
    ref = reference.load(path)
    assert ref.rows is None
    assert str(path) in ref.warning and words in ref.warning and ref.warning.endswith("training goes on without it")


def test_a_negative_memory_is_named_with_its_line(tmp_path):
    lines = SHIPPED.read_text().splitlines()
    header = lines[0].split(",")
    row = lines[2].split(",")
    row[header.index("peak_gpu_mem_gb")] = "-1.0"
    path = tmp_path / "ref.csv"
    path.write_text("\n".join([lines[0], lines[1], ",".join(row)]) + "\n")
    warning = reference.load(path).warning
    assert "line 3: peak_gpu_mem_gb must be a positive number" in warning
