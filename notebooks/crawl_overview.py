# Databricks notebook source
# MAGIC %md
# MAGIC # Crawl overview
# MAGIC Status mix of the CrawlDB, HTTP status mix, hosts, and requests per segment from the fetch log.
# MAGIC On Databricks set the `crawl_dir` widget; locally run
# MAGIC `CRAWL_DIR=demo-crawl .venv/bin/python notebooks/crawl_overview.py`.

# COMMAND ----------

import os

from pyspark.sql import functions as F

try:
    dbutils.widgets.text("crawl_dir", "")  # noqa: F821 (Databricks)
    crawl_dir = dbutils.widgets.get("crawl_dir")  # noqa: F821
    show = display  # noqa: F821
except NameError:  # running locally
    from crawler_lib.config import Config
    from crawler_lib.spark.session import get_spark

    spark = get_spark("crawl-overview", Config.load())
    crawl_dir = os.environ.get("CRAWL_DIR", "demo-crawl")

    def show(df):
        df.show(50, truncate=False)

crawldb = spark.read.format("delta").load(f"{crawl_dir}/crawldb")
fetchlog = spark.read.format("delta").load(f"{crawl_dir}/fetchlog")

# COMMAND ----------

# MAGIC %md ## Status mix (with the reason for every URL not fetched)

# COMMAND ----------

status_mix = crawldb.groupBy("status", "reason").count().orderBy(F.desc("count"))
show(status_mix)

# COMMAND ----------

# MAGIC %md ## HTTP status mix and hosts

# COMMAND ----------

show(crawldb.filter("http_status IS NOT NULL").groupBy("http_status").count().orderBy("http_status"))
show(crawldb.groupBy("host_key").agg(F.count("*").alias("urls"),
                                     F.sum(F.expr("CAST(status = 'fetched' AS INT)")).alias("fetched"))
     .orderBy(F.desc("urls")))

# COMMAND ----------

# MAGIC %md ## Requests per segment (from the fetch log, robots.txt included)

# COMMAND ----------

per_segment = (fetchlog.groupBy("segment_id")
               .agg(F.count("*").alias("requests"), F.sum("bytes").alias("bytes"),
                    F.sum(F.expr("CAST(purpose = 'robots' AS INT)")).alias("robots_requests"),
                    (F.max("ended_at").cast("timestamp").cast("double")
                     - F.min("started_at").cast("timestamp").cast("double")).alias("seconds"))
               .orderBy("segment_id"))
show(per_segment)
