"""What every analytics notebook needs, on Databricks and locally: a session, the crawl dir, and
ways to show a table and a figure.

On Databricks (the notebook's globals hold `dbutils` and `display`) the crawl dir is the `crawl_dir`
widget and tables and figures go to `display`. Locally (`python notebooks/<name>.py`) the crawl dir is
$CRAWL_DIR (default demo-crawl), tables are printed and figures are written as PNG files to
$FIGURE_DIR (default figures/).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Callable

from pyspark.sql import DataFrame, SparkSession

from crawler_lib import plots


@dataclass
class NotebookContext:
    spark: SparkSession
    crawl_dir: str
    show: Callable[[DataFrame], None]
    figure: Callable[..., None]  # figure(plot_function, dataframe)


def notebook_context(name: str, notebook_globals: dict) -> NotebookContext:
    if "dbutils" in notebook_globals:
        dbutils, display = notebook_globals["dbutils"], notebook_globals["display"]
        dbutils.widgets.text("crawl_dir", "")
        return NotebookContext(notebook_globals["spark"], dbutils.widgets.get("crawl_dir"), display,
                               lambda plot, df: display(plot([r.asDict() for r in df.collect()])))

    from crawler_lib.config import Config
    from crawler_lib.spark.session import get_spark
    spark = get_spark(name, Config.load())
    figure_dir = os.environ.get("FIGURE_DIR", "figures")
    os.makedirs(figure_dir, exist_ok=True)

    def show(df: DataFrame) -> None:
        df.show(50, truncate=False)

    def figure(plot, df: DataFrame) -> None:
        path = os.path.join(figure_dir, f"{name}-{re.sub(r'[^a-z0-9]+', '_', plot.__name__)}.png")
        with open(path, "wb") as handle:
            handle.write(plots.png(plot([r.asDict() for r in df.collect()])))
        print(f"figure: {path}")
    return NotebookContext(spark, os.environ.get("CRAWL_DIR", "demo-crawl"), show, figure)
