"""The crawl directory layout (DESIGN.md "Crawl directory"), local or on object storage.

Paths may be local or s3a://, abfss://, gs:// (listing goes through fsspec and its backends).
"""
from __future__ import annotations

import secrets
from datetime import datetime, timezone
from typing import Optional

import fsspec


class CrawlError(RuntimeError):
    """An operator-facing error (missing crawl dir, segment, ...): printed as one line."""


class CrawlDir:
    def __init__(self, root: str):
        self.root = root.rstrip("/")
        self.crawldb = f"{self.root}/crawldb"
        self.hostdb = f"{self.root}/hostdb"
        self.fetchlog = f"{self.root}/fetchlog"
        self.warc = f"{self.root}/warc"
        self.segments = f"{self.root}/segments"

    def segment(self, segment_id: str, part: str) -> str:
        return f"{self.segments}/{segment_id}/{part}"

    def _fs(self):
        return fsspec.core.url_to_fs(self.root)

    def exists(self) -> bool:
        fs, path = self._fs()
        return fs.exists(path)

    def require(self) -> "CrawlDir":
        if not self.exists():
            raise CrawlError(f"crawl dir {self.root} does not exist (run `crawler inject` first)")
        return self

    def segment_ids(self) -> list[str]:
        fs, path = fsspec.core.url_to_fs(self.segments)
        if not fs.exists(path):
            return []
        return sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(path, detail=False))

    def segment_range(self, first: Optional[str], last: Optional[str]) -> list[str]:
        """Segment ids from `first` to `last` inclusive (ids sort by creation time); open bounds allowed."""
        ids = [s for s in self.segment_ids() if (first is None or s >= first) and (last is None or s <= last)]
        if not ids:
            raise CrawlError(f"no segments from {first or 'the first'} to {last or 'the last'} in {self.segments}")
        return ids

    def resolve_segment(self, segment_id: Optional[str]) -> str:
        ids = self.segment_ids()
        if segment_id is None:
            if not ids:
                raise CrawlError(f"no segments in {self.root} (run `crawler generate` first)")
            return ids[-1]
        if segment_id not in ids:
            raise CrawlError(f"segment {segment_id} not found in {self.segments}")
        return segment_id


def new_segment_id(now: datetime) -> str:
    """Sortable by creation time, unique across concurrent generates."""
    return now.replace(tzinfo=timezone.utc).strftime("%Y%m%d%H%M%S") + "-" + secrets.token_hex(3)
