"""`gpucast` answers at once: loading the command line imports none of the heavy libraries (issue 31, item 4), and
each command imports what it uses (issue 52, item 4).

Each command imports what it uses when it runs (a flow command: Prefect; `ingest`: Great Expectations;
`train`: the models); a command's flags and handler module are loaded when it is the one run (flows/cli/parser.py
`_Command`). Measured figures: docs/benchmarks.md, "The command line's start-up".
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# Seconds each, at least, to import on the 2-core machine; none is needed to parse, print help or the version.
HEAVY = ("prefect", "torch", "great_expectations", "sklearn", "xgboost", "lightgbm", "dask", "mlflow", "pandas",
         "pyarrow", "duckdb", "statsforecast")
# What `gpucast --help` does not need either (measured with -X importtime, issue 52: the train options' feature sets
# brought Polars and numpy, 0.4-0.8 s; the settings' table pydantic, 0.1-0.2 s).
NOT_FOR_HELP = (*HEAVY, "polars", "numpy", "pydantic", "yaml")
# What a read command (status, sql) never needs: the models and their libraries (skops brought torch through
# scikit-learn's estimator list), Great Expectations (altair, scipy, SQLAlchemy with it), Prefect, Dask, MLflow.
NOT_FOR_READS = ("prefect", "torch", "great_expectations", "sklearn", "skops", "xgboost", "lightgbm", "catboost",
                 "crepes", "scipy", "altair", "sqlalchemy", "dask", "distributed", "mlflow", "pandas", "statsforecast",
                 "jinja2")


def imported_by(argv: list[str], env: dict | None = None) -> tuple[int, set[str], str]:
    """(exit code, the top-level packages imported, stderr) of `gpucast ARGV` run as the console script runs it."""
    code = ("import sys\nfrom gpucast.flows.cli import main\n"
            "try:\n    rc = main(sys.argv[1:])\nexcept SystemExit as e:\n    rc = e.code or 0\n"
            "print('\\nIMPORTED', ' '.join(sorted({m.split('.')[0] for m in sys.modules})))\nsys.exit(rc)")
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env)
    line = next(x for x in out.stdout.splitlines() if x.startswith("IMPORTED "))
    return out.returncode, set(line.split()[1:]), out.stderr


def test_loading_the_command_line_imports_no_heavy_library():
    code = ("import sys, gpucast.flows.cli\n"
            f"print(' '.join(sorted({{m.split('.')[0] for m in sys.modules}} & set({NOT_FOR_HELP!r}))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"imported when the command line loads: {out.stdout.strip()}"


@pytest.mark.parametrize("argv", [["--help"], ["--version"]])
def test_help_and_version_import_no_heavy_library(argv):
    code, imported, err = imported_by(argv)
    assert code == 0, err
    assert imported & set(NOT_FOR_HELP) == set(), argv


def test_the_read_commands_import_only_what_they_read(home):
    """status and sql on a warehouse with its schema: DuckDB and Polars, never the models, GX or Prefect."""
    from gpucast.flows.settings import Settings
    from gpucast.warehouse.db import connect_writer

    connect_writer(Settings.from_env().storage).close()  # a new warehouse, its schema applied
    env = dict(os.environ)
    for argv in (["status"], ["sql", "SELECT count(*) AS n FROM job_logs"]):
        code, imported, err = imported_by(argv, env)
        assert code == 0, (argv, err)
        assert "duckdb" in imported, argv  # not vacuous: the command did read the warehouse
        assert imported & set(NOT_FOR_READS) == set(), argv


# What `status` and `sql`'s table print without (issue 52 item 4: 0.76-0.99 CPU-s each, goal 0.5 s): Polars and PyArrow
# (with numpy) only to lay out a few rows, pydantic only for the settings' training concern they never use.
NOT_FOR_QUICK_READS = ("polars", "pyarrow", "numpy", "pydantic")


def test_status_and_sql_print_without_polars_pyarrow_or_pydantic(home):
    """Run in a fresh interpreter each, on a warehouse with an ingest run (status) and a query's row (sql): the rows come from
    DuckDB's own fetch and are laid out as Polars would (tests/tasks/report/test_tables.py)."""
    from gpucast.flows.settings import Settings
    from gpucast.warehouse.db import connect_writer

    con = connect_writer(Settings.from_env().storage)
    con.execute("INSERT INTO ingest_runs (run_id, source, status, started_at, finished_at, files, files_rejected, "
                "rows_read, rows_loaded, rows_rejected, rows_duplicate) "
                "VALUES ('ingest-1', 'files', 'succeeded', now(), now(), 1, 0, 2, 2, 0, 0)")
    con.close()
    for argv, shown in ((["status"], "ingest-1"), (["sql", "SELECT 2.5::DOUBLE AS x, 'a' AS s, now() AS t"], "2.5")):
        out = subprocess.run([sys.executable, "-c", "import sys\nfrom gpucast.flows.cli import main\nrc = main(sys.argv[1:])\n"
                              "print('IMPORTED', ' '.join(sorted({m.split('.')[0] for m in sys.modules})))\n"
                              "sys.exit(rc)", *argv], capture_output=True, text=True, env=dict(os.environ))
        assert out.returncode == 0, (argv, out.stderr)
        assert shown in out.stdout, argv  # it printed the rows
        imported = set(out.stdout.splitlines()[-1].split()[1:])
        assert "duckdb" in imported and imported & set(NOT_FOR_QUICK_READS) == set(), (argv, imported & set(NOT_FOR_QUICK_READS))


def test_a_command_used_loads_its_flags_and_a_command_listed_does_not():
    """The lazy tree parses as the whole one does, and the console script's help lists every command."""
    from gpucast.flows.cli.parser import COMMANDS, build_parser

    lazy, eager = build_parser(lazy=True), build_parser()
    argv = ["score", "--batch-rows", "7", "--as-of", "2026-11-01"]
    assert vars(lazy.parse_args(argv)) == vars(eager.parse_args(argv))
    listed = lazy.format_help()
    assert all(name in listed for name, _, _ in COMMANDS)
    commands = next(a for a in lazy._actions if a.dest == "command").choices
    assert commands["score"]._flags is None and commands["train"]._flags is not None  # score's used, train's not
    assert commands["train"].format_help() == next(a for a in eager._actions if a.dest == "command").choices[
        "train"].format_help()
