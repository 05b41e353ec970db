"""The flows only wire (issue 49, items 1 and 2): a static reading of the flow modules, no Prefect run.

1. Every branch in a flow module's functions (`if`, a conditional expression, a comprehension's filter, `while`) is
   listed below with why it is wiring: which step runs next (`step`), an option or setting the caller gave
   (`option`), an error path (`error`), or the reading of another system's objects (`system`: Prefect's API, Dask).
   A rule on data values belongs in `tasks/`, where it is tested without Prefect (README "Where does X go").
   Two kinds need no entry, since they only say what happened: an `if` whose body only prints or logs, and a
   conditional expression that only chooses words (inside a print, a log call or an f-string, or one whose two
   sides are text).
2. What crosses a step is typed: no flow or task (nor a public function) of a flow module returns a `dict`, and no
   flow module reads a value by a fixed key (`x["key"]`, `x.get("key")`), except those listed with the reason.

The flow modules are the steps' wiring. The rest of flows/ is the process's edge and is not checked here: cli/
(arguments in, lines out), settings.py and environment.py (the environment read once), children.py, runners.py
(where tasks run) and demo.py (the demo's own script), errors.py (exit codes).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLOW_MODULES = ("backtest", "demand", "gpu_pool", "imports", "ingest", "nightly", "nightly_steps", "plan", "report",
                "score", "stage", "status", "train")
RECORDERS = {"print", "debug", "info", "warning", "error", "exception"}  # print, and a logger's methods
KINDS = {"step", "option", "error", "system"}

# module -> function -> (kind, why, the conditions as `ast.unparse` writes them)
BRANCHES: dict[str, dict[str, tuple[str, str, tuple[str, ...]]]] = {
    "demand": {
        "demand_forecast": ("error", "no history to forecast from: the run fails with the reason", ("end is None",)),
    },
    "gpu_pool": {
        "_wait": ("system", "polls Prefect's flow run until it leaves the waiting states or ends (a run without a "
                            "state yet is waiting)", ("True", "run.state", "waiting", "done or time.monotonic() >= until")),
        "train_where_possible": ("step", "where training runs: here without an online GPU worker, or when none picked "
                                         "the run up; a pool run that did not complete fails the call",
                                 ("not gpu_worker_online()", "run.state is None or run.state.type.value in _WAITING",
                                  "not (run.state and run.state.is_completed())", "run.state")),
        "handoff_parameters": ("option", "the night's clock is sent (as ISO 8601 text) when the caller gave one",
                               ("as_of",)),
        "pool_result": ("error", "the pool's run left no train run in this warehouse", ("result is None",)),
    },
    "imports": {
        "import_slurm": ("option", "a mapping file and an MLflow join only when given", ("mapping", "join")),
        "import_mlflow": ("option", "a mapping file and --since only when given", ("mapping", "since")),
        "pull_sources": ("option", "no sources file (GPUCAST_SOURCES unset): nothing to pull", ("path is None",)),
        "_pull": ("step", "which importer runs: the entry's kind", ("isinstance(options, MlflowSource)",)),
        "_pull_slurm": ("step", "run sacct, or read the exported files", ("options.sacct",)),
    },
    "ingest": {
        "find_files": ("option", "the files named, else the inbox", ("paths",)),
        "mapping_source": ("option", "a mapping file only when given; it needs the files it describes",
                           ("mapping is None", "not paths")),
        "stage_all": ("step", "a large file is a task of its own, small ones a batch (`tasks/ingest/staging.py` "
                              "`batches` groups them)", ("len(group) == 1",)),
        "ingest_job_logs": ("option", "a mapping file (the run's own, or the importer's) only when given; the inbox's "
                                      "files are archived after a run that read the inbox",
                            ("source", "source_mapping", "described", "not paths")),
    },
    "nightly": {
        "quality_gate": ("error", "the rejected share is over the limit: the night fails with the reasons",
                         ("gate.failed",)),
        "alert_on_failure": ("option", "no webhook configured: no alert", ("not url",)),
        "outcome": ("error", "a failed night's alert says what planners read: the copy replaced since before the "
                             "publish step or not, the page written or not (review 86 S3-1)",
                    ("copy_identity(self.copy) == self.before", "self.page")),
        "_published_outcome": ("error", "a run that failed before its publish step kept the last copy",
                               ("publish is None",)),
        "_timed": ("error", "a step name not in NIGHTLY_STEPS is a programming error", ("step not in NIGHTLY_STEPS",)),
        "_steps": ("option", "an inbox night also pulls the sources file; --no-train skips training; a failed "
                             "quality gate still publishes (the module doc)",
                   ("paths is None", "retrain", "isinstance(exc, ValidationFailed)")),
    },
    "plan": {
        "gpu_type_names": ("option", "--gpu-types checked against the catalogue (an unknown name: exit 2)",
                           ("not names", "canonical not in catalog.gpus()")),
        "capacity_plan": ("option", "the inventory's file is recorded when there is one", ("inventory",)),
        "write_site": ("option", "--out, else the site folder (a file there: exit 2); the link artifact when asked",
                       ("out", "folder.exists() and (not folder.is_dir())", "artifact")),
    },
    "report": {
        "write_train_report": ("step", "a scatter plot only from saved test predictions with the network's column",
                               ("predictions is not None", "png")),
        "warehouse_status": ("error", "no warehouse yet: said in one line", ("not storage.query_path.exists()",)),
        "_masked": ("step", "a table an older planners' copy lacks stays absent", ("df is None",)),
        "published_copy_text": ("step", "nothing published yet: nothing to say", ("not published.exists()",)),
        "unpublished_text": ("step", "no run since the last publish that has not succeeded: nothing to say; a warehouse "
                                     "it cannot read now: one sentence",
                             ("found is None or (not isinstance(found, str) and (not found.height))",
                              "isinstance(found, str)")),
        "backtest_text": ("step", "the window's summary is read only when it holds completed jobs",
                          ("counts.window_start is not None",)),
    },
    "score": {
        "scoring_runner": ("step", "where scoring runs: in-process below `partition_min_jobs` pending jobs",
                           ("cluster.dask_address and pending_jobs < min_jobs",)),
        "score_target": ("step", "a target without a champion has only the scheduler history's forecasts",
                         ("champion is not None",)),
        "score_pending": ("step", "the publish's paths are checked first when it will publish; the pending jobs the "
                                  "caller staged are read, else staged here; the scheduler's history "
                                  "is staged when jobs without model features are pending and the caller staged none, "
                                  "the running jobs (their bursts' siblings) whenever such jobs are pending",
                          ("publish", "pending_path", "without and (not history_path)", "without")),
        "_on_cluster": ("step", "where scoring runs: no champion or no cluster runner, in this process",
                        ("not champions", "choice.runner is None")),
    },
    "stage": {
        "stage_features": ("option", "what the traced prior did and what tonight's models see only when parts, "
                                     "both of them, were staged", ("staged", "both")),
        "_read_and_trace": ("option", "the parts the caller asked for (`parts`)",
                            ("HISTORY in parts", "PENDING in parts", "rows is not None")),
        "_trace": ("option", "nothing staged, nothing to trace", ("not staged",)),
    },
    "status": {
        "recent_flow_runs": ("system", "Prefect's flow runs (a run without a state yet); the failing step is asked "
                                       "of failed runs only", ("run.state", "state in FAILED")),
        "_failing_step": ("system", "a run without a state has no message", ("run.state",)),
        "next_scheduled_runs": ("system", "the flows' and deployments' names are read only when runs are scheduled",
                                ("runs",)),
        "flow_runs_text": ("option", "`timeout_s` bounds the API's requests when given", ("timeout_s",)),
    },
    "train": {
        "resolve": ("option", "the pending queue counted and whether trees are compiled, when the caller left them to "
                              "the warehouse", ("options.pending_jobs is None", "options.compile_trees is None")),
        "gate_windows": ("option", "the window is recomputed unless the caller did this night", ("refresh",)),
        "_record": ("step", "a target without a champion tonight has nothing to save", ("finished.estimator is not None",)),
    },
}

# module -> (function, the read as `ast.unparse` writes it) -> why it is not a step's result read by key
KEY_READS: dict[str, dict[tuple[str, str], str]] = {
    "score": {("_workers", "client.scheduler_info()['workers']"): "Dask's scheduler describes itself as a dict"},
}
# module -> function -> why it returns a dict
DICT_RETURNS: dict[str, dict[str, str]] = {
    "gpu_pool": {"handoff_parameters": "a deployment run's parameters: Prefect's API takes them as a JSON object"},
}


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _function(node: ast.AST, parents: dict) -> str | None:
    """The innermost function `node` is in (its name; a method's without its class), or None at module level."""
    while (node := parents.get(node)) is not None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return node.name
    return None


def _records(call: ast.AST) -> bool:
    """A call that only says what happened: print(...) or a logger's info/warning/... ."""
    if not isinstance(call, ast.Call):
        return False
    name = call.func.id if isinstance(call.func, ast.Name) else call.func.attr if isinstance(call.func, ast.Attribute) else ""
    return name in RECORDERS


def _words_only(node: ast.IfExp, parents: dict) -> bool:
    """A conditional expression that only chooses words: inside a print, a log call or an f-string, or text both sides."""
    text = (ast.JoinedStr, ast.Constant)
    if isinstance(node.body, text) and isinstance(node.orelse, text):
        return all(not isinstance(x, ast.Constant) or isinstance(x.value, str) for x in (node.body, node.orelse))
    up = parents.get(node)
    while up is not None and not isinstance(up, ast.stmt):
        if isinstance(up, ast.JoinedStr) or _records(up):
            return True
        up = parents.get(up)
    return False


def branches(path: Path) -> list[tuple[int, str, str]]:
    """(line, function, condition) of every branch in `path`'s functions that is not only recording (module doc)."""
    tree = ast.parse(path.read_text())
    parents = _parents(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            if not node.orelse and all(isinstance(s, ast.Expr) and _records(s.value) for s in node.body):
                continue
            tests = [node.test]
        elif isinstance(node, ast.IfExp):
            tests = [] if _words_only(node, parents) else [node.test]
        elif isinstance(node, ast.comprehension):
            tests = node.ifs
        elif isinstance(node, ast.While):
            tests = [node.test]
        else:
            continue
        function = _function(node, parents)
        found += [(test.lineno, function, ast.unparse(test)) for test in tests if function]
    return sorted(found)


def key_reads(path: Path) -> list[tuple[int, str, str]]:
    """(line, function, read) of every `x["key"]` and `x.get("key", ...)` with a fixed text key in `path`."""
    tree = ast.parse(path.read_text())
    parents = _parents(tree)
    found = []
    for node in ast.walk(tree):
        fixed = (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
                 and isinstance(node.slice.value, str))
        fixed = fixed or (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                          and bool(node.args) and isinstance(node.args[0], ast.Constant)
                          and isinstance(node.args[0].value, str))
        if fixed:
            found.append((node.lineno, _function(node, parents) or "", ast.unparse(node)))
    return sorted(found)


def dict_returns(path: Path) -> list[tuple[int, str, str]]:
    """(line, function, annotation) of each flow, task or public function of `path` annotated to return a dict."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.returns is None:
            continue
        step = any("task" in ast.unparse(d) or "flow" in ast.unparse(d) for d in node.decorator_list)
        names = {n.id for n in ast.walk(node.returns) if isinstance(n, ast.Name)}
        if (step or not node.name.startswith("_")) and "dict" in names:
            found.append((node.lineno, node.name, ast.unparse(node.returns)))
    return found


def _module(name: str) -> Path:
    return ROOT / "flows" / f"{name}.py"


def test_every_branch_in_the_flows_is_wiring_and_listed_with_its_reason():
    unlisted, stale = [], []
    for name in FLOW_MODULES:
        allowed = BRANCHES.get(name, {})
        seen: dict[str, set[str]] = {}
        for line, function, condition in branches(_module(name)):
            seen.setdefault(function, set()).add(condition)
            if condition not in allowed.get(function, ("", "", ()))[2]:
                unlisted.append(f"flows/{name}.py:{line} {function}: if {condition}")
        stale += [f"flows/{name}.py {function}: {c}" for function, (_, _, conditions) in allowed.items()
                  for c in conditions if c not in seen.get(function, set())]
    assert unlisted == [], "a rule on data values in a flow: move it to tasks/ (or list it here with why it wires)"
    assert stale == [], "listed but gone: remove it from BRANCHES"


def test_each_listed_branch_says_its_kind_and_why():
    for functions in BRANCHES.values():
        for kind, why, conditions in functions.values():
            assert kind in KINDS and len(why) > 10 and conditions


def test_no_step_result_is_read_by_a_fixed_key_in_the_flows():
    found = [f"flows/{name}.py:{line} {function}: {read}" for name in FLOW_MODULES
             for line, function, read in key_reads(_module(name))
             if (function, read) not in KEY_READS.get(name, {})]
    assert found == [], "a value read by key: hand a typed record (records/) instead"


def test_no_flow_or_task_returns_a_dict():
    found = [f"flows/{name}.py:{line} {function} -> {returns}" for name in FLOW_MODULES
             for line, function, returns in dict_returns(_module(name))
             if function not in DICT_RETURNS.get(name, {})]
    assert found == [], "a dict handed to the next step: return a frozen dataclass (records/)"


def test_the_checks_catch_what_they_look_for(tmp_path):
    """Not vacuous: a rule on data values, a read by key and a dict returned are each reported; recording is not."""
    module = tmp_path / "m.py"
    module.write_text('''
from prefect import task

@task
def step(rows, say) -> dict[str, int]:
    out = {"n": len(rows)}
    if out["n"] > 3:
        rows = rows[:3]
    if rows:
        print(f"{len(rows)} row{'s' if len(rows) != 1 else ''}")
    say("none" if not rows else "some")
    return out
''')
    assert [(f, c) for _, f, c in branches(module)] == [("step", "out['n'] > 3")]
    assert [r for _, _, r in key_reads(module)] == ["out['n']"]
    assert [(f, r) for _, f, r in dict_returns(module)] == [("step", "dict[str, int]")]
