# The two quick-start commands (README): `make demo` sets up and runs the main job,
# `make test` sets up and runs the test suite (.ci/run calls exactly `make test`).
VENV ?= .venv
PY := $(VENV)/bin/python
OPERA := $(VENV)/bin/opera
export TF_CPP_MIN_LOG_LEVEL := 2

.PHONY: setup browser test test-fast demo lint

$(VENV)/.installed: pyproject.toml setup.py
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev,ray]"
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

# The edit loop: the suite without the tests marked slow (a real harvest, a notebook, a Ray cluster,
# real compilers over a slice; see tests/conftest.py). `make test` above stays the full suite.
test-fast: setup browser
	OPERA_REQUIRE_BROWSER=1 $(PY) -m pytest -q -ra -m "not slow"

lint: setup
	$(VENV)/bin/ruff check opera instrumentation templates tests benchmarks notebooks
	$(VENV)/bin/mypy opera instrumentation templates

# Main job on the embedded defaults: the nightly pipeline on the shipped corpus (harvested/), the
# local worker pool and SQLite: every installed CPU target, prioritized, within DEMO_BUDGET (split
# across targets), compared with the previous night in the same store; JUnit XML + HTML report.
# Its last line is the path of the HTML report (opera-demo/opera.db.d/nightly/N/report.html).
# Exit 1 means "new failures" (on a first night, every failure is new): the demo reports it and
# goes on; exit 2 (bad input) stops make. Run it again for a second night to see fixed/still-failing.
DEMO := opera-demo
DEMO_BUDGET ?= 8m
demo: setup
	$(OPERA) targets
	$(OPERA) nightly harvested/onnx.jsonl.gz harvested/torch.jsonl.gz harvested/keras.jsonl.gz \
	    --budget $(DEMO_BUDGET) --store $(DEMO)/opera.db; \
	  status=$$?; [ $$status -le 1 ] || exit $$status
