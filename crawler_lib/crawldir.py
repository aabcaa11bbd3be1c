"""The crawl directory layout (DESIGN.md "Crawl directory"), local or on object storage.

Paths may be local or s3a://, abfss://, gs:// (listing goes through fsspec and its backends).
Spark writes behind the driver's back, and fsspec backends (s3fs, gcsfs, adlfs) keep directory
listings for the life of their cached instance: every listing here goes through `fresh_fs`, which
drops the backend's cached listing of that path first (`invalidate_cache`, part of fsspec's public
file-system API, a no-op where nothing is cached). S3 lists consistently, so a fresh LIST sees every
object Spark committed; no registry table is needed.
"""
from __future__ import annotations

import os
import secrets
import tempfile
from datetime import datetime, timezone
from typing import Optional

import fsspec
import fsspec.utils


def fresh_fs(url: str):
    """(file system, path) for `url`, with no cached listing of the path left to go stale."""
    fs, path = fsspec.core.url_to_fs(url)
    fs.invalidate_cache(path)
    return fs, path


def bytes_under(url: str) -> int:
    """Bytes of the file at `url`, or of every file under it; 0 when there is nothing there."""
    fs, path = fresh_fs(url)
    return int(fs.du(path)) if fs.exists(path) else 0


def warc_pointer(filename: str) -> str:
    """How a WARC file is named in the tables: relative to the crawl dir (`warc/<file>`), so a crawl dir
    that is moved, copied or read from another working directory or machine still resolves."""
    return "/".join(filename.rstrip("/").split("/")[-2:])


def resolve_pointer(root: str, pointer: str) -> str:
    """A stored WARC name as a path to open: relative names under `root`; absolute paths and URLs (as
    crawls made before pointers were relative stored them) as they are."""
    if pointer.startswith("/") or "://" in pointer:
        return pointer
    return f"{root.rstrip('/')}/{pointer}"


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

    def resolve(self, pointer: str) -> str:
        """A `warc_filename` of the CrawlDB, a segment or a dump, as a path to open."""
        return resolve_pointer(self.root, pointer)

    def spark_log(self, job: str, now: datetime) -> str:
        """Where a job's Spark, Ivy and JVM console output goes: `logs/` of a local crawl dir; for one on
        object storage, the machine's temporary directory (a JVM writes its console to a local file)."""
        scheme = fsspec.utils.get_protocol(self.root)
        folder = (f"{self.root.removeprefix('file://')}/logs" if scheme in ("file", "local")
                  else os.path.join(tempfile.gettempdir(), "sparkcrawler-logs"))
        return f"{folder}/{job}-{now:%Y%m%dT%H%M%S}-{os.getpid()}.log"

    def exists(self) -> bool:
        fs, path = fresh_fs(self.root)
        return fs.exists(path)

    def require(self) -> "CrawlDir":
        if not self.exists():
            raise CrawlError(f"crawl dir {self.root} does not exist (run `crawler inject` first)")
        return self

    def segment_ids(self) -> list[str]:
        fs, path = fresh_fs(self.segments)
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
