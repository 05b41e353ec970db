"""Project-wide invariants: the layers of the README's picture, one definition of names, the schema.

    flows/         wires (Prefect, @task wrappers, the CLI): may import everything
    tasks/         pure logic: no storage (warehouse), no Prefect, no flows
    warehouse/     every SQL statement, the lake, runs, publishing: no tasks, no flows, no Prefect
    expectations/  the data contract (fields, GX suites): imports nothing of ours
    records/       the types the layers share (flow results, step records, inventory, GPU catalogue, config
                   reading): imports nothing of ours
"""

from __future__ import annotations

import ast
from pathlib import Path

import duckdb
import pytest

from gpucast.expectations import contract as c
from gpucast.warehouse.schema import SQL_TYPES, schema_sql

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("flows", "tasks", "warehouse", "expectations", "records")
FORBIDDEN = {
    "tasks": ("gpucast.warehouse", "gpucast.flows", "prefect"),
    "warehouse": ("gpucast.tasks", "gpucast.flows", "prefect"),
    "expectations": ("gpucast.tasks", "gpucast.flows", "gpucast.warehouse", "gpucast.records", "prefect"),
    "records": ("gpucast.tasks", "gpucast.flows", "gpucast.warehouse", "gpucast.expectations", "prefect"),
    "flows": (),
}


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in a file; a relative import counts as a violation by itself."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.lineno, "." * node.level + (node.module or "")))
    return found


def layer_violations(layer: str, files: list[Path]) -> list[str]:
    bad = []
    for path in files:
        for line, name in imports(path):
            if name.startswith(".") or any(name == f or name.startswith(f + ".") for f in FORBIDDEN[layer]):
                bad.append(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{line} imports {name}")
    return bad


@pytest.mark.parametrize("layer", LAYERS)
def test_each_layer_imports_only_what_the_picture_allows(layer):
    assert layer_violations(layer, sorted((ROOT / layer).rglob("*.py"))) == []


def test_the_layout_check_catches_a_warehouse_module_importing_tasks(tmp_path):
    """The check above is not vacuous: a warehouse module that imports tasks is reported."""
    module = tmp_path / "publish.py"
    module.write_text((ROOT / "warehouse" / "publish.py").read_text())
    assert layer_violations("warehouse", [module]) == []
    module.write_text(module.read_text() + "\nfrom gpucast.tasks import features\n")
    line = len(module.read_text().splitlines())
    assert layer_violations("warehouse", [module]) == [f"{module}:{line} imports gpucast.tasks"]
    assert layer_violations("flows", [module]) == []  # flows may import everything


def test_there_are_eleven_features():
    assert len(c.FEATURES) == 11
    assert set(c.FEATURES) <= set(c.COLUMNS)


def test_warehouse_tables_carry_the_contract_columns_with_their_types():
    con = duckdb.connect()
    con.execute(schema_sql())
    expected = [(f.name, SQL_TYPES[f.kind]) for f in c.FIELDS]
    for table in ("job_logs", "job_log_records"):
        cols = con.execute(f"SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = '{table}' "
                           "ORDER BY column_index").fetchall()
        assert cols[: len(c.COLUMNS)] == [(n, t.replace("TIMESTAMPTZ", "TIMESTAMP WITH TIME ZONE")) for n, t in expected]
    required = {r[0] for r in con.execute(  # (`job_logs`, a view of its rows since session 15, has no constraints)
        "SELECT column_name FROM duckdb_columns() WHERE table_name = 'job_log_records' AND NOT is_nullable").fetchall()}
    assert set(c.REQUIRED) <= required


def test_the_schema_reapplied_to_a_warehouse_with_data_keeps_every_row(tmp_path):
    """Every writer connection applies the schema again: it must never drop or change what is there."""
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(schema_sql())
        con.execute("INSERT INTO train_runs (train_run_id, started_at, status) VALUES ('t1', now(), 'succeeded')")
        con.execute("INSERT INTO model_champions (train_run_id, target, model, labelled_rows, model_dir) "
                    "VALUES ('t1', 'runtime_hours', 'lightgbm', 10, '/m')")
        before = con.execute("SELECT * FROM current_champions").fetchall()
    with duckdb.connect(str(path)) as con:
        con.execute(schema_sql())
        con.execute(schema_sql())
        assert con.execute("SELECT * FROM current_champions").fetchall() == before
        assert con.execute("SELECT count(*) FROM train_runs").fetchone()[0] == 1


def test_the_documented_contract_table_lists_every_column():
    table = (ROOT / "docs" / "contract.md").read_text().split("## Job-log contract")[1].split("Rules and decisions")[0]
    for f in c.FIELDS:
        assert f"| `{f.name}` |" in table, f.name


STAGES = ("ingest", "learn", "plan", "report", "sources", "demand")


def test_tasks_are_grouped_by_stage():
    """tasks/ holds one subpackage per stage of the data flow (and the simulator on its own): a new
    module goes into the stage it serves, never back into one flat folder."""
    top = sorted(p.name for p in (ROOT / "tasks").iterdir() if p.suffix == ".py" and p.name != "__init__.py")
    assert top == ["simulate.py"]
    packages = sorted(p.name for p in (ROOT / "tasks").iterdir() if (p / "__init__.py").exists())
    assert packages == sorted(STAGES)


# Settings at the edge (issue 39, item 2): the environment is read and the settings table lives in flows/
# (`flows/settings.py`); the warehouse receives the two concerns it uses (`warehouse/concerns.py`: `Storage`,
# `SqlSandbox`), never the whole `Settings`, and imports nothing of flows/ to get them.
WHOLE_SETTINGS = {"Settings"}


def whole_settings_parameters(path: Path) -> list[str]:
    """`file:line function(parameter)` for every parameter of a function in `path` annotated with the whole
    settings object (`Settings`, `settings.Settings`, `"Settings"`, `Settings | None`, ...)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        a = node.args
        for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, *(x for x in (a.vararg, a.kwarg) if x)]:
            if arg.annotation is None:
                continue
            text = ast.unparse(arg.annotation)
            names = set(ast.walk(ast.parse(text.strip("'\""), mode="eval")))
            words = {n.id for n in names if isinstance(n, ast.Name)} | {n.attr for n in names if isinstance(n, ast.Attribute)}
            if words & WHOLE_SETTINGS:
                found.append(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{arg.lineno} "
                             f"{node.name}({arg.arg}: {text})")
    return found


def test_the_warehouse_never_imports_flows_nor_takes_the_whole_settings():
    files = sorted((ROOT / "warehouse").rglob("*.py"))
    assert [f"{p.relative_to(ROOT)}:{line} imports {name}" for p in files for line, name in imports(p)
            if name == "gpucast.flows" or name.startswith("gpucast.flows.")] == []
    assert [bad for p in files for bad in whole_settings_parameters(p)] == []
    assert not (ROOT / "warehouse" / "settings.py").exists()  # the settings model lives at the edge: flows/settings.py


def test_the_whole_settings_check_is_not_vacuous(tmp_path):
    """A warehouse function taking `Settings` (bare, quoted, optional or through a module) is reported; one
    taking a `Storage` named `settings` is not."""
    module = tmp_path / "m.py"
    module.write_text("from gpucast.warehouse.concerns import Storage\n"
                      "def fine(settings: Storage, n: int) -> None: ...\n"
                      "def bare(settings: Settings) -> None: ...\n"
                      "def quoted(*, s: 'Settings | None' = None) -> None: ...\n"
                      "def dotted(s: flows_settings.Settings) -> None: ...\n")
    assert whole_settings_parameters(module) == [f"{module}:3 bare(settings: Settings)",
                                                 f"{module}:4 quoted(s: 'Settings | None')",
                                                 f"{module}:5 dotted(s: flows_settings.Settings)"]
