"""Mapping files: refused with their file and line; applied value by value; read through by the readers."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpucast.expectations import contract as c
from gpucast.tasks.ingest.normalize import normalize
from gpucast.tasks.ingest.readers import FileInfo, read_chunks
from gpucast.tasks.sources.mapping import MappingError, check_files, load_mapping
from tests.conftest import write

MAPPING = """\
fields:
  job_id: JobID
  submitted_at: {column: Submit, format: "%d/%m/%Y %H:%M"}
  status: State
  model_type: Arch
  peak_gpu_mem_gb: {column: MaxGPUMem, unit: MiB}
  runtime_hours: {column: Elapsed, unit: seconds}
  gpu_demand_gflops: {column: Throughput, unit: TFLOPS}
values:
  status: {DONE: COMPLETED, ERR: failed}
  precision: {half: FP16, NO: FP32}
constants:
  queue: a100-80g
"""


def mapping(tmp_path, text=MAPPING):
    return load_mapping(write(tmp_path / "m.yaml", text))


def refusal(tmp_path, text) -> str:
    with pytest.raises(MappingError) as err:
        mapping(tmp_path, text)
    return str(err.value).replace(str(tmp_path / "m.yaml"), "m.yaml")


@pytest.mark.parametrize(("text", "expected"), [
    ("fields:\n  job_id: JobID\n  gpu_mem: Mem\n",
     "m.yaml:3: unknown contract field 'gpu_mem' (fields: job_id, submitted_at,"),
    ("fields:\n  job_id: JobID\n\n  peak_gpu_mem_gb: {column: Mem, unit: MiBs}\n",
     "m.yaml:4: unknown unit 'MiBs' for peak_gpu_mem_gb (units: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)"),
    ("fields:\n  batch_size: {column: BS, unit: KB}\n",
     "m.yaml:2: batch_size has no unit to convert to (samples); units apply to gpu_peak_tflops, "
     "gpu_demand_gflops, peak_gpu_mem_gb, runtime_hours"),
    ("constants:\n  queue: !!python/object/apply:os.system [echo hi]\n",
     "m.yaml:2: YAML tags are not allowed (tag:yaml.org,2002:python/object/apply:os.system)"),
    ("fields:\n  job_id: !custom JobID\n", "m.yaml:2: YAML tags are not allowed (!custom)"),
    ("- job_id\n- status\n", "m.yaml:1: a mapping file must be a mapping"),
    ("fields:\n  - job_id\n", "m.yaml:2: `fields` must be a mapping"),
    ("field:\n  job_id: JobID\n", "m.yaml:1: unknown section 'field' (sections: fields, values, constants)"),
    ("fields:\n  job_id: JobID\n  job_id: Id\n", "m.yaml:3: 'job_id' is given twice in one mapping (first on line 2)"),
    ("fields:\n  job_id: JobID\n  'job_id ': Id\n", "m.yaml:3: 'job_id' is given twice (first on line 2, written another"),
    ("values:\n  status:\n    1: COMPLETED\n    '1': FAILED\n", "m.yaml:4: '1' is given twice (first on line 3, written"),
    ("fields:\n  job_id: JobID\n  team: jobid\n", "m.yaml:3: column 'jobid' is already mapped, at line 2"),
    ("fields:\n  queue: Partition\nconstants:\n  queue: a100\n",
     "m.yaml:4: queue is both a column in `fields` and a constant; keep one"),
    ("constants:\n  job_id: x\n", "m.yaml:2: job_id cannot be a constant"),
    ("constants:\n  gpu_count: two\n", "m.yaml:2: gpu_count: 'two' is not a number"),
    ("constants:\n  queue:\n", "m.yaml:2: the constant queue is missing"),
    ("values:\n  status: {DONE: FINISHED_OK}\n",
     "m.yaml:2: 'FINISHED_OK' is not a status (one of PENDING, RUNNING, COMPLETED, FAILED, CANCELLED)"),
    ("values:\n  runtime_hours: {x: 1}\n", "m.yaml:2: value maps rename names (runtime_hours is a float)"),
    ("fields:\n  runtime_hours: {column: T, format: '%H'}\n", "m.yaml:2: `format` is for timestamps"),
    ("fields:\n  runtime_hours: {col: T}\n", "m.yaml:2: unknown key 'col' for runtime_hours"),
    ("fields:\n  job_id: [a\n", "m.yaml:3: not valid YAML"),
    ("", "m.yaml:1: empty; write the sections fields, values, constants"),
])
def test_a_bad_mapping_is_refused_with_its_file_and_line(tmp_path, text, expected):
    assert refusal(tmp_path, text).startswith(expected)


def test_a_missing_mapping_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="mapping file .*nope.yaml not found"):
        load_mapping(tmp_path / "nope.yaml")


def test_a_mapping_is_read_as_written(tmp_path):
    m = mapping(tmp_path)
    assert m.columns == {"JobID": "job_id", "Submit": "submitted_at", "State": "status", "Arch": "model_type",
                         "MaxGPUMem": "peak_gpu_mem_gb", "Elapsed": "runtime_hours", "Throughput": "gpu_demand_gflops"}
    # multiply, divide: 2^20 / 10^9 bytes, 1 / 3600 hours, 10^12 / 10^9 FLOP/s, reduced
    assert m.scale == {"peak_gpu_mem_gb": (2048, 1953125), "runtime_hours": (1, 3600), "gpu_demand_gflops": (1000, 1)}
    # keys matched without case; YAML's `NO` stays the text "no" (not false)
    assert m.values == {"status": {"done": "COMPLETED", "err": "failed"}, "precision": {"half": "FP16", "no": "FP32"}}
    assert m.constants == {"queue": "a100-80g"}
    assert len(m.sha256) == 64


def apply(tmp_path, field: str, unit: str, values: list[str | None]) -> list[str | None]:
    m = mapping(tmp_path, f"fields:\n  {field}: {{column: X, unit: {unit}}}\n")
    return m.apply(pl.DataFrame({field: values}, schema={field: pl.String}))[field].to_list()


@pytest.mark.parametrize(("field", "unit", "given", "expected"), [
    ("peak_gpu_mem_gb", "MiB", "1024", 1.073741824),   # 1024 x 2^20 bytes
    ("peak_gpu_mem_gb", "mib", "81920", 85.89934592),  # an 80 GiB card, in decimal GB
    ("peak_gpu_mem_gb", "MB", "1500", 1.5),
    ("peak_gpu_mem_gb", "GiB", "2", 2.147483648),
    ("peak_gpu_mem_gb", "KB", "250000", 0.25),
    ("peak_gpu_mem_gb", "B", "3000000000", 3.0),
    ("peak_gpu_mem_gb", "GB", " 12.5 ", 12.5),
    ("runtime_hours", "seconds", "5400", 1.5),
    ("runtime_hours", "s", "90", 0.025),
    ("runtime_hours", "minutes", "45", 0.75),
    ("runtime_hours", "days", "2", 48.0),
    ("gpu_demand_gflops", "TFLOPS", "1.5", 1500.0),
    ("gpu_demand_gflops", "PFLOPS", "0.002", 2000.0),
    ("gpu_peak_tflops", "GFLOPS", "312000", 312.0),
])
def test_units_convert_value_by_value(tmp_path, field, unit, given, expected):
    (out,) = apply(tmp_path, field, unit, [given])
    assert float(out) == pytest.approx(expected, rel=1e-12)


def test_a_value_a_conversion_cannot_read_is_left_for_the_rules(tmp_path):
    # text stays text ("'abc' is not a number" follows); missing stays missing; NaN stays not finite
    assert apply(tmp_path, "runtime_hours", "s", ["abc", "", "n/a", None, "NaN", "-36"]) == [
        "abc", "", "n/a", None, "NaN", "-0.01"]


def test_timestamps_formats_value_maps_and_constants(tmp_path):
    m = mapping(tmp_path, MAPPING + "  regularization: 'NO'\n")
    chunk = pl.DataFrame({"submitted_at": ["01/11/2026 10:30", "2026-11-01", None],
                          "status": ["DONE", " err ", "Pending"], "precision": ["HALF", "no", "bf16"],
                          "queue": ["x", "y", "z"]})
    out = m.apply(chunk)
    assert out["submitted_at"].to_list() == ["2026-11-01T10:30:00.000000Z", "2026-11-01", None]  # unreadable: as given
    assert out["status"].to_list() == ["COMPLETED", "failed", "Pending"]  # unmapped values pass through
    assert out["precision"].to_list() == ["FP16", "FP32", "bf16"]
    assert out["queue"].to_list() == ["a100-80g"] * 3  # the constant wins over a column
    assert out["regularization"].to_list() == ["NO"] * 3


def test_a_format_with_an_offset_is_converted_to_utc(tmp_path):
    m = mapping(tmp_path, "fields:\n  submitted_at: {column: S, format: '%Y-%m-%d %H:%M:%S%z'}\n")
    out = m.apply(pl.DataFrame({"submitted_at": ["2026-11-01 12:00:00+0200"]}))
    assert out["submitted_at"].to_list() == ["2026-11-01T10:00:00.000000Z"]


EXPORT = (
    "JobID,Submit,State,Arch,MaxGPUMem,Elapsed,Throughput,precision,queue,id\n"
    "j1,01/11/2026 10:30,DONE,CNN,1024,5400,1.5,half,ignored,other-1\n"
    "j2,02/11/2026 00:00,ERR,MLP,abc,60,2,fp32,ignored,other-2\n"
)


def typed(path, m) -> tuple[pl.DataFrame, FileInfo]:
    info = FileInfo(path, mapping=m)
    return normalize(pl.concat(list(read_chunks(path, info)), how="diagonal")), info


def test_a_csv_export_read_through_the_mapping(tmp_path):
    m = mapping(tmp_path)
    df, info = typed(write(tmp_path / "export.csv", EXPORT), m)
    j1, j2 = df.to_dicts()
    assert j1[c.JOB_ID] == "j1" and j2[c.JOB_ID] == "j2"  # `id` (an alias of job_id) is ignored: JobID is mapped
    assert j1[c.SUBMITTED_AT] == datetime(2026, 11, 1, 10, 30, tzinfo=UTC)
    assert (j1[c.STATUS], j2[c.STATUS]) == ("COMPLETED", "FAILED")
    assert (j1[c.MODEL_TYPE], j1[c.PRECISION], j2[c.PRECISION]) == ("CNN", "FP16", "FP32")
    assert (j1[c.QUEUE], j2[c.QUEUE]) == ("a100-80g", "a100-80g")
    assert j1[c.PEAK_GPU_MEM_GB] == pytest.approx(1.073741824)
    assert (j1[c.RUNTIME_HOURS], j1[c.GPU_DEMAND_GFLOPS]) == (1.5, 1500.0)
    assert j1["_errors"] == []
    assert j2["_errors"] == ["peak_gpu_mem_gb: 'abc' is not a number"]
    assert info.ignored_columns == {"queue", "id"}
    # a rejected row keeps the record as the export wrote it
    assert j2["_raw"].startswith('{"JobID":"j2","Submit":"02/11/2026 00:00","State":"ERR",')


def test_json_lines_and_parquet_read_through_the_mapping(tmp_path):
    m = mapping(tmp_path)
    lines = ('{"JobID": "j1", "Submit": "01/11/2026 10:30", "State": "done", "Arch": "GRU", "Elapsed": 7200}\n'
             '{"JobID": "j2", "Submit": "01/11/2026 11:00", "State": "ERR", "Arch": "GRU", "MaxGPUMem": 2048}\n')
    df, _ = typed(write(tmp_path / "e.jsonl", lines), m)
    assert df.select(c.JOB_ID, c.STATUS, c.QUEUE, c.RUNTIME_HOURS).rows() == [
        ("j1", "COMPLETED", "a100-80g", 2.0), ("j2", "FAILED", "a100-80g", None)]
    assert df[c.PEAK_GPU_MEM_GB][1] == pytest.approx(2.147483648)  # a key past the first line is still read

    table = pa.table({"JobID": ["p1"], "Submit": ["01/11/2026 09:00"], "State": ["DONE"], "Arch": ["CNN"],
                      "MaxGPUMem": [512.0], "batch_size": [32]})
    pq.write_table(table, tmp_path / "e.parquet")
    df, _ = typed(tmp_path / "e.parquet", m)
    assert df.select(c.JOB_ID, c.STATUS, c.BATCH_SIZE).rows() == [("p1", "COMPLETED", 32)]  # contract names pass
    assert df[c.PEAK_GPU_MEM_GB][0] == pytest.approx(0.536870912)


def test_files_the_mapping_does_not_fit_are_named(tmp_path):
    m = mapping(tmp_path)
    ok = write(tmp_path / "export.csv", EXPORT)
    jsonl = write(tmp_path / "any.jsonl", '{"job_id": "a"}\n')  # JSON Lines: each line on its own, later
    check_files(m, [ok, jsonl])
    other = write(tmp_path / "other.csv", "JobID,State,Arch,MaxGPUMem\nj1,DONE,CNN,1\n")
    with pytest.raises(MappingError) as err:
        check_files(m, [ok, other])
    assert str(err.value) == (
        f"{other}: not the export {m.path} describes: no column(s) Submit, Elapsed, Throughput in its header "
        "(found JobID, State, Arch, MaxGPUMem); ingest it with its own mapping, or without --mapping")
    sheet = write(tmp_path / "jobs.xlsx", b"PK\x03\x04")
    with pytest.raises(MappingError, match=r"jobs.xlsx: unknown format: .*; --mapping reads CSV, JSON Lines or Parquet"):
        check_files(m, [sheet])


def test_a_required_field_needs_a_column_or_a_constant(tmp_path):
    m = mapping(tmp_path, "fields:\n  job_id: JobID\nconstants:\n  status: COMPLETED\n")
    check_files(m, [write(tmp_path / "a.csv", "JobID,submitted_at,model\nj1,2026-11-01,CNN\n")])
    with pytest.raises(MappingError, match="no column[(]s[)] submitted_at in its header"):  # model_type is optional (v4)
        check_files(m, [write(tmp_path / "b.csv", "JobID,model\nj1,CNN\n")])
    df, _ = typed(tmp_path / "a.csv", m)
    assert df.select(c.JOB_ID, c.STATUS, c.MODEL_TYPE).rows() == [("j1", "COMPLETED", "CNN")]
