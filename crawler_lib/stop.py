"""Graceful stops: SIGTERM or SIGINT (a scheduler's task timeout, `kill`, Ctrl-C) ends a step without
losing or repeating work, and without leaving leases to expire.

The driver writes a stop request into the running segment (`segments/<id>/stop`); each fetch task,
wherever it runs, looks for it every `fetcher.stop_poll_s`, then grants no new request slot: the
requests in flight finish and the URLs not requested go back to the pool (`not_attempted`, reason
`stopped`). The fetch commits its output as usual, updatedb applies it and releases the leases, and
`crawl` starts no further cycle. A second signal ends the process at once: the fetch journal and the
lease expiry mend that, as after a crash.
"""
from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager
from typing import Callable, Iterator, Optional

from crawler_lib.crawldir import fresh_fs

SIGNALS = (signal.SIGTERM, signal.SIGINT)


def request_stop(marker: str) -> None:
    """Ask the fetch tasks of a segment to stop (its `stop` file)."""
    fs, path = fresh_fs(marker)
    fs.pipe_file(path, b"stop requested\n")


def stop_requested(marker: str) -> bool:
    fs, path = fresh_fs(marker)
    return fs.exists(path)


def clear_stop(marker: str) -> None:
    """A fetch run again after a stop fetches again."""
    fs, path = fresh_fs(marker)
    if fs.exists(path):
        fs.rm(path)


class GracefulStop:
    """Catches the first SIGTERM or SIGINT while active: records it, says so in one line, and runs the
    hooks of the work in progress (`while_running`); the second one gets the default action. Outside
    the main thread (a notebook's worker thread) signals cannot be caught, and it only records."""

    def __init__(self, report: Callable[[str], None]):
        self.report = report
        self.signal_name: Optional[str] = None
        self._hooks: list[Callable[[], None]] = []
        self._previous: dict = {}

    @property
    def requested(self) -> bool:
        return self.signal_name is not None

    def __enter__(self) -> "GracefulStop":
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._handle) for s in SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        self._previous = {}

    def _handle(self, signum, _frame) -> None:
        if self.requested:  # the second signal: the default action (SIGINT: KeyboardInterrupt)
            self.__exit__()
            os.kill(os.getpid(), signum)
            return
        self.signal_name = signal.Signals(signum).name
        self.report(f"stopping ({self.signal_name}): the requests in flight finish, the rest of the segment "
                    f"goes back to the pool, then it is committed; send it again to end at once")
        for hook in list(self._hooks):  # not in the handler: it may have interrupted a storage call
            threading.Thread(target=hook, name="stop-request", daemon=True).start()

    @contextmanager
    def while_running(self, hook: Callable[[], None]) -> Iterator[None]:
        """Within the block, a stop calls `hook` (at once when one came before)."""
        self._hooks.append(hook)
        try:
            if self.requested:
                hook()
            yield
        finally:
            self._hooks.remove(hook)
