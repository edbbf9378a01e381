# Everything a fresh machine needs: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test tools bench verify clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip setuptools
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/tokenreel demo

# The tests probe videos with ffprobe and encode with a second ffmpeg build; Debian's ffmpeg
# package has both. (The encoder itself is imageio-ffmpeg's, installed with the venv.)
tools:
	@command -v ffprobe >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ffmpeg >/dev/null; } \
	  || { echo "make test needs ffprobe: install ffmpeg (Debian/Ubuntu: sudo apt-get install ffmpeg)" >&2; exit 2; }

test: $(STAMP) tools
	$(BIN)/python -m pytest -q
	$(BIN)/tokenreel verify sessions/*.render.json

bench: $(STAMP)
	$(BIN)/python bench/render_throughput.py
	$(BIN)/python bench/recorder_fidelity.py

clean:
	rm -rf $(VENV) out .pytest_cache
