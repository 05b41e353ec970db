# The two commands of the README. Each sets itself up on a fresh machine (Python 3.11 + pip).
PY ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: demo demo-sources test setup lint clean-data bench-ingest bench-cli bench-train bench-score bench-scale clean constraints

# System packages from Debian's registry: gcc compiles tree champions for bulk scoring (without it
# they are scored by their own library, slower); chromium renders the planners' page in its test
# (without it that test is skipped, saying why). Not root and no sudo: say so and go on.
SUDO := $(shell [ "$$(id -u)" = 0 ] || command -v sudo >/dev/null && { [ "$$(id -u)" = 0 ] || echo sudo; })

# One line per set-up step: the package managers' own output goes to $(SETUP_LOG). `step`: make stops when it
# fails, showing the end of that log; `optional`: set-up goes on and says what is lost.
SETUP_LOG := setup.log
EXTRAS := .[ml,mlflow,dev]
step = printf '%-58s' '$(1) ...'; if { $(2); } >>$(SETUP_LOG) 2>&1; then echo ok; else echo FAILED; \
	tail -n 30 $(SETUP_LOG); echo "(whole log: $(SETUP_LOG))"; exit 1; fi
optional = printf '%-58s' '$(1) ...'; if { $(2); } >>$(SETUP_LOG) 2>&1; then echo ok; else echo "not installed: $(3) ($(SETUP_LOG))"; fi

# uv installs the pinned set (constraints.txt) in ~12 s, where pip took ~100 s (docs/testing.md); pip is the
# fallback. uv reads no pip configuration: the folders pip finds local wheels in (here, torch's CPU build, which
# keeps the multi-GB CUDA build away) are passed on to it.
# Bytecode: only for the modules gpucast's commands and tests import (~6,900 of the venv's ~26,400 files: 18 CPU-s
# where compiling all of them took 77), written by importing them once (WARM_*: two processes, one per core), not
# at install (`--compile-bytecode`); the tests and the demo write what else they import (RUN: a machine setting
# PYTHONDONTWRITEBYTECODE, as this one does, would otherwise compile it again in every process). Not torchvision
# and timm: their import fails beside CPU torch unless the zoo's workaround runs (tasks/learn/zoo_trace.py).
UV_VERSION := 0.13.9
FIND_LINKS = $(or $(PIP_FIND_LINKS),$(shell $(PY) -m pip config get global.find-links 2>/dev/null))
UV_INSTALL = $(VENV)/bin/uv pip install --quiet --python $(VENV)/bin/python -c constraints.txt \
	$(foreach d,$(FIND_LINKS),--find-links $(d)) -e '$(EXTRAS)' --upgrade-package pip pip
PIP_INSTALL = $(VENV)/bin/pip install --quiet --upgrade pip && $(VENV)/bin/pip install --quiet -c constraints.txt -e '$(EXTRAS)'
WARM_ML := torch, transformers, lightgbm, xgboost, catboost, sklearn.ensemble, skops.io, treelite, \
	tl2cgen, crepes, scipy.stats
WARM_FLOWS := prefect, prefect.server.api.server, prefect.testing.utilities, prefect_dask, distributed, \
	great_expectations, duckdb_engine, statsforecast.models, mlflow, polars, pyarrow.parquet, pandas, \
	matplotlib.pyplot, bokeh, jinja2, yaml, sqlalchemy, hypothesis, pytest, xdist, markdown_it
RUN := env -u PYTHONDONTWRITEBYTECODE
WARM = $(RUN) $(VENV)/bin/python -c 'import $(WARM_ML)' & $(RUN) $(VENV)/bin/python -c 'import $(WARM_FLOWS)'; \
	a=$$?; wait $$!; b=$$?; [ $$a = 0 ] && [ $$b = 0 ]

$(STAMP): pyproject.toml setup.py constraints.txt
	@: > $(SETUP_LOG)
	@$(call optional,gcc (compiles tree champions for scoring),command -v gcc || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq gcc; },tree champions will be scored without compiling (slower))
	@$(call optional,chromium (renders the planners page in a test; ~2 min),command -v chromium || { $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; },the test of the planners' page in a browser will be skipped)
	@$(call step,Python environment $(VENV),$(PY) -m venv $(VENV))
	@$(call step,uv (installs in under a minute what pip does in two),$(VENV)/bin/pip install --quiet uv==$(UV_VERSION))
	@$(call step,gpucast and its libraries (constraints.txt),$(UV_INSTALL) || { echo "uv failed: pip instead"; $(PIP_INSTALL); })
	@$(call optional,bytecode of the libraries gpucast imports,$(WARM),each process compiles what it imports (slower))
	@touch $(STAMP)
	@echo "set-up done (the package managers' output: $(SETUP_LOG))"

setup: $(STAMP)

demo: $(STAMP)  ## the nightly pipeline on the built-in simulated logs
	$(RUN) $(VENV)/bin/gpucast demo

SOURCES_DEMO := .gpucast-sources
demo-sources: $(STAMP)  ## a generated MLflow store and sacct file, imported end to end to forecasts (docs/sources.md)
	rm -rf $(SOURCES_DEMO)
	$(VENV)/bin/python tests/data/make_sources_demo.py $(SOURCES_DEMO)/inputs
	GPUCAST_HOME=$(SOURCES_DEMO) $(VENV)/bin/gpucast import mlflow \
		--tracking-uri sqlite:///$(CURDIR)/$(SOURCES_DEMO)/inputs/mlflow.db --experiment demo-sweeps
	GPUCAST_HOME=$(SOURCES_DEMO) $(VENV)/bin/gpucast import slurm $(SOURCES_DEMO)/inputs/sacct.txt \
		--mlflow-uri sqlite:///$(CURDIR)/$(SOURCES_DEMO)/inputs/mlflow.db --mlflow-experiment demo-cluster
	GPUCAST_HOME=$(SOURCES_DEMO) $(VENV)/bin/gpucast train --target peak_gpu_mem_gb,runtime_hours \
		--models prior,linear_fs,decision_tree,lightgbm \
		--repeats 1 --train-runner local --min-labelled 100
	GPUCAST_HOME=$(SOURCES_DEMO) $(VENV)/bin/gpucast score
	GPUCAST_HOME=$(SOURCES_DEMO) $(VENV)/bin/gpucast sql "SELECT job_id, model_type, target, round(p50, 2) AS p50, \
		round(p90, 2) AS p90, model FROM pending_forecasts ORDER BY job_id, target LIMIT 12"

# The suite runs on parallel workers (pytest-xdist), one per core by default; each worker has its own data
# directory and Prefect test server (tests/conftest.py). TEST_WORKERS=0: one process. docs/testing.md has the rest.
TEST_WORKERS ?= auto
test: $(STAMP)  ## the linter, then the whole test suite (the 20 slowest tests listed at the end)
	$(VENV)/bin/ruff check .
	$(RUN) $(VENV)/bin/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --durations=20

lint: $(STAMP)
	$(VENV)/bin/ruff check .

bench-ingest: $(STAMP)
	$(VENV)/bin/python tests/benchmarks/bench_ingest.py

bench-cli: $(STAMP)  ## the quick commands' start-to-exit seconds and imports (goals: --help, status, sql <= 0.5 s; every one under 2 s)
	$(VENV)/bin/python tests/benchmarks/bench_cli.py

bench-train: $(STAMP)
	$(VENV)/bin/python tests/benchmarks/bench_train.py

bench-score: $(STAMP)
	$(VENV)/bin/python tests/benchmarks/bench_score.py

bench-scale: $(STAMP)  ## 10M-row history + 1M pending: ~10 GB of disk, ~15 minutes (4 simulating)
	$(VENV)/bin/python tests/benchmarks/bench_scale.py

constraints: $(STAMP)  ## re-pin constraints.txt to what the venv holds (after a change to pyproject.toml)
	{ sed -n '1,3p' constraints.txt; $(VENV)/bin/pip freeze --all --exclude-editable | grep -v '^gpucast\|^pip==' | sed 's/+cpu$$//'; } > constraints.new
	mv constraints.new constraints.txt

clean:  ## caches and build output only: the data folder (.gpucast) is never touched here
	rm -rf .pytest_cache build dist *.egg-info

clean-data:  ## DELETES ./.gpucast (warehouse, lake, models): only for a scratch checkout
	rm -rf .gpucast
