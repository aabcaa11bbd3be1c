# Databricks notebook source
# MAGIC %md
# MAGIC # Crawl health
# MAGIC Responses per cycle (2xx/304/4xx/5xx/429 shares), fetch rate over time, and every URL of the
# MAGIC CrawlDB by status and reason (robots-denied, blocked by reason).
# MAGIC On Databricks set the `crawl_dir` widget; locally run
# MAGIC `CRAWL_DIR=demo-crawl FIGURE_DIR=figures .venv/bin/python notebooks/crawl_health.py` (figures as PNG files).

# COMMAND ----------

from datetime import datetime, timezone

from crawler_lib import plots
from crawler_lib.spark import analytics
from crawler_lib.spark.notebook import notebook_context

nb = notebook_context("crawl_health", globals())
now = datetime.now(timezone.utc).replace(tzinfo=None)

# COMMAND ----------

# MAGIC %md ## Responses per cycle

# COMMAND ----------

responses = analytics.responses_per_cycle(nb.spark, nb.crawl_dir)
nb.show(responses)
nb.figure(plots.responses_per_cycle, responses)

# COMMAND ----------

# MAGIC %md ## Fetch rate over time

# COMMAND ----------

rate = analytics.fetch_rate(nb.spark, nb.crawl_dir)
nb.show(rate)
nb.figure(plots.fetch_rate, rate)

# COMMAND ----------

# MAGIC %md ## URLs by status and reason

# COMMAND ----------

reasons = analytics.status_reasons(nb.spark, nb.crawl_dir)
nb.show(reasons)
nb.figure(plots.status_reasons, reasons)
