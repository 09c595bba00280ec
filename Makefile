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

.PHONY: install run test lint bench clean

$(VENV)/.installed: pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch first, from its CPU wheel: otherwise a dependency would pull the CUDA build.
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $@

install: $(VENV)/.installed

run: install
	$(VENV)/bin/wander eval --policy minimax --opponents random,minimax-0.5,minimax-0 --games 200

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: lint
	$(VENV)/bin/pytest -q

bench: install
	$(PY) -m bench.run

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
