"""Issue 38's probe of `sources.yaml` (defects 2 and 5): an alias bomb, paths out of the file's folder and
files given by mistake fail their own source, in one line that quotes none of what they read; the rest
of the night's sources load; the planners' page shows no failed run's error text."""

from __future__ import annotations

import duckdb
import pytest

from gpucast.flows.settings import Settings
from tests.conftest import write
from tests.data.make_sources_demo import SACCT_HEADER
from tests.tasks.sources.test_sources_file import bomb

SECRET = ("root:$6$Zq9saltsalt$hashhashhashhashhashhashhash:20228:0:99999:7:::\n"
          "daemon:*:20228:0:99999:7:::\n")  # shadow's lines parse as YAML keys: the mapping reader reads them
GOOD_SACCT = (SACCT_HEADER + "\n7001|train|hpc|gpu-a100|nlp|bob|COMPLETED|0:0|2026-11-20T07:55:00|2026-11-20T08:00:00|"
              "2026-11-20T09:00:00|01:00:00|gres/gpu=1|gres/gpu=1|||{\"model_type\": \"CNN\"}\n")


def rows(home, sql: str) -> list[tuple]:
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        return con.execute(sql).fetchall()


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_bad_sources_fail_alone_and_quote_nothing_they_read(home, tmp_path, monkeypatch, capsys):
    from gpucast.flows.imports import pull_sources

    secret = write(tmp_path / "etc" / "shadow", SECRET)
    write(tmp_path / "etc" / "passwd", "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n")
    conf = tmp_path / "conf"
    export = write(conf / "exports" / "sacct-1.txt", GOOD_SACCT)
    sources = write(conf / "sources.yaml", bomb(7).split("\n  - tracking_uri: http")[0] + "\n"
                    "slurm:\n"
                    "  - files: exports/*.txt\n"                    # loads
                    "  - files: ../etc/passw*\n"                    # leaves the folder: refused unread
                    f"  - files: {tmp_path}/etc/passwd\n"           # absolute: read, not sacct, not quoted
                    "  - files: exports/*.txt\n"
                    f"    mapping: {secret}\n")                     # absolute: read, not a mapping, not quoted
    monkeypatch.setenv("GPUCAST_SOURCES", str(sources))
    pulled = pull_sources(Settings.from_env().ensure())
    assert {k: v.rows_loaded for k, v in pulled.runs.items()} == {f"slurm {export}": 1}
    assert set(pulled.failed) == {"mlflow entry 1", "slurm entry 2", f"slurm {tmp_path}/etc/passwd", f"slurm {conf}/exports/*.txt"}
    messages = [m for (m,) in rows(home, "SELECT message FROM ingest_runs WHERE status = 'failed'")]
    assert sorted(messages) == sorted(pulled.failed.values()) and len(messages) == 4
    for message in messages:
        assert "\n" not in message and len(message) < 600
        assert not any(part in message for part in ("root:", "daemon", "hashhash", "nologin", "20228")), message
    assert "expands to more than 10,000 values" in pulled.failed["mlflow entry 1"]
    assert "leaves the sources file's folder" in pulled.failed["slurm entry 2"]
    assert "a line of 31 characters that is not a header of names" in pulled.failed[f"slurm {tmp_path}/etc/passwd"]
    assert "(a 66-character key that is not a name" in pulled.failed[f"slurm {conf}/exports/*.txt"]
    assert "root:" not in capsys.readouterr().out and "hashhash" not in capsys.readouterr().out


def test_the_page_shows_no_failed_runs_error_text(home):
    from gpucast.warehouse.load import start_columns
    from gpucast.warehouse.queries import site_frames
    from gpucast.warehouse.runs import record_failed_run

    storage = Settings.from_env().ensure().storage
    from gpucast.warehouse import db

    with db.writer(storage):
        pass
    record_failed_run(storage, "ingest", "slurm /x failed: NotSacctOutput: root:x:0:0:root:/root:/bin/bash",
                      **start_columns(0, source="slurm"))
    (run,) = site_frames(storage.db_path)["runs"].to_dicts()
    assert (run["kind"], run["status"], run["message"]) == ("ingest", "failed", "failed: the reason is in `gpucast status`")
