# Databricks notebook source
# MAGIC %md
# MAGIC # Duplicates and near-duplicates
# MAGIC Fetched pages marked by dedup: canonical, exact copies (same SHA-256) and near copies (SimHash
# MAGIC within dedup.max_hamming_distance, found through exact lookup tables or a shared MinHash band).
# MAGIC On Databricks set the `crawl_dir` widget; locally run
# MAGIC `CRAWL_DIR=demo-crawl FIGURE_DIR=figures .venv/bin/python notebooks/duplicates.py` (figures as PNG files).

# COMMAND ----------

from datetime import datetime, timezone

from crawler_lib import plots
from crawler_lib.spark import analytics
from crawler_lib.spark.notebook import notebook_context

nb = notebook_context("duplicates", globals())
now = datetime.now(timezone.utc).replace(tzinfo=None)

# COMMAND ----------

# MAGIC %md ## Duplicate marks

# COMMAND ----------

dups = analytics.duplicates(nb.spark, nb.crawl_dir)
nb.show(dups)
nb.figure(plots.duplicates, dups)
