"""Process-wide switches for the libraries gpucast drives, set once at the edge, before Prefect is
imported: by the CLI's `main`, the test session (tests/conftest.py) and the benchmark scripts. Nothing
sets them at import time.

* Prefect keeps its state under the data directory (`$GPUCAST_HOME/prefect`), so a run needs no server
  and leaves nothing in the user's home;
* telemetry is off (`DO_NOT_TRACK` is not enough for the server: shared/STACK-NOTES.md);
* the temporary local API server gets 90 s to start on a busy 2-core machine (the default 20 s was
  exceeded here); the CLI starts that server itself, in a session of its own, and it stops when
  `gpucast` is gone, however it ended (`flows/children.py`).
Values already in the environment win, so a deployment's own Prefect settings are kept.
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path

from gpucast.flows import children


def defaults(home: Path) -> dict[str, str]:
    return {
        "PREFECT_HOME": str(home / "prefect"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "90",
    }


def configure(home: Path | None = None) -> None:
    """Set the defaults above where unset, create Prefect's home (its temporary server cannot start
    without it, and Prefect makes it without parents). `home`: the data directory of the settings the caller
    built (the CLI's); None: GPUCAST_HOME's (a command that reads no setting, the test session, a benchmark)."""
    from gpucast.flows.settings import home_from_env  # (the settings' table: pydantic, not for `gpucast --help`)

    for key, value in defaults(home or home_from_env()).items():
        os.environ.setdefault(key, value)
    Path(os.environ["PREFECT_HOME"]).expanduser().mkdir(parents=True, exist_ok=True)


# MLflow's client, as `gpucast import mlflow` reads a store: MLflow 3 refuses a file store unless told (reading
# one is what an import does), and retries an unreachable server for minutes by default (here: fail at once; the
# nightly tries again the next night).
MLFLOW_DEFAULTS = {"MLFLOW_ALLOW_FILE_STORE": "true", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
                   "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}


def configure_mlflow() -> None:
    """Set `MLFLOW_DEFAULTS` where unset (before MLflow's client is made; a site's own values win)."""
    for key, value in MLFLOW_DEFAULTS.items():
        os.environ.setdefault(key, value)


def configured_prefect_api() -> str | None:
    """The Prefect API this process would talk to when one is configured (PREFECT_API_URL in the
    environment, or in the active profile of PREFECT_HOME's profiles.toml); None means every flow run
    starts a temporary local server (the one gpucast started, `flows/children.py`, is not a configured one).
    Read without importing Prefect (2 s), for commands that answer at once."""
    if url := os.environ.get("PREFECT_API_URL", "").strip():
        return None if url == children.temporary_url() else url
    profiles = Path(os.environ.get("PREFECT_HOME", "~/.prefect")).expanduser() / "profiles.toml"
    try:
        data = tomllib.loads(profiles.read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return None
    active = os.environ.get("PREFECT_PROFILE") or data.get("active", "ephemeral")
    return str(data.get("profiles", {}).get(active, {}).get("PREFECT_API_URL", "")).strip() or None


def prefect_api_in_use() -> str | None:
    """`configured_prefect_api`, or, once Prefect is imported, the API its current settings name (a
    `temporary_settings` block, as the test session's harness sets): where a flow run would go without a
    temporary server. None: a flow command needs one."""
    if url := configured_prefect_api():
        return url
    if "prefect.settings" in sys.modules:
        url = sys.modules["prefect.settings"].get_current_settings().api.url
        return url if url and url != children.temporary_url() else None
    return None


def child_environment(**overrides: str) -> dict[str, str]:
    """This process's environment with `overrides`, for a program gpucast runs (e.g. `sacct` in UTC)."""
    return {**os.environ, **overrides}


def cores_here() -> int:
    """The cores this process may use: `OMP_NUM_THREADS` when it is set to a whole number >= 1 (the OpenMP
    libraries' own variable, which torch reads too), else the cores the process may run on.

    The fits pass this count to LightGBM, XGBoost, CatBoost and scikit-learn explicitly, which overrides
    their own reading of `OMP_NUM_THREADS`; so a machine shared with other work (or a test run on parallel
    workers) sets it once for all of them. More OpenMP threads than free cores is not a little slower but
    10-30x (threads spin at every barrier while another process holds the core: a LightGBM fit of 2,000
    rows took 5-7 s on one thread and 74-182 s on two beside other work, docs/testing.md)."""
    given = os.environ.get("OMP_NUM_THREADS", "").strip()
    if given.isdigit() and int(given) >= 1:
        return int(given)
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # no affinity call on this platform (macOS)
        return os.cpu_count() or 1
