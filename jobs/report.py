"""report: write a self-contained HTML report of the crawl's health (figures and tables, no network)."""
from __future__ import annotations

import base64
import html
import sys
from datetime import datetime

from crawler_lib import plots
from crawler_lib.crawldir import CrawlDir
from crawler_lib.spark import analytics
from jobs import stats as stats_job
from jobs.base import CrawlJob, utc_now

MAX_TABLE_ROWS = 50
STYLE = ("body{font-family:sans-serif;margin:2em;max-width:60em}table{border-collapse:collapse;font-size:12px}"
         "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}th{background:#eee}"
         "td:first-child{text-align:left}img{max-width:100%}")


def sections(spark, crawl_dir: str, now: datetime):
    """(title, plot function, DataFrame) of every figure, in report order."""
    yield "Responses per cycle", plots.responses_per_cycle, analytics.responses_per_cycle(spark, crawl_dir)
    yield "Fetch rate", plots.fetch_rate, analytics.fetch_rate(spark, crawl_dir)
    yield "URLs by status and reason", plots.status_reasons, analytics.status_reasons(spark, crawl_dir)
    yield "Top hosts", plots.hosts, analytics.hosts(spark, crawl_dir, now)
    yield "Freshness", plots.freshness, analytics.freshness(spark, crawl_dir, now)
    yield "Duplicates", plots.duplicates, analytics.duplicates(spark, crawl_dir)
    yield "WARC output", plots.warc_bytes, analytics.warc_bytes(spark, crawl_dir)


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}"
    return html.escape("" if value is None else str(value))


def _table(rows: list[dict]) -> str:
    if not rows:
        return "<p>no rows</p>"
    head = "".join(f"<th>{html.escape(k)}</th>" for k in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in row.values()) + "</tr>"
                   for row in rows[:MAX_TABLE_ROWS])
    more = f"<p>... {len(rows) - MAX_TABLE_ROWS} more rows</p>" if len(rows) > MAX_TABLE_ROWS else ""
    return f"<table><tr>{head}</tr>{body}</table>{more}"


def render(spark, cfg, crawl_dir: str, now: datetime) -> str:
    summary = stats_job.run(spark, cfg, crawl_dir)
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Crawl report</title><style>{STYLE}</style>"
             f"</head><body><h1>Crawl report</h1><p>{html.escape(crawl_dir)} at {now:%Y-%m-%d %H:%M} UTC: "
             f"{summary['urls']:,} URLs on {summary['hosts']:,} hosts, {summary['segments']} segments, "
             f"{summary['requests_sent']:,} requests sent.</p>"]
    for title, plot, df in sections(spark, crawl_dir, now):
        rows = [r.asDict() for r in df.collect()]
        image = base64.b64encode(plots.png(plot(rows))).decode("ascii")
        parts.append(f"<h2>{html.escape(title)}</h2><img alt='{html.escape(title)}' "
                     f"src='data:image/png;base64,{image}'>{_table(rows)}")
    parts.append("</body></html>")
    return "\n".join(parts)


class Report(CrawlJob):
    name = "report"
    help = __doc__.splitlines()[0]

    @classmethod
    def add_arguments(cls, parser):
        parser.add_argument("--out", required=True, metavar="FILE.html", help="HTML file to write")

    @classmethod
    def preflight(cls, cfg, args) -> None:
        CrawlDir(args.crawl_dir).require()

    @classmethod
    def execute(cls, spark, cfg, args) -> int:
        page = render(spark, cfg, args.crawl_dir, utc_now())
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write(page)
        print(f"report: wrote {args.out} ({len(page) // 1024} KiB)")
        return 0


if __name__ == "__main__":
    sys.exit(Report.main())
