PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DIST ?= dist
export LITELLM_LOCAL_MODEL_COST_MAP := True
export NO_MKDOCS_2_WARNING := 1

.PHONY: native-agents venv side-envs test demo bench lint docs docs-serve phoenix demo-phoenix collector telemetrygen chromium redis prometheus wheel clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

# 3 workers on any machine: most slow tests wait on subprocesses (collector, Phoenix, gateways);
# more starve the timing-bound end-to-end tests of CPU on 2 cores
test: $(STAMP) lint docs collector chromium redis prometheus side-envs native-agents
	$(PY) -m pytest -q -n 3

# the real libraries the tests run (agent frameworks, Phoenix) in cached side environments, built
# several at once (minutes cold, instant when cached). Like Phoenix below, they are the suite's rigs
# (tests/rigs, not in the wheel), run as `python -m rigs.NAME` with tests/ on PYTHONPATH.
side-envs: $(STAMP)
	PYTHONPATH=tests $(PY) -m rigs.side_envs

# the suite's programs in other languages (the reach suite's agents, tests/go/agent and
# tests/jvm/agent; the Kubernetes manifest checker, tests/go/k8scheck), built once into the
# cache dir; a JDK and Maven from Debian when missing (needs root), Go as for the collector
native-agents: $(STAMP)
	@command -v mvn >/dev/null 2>&1 || { \
		(export DEBIAN_FRONTEND=noninteractive; apt-get install -y -qq maven default-jdk-headless || (apt-get update -qq && apt-get install -y -qq maven default-jdk-headless)) \
		|| echo "make native-agents: could not install maven (needs root and Debian's apt)"; }
	PYTHONPATH=tests $(PY) -m rigs.native_agents

docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict --quiet

docs-serve: $(STAMP)
	$(VENV)/bin/mkdocs serve

demo: $(STAMP)
	$(VENV)/bin/tracescore demo

# dist/tracescore-<version>-py3-none-any.whl and the sdist it is built from (the test extra's `build`)
wheel: $(STAMP)
	rm -f $(DIST)/tracescore-*.whl $(DIST)/tracescore-*.tar.gz
	$(PY) -m build --no-isolation --outdir $(DIST) .

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

# The OpenTelemetry Collector built from collector/builder-config.yaml (needs Go; cached, minutes cold).
collector: $(STAMP)
	$(PY) -m tracescore.testing._collector build

# The contrib repo's load generator at the same release (the gateway benchmark's sender; cached).
telemetrygen: $(STAMP)
	$(PY) -m tracescore.testing._collector telemetrygen

phoenix: $(STAMP)
	exec env PYTHONPATH=tests $(PY) -m rigs.phoenix serve

demo-phoenix: $(STAMP)
	exec env PYTHONPATH=tests $(PY) -m rigs.phoenix demo

# headless Chromium for the browser test (Debian's package; needs root, skipped when installed)
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
		(export DEBIAN_FRONTEND=noninteractive; apt-get install -y -qq chromium || (apt-get update -qq && apt-get install -y -qq chromium)) \
		|| echo "make chromium: could not install chromium (needs root and Debian's apt);" \
			"tests/e2e/test_phoenix_browser.py will fail until it is installed"; }

# Debian's redis-server for the fleet limits' tests (each test starts its own on a free loopback
# port; needs root, skipped when installed)
redis:
	@command -v redis-server >/dev/null 2>&1 || { \
		(export DEBIAN_FRONTEND=noninteractive; apt-get install -y -qq redis-server || (apt-get update -qq && apt-get install -y -qq redis-server)) \
		|| echo "make redis: could not install redis-server (needs root and Debian's apt);" \
			"tests/gateway/test_fleet_limits.py will fail until it is installed"; }

# Debian's prometheus (the server and promtool) for the shipped rules' tests: `promtool check/test
# rules` and the end-to-end test that scrapes the collector (needs root, skipped when installed)
prometheus:
	@command -v promtool >/dev/null 2>&1 || { \
		(export DEBIAN_FRONTEND=noninteractive; apt-get install -y -qq --no-install-recommends prometheus || (apt-get update -qq && apt-get install -y -qq --no-install-recommends prometheus)) \
		|| echo "make prometheus: could not install prometheus (needs root and Debian's apt);" \
			"tests/e2e/test_prometheus_rules.py will fail until it is installed"; }

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) build dist site *.egg-info .pytest_cache
