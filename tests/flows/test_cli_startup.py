"""`gpucast` answers at once: loading the command line imports none of the heavy libraries (issue 31, item 4).

Each command imports what it uses when it runs (a flow command: Prefect; `ingest`: Great Expectations;
`train`: the models). Measured figures: docs/benchmarks.md, "The command line's start-up".
"""

from __future__ import annotations

import subprocess
import sys

# Seconds each, at least, to import on the 2-core machine; none is needed to parse, print help or the version.
HEAVY = ("prefect", "torch", "great_expectations", "sklearn", "xgboost", "lightgbm", "dask", "mlflow", "pandas",
         "pyarrow", "duckdb", "statsforecast")


def test_loading_the_command_line_imports_no_heavy_library():
    code = ("import sys, gpucast.flows.cli\n"
            f"print(' '.join(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"imported when the command line loads: {out.stdout.strip()}"
