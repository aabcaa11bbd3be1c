"""Figures of crawl health for the notebooks and the HTML report (matplotlib, no global pyplot state).

Each function takes the collected rows (dicts) of the matching `crawler_lib.spark.analytics` query and
returns a `matplotlib.figure.Figure`; `display(fig)` on Databricks, `png(fig)` for files and the report.
"""
from __future__ import annotations

import io
from typing import Sequence

from matplotlib.figure import Figure

RESPONSE_COLORS = {"2xx": "#2e7d32", "304": "#81c784", "3xx": "#64b5f6", "4xx": "#ffb74d", "429": "#e65100",
                   "5xx": "#c62828", "error": "#6a1b9a"}
Rows = Sequence[dict]


def _figure(title: str, height: float = 3.2) -> tuple[Figure, object]:
    figure = Figure(figsize=(8, height), layout="constrained")
    axes = figure.add_subplot()
    axes.set_title(title)
    return figure, axes


def _empty(axes, rows: Rows) -> bool:
    if not rows:
        axes.text(0.5, 0.5, "no data yet", ha="center", va="center", transform=axes.transAxes)
    return not rows


def responses_per_cycle(rows: Rows) -> Figure:
    """Stacked shares of response classes per segment (cycle)."""
    figure, axes = _figure("Responses per cycle (share of requests)")
    if not _empty(axes, rows):
        labels = [r["segment_id"] for r in rows]
        bottom = [0.0] * len(rows)
        for name, color in RESPONSE_COLORS.items():
            shares = [r.get(name, 0) / max(r["requests"], 1) for r in rows]
            axes.bar(labels, shares, bottom=bottom, color=color, label=name)
            bottom = [b + s for b, s in zip(bottom, shares)]
        axes.set_ylim(0, 1)
        axes.tick_params(axis="x", labelrotation=30, labelsize=7)
        axes.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return figure


def fetch_rate(rows: Rows) -> Figure:
    figure, axes = _figure("Fetch rate (requests per minute)")
    if not _empty(axes, rows):
        axes.plot([r["minute"] for r in rows], [r["requests"] for r in rows], marker="o")
        axes.set_ylabel("requests / minute")
        figure.autofmt_xdate()
    return figure


def status_reasons(rows: Rows) -> Figure:
    """Every CrawlDB URL by status and reason (robots-denied, blocked by reason, gone...)."""
    figure, axes = _figure("CrawlDB URLs by status and reason", height=max(2.5, 0.3 * len(rows) + 1))
    if not _empty(axes, rows):
        labels = [f"{r['status']} {r['reason']}".strip() for r in reversed(rows)]
        axes.barh(labels, [r["urls"] for r in reversed(rows)], color="#546e7a")
        axes.set_xlabel("URLs")
        axes.tick_params(axis="y", labelsize=7)
    return figure


def hosts(rows: Rows) -> Figure:
    """Top hosts: URLs known, fetched and budget-blocked; hosts in backoff are marked."""
    figure, axes = _figure("Top hosts", height=max(2.5, 0.3 * len(rows) + 1))
    if not _empty(axes, rows):
        rows = list(reversed(rows))
        labels = [r["host_key"] + ("  [backoff]" if r.get("in_backoff") else "") for r in rows]
        positions = range(len(rows))
        axes.barh([p + 0.27 for p in positions], [r["urls"] for r in rows], height=0.27, label="URLs", color="#90a4ae")
        axes.barh(list(positions), [r["fetched"] or 0 for r in rows], height=0.27, label="fetched", color="#2e7d32")
        axes.barh([p - 0.27 for p in positions], [r["budget_blocked"] or 0 for r in rows], height=0.27,
                  label="budget-blocked", color="#e65100")
        axes.set_yticks(list(positions), labels, fontsize=7)
        axes.legend(fontsize=7)
    return figure


def _bars(title: str, labels: list, values: list, ylabel: str, color: str, rotate: bool = False) -> Figure:
    figure, axes = _figure(title)
    if not _empty(axes, labels):
        axes.bar(labels, values, color=color)
        axes.set_ylabel(ylabel)
        if rotate:
            axes.tick_params(axis="x", labelrotation=30, labelsize=7)
    return figure


def freshness(rows: Rows) -> Figure:
    return _bars("Freshness: page age / recrawl interval", [r["bucket"] for r in rows],
                 [r["pages"] for r in rows], "fetched pages", "#00838f")


def duplicates(rows: Rows) -> Figure:
    return _bars("Duplicates (dedup marks)", [r["kind"] for r in rows], [r["pages"] for r in rows], "pages",
                 "#5e35b1")


def warc_bytes(rows: Rows) -> Figure:
    return _bars("WARC output per cycle (MB)", [r["segment_id"] for r in rows], [r["mb"] for r in rows], "MB",
                 "#6d4c41", rotate=True)


def png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90)
    return buffer.getvalue()
