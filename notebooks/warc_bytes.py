# Databricks notebook source
# MAGIC %md
# MAGIC # WARC bytes
# MAGIC WARC output per cycle (files and MB): the archive the crawl leaves behind.
# MAGIC On Databricks set the `crawl_dir` widget; locally run
# MAGIC `CRAWL_DIR=demo-crawl FIGURE_DIR=figures .venv/bin/python notebooks/warc_bytes.py` (figures as PNG files).

# COMMAND ----------

from datetime import datetime, timezone

from crawler_lib import plots
from crawler_lib.spark import analytics
from crawler_lib.spark.notebook import notebook_context

nb = notebook_context("warc_bytes", globals())
now = datetime.now(timezone.utc).replace(tzinfo=None)

# COMMAND ----------

# MAGIC %md ## WARC output per cycle

# COMMAND ----------

warc = analytics.warc_bytes(nb.spark, nb.crawl_dir)
nb.show(warc)
nb.figure(plots.warc_bytes, warc)
