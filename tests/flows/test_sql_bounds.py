"""`gpucast sql` keeps its bounds (memory, threads, spill, timeout) and never hides rows silently."""

from __future__ import annotations

import json

import pytest

from gpucast.flows.cli import main
from gpucast.warehouse import db
from gpucast.warehouse.publish import publish_snapshot
from gpucast.warehouse.settings import Settings, Storage


@pytest.fixture
def published(home) -> Storage:
    settings = Settings.from_env().ensure().storage
    with db.writer(settings) as con:
        con.execute("CREATE TABLE wide AS SELECT range AS i, repeat('x', 300) AS long_text FROM range(2500)")
    publish_snapshot(settings)
    return settings


def test_a_table_says_how_many_rows_there_are_and_when_it_cut(published, capsys):
    assert main(["sql", "SELECT * FROM wide ORDER BY i"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith("(first 1,000 of 2,500 rows shown (--max-rows N to see more; --format csv or json "
                                 "print every row))")
    assert "│ 999 " in out and "│ 1000 " not in out  # the first 1,000, none of the middle dropped
    assert "x" * 300 in out  # strings whole, not cut at 80 characters

    assert main(["sql", "SELECT * FROM wide ORDER BY i", "--max-rows", "0"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith("(2,500 rows)") and "│ 2499 " in out
    assert main(["sql", "SELECT count(*) AS n FROM wide"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("(1 row)")


def test_csv_and_json_print_every_row(published, capsys):
    assert main(["sql", "SELECT i FROM wide", "--format", "csv", "--max-rows", "10"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1 + 2500
    assert main(["sql", "SELECT i FROM wide", "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 2500


def test_the_query_runs_with_the_configured_limits_and_cleans_its_spill_folder(published, monkeypatch, capsys):
    monkeypatch.setenv("GPUCAST_SQL_MEMORY", "300MB")
    monkeypatch.setenv("GPUCAST_SQL_THREADS", "1")
    monkeypatch.setenv("GPUCAST_SQL_TEMP_LIMIT", "50MB")
    assert main(["sql", "SELECT current_setting('memory_limit') AS mem, current_setting('threads') AS threads, "
                        "current_setting('max_temp_directory_size') AS temp, current_setting('temp_directory') AS dir",
                 "--format", "json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["mem"] == "286.1 MiB" and row["threads"] == 1 and row["temp"] == "47.6 MiB"
    assert row["dir"].startswith(str(published.home / "tmp" / "sql-"))
    assert not list((published.home / "tmp").glob("sql-*"))  # removed when the query ended
    # the planner cannot lift them
    assert main(["sql", "SET memory_limit = '100GB'"]) == 2
    assert "the configuration has been locked" in capsys.readouterr().err


def test_a_query_past_the_timeout_is_stopped_with_exit_code_2(published, monkeypatch, capsys):
    monkeypatch.setenv("GPUCAST_SQL_TIMEOUT_S", "1")
    assert main(["sql", "SELECT count(*) FROM range(100000000000) a"]) == 2
    err = capsys.readouterr().err
    assert "ran longer than 1 s (GPUCAST_SQL_TIMEOUT_S) and was stopped" in err
