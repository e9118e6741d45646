# The two commands of the README: `make demo` (the main job) and `make test` (lint + the test suite).
# Both set up a fresh machine first (idempotent; see scripts/bootstrap.sh).
PY := .venv/bin/python
# pytest-xdist workers of `make test` / `make test-fast` (tests/conftest.py groups the tests; 0 = one process)
TEST_WORKERS ?= 2

.PHONY: bootstrap demo smoke test test-fast lint typecheck bench bench-quick
bootstrap:
	bash scripts/bootstrap.sh

demo: bootstrap
	.venv/bin/esopt train --config configs/demo.toml --run-dir runs/demo-$$(date +%Y%m%d-%H%M%S)

smoke: bootstrap
	.venv/bin/esopt train --config configs/smoke.toml --run-dir runs/smoke-$$(date +%Y%m%d-%H%M%S)

lint: bootstrap
	.venv/bin/ruff check .

# mypy on the paths of pyproject.toml's [tool.mypy] (incremental: its cache is .mypy_cache/)
typecheck: bootstrap
	.venv/bin/mypy

test: bootstrap
	.venv/bin/ruff check .
	.venv/bin/mypy
	$(PY) -m pytest -n $(TEST_WORKERS)

test-fast: bootstrap
	.venv/bin/ruff check .
	$(PY) -m pytest -n $(TEST_WORKERS) -m "not slow"

bench: bootstrap
	$(PY) -m benchmarks.run

bench-quick: bootstrap
	$(PY) -m benchmarks.run --quick
