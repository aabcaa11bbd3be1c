"""The fetch journal: what a fetch task has done, kept under its segment while it runs, so that a
retried attempt (a Spark task retry) or a rerun of a fetch that never committed resumes where the
earlier one stopped instead of starting over (Heritrix keeps a frontier journal for the same reason).

Lines, JSON, one file set per partition under `segments/<id>/journal/`:
- `intent`: a request about to be sent (written before it is);
- `request`: the audit row of a request sent (so `fetchlog` holds every request of every attempt);
- `url`: a URL's outcome, with the location of its WARC record;
- `parse`: with `fetcher.journal_parses`, the page's parse row, written just before its `url` line;
- `politeness`: a host's backoff state after a request; `robots`: its rules after a robots.txt fetch.

`Replay` reads the earlier attempts' lines: their outcomes and request rows are emitted again (the
WARC records they point at stay), answered URLs are not requested again, a URL whose request left
but whose answer was lost goes back to the pool (never requested twice in one segment), and each
host and address resumes its politeness from its last request start, its backoff and its rules.

On a local or mounted file system each attempt appends to one file, flushed line by line, so a hard
exit loses nothing written; the WARC writer flushes each record before its `url` line is written. On
object stores (no appends, nothing durable before close) lines are buffered and written as one new
object every `fetcher.journal_interval_s`, after the WARC file they point into has been closed: a
retry there may repeat the requests of the last interval.
"""
from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Optional

import fsspec
from fsspec.implementations.local import LocalFileSystem

from crawler_lib.progress import PeriodicProgress
from crawler_lib.schema import to_epoch


def _encode(value):
    if isinstance(value, datetime):
        return {"$t": value.isoformat()}
    raise TypeError(f"not journalled: {type(value).__name__}")


def _decode(obj: dict):
    return datetime.fromisoformat(obj["$t"]) if obj.keys() == {"$t"} else obj


@dataclass
class Replay:
    """What the earlier attempts of this partition did."""

    outcomes: dict = field(default_factory=dict)     # url -> url row
    requests: list = field(default_factory=list)     # request rows
    lost: dict = field(default_factory=dict)         # url -> intent whose answer never got journalled
    hosts: dict = field(default_factory=dict)        # host key -> HostDB-like fields to overlay
    # host key / IP address -> the latest a host may have seen a request begin (epoch): an intent is
    # journalled before its request leaves, so an answered request counts until its answer ended
    host_starts: dict = field(default_factory=dict)
    address_starts: dict = field(default_factory=dict)
    lost_hosts: set = field(default_factory=set)  # hosts with a request in flight when the attempt died
    intents: dict = field(default_factory=dict)   # request id -> host key, robots.txt requests included

    @property
    def empty(self) -> bool:
        return not (self.outcomes or self.requests or self.lost or self.hosts)

    def add(self, line: dict) -> None:
        kind = line.pop("k")
        if kind == "intent":
            at, host, address = line.pop("at"), line["host_key"], line.pop("address")
            self.intents[line["request_id"]] = host
            self.host_starts[host] = max(at, self.host_starts.get(host, at))
            if address:
                self.address_starts[address] = max(at, self.address_starts.get(address, at))
            if line["purpose"] == "page" and line["url"] not in self.outcomes:
                self.lost[line["url"]] = line
        elif kind == "request":
            self.requests.append(line)
            ended = to_epoch(line.get("ended_at"))
            if ended is not None:
                host, address = line.get("host_key"), line.get("ip_address")
                self.host_starts[host] = max(ended, self.host_starts.get(host, ended))
                if address:
                    self.address_starts[address] = max(ended, self.address_starts.get(address, ended))
        elif kind == "url":
            self.outcomes[line["url"]] = line
            self.lost.pop(line["url"], None)
        elif kind in ("politeness", "robots"):
            self.hosts.setdefault(line.pop("host_key"), {}).update(line)

    def finish(self) -> "Replay":
        """A lost request whose row never got journalled still enters `fetchlog`, marked so. (A URL
        with a request row but no outcome, e.g. a 429 requeued when the attempt died, is lost too.) A host
        with any request unanswered, robots.txt's included, may have seen it begin as late as the death."""
        logged = {r["request_id"] for r in self.requests}
        unlogged = [intent for intent in self.lost.values() if intent["request_id"] not in logged]
        self.lost_hosts = {host for request_id, host in self.intents.items() if request_id not in logged}
        self.requests += [{**intent, "error": "answer_lost_with_attempt"} for intent in unlogged]
        return self


def _decoded(raw: str) -> Optional[dict]:
    """A journal line, or None for one cut short by a hard exit (a JSON object cut short never parses):
    the rest of its file was never written."""
    try:
        return json.loads(raw, object_hook=_decode)
    except (ValueError, KeyError):
        return None


def _lines(fs, name: str):
    """A dead attempt's journal file: its lines up to the first that is not whole."""
    with fs.open(name, "rb") as handle:
        for raw in handle.read().decode("utf-8", errors="replace").splitlines():
            line = _decoded(raw)
            if line is None:
                return
            yield line


def _new_lines(fs, path: str, offsets: dict[str, int]):
    """(file, line) of the journal files under `path`, from each file's offset in `offsets` (advanced
    past what is read) to its last whole line: a line being written is read next time, and a line cut
    by a hard exit, never completed, ends what is read of its file."""
    fs.invalidate_cache(path)
    try:
        names = sorted(fs.find(path)) if fs.exists(path) else []
    except OSError:
        return
    for name in names:
        offset = offsets.get(name, 0)
        if offset < 0:
            continue
        try:
            with fs.open(name, "rb") as handle:
                handle.seek(offset)
                data = handle.read()
        except OSError:
            continue
        whole = data[:data.rfind(b"\n") + 1]
        offsets[name] = offset + len(whole)
        for raw in whole.decode("utf-8", errors="replace").splitlines():
            line = _decoded(raw)
            if line is None:
                offsets[name] = -1
                break
            yield name, line


class JournaledResults:
    """The URL outcomes every attempt of every task of a fetch has journalled (the running or interrupted
    fetch of `updatedb --running`), each with its task's `fetch_partition`, and the parse rows journalled
    with them (`fetcher.journal_parses`): each call of `new` reads only what was journalled since the
    last one (the loop of `crawl --continuous` keeps its reader)."""

    def __init__(self, directory: str):
        self.fs, self.path = fsspec.core.url_to_fs(directory.rstrip("/"))
        self._offsets: dict[str, int] = {}
        self._parses: dict[str, dict] = {}  # url -> parse row whose outcome line is not read yet
        self.urls: set[str] = set()  # every URL with an outcome read so far
        self.reads = 0

    def new(self) -> tuple[list[dict], dict[str, dict]]:
        """(results journalled since the last call, their parse rows by URL where journalled)."""
        self.reads += 1
        results = {}
        for name, line in _new_lines(self.fs, self.path, self._offsets):
            kind = line.pop("k")
            if kind == "parse":
                self._parses[line["url"]] = line
            elif kind == "url":
                partition = int(name.rstrip("/").split("/")[-2].removeprefix("part-"))
                results[line["url"]] = {**line, "fetch_partition": partition}
        self.urls.update(results)
        # A parse line precedes its outcome's, so a read that has the outcome has the parse; one left
        # without an outcome (its attempt died between the two) waits, and a retry never sends it again.
        parses = {url: self._parses.pop(url) for url in results if url in self._parses}
        return list(results.values()), parses


class FetchJournal:
    """One attempt's journal writer; `FetchJournal(None, ...)` journals nothing (unit tests)."""

    def __init__(self, directory: Optional[str], token: str):
        self.directory = directory.rstrip("/") if directory else None
        self.token = token
        self.enabled = directory is not None
        self._buffer: list[str] = []
        self._file = None
        self._parts = 0
        self.appends = False  # written line by line (a local or mounted file system)
        if self.enabled:
            self.fs, self.path = fsspec.core.url_to_fs(self.directory)
            self.appends = isinstance(self.fs, LocalFileSystem)

    # -------------------------------------------------------------- reading
    def replay(self) -> Replay:
        """Lines of every earlier attempt (files not named by this attempt's token), in write order."""
        replay = Replay()
        if not self.enabled:
            return replay
        self.fs.invalidate_cache(self.path)  # a retry in the same worker: the dead attempt's parts
        if not self.fs.exists(self.path):
            return replay
        for name in sorted(self.fs.ls(self.path, detail=False)):
            if os.path.basename(name).startswith(self.token):
                continue
            for line in _lines(self.fs, name):
                try:
                    replay.add(line)
                except KeyError:
                    break
        return replay.finish()

    # -------------------------------------------------------------- writing
    def intent(self, row: dict, address: Optional[str], at: float) -> None:
        """`row`: the request's audit row as known before it is sent."""
        self._line({"k": "intent", **row, "address": address, "at": at})

    def request(self, row: dict) -> None:
        self._line({"k": "request", **row})

    def url(self, row: dict) -> None:
        self._line({"k": "url", **row})

    def parse(self, row: dict) -> None:
        """`row`: a page's parse row (crawler_lib.parser), journalled before its outcome."""
        self._line({"k": "parse", **row})

    def politeness(self, host_key: str, next_allowed_at, backoff_until, consecutive_failures: int) -> None:
        self._line({"k": "politeness", "host_key": host_key, "next_allowed_at": next_allowed_at,
                    "backoff_until": backoff_until, "consecutive_failures": consecutive_failures})

    def robots(self, host_key: str, fields: dict) -> None:
        """`fields`: the robots.txt state as the HostDB keeps it (exchange.robots_fields)."""
        self._line({"k": "robots", "host_key": host_key, **fields})

    def _line(self, line: dict) -> None:
        if not self.enabled:
            return
        text = json.dumps(line, default=_encode, separators=(",", ":")) + "\n"
        if not self.appends:
            self._buffer.append(text)
            return
        if self._file is None:
            self.fs.makedirs(self.path, exist_ok=True)
            self._file = self.fs.open(f"{self.path}/{self.token}.jsonl", "ab")
        self._file.write(text.encode("utf-8"))
        self._file.flush()

    def take_buffer(self) -> list[str]:
        """Lines not yet written (object stores): taken before the WARC file they point into closes."""
        taken, self._buffer = self._buffer, []
        return taken

    def write_part(self, lines: list[str]) -> None:
        """One new object holding `lines` (object stores; blocking, run off the event loop)."""
        if not lines:
            return
        self.fs.makedirs(self.path, exist_ok=True)
        with self.fs.open(f"{self.path}/{self.token}-{self._parts:06d}.jsonl", "wb") as part:
            part.write("".join(lines).encode("utf-8"))
        self._parts += 1

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        elif self.enabled and not self.appends:
            self.write_part(self.take_buffer())


class JournalTail:
    """The driver's view of a running fetch, read from its tasks' journals: each poll reads only what
    was written since the last one (whole lines; a line being written is read next time)."""

    def __init__(self, directory: str):
        self.fs, self.path = fsspec.core.url_to_fs(directory.rstrip("/"))
        self._offsets: dict[str, int] = {}
        self.urls = 0
        self.by_class: Counter = Counter()  # "200", "404", ... for answers; the outcome otherwise
        self.bytes = 0
        self.hosts_requested: dict[str, float] = {}  # host key -> last request start (epoch)

    def poll(self) -> None:
        for _name, line in _new_lines(self.fs, self.path, self._offsets):
            try:
                self._add(line)
            except (KeyError, TypeError):
                continue

    def _add(self, line: dict) -> None:
        kind = line["k"]
        if kind == "url":
            self.urls += 1
            status = line.get("http_status")
            self.by_class[str(status) if status is not None else line.get("outcome") or "unknown"] += 1
        elif kind == "request":
            self.bytes += line.get("bytes") or 0
        elif kind == "intent":
            self.hosts_requested[line["host_key"]] = max(line["at"], self.hosts_requested.get(line["host_key"], 0.0))

    def line(self, label: str, total: int, elapsed_s: float, now: float, active_window_s: float) -> str:
        """One progress line; a host is active when it was sent a request within `active_window_s`."""
        active = sum(at >= now - active_window_s for at in self.hosts_requested.values())
        mix = " ".join(f"{key}={count}" for key, count in self.by_class.most_common(6)) or "nothing answered yet"
        share = f" ({self.urls / total:.0%})" if total else ""
        eta = ""
        if 0 < self.urls < total:
            eta = f", ETA {_duration(elapsed_s * (total - self.urls) / self.urls)}"
        return (f"{label}: {self.urls} of {total} URLs{share} in {_duration(elapsed_s)}, "
                f"{self.bytes / 1e6:.1f} MB, {active} of {len(self.hosts_requested)} hosts active; {mix}{eta}")


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class FetchProgress(PeriodicProgress):
    """While a fetch runs: one progress line every `interval_s` (0: none), from its journals."""

    def __init__(self, directory: str, label: str, total: int, interval_s: float, report):
        super().__init__(interval_s, report)
        self.tail = JournalTail(directory)
        self.label, self.total = label, total

    def line(self, elapsed_s: float) -> str:
        self.tail.poll()
        return self.tail.line(self.label, self.total, elapsed_s, time.time(), self.interval_s)
