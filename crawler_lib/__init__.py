"""sparkcrawler's core library: pure Python, no Spark (only `crawler_lib.spark` imports pyspark)."""

__version__ = "0.1.0"
