"""One definition each: the nightly's steps listed once, distinct names for distinct things, no import cycle."""

from __future__ import annotations

import argparse
import ast
import collections
from pathlib import Path

import pytest
import yaml

from gpucast.flows.cli import build_parser
from gpucast.flows.nightly_steps import NIGHTLY_CHAIN, NIGHTLY_STEPS
from tests.test_layout import LAYERS, imports

ROOT = Path(__file__).resolve().parents[1]


def timed_steps(source: str) -> list[str]:
    """The step names the nightly flow times (`_timed(seconds, "name")`), in the order its code runs them."""
    (steps,) = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == "_steps"]
    calls = [n for n in ast.walk(steps) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "_timed"]
    return [c.args[1].value for c in sorted(calls, key=lambda c: (c.lineno, c.col_offset))]


def test_the_nightly_flow_runs_the_listed_steps_in_their_order():
    assert timed_steps((ROOT / "flows" / "nightly.py").read_text()) == list(NIGHTLY_STEPS)


def test_the_step_check_sees_a_step_the_list_lacks():
    """Not vacuous: a flow that times one more step, or two in another order, differs from the list."""
    source = (ROOT / "flows" / "nightly.py").read_text()
    assert timed_steps(source.replace('_timed(seconds, "demand")', '_timed(seconds, "forecast-demand")')) != list(NIGHTLY_STEPS)
    swapped = source.replace('"plan")', '"PLAN")').replace('"publish")', '"plan")').replace('"PLAN")', '"publish")')
    assert timed_steps(swapped) != list(NIGHTLY_STEPS)


def _subcommand_help(name: str) -> str:
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    (choice,) = [a for a in sub._choices_actions if a.dest == name]
    return choice.help


def test_the_cli_help_and_the_deployment_name_the_same_steps():
    assert _subcommand_help("nightly") == NIGHTLY_CHAIN
    spec = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    (nightly,) = [d for d in spec["deployments"] if d["name"] == "nightly"]
    assert nightly["description"] == f"{NIGHTLY_CHAIN}, every night"


# command -> the flag its count of days has, named for what it counts (and, for a setting, as the setting)
DAYS_FLAGS = {"simulate": "--history-days", "demo": "--history-days", "backtest": "--backtest-days",
              "plan": "--plan-days", "demand": "--plan-days"}
OLDER = {"--backtest-days": ["--window-days", "--days"], "--plan-days": ["--horizon-days", "--days"],
         "--history-days": ["--days"]}  # hidden spellings that still answer
REQUIRED = {"simulate": ["--out", "x"]}


@pytest.mark.parametrize("command, flag", DAYS_FLAGS.items())
def test_each_days_flag_says_what_it_counts_and_the_old_names_still_answer(command, flag, capsys):
    dest = flag.removeprefix("--").replace("-", "_")
    parser = build_parser()
    assert getattr(parser.parse_args([command, *REQUIRED.get(command, []), flag, "3"]), dest) == 3
    for n, old in enumerate(OLDER[flag], 4):
        assert getattr(parser.parse_args([command, *REQUIRED.get(command, []), old, str(n)]), dest) == n
    with pytest.raises(SystemExit):
        parser.parse_args([command, "--help"])
    shown = capsys.readouterr().out
    assert f"{flag} N" in shown and not any(old in shown for old in OLDER[flag])


def test_names_are_not_reused_across_the_flows():
    """Two public functions of one name in `flows/` (there were two `backtest_step`: the forecasts' and the demand
    forecast's) make a reader guess which one a step runs."""
    defined = collections.defaultdict(list)
    for path in sorted((ROOT / "flows").rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_"):
                defined[node.name].append(path.name)
    assert {name: files for name, files in defined.items() if len(files) > 1} == {}


def test_store_is_the_model_store_only():
    """`store` is the model registry's folder module (`tasks/learn/models/store.py`); no warehouse module goes by it."""
    aliased = []
    for layer in LAYERS:
        for path in sorted((ROOT / layer).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module == "gpucast.warehouse":
                    aliased += [f"{path.relative_to(ROOT)}:{node.lineno}" for a in node.names if a.asname == "store"]
    assert aliased == []


def import_graph(files: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the gpucast modules it imports (at the top, in a function or for type checking alike)."""
    def resolve(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for module, path in files.items():
        targets = set()
        for _, name in imports(path):
            targets.add(resolve(name))
        for node in ast.walk(ast.parse(path.read_text())):  # `from pkg import module` names the module
            if isinstance(node, ast.ImportFrom) and node.module:
                targets |= {resolve(f"{node.module}.{a.name}") for a in node.names}
        graph[module] = targets - {None, module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles: each strongly connected group of two or more modules (Tarjan), sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while not group or group[-1] != v:
                group.append(stack.pop())
                on_stack.discard(group[-1])
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def our_modules() -> dict[str, Path]:
    files = {}
    for layer in LAYERS:
        for path in (ROOT / layer).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            files[".".join(("gpucast", *(parts[:-1] if parts[-1] == "__init__" else parts)))] = path
    return files


def test_no_module_imports_itself_through_others():
    assert cycles(import_graph(our_modules())) == []


def test_the_cycle_check_finds_one(tmp_path):
    """Not vacuous: readers importing the mapping module back (as they once did, for a type) is a cycle."""
    files = our_modules()
    readers = tmp_path / "readers.py"
    readers.write_text(files["gpucast.tasks.ingest.readers"].read_text()
                       + "\nfrom gpucast.tasks.sources.mapping import Mapping\n")
    files["gpucast.tasks.ingest.readers"] = readers
    assert cycles(import_graph(files)) == [["gpucast.tasks.ingest.readers", "gpucast.tasks.sources.mapping"]]


def test_a_flow_parameter_is_not_also_a_function_of_the_flows():
    """`publish` was the flows' parameter (whether a flow publishes itself) and the nightly's publishing task: one name,
    two meanings (issue 49 item 5). No function in `flows/` has the name of a flow's parameter."""
    functions, parameters = set(), set()
    for path in sorted((ROOT / "flows").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):
                functions.add(node.name)
                if any((d.func if isinstance(d, ast.Call) else d).__dict__.get("id") == "flow" for d in node.decorator_list):
                    parameters |= {a.arg for a in (*node.args.args, *node.args.kwonlyargs)}
    assert "publish" in parameters
    assert sorted(functions & parameters) == []


def module_aliases(root: Path) -> dict[str, set[str]]:
    """alias -> the modules of ours imported under it (`from gpucast.x import m as alias`) in the `.py` files under root."""
    import importlib.util

    found = collections.defaultdict(set)
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gpucast."):
                for a in node.names:
                    try:
                        is_module = a.asname and importlib.util.find_spec(f"{node.module}.{a.name}") is not None
                    except ModuleNotFoundError:  # a name in a module, not a module
                        is_module = False
                    if is_module:
                        found[a.asname].add(f"{node.module}.{a.name}")
    return found


def test_an_alias_in_the_flows_names_one_module_and_says_which():
    """`steps` stood for four modules (`from gpucast.tasks.learn import score as steps`, `train as steps`, ...): a
    reader of `steps.Fit` had to look up which (issue 49 item 5). The flows import a module by its own name, or under
    an alias that names it (`plan_tables`: warehouse/plan.py beside the flow `plan.py`), one module per alias."""
    aliases = module_aliases(ROOT / "flows")
    assert "steps" not in aliases
    assert {alias: sorted(m) for alias, m in aliases.items() if len(m) > 1 or m.pop().rsplit(".", 1)[1] not in alias} == {}
