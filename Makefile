# The two quick-start commands (README): `make demo` sets up and runs the main job,
# `make test` sets up and runs the test suite (.ci/run calls exactly `make test`).
VENV ?= .venv
PY := $(VENV)/bin/python
OPERA := $(VENV)/bin/opera
export TF_CPP_MIN_LOG_LEVEL := 2

.PHONY: setup browser test demo lint

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

setup: $(VENV)/.installed

# tests/test_nightly.py opens the nightly HTML report in headless Chromium (Debian packages).
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
browser:
	@command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium chromium-driver; }

test: setup browser
	OPERA_REQUIRE_BROWSER=1 $(PY) -m pytest -q -ra

lint: setup
	$(VENV)/bin/ruff check opera instrumentation templates tests benchmarks
	$(VENV)/bin/mypy opera instrumentation templates

# Main job on the embedded defaults: the shipped corpus (harvested/), the local worker pool, SQLite.
# A prioritized slice of each library through every installed CPU target (a few minutes on 2
# cores), then the unique bug signatures with their reproducers. `opera run --resume RUN` finishes
# an interrupted run.
DEMO := opera-demo
DEMO_LIMIT ?= 100
demo: setup
	mkdir -p $(DEMO)
	$(OPERA) targets
	$(OPERA) prioritize harvested/onnx.jsonl.gz --target tvm-onnx --strategy opera -o $(DEMO)/onnx.order
	$(OPERA) prioritize harvested/torch.jsonl.gz --target tvm-torch --strategy opera -o $(DEMO)/torch.order
	$(OPERA) prioritize harvested/keras.jsonl.gz --target tvm-keras --strategy opera -o $(DEMO)/keras.order
	$(OPERA) run harvested/onnx.jsonl.gz -t tvm-onnx -t ov-onnx --order $(DEMO)/onnx.order --limit $(DEMO_LIMIT) --store $(DEMO)/opera.db
	$(OPERA) run harvested/torch.jsonl.gz -t tvm-torch -t ov-torch -t inductor-torch --order $(DEMO)/torch.order --limit $(DEMO_LIMIT) --store $(DEMO)/opera.db
	$(OPERA) run harvested/keras.jsonl.gz -t tvm-keras -t ov-keras --order $(DEMO)/keras.order --limit $(DEMO_LIMIT) --store $(DEMO)/opera.db
	$(OPERA) bugs --store $(DEMO)/opera.db
