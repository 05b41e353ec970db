"""Settings: frozen objects by concern, read from the environment once, every value checked, names in errors."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from gpucast.flows.settings import CONCERNS, SPECS, Settings, SettingsError

ROOT = Path(__file__).resolve().parents[2]


def value_of(s: Settings, name: str):
    """A setting's value, found through the concern its spec names (the only way code reaches it)."""
    spec = next(x for x in SPECS if x.field == name)
    return getattr(getattr(s, spec.concern), name)


def test_defaults_when_nothing_is_set(tmp_path):
    s = Settings.from_env({"GPUCAST_HOME": str(tmp_path)})
    assert s.storage.home == tmp_path.resolve()
    assert (s.storage.lock_timeout_s, s.storage.duckdb_memory, s.planning.oom_gpu_mem_gb, s.quality.max_reject_fraction,
            s.storage.keep_train_runs, s.training.nn_max_minutes, s.quality.backtest_days) == (600.0, "1GB", 80.0, 0.2, 7,
                                                                                                20.0, 7)


# The prefix a concern's variables carry before the setting's name (a naming rule this test keeps; the variables
# themselves are written out in SPECS, never computed from it).
CONCERN_PREFIX = {"sql": "SQL_", "alerts": "ALERT_"}


def test_each_setting_has_one_name_from_its_variable_to_its_concern():
    """GPUCAST_ + the concern's prefix + the name: `GPUCAST_SQL_TIMEOUT_S` is `sql.timeout_s`; every spec
    is a field of its concern's object and nothing else is (but for the training concern, `TrainOptions`, whose
    other fields are a run's own: flags, prefect.yaml's `options:`)."""
    for spec in SPECS:
        assert spec.env == f"GPUCAST_{CONCERN_PREFIX.get(spec.concern, '')}{spec.field}".upper()
    from dataclasses import fields

    from gpucast.tasks.learn.options import TrainOptions

    assert CONCERNS["training"] is TrainOptions
    assert sorted(f.name for name, cls in CONCERNS.items() if name != "training" for f in fields(cls)) == sorted(
        s.field for s in SPECS if s.concern != "training")
    assert {s.field for s in SPECS if s.concern == "training"} == {"nn_max_minutes", "night_budget_minutes",
                                                                   "score_budget_s"}


def string_literals(path: Path) -> list[str]:
    """Every string constant in a module's code (docstrings and f-string parts included; comments are not code)."""
    import ast

    return [n.value for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


# GPUCAST_ names that are not settings: where a deployment's worker finds the checkout (prefect.yaml's pull step),
# and a marker of the test session's own (tests/conftest.py).
NOT_SETTINGS = {"GPUCAST_REPO", "GPUCAST_TEST_SESSION_SET"}
VARIABLE = re.compile(r"\bGPUCAST_[A-Z0-9_]*[A-Z0-9]\b")


def test_every_variable_is_written_out_once_in_the_settings_table():
    """`grep GPUCAST_SQL_THREADS` finds its definition: each spec's variable (and an older name it still answers to)
    is a string written out in flows/settings.py, exactly once, and nothing computes one."""
    literals = string_literals(ROOT / "flows" / "settings.py")
    for name in [s.env for s in SPECS] + [old for s in SPECS for old in s.older]:
        assert literals.count(name) == 1 or name in {old for s in SPECS for old in s.older}, name
        assert name in literals, name
    assert len({s.env for s in SPECS}) == len(SPECS)


def variables_used(root: Path) -> dict[str, set[str]]:
    """Every GPUCAST_ name written in the project's code, docs and deployment files -> the files that write it."""
    found: dict[str, set[str]] = {}
    for path in root.rglob("*"):
        parts = path.relative_to(root).parts
        if not path.is_file() or parts[0].startswith(".") or parts[0].endswith(".egg-info") or path.suffix not in (
                ".py", ".md", ".yaml", ".yml", ".toml", ".cfg", ".sh", "") or "__pycache__" in parts:
            continue
        for name in VARIABLE.findall(path.read_text(errors="replace")):
            found.setdefault(name, set()).add(str(path.relative_to(root)))
    return found


def test_every_gpucast_variable_used_anywhere_is_a_setting():
    """A GPUCAST_ name in code, docs, prefect.yaml or the Makefile is a setting of the table (or an older name of one),
    or one of the few named non-settings: a variable the table does not know is one nothing reads."""
    known = {s.env for s in SPECS} | {old for s in SPECS for old in s.older} | NOT_SETTINGS
    used = variables_used(ROOT)
    assert "GPUCAST_SQL_THREADS" in used and "GPUCAST_REPO" in used  # the scan sees code, docs and prefect.yaml
    assert {name: sorted(files) for name, files in used.items() if name not in known} == {}


def test_the_variable_scan_finds_an_unknown_one(tmp_path):
    (tmp_path / "flows").mkdir()
    typo = "GPUCAST_SQL_" + "THRADS"  # (spelt out here, this file would hold it)
    (tmp_path / "flows" / "x.py").write_text(f"# reads GPUCAST_SQL_THREADS and {typo}\n")
    (tmp_path / "README.md").write_text("set `GPUCAST_SQL_` + a name\n")
    assert variables_used(tmp_path) == {"GPUCAST_SQL_THREADS": {"flows/x.py"}, typo: {"flows/x.py"}}


@pytest.mark.parametrize("spec", SPECS[1:], ids=[s.env for s in SPECS[1:]])
def test_every_variable_is_read(spec, tmp_path):
    value = ("3GB" if spec.expects.startswith("a size") else "http://127.0.0.1:9/hook" if spec.expects.startswith("an http")
             else "local" if spec.field == "train_runner" else "tcp://127.0.0.1:8786" if spec.field == "dask_address"
             else "3" if spec.parse is int else "0.5")
    s = Settings.from_env({"GPUCAST_HOME": str(tmp_path), spec.env: value})
    assert value_of(s, spec.field) == spec.parse(value) != spec.default


@pytest.mark.parametrize(("env", "raw", "says"), [
    ("GPUCAST_MAX_REJECT_FRACTION", "nan", "a number between 0 and 1"),
    ("GPUCAST_MAX_REJECT_FRACTION", "1.5", "a number between 0 and 1"),
    ("GPUCAST_MAX_REJECT_FRACTION", "-0.1", "a number between 0 and 1"),
    ("GPUCAST_LOCK_TIMEOUT_S", "nan", "a finite number > 0"),
    ("GPUCAST_LOCK_TIMEOUT_S", "inf", "a finite number > 0"),
    ("GPUCAST_GPU_MEM_GB", "80GB", "a finite number > 0"),
    ("GPUCAST_NN_MAX_MINUTES", "twenty", "a finite number >= 0"),
    ("GPUCAST_KEEP_TRAIN_RUNS", "2.5", "a whole number >= 1"),
    ("GPUCAST_KEEP_TRAIN_RUNS", "0", "a whole number >= 1"),
    ("GPUCAST_DUCKDB_MEMORY", "lots", "a size such as"),
    ("GPUCAST_KEEP_FORECAST_DAYS", "0", "a whole number >= 1"),
    ("GPUCAST_SQL_TIMEOUT_S", "nan", "a finite number > 0"),
    ("GPUCAST_SQL_THREADS", "0", "a whole number >= 1"),
    ("GPUCAST_SQL_TEMP_LIMIT", "unbounded", "a size such as"),
    ("GPUCAST_NIGHT_BUDGET_MINUTES", "-5", "a finite number >= 0"),
    ("GPUCAST_TRAIN_RUNNER", "ray", "one of: dask, local"),
    ("GPUCAST_DASK_ADDRESS", "http://scheduler:8787/status", "a Dask scheduler address"),
    ("GPUCAST_DASK_WORKERS", "-1", "a whole number >= 0"),
])
def test_a_bad_value_names_the_variable_and_the_rule(env, raw, says):
    with pytest.raises(SettingsError, match=re.escape(f"{env}='{raw}' is not {says}")):
        Settings.from_env({env: raw})


def test_a_bad_webhook_url_is_named_but_never_shown():
    """Review 77 S1-9: a Slack, Teams or Discord webhook carries its token in the URL's path; the settings error
    printed it (and a deployment run's failure state and alert would carry it). The variable and the rule are named,
    the value is not."""
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({"GPUCAST_ALERT_WEBHOOK_URL": "hooks.slack.com/services/T0AAAA/B0BBBB/S3CRETtokenXYZ"})
    said = str(caught.value)
    assert said.startswith("GPUCAST_ALERT_WEBHOOK_URL=<its value, not shown: it may hold a token> is not an http(s) URL")
    assert "S3CRET" not in said


# Issue 38, defect 1 (and 13's variable): every number has an upper bound as well as a lower one;
# GPUCAST_SQL_THREADS=1000000 ran 850 s with 29,610 threads, GPUCAST_DUCKDB_MEMORY=0GB was taken.
@pytest.mark.parametrize(("env", "raw", "says"), [
    ("GPUCAST_SQL_THREADS", "1000000", "a whole number >= 1 and <= 256"),
    ("GPUCAST_DASK_WORKERS", "100000", "a whole number >= 0 and <= 256"),
    ("GPUCAST_SQL_TIMEOUT_S", "1e12", "a finite number > 0 and <= 86400"),
    ("GPUCAST_LOCK_TIMEOUT_S", "1e9", "a finite number > 0 and <= 86400"),
    ("GPUCAST_NIGHT_BUDGET_MINUTES", "100000", "a finite number >= 0 and <= 1440"),
    ("GPUCAST_NN_MAX_MINUTES", "1e30", "a finite number >= 0 and <= 1440"),
    ("GPUCAST_PLAN_DAYS", "100000", "a whole number >= 1 and <= 366"),
    ("GPUCAST_BACKTEST_DAYS", "99999999", "a whole number >= 1 and <= 3660"),
    ("GPUCAST_KEEP_FORECAST_DAYS", "99999999", "a whole number >= 1 and <= 3660"),
    ("GPUCAST_KEEP_TRAIN_RUNS", "1000001", "a whole number >= 1 and <= 1000"),
    ("GPUCAST_FUTURE_TOLERANCE_HOURS", "1e9", "a finite number >= 0 and <= 8760"),
    ("GPUCAST_GPU_MEM_GB", "1e9", "a finite number > 0 and <= 10000"),
    ("GPUCAST_TRACE_SECONDS", "1e9", "a finite number > 0 and <= 3600"),
    ("GPUCAST_TRACE_NIGHT_SECONDS", "1e9", "a finite number >= 0 and <= 86400"),
    ("GPUCAST_TRACE_NIGHT_SECONDS", "-1", "a finite number >= 0 and <= 86400"),
    ("GPUCAST_DUCKDB_MEMORY", "0GB", "a size such as 512MB or 2GB, from 16MB to this machine's memory"),
    ("GPUCAST_SQL_MEMORY", "1MB", "a size such as 512MB or 2GB, from 16MB to this machine's memory"),
    ("GPUCAST_SQL_MEMORY", "1000000TB", "a size such as 512MB or 2GB, from 16MB to this machine's memory"),
    ("GPUCAST_SQL_TEMP_LIMIT", "1000TB", "a size such as 512MB or 2GB, from 0MB to 100TB"),
])
def test_a_value_past_its_upper_or_lower_bound_names_the_variable_and_the_rule(env, raw, says):
    with pytest.raises(SettingsError, match=re.escape(f"{env}='{raw}' is not {says}")):
        Settings.from_env({env: raw})


def test_every_number_and_size_has_an_upper_bound():
    """No numeric setting is open above: one far past any use is refused (a test per rule kind)."""
    for spec in SPECS:
        if spec.parse in (int, float):
            assert not spec.rule(spec.parse("1e15" if spec.parse is float else "1000000000000000")), spec.env
        elif spec.expects.startswith("a size"):
            assert not spec.rule("100000TB"), spec.env


def test_sql_with_a_million_threads_stops_at_once_with_one_line(home, tmp_path):
    """The probe's command: refused before any query runs, one line, exit 2 (it ran 850 s before)."""
    import subprocess
    import sys

    env = {**os.environ, "GPUCAST_HOME": str(home), "GPUCAST_SQL_THREADS": "1000000"}
    done = subprocess.run([sys.executable, "-m", "gpucast.flows.cli", "sql", "select 1"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == ("gpucast sql: GPUCAST_SQL_THREADS='1000000' is not a whole number >= 1 and <= 256 "
                           "(default 2)\n")


def test_an_empty_data_directory_is_refused_not_defaulted():
    """A deployment rendering `{{ $GPUCAST_HOME }}` from an unset variable must fail, not use ./.gpucast."""
    with pytest.raises(SettingsError, match="GPUCAST_HOME is set but empty"):
        Settings.from_env({"GPUCAST_HOME": ""})


def test_empty_counts_as_unset():
    assert Settings.from_env({"GPUCAST_OOM_GPU_MEM_GB": " "}).planning.oom_gpu_mem_gb == 80.0


def test_a_read_commands_settings_are_read_and_checked_as_the_full_ones(tmp_path):
    """`gpucast status` and `sql` build `ReadSettings` (no training concern, no pydantic: issue 52 item 4): the same
    values from the same variables, and a bad variable, the training concern's too, stops them with the same line."""
    from dataclasses import fields

    from gpucast.flows.settings import ReadSettings

    env = {"GPUCAST_HOME": str(tmp_path), "GPUCAST_SQL_THREADS": "3", "GPUCAST_BACKTEST_DAYS": "9"}
    full, read = Settings.from_env(env), ReadSettings.from_env(env)
    assert [f.name for f in fields(ReadSettings)] == [n for n in (f.name for f in fields(Settings)) if n != "training"]
    assert all(getattr(read, f.name) == getattr(full, f.name) for f in fields(ReadSettings))
    assert (read.sql.threads, read.quality.backtest_days) == (3, 9)
    for bad in ({"GPUCAST_NN_MAX_MINUTES": "-1"}, {"GPUCAST_SQL_MEMORY": "lots"}):
        with pytest.raises(SettingsError) as full_error:
            Settings.from_env(env | bad)
        with pytest.raises(SettingsError) as read_error:
            ReadSettings.from_env(env | bad)
        assert str(read_error.value) == str(full_error.value)


def test_an_older_variable_sets_what_it_set_and_the_new_names_win():
    """GPUCAST_GPU_MEM_GB set both the OOM threshold and the plan's default GPU before they were split: it still does,
    for each whose own variable is unset; an error names the variable read."""
    both = Settings.from_env({"GPUCAST_GPU_MEM_GB": "40"}).planning
    assert (both.oom_gpu_mem_gb, both.default_gpu_mem_gb) == (40.0, 40.0)
    one = Settings.from_env({"GPUCAST_GPU_MEM_GB": "40", "GPUCAST_OOM_GPU_MEM_GB": "24"}).planning
    assert (one.oom_gpu_mem_gb, one.default_gpu_mem_gb) == (24.0, 40.0)
    with pytest.raises(SettingsError, match=re.escape("GPUCAST_GPU_MEM_GB='big' is not")):
        Settings.from_env({"GPUCAST_GPU_MEM_GB": "big", "GPUCAST_OOM_GPU_MEM_GB": "24"})


def test_overrides_are_checked_and_name_their_flag():
    s = Settings.from_env({})
    assert s.override(oom_gpu_mem_gb=40.0, max_reject_fraction=None).planning.oom_gpu_mem_gb == 40.0
    assert s.override(oom_gpu_mem_gb=40.0).quality is s.quality  # other concerns are kept as they are
    assert s.override(max_reject_fraction=None) is s  # None keeps the value
    with pytest.raises(SettingsError, match=re.escape("--oom-gpu-mem-gb=-1 is not a finite number > 0")):
        s.override({"oom_gpu_mem_gb": "--oom-gpu-mem-gb"}, oom_gpu_mem_gb=-1)
    with pytest.raises(SettingsError, match="unknown setting 'gpu_mem'"):
        s.override(gpu_mem=1)


def test_settings_are_frozen():
    with pytest.raises(AttributeError):
        Settings.from_env({}).planning.oom_gpu_mem_gb = 1.0


def test_the_readme_documents_every_setting():
    table = (ROOT / "docs" / "operations.md").read_text().split("## Settings")[1].split("\n## ")[0]
    for spec in SPECS:
        assert f"| `{spec.env}` |" in table, spec.env


def test_only_the_settings_module_reads_gpucast_variables():
    """Tasks never read the environment; flows and the warehouse get a Settings object."""
    readers = []
    for layer in ("tasks", "warehouse", "expectations", "flows"):
        for path in (ROOT / layer).rglob("*.py"):
            text = path.read_text()
            if re.search(r"os\.(environ|getenv)", text) and str(path.relative_to(ROOT)) not in ALLOWED_ENV_READERS:
                readers.append(str(path.relative_to(ROOT)))
    assert readers == []


# settings.py: the settings; flows/environment.py: Prefect's switches, set (not read) by the CLI before
# Prefect is imported; flows/children.py: hands gpucast's pid to its temporary API server child in that child's
# environment (a hand-over between two processes, not a setting); flows/environment.py also reads OMP_NUM_THREADS
# (`cores_here`: the OpenMP libraries' own variable, not a gpucast setting).
ALLOWED_ENV_READERS = {"flows/settings.py", "flows/environment.py", "flows/children.py"}


def test_nothing_writes_the_environment_at_import_time():
    """Importing any module of ours sets none of the variables we care about (Prefect's, GX's, ours):
    the edge configures, explicitly. (Libraries we import set their own, e.g. OpenMP's KMP_*: not ours.)"""
    import os
    import subprocess
    import sys

    modules = sorted({".".join(("gpucast", *p.relative_to(ROOT).with_suffix("").parts)).removesuffix(".__init__")
                      for layer in ("tasks", "warehouse", "expectations", "flows") for p in (ROOT / layer).rglob("*.py")})
    code = ("import importlib, os, sys\nbefore = dict(os.environ)\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            "changed = sorted(k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k) "
            "and k.startswith(('GPUCAST_', 'PREFECT_', 'GX_', 'DO_NOT_TRACK')))\n"
            "print(changed)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "GX_", "DO_NOT_TRACK"))}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def flow_parameters(path: Path) -> dict[str, list[str]]:
    """Every Prefect flow in `path` (a function decorated `@flow` or `@flow(...)`) -> its parameter names."""
    import ast

    found = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef) and any(
                (d.func if isinstance(d, ast.Call) else d).__dict__.get("id") == "flow" for d in node.decorator_list):
            a = node.args
            found[node.name] = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    return found


# A flow parameter that has a setting's name but is not its value: the plan's `inventory` is the parsed inventory
# file (an `Inventory`, read first by the nightly so a bad file stops it early), not GPUCAST_INVENTORY's path.
NOT_THE_SETTING = {"plan.py:capacity_plan": {"inventory"}}


def test_a_flow_takes_the_concerns_it_needs_never_settings_and_the_same_values_again():
    """Issue 39: `train_models(cluster, quality, settings)` took the bundle and parts of it again. A flow takes the
    whole `settings` (the nightly: it runs every step) or the concern objects it uses, never a concern or a setting's
    own name beside `settings`; and no flow takes a setting as a loose scalar (`gpu_mem_gb`, `days` of the plan)."""
    flows = {f"{p.name}:{name}": params for p in sorted((ROOT / "flows").glob("*.py"))
             for name, params in flow_parameters(p).items()}
    assert "train.py:train_models" in flows and "nightly.py:nightly" in flows  # the check sees the flows
    mixed = {f: sorted(set(p) & (set(CONCERNS) | {s.field for s in SPECS})) for f, p in flows.items() if "settings" in p}
    assert {f: both for f, both in mixed.items() if both} == {}
    loose = {f: sorted(set(p) & {s.field for s in SPECS} - NOT_THE_SETTING.get(f, set())) for f, p in flows.items()}
    assert {f: names for f, names in loose.items() if names} == {}
    assert set(flows["train.py:train_models"]) >= {"storage", "cluster", "quality"}


def test_the_flow_check_sees_a_flow_that_takes_settings_and_a_scalar(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("@flow(name='x')\ndef x(gpu_mem_gb: float, settings=None): ...\n"
                      "@flow\ndef y(storage=None): ...\ndef z(settings, gpu_mem_gb): ...\n")
    assert flow_parameters(module) == {"x": ["gpu_mem_gb", "settings"], "y": ["storage"]}


def test_a_deployment_hands_concerns_over_as_json():
    """The gpu pool's hand-off and prefect.yaml pass concerns as JSON objects; the flow gets the typed concern. The
    warehouse's concerns define no defaults (warehouse/concerns.py): a `storage` handed over names every value."""
    from dataclasses import asdict

    from gpucast.flows.settings import Cluster
    from gpucast.flows.train import train_models

    storage = Settings.from_env({"GPUCAST_HOME": "/srv/gpucast"}).storage
    given = train_models.validate_parameters({"storage": {**asdict(storage), "home": "/srv/gpucast"},
                                              "cluster": {"train_runner": "local"}, "publish": False})
    assert given["storage"] == storage and given["cluster"] == Cluster(train_runner="local")


def test_given_concerns_win_over_the_environment_and_the_rest_is_read(tmp_path):
    from gpucast.flows.settings import Quality

    s = Settings.given(quality=Quality(backtest_days=3), planning=None)
    env = Settings.from_env()
    assert s.quality.backtest_days == 3 and s.planning == env.planning and s.storage == env.storage
    with pytest.raises(TypeError, match="not a settings concern: gpu_mem_gb"):
        Settings.given(gpu_mem_gb=40.0)


def test_a_flow_handed_every_concern_reads_no_environment(monkeypatch):
    """A subflow (or a flow the CLI called) is handed every concern it takes: nothing is read again."""
    from gpucast.flows.settings import Quality

    built = Settings.from_env({"GPUCAST_HOME": "/srv/gpucast"})
    monkeypatch.setattr(Settings, "from_env", classmethod(lambda cls, environ=None: pytest.fail("read the environment")))
    s = Settings.given(storage=built.storage, quality=Quality(backtest_days=3))
    assert s.storage == built.storage and s.quality.backtest_days == 3


def test_train_options_leave_their_time_limits_to_the_settings():
    """The training concern is TrainOptions: a run's options that leave a limit None get the settings'; a run's
    options that set both are the training concern a caller hands over (`limits_given`)."""
    from gpucast.flows.settings import limits_given, with_time_limits
    from gpucast.tasks.learn.options import TrainOptions

    training = Settings.from_env({"GPUCAST_NIGHT_BUDGET_MINUTES": "45"}).training
    assert (training.nn_max_minutes, training.night_budget_minutes) == (20.0, 45.0)
    filled = with_time_limits(TrainOptions(repeats=2, nn_max_minutes=0), training)
    assert (filled.repeats, filled.nn_max_minutes, filled.night_budget_minutes) == (2, 0, 45.0)
    assert limits_given(TrainOptions(nn_max_minutes=1)) is None and limits_given(filled) is filled
    assert Settings.from_env({}).override(night_budget_minutes=7.5).training.night_budget_minutes == 7.5


# Flows a caller must hand every concern it takes: name -> its concern parameters, read from `flows/` (`flow_parameters`)
def concern_parameters() -> dict[str, set[str]]:
    return {name: set(params) & set(CONCERNS) for p in sorted((ROOT / "flows").glob("*.py"))
            for name, params in flow_parameters(p).items() if set(params) & set(CONCERNS)}


def calls_missing_concerns(path: Path, flows: dict[str, set[str]], root: Path = ROOT) -> list[str]:
    """'file:line flow: missing' for each call in `path` of a flow in `flows` that does not pass, by keyword, every
    concern the flow takes (a `**name` whose dict literal is assigned in the same function counts its keys)."""
    import ast

    missing = []
    tree = ast.parse(path.read_text())
    for func in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
        literals = {t.id: {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
                    for node in ast.walk(func) if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
                    for t in node.targets if isinstance(t, ast.Name)}
        for call in [n for n in ast.walk(func) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]:
            if call.func.id not in flows:
                continue
            passed = {k.arg for k in call.keywords if k.arg}
            passed |= {key for k in call.keywords if k.arg is None and isinstance(k.value, ast.Name)
                       for key in literals.get(k.value.id, ())}
            if lacking := flows[call.func.id] - passed:
                missing.append(f"{path.relative_to(root)}:{call.lineno} {call.func.id}: {', '.join(sorted(lacking))}")
    return missing


def test_callers_hand_a_flow_every_concern_it_takes():
    """Settings are built once, where the command starts (the CLI) or where a deployment's run starts; every call of a
    flow in `flows/` (a parent flow's, the CLI's) hands it every concern it takes, so no subflow reads the environment
    again. (The GPU pool's deployment run is started by parameters, not a call: its storage is the worker's.)"""
    flows = concern_parameters()
    assert {"ingest_job_logs", "score_pending", "train_models", "capacity_plan", "demand_forecast"} <= set(flows)
    files = sorted((ROOT / "flows").rglob("*.py"))
    assert [m for p in files for m in calls_missing_concerns(p, flows)] == []


def test_the_concern_check_finds_a_call_that_lacks_one(tmp_path):
    module = tmp_path / "planted.py"
    module.write_text("def night(s):\n    here = {'storage': s.storage}\n    score_pending(storage=s.storage)\n"
                      "    train_models(**here)\n")
    assert calls_missing_concerns(module, concern_parameters(), tmp_path) == [
        "planted.py:3 score_pending: cluster, planning, quality, tracing", "planted.py:4 train_models: cluster, quality, tracing"]


HOP = re.compile(r"\b((?:flows|tasks|warehouse|records|expectations)/[\w/]+\.py):([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)")


def named_hops(text: str) -> list[tuple[str, str]]:
    """Every `path.py:name` (a function, class, constant or `Class.method`) a page names."""
    return HOP.findall(text)


def defines(path: Path, name: str) -> bool:
    """Whether the module at `path` defines `name` at its top level (`Class.method`: the method in the class)."""
    import ast

    body = ast.parse(path.read_text()).body
    for part in name.split("."):
        found = [n for n in body if (isinstance(n, ast.FunctionDef | ast.ClassDef) and n.name == part)
                 or (isinstance(n, ast.Assign | ast.AnnAssign) and part in [
                     t.id for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)])]
        if not found:
            return False
        body = getattr(found[0], "body", [])
    return True


def test_the_maintainers_page_names_real_functions():
    """docs/maintainers.md ("Follow a setting") walks GPUCAST_SQL_THREADS and --repeats to their use by `file:function`
    hops: each must still exist, or the walk leads nowhere."""
    hops = named_hops((ROOT / "docs" / "maintainers.md").read_text())
    assert ("flows/settings.py", "SPECS") in hops and ("tasks/learn/train.py", "order_fits") in hops
    assert [f"{path}:{name}" for path, name in hops if not defines(ROOT / path, name)] == []


def test_the_hop_check_finds_a_name_that_is_gone(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("X = 1\nclass C:\n    def f(self): ...\ndef g(): ...\n")
    assert [defines(module, n) for n in ("X", "C.f", "g", "C.h", "h")] == [True, True, True, False, False]
    assert named_hops("`flows/cli/query.py:_sql` and tasks/learn/options.py:TrainOptions.") == [
        ("flows/cli/query.py", "_sql"), ("tasks/learn/options.py", "TrainOptions")]
