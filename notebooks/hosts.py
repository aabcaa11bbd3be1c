# Databricks notebook source
# MAGIC %md
# MAGIC # Hosts
# MAGIC The largest hosts: URLs known, fetched, blocked by a budget (host URL budget, URL-shape growth,
# MAGIC depth), requests and errors, hosts in backoff and their crawl delay.
# MAGIC On Databricks set the `crawl_dir` widget; locally run
# MAGIC `CRAWL_DIR=demo-crawl FIGURE_DIR=figures .venv/bin/python notebooks/hosts.py` (figures as PNG files).

# COMMAND ----------

from datetime import datetime, timezone

from crawler_lib import plots
from crawler_lib.spark import analytics
from crawler_lib.spark.notebook import notebook_context

nb = notebook_context("hosts", globals())
now = datetime.now(timezone.utc).replace(tzinfo=None)

# COMMAND ----------

# MAGIC %md ## Top hosts

# COMMAND ----------

top_hosts = analytics.hosts(nb.spark, nb.crawl_dir, now, top=20)
nb.show(top_hosts)
nb.figure(plots.hosts, top_hosts)
