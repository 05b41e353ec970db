"""Prefect flows (wiring only) and the `gpucast` command line.

Importing this package sets safe defaults for Prefect before Prefect is imported: its state lives
under the data directory, telemetry is off, and the temporary local API server gets enough time to
start on a busy 2-core machine (shared/STACK-NOTES.md). Values already in the environment win.
"""

import os
from pathlib import Path

from gpucast.warehouse.settings import home_from_env

_DEFAULTS = {
    "PREFECT_HOME": str(home_from_env() / "prefect"),
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "90",
    "GX_ANALYTICS_ENABLED": "false",
}
for _key, _value in _DEFAULTS.items():
    os.environ.setdefault(_key, _value)
# Prefect creates its home without parents and its temporary server cannot start without it.
Path(os.environ["PREFECT_HOME"]).expanduser().mkdir(parents=True, exist_ok=True)
