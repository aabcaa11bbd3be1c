"""Graceful stops: SIGTERM or SIGINT (`kill`, Kubernetes or systemd stopping a process, Ctrl-C; not
Airflow's SparkSubmitOperator timeout, which kills spark-submit outright) ends a step without
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
    """Catches the first SIGTERM or SIGINT while active, and stops on its own after `after_s` when
    given (`crawl --duration`): records why, says so in one line, and runs the hooks of the work in
    progress (`while_running`). A second signal gets its default action. Outside the main thread (a
    notebook's worker thread) signals cannot be caught: only the duration and `request` stop it."""

    def __init__(self, report: Callable[[str], None], after_s: Optional[float] = None):
        self.report = report
        self.after_s = after_s
        self.reason: Optional[str] = None
        self._hooks: list[Callable[[], None]] = []
        self._previous: dict = {}
        self._timer: Optional[threading.Timer] = None
        self._signalled = False

    @property
    def requested(self) -> bool:
        return self.reason is not None

    def __enter__(self) -> "GracefulStop":
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._handle) for s in SIGNALS}
        if self.after_s is not None:
            self._timer = threading.Timer(self.after_s, self.request, [f"--duration {self.after_s:g}"])
            self._timer.daemon = True
            self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._timer:
            self._timer.cancel()
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        self._previous = {}

    def request(self, reason: str) -> None:
        """Stop the work under way and what would follow it (the first request counts)."""
        if self.requested:
            return
        self.reason = reason
        self.report(f"stopping ({reason}): the requests in flight finish, the rest of the segment goes back "
                    f"to the pool, then it is committed (SIGTERM or SIGINT twice ends the process at once)")
        for hook in list(self._hooks):  # in a thread: a signal may have interrupted a storage call
            threading.Thread(target=hook, name="stop-request", daemon=True).start()

    def _handle(self, signum, _frame) -> None:
        if self._signalled:  # the second signal: its default action (SIGINT: KeyboardInterrupt)
            self.__exit__()
            os.kill(os.getpid(), signum)
            return
        self._signalled = True
        self.request(signal.Signals(signum).name)

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
