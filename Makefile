# streamgate: `make run`, `make check` and `make test` set up what they need on a fresh Debian
# machine.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# The distribution's interpreter first (Debian's python3.11 is built with PGO and LTO and runs
# the gateway's Python code about 1.45x faster than a build without them, as pyenv makes by
# default), then whatever python3.11 / python3.12 / python3 comes first on PATH; `make
# PYTHON=...` overrides it (a venv is made once: remove .venv to change it).
FIND_PYTHON := for p in /usr/bin/python3.11 python3.11 /usr/bin/python3.12 python3.12 python3; do \
  command -v $$p && break; done
PYTHON ?= $(shell $(FIND_PYTHON))
VENV := .venv
BIN := $(VENV)/bin
# Two stamps in one venv: what running the gateway needs (the runtime dependencies: `make run`),
# and on top of it the `test` and `pipeline` extras (linters, test clients, Tansu; pyspark and
# pyarrow for pipeline/ and tests/pipeline: `make check`, `make test`). `make run` after
# `make test` installs nothing; `make test` after `make run` adds the extras.
RUN_STAMP := $(VENV)/.run-stamp
TEST_STAMP := $(VENV)/.test-stamp
PIP_INSTALL := $(BIN)/python -m pip install -q --disable-pip-version-check -c constraints.txt
# Older Iggy clients (classic framing), each pinned in a venv of its own: their extension modules
# cannot share one with apache-iggy 0.9.0. tests/gateway/listeners/iggy_classic runs them.
IGGY08_VENV := .venv-iggy08
IGGY08_STAMP := $(IGGY08_VENV)/.installed-stamp
IGGYPY04_VENV := .venv-iggypy04
IGGYPY04_STAMP := $(IGGYPY04_VENV)/.installed-stamp
# Debian packages the test suite needs (the real servers and clients of later protocols join
# this list as their listeners arrive). Installed with apt-get only when missing.
# rabbitmq-server: the real RabbitMQ (3.10.8 on bookworm, stream plugin included) that
# tests/helpers/rabbitmq_server.py runs on loopback for the backend tests, with epmd (from
# erlang-base). The tests never use its service: each runs a private node on free ports.
# openjdk-17-jre-headless: the JVM pyspark starts (tests/pipeline; bookworm's default Java).
# prometheus: Debian's Prometheus 2.42 and promtool (tests/monitoring runs its own server on a
# free loopback port, never the package's service); chromium: the status page's browser test.
APT_TEST_PACKAGES := kcat rabbitmq-server openjdk-17-jre-headless prometheus chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# The tests that need no server, no extra venv and no apt (codecs, translation, coordination, the
# embedded store, config, the client's rendering, the pipeline's options and offset arithmetic):
# `make check`. By path, so a moved or renamed
# one is an error here rather than silently left out; a new module under these folders joins it.
CHECK_TESTS := tests/protocols tests/gateway/translate tests/gateway/coordination \
	tests/gateway/backends/embedded tests/gateway/client tests/gateway/test_config.py \
	tests/gateway/test_access_log.py tests/gateway/test_redact.py \
	tests/gateway/test_status_page.py tests/deploy/test_dockerfile.py \
	tests/deploy/test_kubernetes.py tests/gateway/listeners/test_connection_drain.py \
	tests/gateway/backends/iggy/test_mapping.py \
	tests/gateway/backends/rabbitmq_stream/test_catalog.py \
	tests/gateway/backends/rabbitmq_stream/test_streams.py \
	tests/pipeline/test_options.py tests/pipeline/test_offsets.py \
	tests/pipeline/test_partitioner.py tests/pipeline/test_dedup.py tests/pipeline/test_cli.py \
	tests/abuse/test_codecs.py

.PHONY: help setup setup-run run check test lint bench bench-kafka bench-iggy \
	bench-rabbitmq-stream bench-backends bench-compare clean apt-test python-ok compiler-ok \
	older-clients

help:
	@echo "make run   - set up (runtime dependencies only) and run the gateway on the embedded"
	@echo "             backend (./data)"
	@echo "make check - the fast loop (< 2 min): linters and the tests that need no server"
	@echo "make test  - set up and run the linters and the whole test suite"
	@echo "make bench - benchmark the embedded store"
	@echo "make bench-kafka - confluent-kafka against a gateway it starts (100 B and 1 KiB)"
	@echo "make bench-iggy - apache-iggy batches of 1000 against a gateway it starts"
	@echo "make bench-rabbitmq-stream - rstream publish (confirmed) and consume, gateway it starts"
	@echo "make bench-backends - rstream and confluent-kafka straight to a private RabbitMQ and"
	@echo "                      Tansu vs through streamgate on them, side by side"
	@echo "make bench-compare - server CPU per message: streamgate vs the same private RabbitMQ"
	@echo "                     and Tansu (the performance yardstick)"

# Debian's python3 needs python3-venv for `-m venv`; install it when it is missing.
python-ok:
	@if [ -z "$(PYTHON)" ]; then \
	  echo "installing python3 (apt-get)"; $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq python3 python3-venv; fi
	@py=$$($(FIND_PYTHON)); \
	$$py -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || \
	  { echo "streamgate needs Python >= 3.11 ($$py is older)"; exit 1; }; \
	$$py -c 'import ensurepip, venv' 2>/dev/null || { \
	  echo "installing python3-venv (apt-get)"; $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq python3-venv; };

# rbfly (a RabbitMQ Stream client in the test extra) builds C extensions from its sources.
compiler-ok:
	@py=$$($(FIND_PYTHON)); \
	command -v cc >/dev/null 2>&1 && $$py -c 'import os, sys, sysconfig; \
	  sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' || { \
	  echo "installing gcc and python3-dev (apt-get)"; $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq gcc python3-dev; }

$(RUN_STAMP): pyproject.toml constraints.txt | python-ok
	$(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) -e .
	@touch $(RUN_STAMP)

$(TEST_STAMP): $(RUN_STAMP) | compiler-ok
	$(PIP_INSTALL) -e '.[test,pipeline]'
	@touch $(TEST_STAMP)

setup-run: $(RUN_STAMP)

setup: $(TEST_STAMP)

$(IGGY08_STAMP): | python-ok
	$(PYTHON) -m venv $(IGGY08_VENV)
	$(IGGY08_VENV)/bin/python -m pip install -q --disable-pip-version-check apache-iggy==0.8.0
	$(IGGY08_VENV)/bin/python -c 'import apache_iggy'
	@touch $(IGGY08_STAMP)

$(IGGYPY04_STAMP): | python-ok
	$(PYTHON) -m venv $(IGGYPY04_VENV)
	$(IGGYPY04_VENV)/bin/python -m pip install -q --disable-pip-version-check iggy-py==0.4.0
	$(IGGYPY04_VENV)/bin/python -c 'import iggy_py'
	@touch $(IGGYPY04_STAMP)

older-clients: $(IGGY08_STAMP) $(IGGYPY04_STAMP)

apt-test:
	@missing=""; for p in $(APT_TEST_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing$$missing (apt-get)"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; fi

run: $(RUN_STAMP)
	$(BIN)/streamgate run $(ARGS)

lint: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# Hypothesis profiles (tests/conftest.py): `dev` is short, `ci` is what CI (CI=true) runs.
check: $(TEST_STAMP) lint
	HYPOTHESIS_PROFILE=dev $(BIN)/pytest $(PYTEST_ARGS) $(CHECK_TESTS)

# Two pytest-xdist workers: most of the suite waits on servers and clients it started, so two
# files at a time halve its wall time on 2 cores (tests/conftest.py keeps the pipeline's tests
# together on one worker). TEST_WORKERS=0 runs it in this one process.
TEST_WORKERS ?= 2
test: $(TEST_STAMP) older-clients apt-test lint
	HYPOTHESIS_PROFILE=ci $(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile --durations=30 \
		$(PYTEST_ARGS)

bench: $(RUN_STAMP)
	$(BIN)/streamgate bench embedded $(ARGS)

bench-kafka: $(TEST_STAMP)
	$(BIN)/streamgate bench kafka $(ARGS)

bench-iggy: $(TEST_STAMP)
	$(BIN)/streamgate bench iggy $(ARGS)

bench-rabbitmq-stream: $(TEST_STAMP)
	$(BIN)/streamgate bench rabbitmq-stream $(ARGS)

# Starts a private RabbitMQ and Tansu on loopback (tests/helpers), stopped by pid at the end or on
# Ctrl-C; the bench gets their URLs for the placeholders. ARGS, e.g. ARGS="--rounds 3".
bench-backends: $(TEST_STAMP) apt-test
	$(BIN)/python -m tests.helpers.bench_brokers -- $(BIN)/streamgate bench backends \
	  --rabbitmq-url '{rabbitmq_url}' --kafka-url '{kafka_url}' $(ARGS)

# The same brokers, and their pids for their CPU. ARGS, e.g. ARGS="--rounds 5 --json out.json".
bench-compare: $(TEST_STAMP) apt-test
	$(BIN)/python -m tests.helpers.bench_brokers -- $(BIN)/streamgate bench compare \
	  --rabbitmq-url '{rabbitmq_url}' --rabbitmq-pid '{rabbitmq_pid}' \
	  --kafka-url '{kafka_url}' --kafka-pid '{kafka_pid}' $(ARGS)

clean:
	rm -rf $(VENV) $(IGGY08_VENV) $(IGGYPY04_VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
