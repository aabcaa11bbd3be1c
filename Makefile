# Set-up and entry points. `make demo` and `make test` install what they need on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
CACHE := .cache
JARS_STAMP := $(CACHE)/jars/.complete
S3_JARS_STAMP := $(CACHE)/jars-s3/.complete
DEPS_STAMP := $(VENV)/.installed
AIRFLOW_VENV := .venv-airflow
AIRFLOW_STAMP := $(AIRFLOW_VENV)/.installed
PYWB_VENV := .venv-pywb
PYWB_STAMP := $(PYWB_VENV)/.installed
DEMO_DIR ?= demo-crawl
CYCLES ?= 3
export CRAWLER_JARS_DIR := $(CURDIR)/$(CACHE)/jars
export PYSPARK_PYTHON := $(CURDIR)/$(PY)
export PYSPARK_DRIVER_PYTHON := $(CURDIR)/$(PY)

.PHONY: setup demo test test-unit test-dags test-cluster jars-s3 bench clean check-java dist

setup: check-java $(DEPS_STAMP) $(JARS_STAMP)

check-java:
	@command -v java >/dev/null 2>&1 || { echo "error: Java 17+ is required by Spark: install a JDK/JRE 17 (e.g. apt-get install openjdk-17-jre-headless) and put 'java' on PATH" >&2; exit 1; }

$(DEPS_STAMP): setup.cfg setup.py pyproject.toml crawler_lib/_simhash.c
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@mkdir -p $(CACHE)/logs
	@echo "installing the package and its dependencies into $(VENV) (log: $(CACHE)/logs/pip.log)"
	@{ $(PY) -m pip install -q --upgrade pip && $(PY) -m pip install -q -e '.[dev]'; } >$(CACHE)/logs/pip.log 2>&1 \
	  || { tail -n 30 $(CACHE)/logs/pip.log >&2; echo "error: pip install failed; see $(CACHE)/logs/pip.log" >&2; exit 1; }
	@$(PY) -c "from crawler_lib import fingerprint; fingerprint.native or print('note: no C compiler: the page fingerprint uses its Python form (same values, ~10x slower)')"
	@touch $@

$(JARS_STAMP): $(DEPS_STAMP)
	@$(PY) -m crawler_lib.spark.jars --dest $(CACHE)/jars --ivy $(CACHE)/ivy
	@touch $@

# hadoop-aws and the AWS SDK modules it needs, for a crawl dir on s3a:// (README: "Crawl dir on S3").
jars-s3: $(S3_JARS_STAMP)

$(S3_JARS_STAMP): $(DEPS_STAMP)
	$(PY) -m crawler_lib.spark.jars --s3 --dest $(CACHE)/jars-s3 --ivy $(CACHE)/ivy-s3
	@touch $@

demo: setup
	@$(PY) -m crawler_lib.testweb.demo --crawl-dir $(DEMO_DIR) --cycles $(CYCLES)

test: setup test-dags $(PYWB_STAMP)
	$(PY) -m pytest -q -m "not cluster"
	@$(MAKE) --no-print-directory test-cluster

# A Spark standalone cluster (master + 2 workers) with the crawl dir on SeaweedFS's S3, all on loopback.
test-cluster: setup $(S3_JARS_STAMP)
	$(PY) -m pytest -q -m cluster tests/test_cluster.py

# The Airflow DAG is tested in its own virtualenv: Airflow's Spark provider pulls pyspark-client.
$(AIRFLOW_STAMP): dags/requirements.txt
	@test -x $(AIRFLOW_VENV)/bin/python || $(PYTHON) -m venv $(AIRFLOW_VENV)
	$(AIRFLOW_VENV)/bin/python -m pip install -q --upgrade pip
	$(AIRFLOW_VENV)/bin/python -m pip install -q -r dags/requirements.txt 'pytest>=8,<9'
	@touch $@

test-dags: $(AIRFLOW_STAMP)
	AIRFLOW_HOME=$(CURDIR)/$(CACHE)/airflow AIRFLOW__CORE__LOAD_EXAMPLES=False \
	  $(AIRFLOW_VENV)/bin/python -m pytest -q --noconftest -p no:cacheprovider tests/dags

# pywb replays the e2e crawl's WARC files from our CDXJ index (tests/pywb_server.py), in its own
# virtualenv: it pins its own warcio and gevent.
$(PYWB_STAMP):
	@test -x $(PYWB_VENV)/bin/python || $(PYTHON) -m venv $(PYWB_VENV)
	@mkdir -p $(CACHE)/logs
	@$(PYWB_VENV)/bin/python -m pip install -q 'pywb>=2.9,<3' >$(CACHE)/logs/pip-pywb.log 2>&1 \
	  || { tail -n 20 $(CACHE)/logs/pip-pywb.log >&2; echo "error: installing pywb failed; see $(CACHE)/logs/pip-pywb.log" >&2; exit 1; }
	@touch $@

test-unit: setup
	$(PY) -m pytest -q -m "not spark and not e2e and not cluster"

bench: setup $(S3_JARS_STAMP)
	$(PY) -m pip install -q -e '.[dev,bench]'
	$(PY) -m bench

dist: setup
	$(PY) -m pip wheel --no-deps -w dist .

clean:
	rm -rf $(DEMO_DIR) dist build *.egg-info .pytest_cache spark-warehouse
