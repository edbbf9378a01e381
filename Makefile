# Everything a fresh machine needs: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench verify clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip setuptools
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/tokenreel demo

test: $(STAMP)
	$(BIN)/python -m pytest -q
	$(BIN)/tokenreel verify sessions/*.render.json

bench: $(STAMP)
	$(BIN)/python bench/render_throughput.py
	$(BIN)/python bench/recorder_fidelity.py

clean:
	rm -rf $(VENV) out .pytest_cache
