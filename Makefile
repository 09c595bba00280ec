# wander: `make run` runs the main job on the embedded defaults; `make test` runs the tests.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

# Offline and quiet: no tool phones home.
export DO_NOT_TRACK=1
export PREFECT_SERVER_ANALYTICS_ENABLED=false
export DVC_NO_ANALYTICS=1
export GX_ANALYTICS_ENABLED=false
export MLFLOW_DISABLE_TELEMETRY=true
export HF_HUB_OFFLINE=1
export HF_DATASETS_OFFLINE=1
export TRANSFORMERS_NO_ADVISORY_WARNINGS=1
export TOKENIZERS_PARALLELISM=false
# Prefect waits 20 s for its ephemeral API by default: too little on two cores shared with other work.
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS ?= 120
# DVC stage commands call `python` and `dvc`: the project's venv comes first.
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: install run test lint bench ui clean

$(VENV)/.installed: pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch first, from its CPU wheel: otherwise a dependency would pull the CUDA build.
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $@

install: $(VENV)/.installed

# The whole pipeline on params.yaml through the Prefect flow (ephemeral Prefect API, no server needed).
run: install
	$(PY) -m flows.pipeline

# The MLflow UI on the project's store: http://127.0.0.1:5000
ui: install
	$(VENV)/bin/mlflow ui --backend-store-uri sqlite:///mlflow/mlflow.db --host 127.0.0.1 --port 5000

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# Two xdist workers on two cores; a test module (or an env's smoke pipeline) stays on one worker (tests/conftest.py).
# PYTEST_WORKERS=0 runs the suite in this process.
PYTEST_WORKERS ?= 2
test: lint
	$(VENV)/bin/pytest -q -n $(PYTEST_WORKERS) --dist loadscope --no-loadscope-reorder

bench: install
	$(PY) -m bench.run

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
