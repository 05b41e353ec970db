"""Settings: one frozen object, read from the environment once, every value checked, names in errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpucast.warehouse.settings import SPECS, Settings, SettingsError

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_when_nothing_is_set(tmp_path):
    s = Settings.from_env({"GPUCAST_HOME": str(tmp_path)})
    assert s.home == tmp_path.resolve()
    assert (s.lock_timeout_s, s.duckdb_memory, s.gpu_mem_gb, s.max_reject_fraction, s.keep_train_runs,
            s.nn_max_minutes, s.backtest_days) == (600.0, "1GB", 80.0, 0.2, 7, 20.0, 7)


@pytest.mark.parametrize("spec", SPECS[1:], ids=[s.env for s in SPECS[1:]])
def test_every_variable_is_read(spec, tmp_path):
    value = ("3GB" if spec.expects.startswith("a size") else "http://127.0.0.1:9/hook" if spec.expects.startswith("an http")
             else "local" if spec.field == "train_runner" else "tcp://127.0.0.1:8786" if spec.field == "dask_address"
             else "3" if spec.parse is int else "0.5")
    s = Settings.from_env({"GPUCAST_HOME": str(tmp_path), spec.env: value})
    assert getattr(s, spec.field) == spec.parse(value) != spec.default


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
    ("GPUCAST_ALERT_WEBHOOK_URL", "hooks.example.com", "an http(s) URL, or empty"),
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


def test_an_empty_data_directory_is_refused_not_defaulted():
    """A deployment rendering `{{ $GPUCAST_HOME }}` from an unset variable must fail, not use ./.gpucast."""
    with pytest.raises(SettingsError, match="GPUCAST_HOME is set but empty"):
        Settings.from_env({"GPUCAST_HOME": ""})


def test_empty_counts_as_unset():
    assert Settings.from_env({"GPUCAST_GPU_MEM_GB": " "}).gpu_mem_gb == 80.0


def test_overrides_are_checked_and_name_their_flag():
    s = Settings.from_env({})
    assert s.override(gpu_mem_gb=40.0, max_reject_fraction=None).gpu_mem_gb == 40.0
    assert s.override(max_reject_fraction=None) is s  # None keeps the value
    with pytest.raises(SettingsError, match=re.escape("--gpu-mem-gb=-1 is not a finite number > 0")):
        s.override({"gpu_mem_gb": "--gpu-mem-gb"}, gpu_mem_gb=-1)
    with pytest.raises(SettingsError, match="unknown setting 'gpu_mem'"):
        s.override(gpu_mem=1)


def test_settings_are_frozen():
    with pytest.raises(AttributeError):
        Settings.from_env({}).gpu_mem_gb = 1.0


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


# settings.py: the settings; housekeeping.py: the crash tests' failpoint seam; flows/__init__.py and
# expectations/validate.py: telemetry switches set (not read) before Prefect and GX are imported;
# tasks/learn/models/registry.py: OMP_NUM_THREADS (not ours: a Dask worker's share of the cores) sizes a fit.
ALLOWED_ENV_READERS = {"warehouse/settings.py", "warehouse/housekeeping.py", "flows/__init__.py",
                       "expectations/validate.py", "tasks/learn/models/registry.py"}
