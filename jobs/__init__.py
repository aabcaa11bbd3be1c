"""Crawl steps as Spark jobs (one module per step) and the `crawler` CLI."""
