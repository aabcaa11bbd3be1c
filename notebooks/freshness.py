# Databricks notebook source
# MAGIC %md
# MAGIC # Freshness
# MAGIC Age of fetched pages against their recrawl interval: a ratio above 1 means a page is older than
# MAGIC its schedule wants.
# MAGIC On Databricks set the `crawl_dir` widget; locally run
# MAGIC `CRAWL_DIR=demo-crawl FIGURE_DIR=figures .venv/bin/python notebooks/freshness.py` (figures as PNG files).

# COMMAND ----------

from datetime import datetime, timezone

from crawler_lib import plots
from crawler_lib.spark import analytics
from crawler_lib.spark.notebook import notebook_context

nb = notebook_context("freshness", globals())
now = datetime.now(timezone.utc).replace(tzinfo=None)

# COMMAND ----------

# MAGIC %md ## Page age / recrawl interval

# COMMAND ----------

fresh = analytics.freshness(nb.spark, nb.crawl_dir, now)
nb.show(fresh)
nb.figure(plots.freshness, fresh)
