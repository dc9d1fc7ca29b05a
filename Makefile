# The two quick-start commands live here: `make lab` and `make test`.
# Both create the virtual environment on first use (and again whenever pyproject.toml changes).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: setup system-deps lab test test-quick check fix bench notebooks clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	@# uv installs the same versions as pip in a sixth of the time; pip if uv cannot be had.
	@# --compile-bytecode, as pip does: where PYTHONDONTWRITEBYTECODE is set (this machine kind
	@# sets it) a package without .pyc files is compiled again by every process that imports it
	@# (`import dbos`: 4 s of CPU instead of 1.2 s, in every attempt, kernel and `relay` command)
	$(BIN)/python -m pip install --quiet uv && \
	  $(BIN)/python -m uv pip install --quiet --compile-bytecode --python $(BIN)/python \
	    -e '.[test]' || \
	  { $(BIN)/python -m pip install --quiet --upgrade pip && \
	    $(BIN)/python -m pip install --quiet -e '.[test]'; }
	$(BIN)/jupyter-builder develop --overwrite . >/dev/null
	$(BIN)/python -m compileall -q relay_notebook agentworks
	touch $(STAMP)

setup: $(STAMP)

## Debian packages the tests use: passt (pasta) gives a relay's sandbox its way to the outside
## (and to the loopback endpoints it declares), bubblewrap confines relays where the kit's own
## sandbox cannot be made,
## chromium runs the JupyterLab browser tests, postgresql's server programs run the worker-pool
## tests (each test session starts its own private server with them; see relay_notebook.testing)
system-deps:
	@missing=""; \
	command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	command -v pasta >/dev/null || missing="$$missing passt"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null || \
	  missing="$$missing postgresql"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "note: install$$missing (as root) for the full test suite; tests needing it skip"; \
	  fi; \
	fi

## JupyterLab on the tutorials, with the kit installed
lab: setup
	$(BIN)/jupyter lab --notebook-dir=notebooks $(ROOT_FLAG)

## lint, format check, types (the kit and the benchmarks' scripts), layering
check: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/mypy benchmarks
	$(BIN)/lint-imports

## two workers (pytest-xdist), each running whole test files: a file's module fixtures are built
## once and a notebook's cells run in order in one kernel (--dist loadgroup is broken on pytest 9);
## the longest files start first (tests/file_order.py, refreshed with tools/file_seconds.py)
## bytecode is written during the tests even where PYTHONDONTWRITEBYTECODE is set: pytest then
## keeps its assertion rewrites of the ~400 test and kit modules instead of redoing them in each
## worker (30 s of CPU each), and the test modules are compiled once, not in every process;
## the checks run beside the tests (mypy from cold is a minute of one core that the tests, often
## waiting on processes, mostly leave free); either failing fails `make test`, checks printed last;
## the Debian packages install beside the virtual environment (both mostly wait on downloads)
test:
	@$(MAKE) --no-print-directory -j2 setup system-deps
	@$(MAKE) --no-print-directory check > $(VENV)/check.log 2>&1 & checks=$$!; \
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder --durations=15; tests=$$?; \
	wait $$checks; checked=$$?; \
	echo "--- make check (lint, format, types, layers), run beside the tests:"; \
	cat $(VENV)/check.log; \
	if [ $$checked -ne 0 ]; then echo "make check failed (exit $$checked)"; fi; \
	exit $$(( tests != 0 ? tests : checked ))

## the inner loop, about two minutes: the unit tests of every layer, the magics on a real
## IPython shell and the core of a run (runner, fork, history, the DBOS canary, the secret
## check), without the browsers, the notebooks, PostgreSQL or the fuzzers; `make test` runs all
QUICK_TESTS := tests/unit tests/magics tests/integration/test_runner.py \
  tests/integration/test_fork.py tests/integration/test_history.py \
  tests/integration/test_dbos_canary.py tests/security/test_secret_check.py
QUICK := not browser and not notebook and not postgres and not fuzz
test-quick: setup
	$(BIN)/python -m pytest -n 2 --dist loadfile -m "$(QUICK)" -q $(QUICK_TESTS)

fix: setup
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

## rewrite the tutorials from tools/make_notebooks.py and store fresh outputs (no widget state)
notebooks: setup
	$(BIN)/python tools/make_notebooks.py
	cd notebooks && for nb in *.ipynb; do \
	  ../$(BIN)/jupyter nbconvert --to notebook --execute --inplace \
	    --ExecutePreprocessor.store_widget_state=False "$$nb" || exit 1; done

bench: setup
	for b in benchmarks/bench_*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis
