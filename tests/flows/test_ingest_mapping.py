"""`gpucast ingest PATH --mapping FILE`: an export with other names and units, through the real flow."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import duckdb
import pytest

from gpucast.expectations import contract as c
from gpucast.flows.cli import main
from tests.conftest import write

MAPPING = """\
# a scheduler's export: its own names, MiB, seconds, TFLOPS and state codes
fields:
  job_id: JobID
  submitted_at: {column: Submit, format: "%d/%m/%Y %H:%M"}
  status: State
  model_type: Arch
  params_million: Params
  precision: Prec
  peak_gpu_mem_gb: {column: MaxGPUMem, unit: MiB}
  runtime_hours: {column: Elapsed, unit: seconds}
  gpu_demand_gflops: {column: Throughput, unit: TFLOPS}
values:
  status: {CD: COMPLETED, F: FAILED, PD: PENDING}
  precision: {h: FP16, s: FP32}
constants:
  queue: a100-80g
"""
# GPUs is not mapped: an alias of gpu_count, it passes through as in any file
EXPORT = """\
JobID,Submit,State,Arch,Params,Prec,MaxGPUMem,Elapsed,Throughput,GPUs
m1,01/11/2026 10:30,CD,Transformer,110,h,40960,5400,1.5,2
m2,01/11/2026 11:00,F,CNN,25,s,81920,90,0.25,1
m3,02/11/2026 08:15,PD,ResNet,11,bf16,,,,
m4,02/11/2026 09:00,CD,MLP,1.2B,s,abc,60,1,1
m1,01/11/2026 10:30,CD,Transformer,110,h,40960,5400,1.5,2
"""
COLUMNS = (c.JOB_ID, c.SUBMITTED_AT, c.STATUS, c.QUEUE, c.MODEL_TYPE, c.PARAMS_MILLION, c.PRECISION,
           c.PEAK_GPU_MEM_GB, c.RUNTIME_HOURS, c.GPU_DEMAND_GFLOPS, c.GPU_COUNT)


def rows(home, sql: str) -> list[tuple]:
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        return con.execute(sql).fetchall()


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_a_mapped_csv_loads_field_by_field(home, tmp_path, capsys):
    m = write(tmp_path / "sched.yaml", MAPPING)
    export = write(tmp_path / "export.csv", EXPORT)
    assert main(["ingest", str(export), "--mapping", str(m)]) == 0
    assert "5 rows read: 3 loaded, 1 rejected, 1 duplicate" in capsys.readouterr().out

    loaded = rows(home, f"SELECT {', '.join(COLUMNS)} FROM job_logs ORDER BY job_id")
    t = lambda d, h, mi: datetime(2026, 11, d, h, mi, tzinfo=UTC)  # noqa: E731
    assert [r[:7] for r in loaded] == [
        ("m1", t(1, 10, 30), "COMPLETED", "a100-80g", "Transformer", 110.0, "FP16"),
        ("m2", t(1, 11, 0), "FAILED", "a100-80g", "CNN", 25.0, "FP32"),
        ("m3", t(2, 8, 15), "PENDING", "a100-80g", "ResNet", 11.0, "BF16"),
    ]
    m1, m2, m3 = (r[7:] for r in loaded)
    assert m1 == (pytest.approx(42.94967296), 1.5, 1500.0, 2)  # 40960 MiB, 5400 s, 1.5 TFLOPS, 2 GPUs
    assert m2 == (pytest.approx(85.89934592), pytest.approx(0.025), 250.0, 1)
    assert m3 == (None, None, None, None)

    assert rows(home, "SELECT source_row, job_id, reason_text, raw_record FROM rejected_job_logs") == [
        (5, "m4", "params_million: '1.2B' is not a number; peak_gpu_mem_gb: 'abc' is not a number",
         '{"JobID":"m4","Submit":"02/11/2026 09:00","State":"CD","Arch":"MLP","Params":"1.2B","Prec":"s",'
         '"MaxGPUMem":"abc","Elapsed":"60","Throughput":"1","gpu_count":"1"}')]  # mapped columns as the export names them
    (run,) = rows(home, "SELECT rows_read, rows_loaded, rows_rejected, rows_duplicate, source, mapping_path, "
                        "mapping_sha256 FROM ingest_runs")
    read, loaded_n, rejected, duplicate, source, path, sha = run
    assert (read, loaded_n, rejected, duplicate) == (5, 3, 1, 1) and read == loaded_n + rejected + duplicate
    assert (source, path, sha) == ("mapping", str(m.resolve()), hashlib.sha256(m.read_bytes()).hexdigest())
    assert rows(home, "SELECT rows_read, rows_loaded, rows_rejected, rows_duplicate FROM ingest_files") == [(5, 3, 1, 1)]

    # the flow itself (no CLI) refuses a file the mapping does not fit before any run starts
    from gpucast.flows.ingest import ingest_job_logs

    other = write(tmp_path / "other" / "x.csv", "job_id,submitted_at,status,model_type\na,2026-11-01,PENDING,CNN\n")
    with pytest.raises(ValueError, match="no column.s. JobID, Submit"):
        ingest_job_logs(paths=[str(other)], mapping=str(m))
    assert rows(home, "SELECT count(*) FROM ingest_runs") == [(1,)]


@pytest.mark.parametrize(("mapping", "expected"), [
    ("fields:\n  job_id: JobID\n\n  gpu_mem: {column: Mem, unit: MiB}\n",
     "gpucast ingest: {m}:4: unknown contract field 'gpu_mem' (fields: job_id, "),
    ("fields:\n  peak_gpu_mem_gb: {column: Mem, unit: MiBs}\n",
     "gpucast ingest: {m}:2: unknown unit 'MiBs' for peak_gpu_mem_gb (units: B, KB, MB,"),
])
def test_a_bad_mapping_is_one_line_and_exit_2(home, tmp_path, capsys, mapping, expected):
    m = write(tmp_path / "m.yaml", mapping)
    export = write(tmp_path / "export.csv", EXPORT)
    assert main(["ingest", str(export), "--mapping", str(m)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(expected.format(m=m)) and err.count("\n") == 1 and "Traceback" not in err
    assert not (home / "warehouse.duckdb").exists()


def test_a_file_in_another_format_stops_the_run_before_anything_loads(home, tmp_path, capsys):
    m = write(tmp_path / "m.yaml", MAPPING)
    write(tmp_path / "in" / "a.csv", EXPORT)
    other = write(tmp_path / "in" / "b.csv", "job_id,submitted_at,status,model_type\na,2026-11-01,PENDING,CNN\n")
    assert main(["ingest", str(tmp_path / "in"), "--mapping", str(m)]) == 2
    err = capsys.readouterr().err
    assert err == (f"gpucast ingest: {other}: not the export {m} describes: no column(s) JobID, Submit, State, Arch, "
                   "Params, Prec, MaxGPUMem, Elapsed, Throughput in its header (found job_id, submitted_at, status, "
                   "model_type); ingest it with its own mapping, or without --mapping\n")
    assert not (home / "warehouse.duckdb").exists()  # nothing of a.csv either

    assert main(["ingest", "--mapping", str(m)]) == 2  # the inbox holds exports of any kind
    assert "--mapping needs the files it describes" in capsys.readouterr().err
