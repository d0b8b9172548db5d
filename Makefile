# The two quick-start commands (README): `make demo` sets up and runs the main job,
# `make test` sets up and runs the test suite (.ci/run calls exactly `make test`).
VENV ?= .venv
PY := $(VENV)/bin/python
OPERA := $(VENV)/bin/opera
export TF_CPP_MIN_LOG_LEVEL := 2

.PHONY: setup test demo lint

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

setup: $(VENV)/.installed

test: setup
	$(PY) -m pytest -q -ra

lint: setup
	$(VENV)/bin/ruff check opera instrumentation templates tests benchmarks
	$(VENV)/bin/mypy opera instrumentation templates

# Main job on the embedded defaults. For now: harvest a small slice of each library and print the
# summary of the shipped corpus.
demo: setup
	mkdir -p opera-demo
	$(OPERA) harvest torch --source opinfo --limit 200 -o opera-demo/torch-slice.jsonl.gz
	$(OPERA) harvest onnx --source node-tests --limit 200 -o opera-demo/onnx-slice.jsonl.gz
	$(OPERA) stats harvested/*.jsonl.gz
