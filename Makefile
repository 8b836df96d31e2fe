# The two commands of the README: `make run` and `make test`. Both install whatever
# is missing first (a venv with pinned Python deps, Kafka's jars from Maven Central).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PY_STAMP := $(VENV)/.installed
JARS_STAMP := kafka/lib/.installed
SPARK_JARS_STAMP := kafka/lib/spark/.installed
PYTEST_ARGS ?=

.PHONY: deps browser run lint test test-fast bench clean check-java

deps: check-java $(PY_STAMP) $(JARS_STAMP) $(SPARK_JARS_STAMP)

check-java:
	@command -v java >/dev/null || { echo "Java 17 is required (Kafka 3.9 and Spark run on it): install openjdk-17-jre-headless"; exit 1; }
	@command -v mvn >/dev/null || { echo "Maven is required to fetch Kafka's jars: install maven"; exit 1; }
	@java -version 2>&1 | head -1 | grep -q '"17\.' || { echo "warning: Java 17 expected (JAVA_HOME=$${JAVA_HOME:-unset}): $$(java -version 2>&1 | head -1)"; }

$(PY_STAMP): pyproject.toml
	@echo "== installing Python dependencies into $(VENV) =="
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -e '.[dev,spark]'
	@touch $@

$(JARS_STAMP): kafka/pom.xml
	@echo "== fetching Apache Kafka jars with Maven =="
	mvn -q -B -f kafka/pom.xml dependency:copy-dependencies
	@touch $@

$(SPARK_JARS_STAMP): kafka/spark-pom.xml
	@echo "== fetching Spark's Kafka connector jars with Maven =="
	rm -rf kafka/lib/spark
	mvn -q -B -f kafka/spark-pom.xml dependency:copy-dependencies
	@touch $@

# The dashboard's tests drive a real headless Chromium (Debian's package). Installed
# when missing if this user may (root, or sudo without a password); otherwise those
# tests are skipped with this reason, except in CI, where they fail.
browser:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || { \
	  echo "== installing Debian's chromium for the dashboard's browser tests =="; \
	  if [ "$$(id -u)" = 0 ]; then sudo=""; elif sudo -n true 2>/dev/null; then sudo="sudo -n"; \
	  else echo "warning: not root and no sudo: cannot install chromium; browser tests will skip"; exit 0; fi; \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq chromium >/dev/null \
	  || echo "warning: chromium could not be installed; the browser tests will skip (in CI: fail)"; }

run: deps
	$(BIN)/eventq up

# ruff (the whole tree but .venv, kafka/, test-output) and mypy (the files pyproject's
# [tool.mypy] names); both silent when clean. `make test` and `make test-fast` run it first.
lint: $(PY_STAMP)
	@$(BIN)/ruff check --quiet .
	@$(BIN)/mypy --no-error-summary

# The whole suite, real Kafka brokers and Spark included, in TEST_WORKERS processes
# (pytest-xdist: each worker has its own broker; tests/conftest.py keeps a module's tests,
# and those sharing Spark or the broker cluster, in one worker). Many tests wait on
# Kafka's timeouts and restarts, so two workers on two cores end sooner than one. Beside
# them from the start, in the controller: the soak, then one run of the fault campaign
# (tests/support/beside.py). The machine is busy all along, so timing is asserted as what
# it is for (a wait happened: a lower bound; an order or a count; an upper bound only far
# from the alternative it rules out, a 60 s deadline asserted well under), and how fast
# is bench/'s, save the tests marked `alone`: each times a "said within 5 s" from a
# command's start, Python's start included, so they run after the rest with nothing
# beside them (exit status 5: none was selected). Each part ends with its slowest
# tests, so where the time goes is on record in every run. CI (.ci/run) gives the whole
# of it 30 minutes on 2 cores.
TEST_WORKERS ?= 2
XDIST := -n $(TEST_WORKERS) --dist loadgroup

test: deps browser lint
	$(BIN)/pytest $(XDIST) -m "not alone" --durations=25 $(PYTEST_ARGS)
	$(BIN)/pytest -m alone --durations=5 $(PYTEST_ARGS) || [ $$? = 5 ]

# The loop while changing code: everything that needs no broker, no Spark and is not
# marked slow (about 2 minutes on 2 cores), nor `alone` (a 5 s deadline from a command's
# start, which two workers beside it break: `make test` runs those alone).
test-fast: deps lint
	$(BIN)/pytest $(XDIST) -m "not kafka and not spark and not slow and not alone" $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) kafka/lib var
