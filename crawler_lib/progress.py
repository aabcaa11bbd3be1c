"""A progress line every few seconds while a long step runs, from a driver thread (Scrapy's LogStats,
Heritrix's reports): the fetch's from its journals, the other steps' from Spark's status API."""
from __future__ import annotations

import threading
import time
from typing import Callable, Optional


class PeriodicProgress:
    """While the `with` block runs: `report(self.line(elapsed_s))` every `interval_s` (0: never); a step
    shorter than one interval prints nothing. Subclasses implement `line` (None: nothing to say)."""

    def __init__(self, interval_s: float, report: Callable[[str], None]):
        self.interval_s, self.report = interval_s, report
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def line(self, elapsed_s: float) -> Optional[str]:
        raise NotImplementedError

    def __enter__(self):
        if self.interval_s > 0:
            self._thread = threading.Thread(target=self._run, name=type(self).__name__, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        started = time.monotonic()
        while not self._stop.wait(self.interval_s):
            try:
                line = self.line(time.monotonic() - started)
            except Exception:  # progress must never fail the step it reports on
                continue
            if line and not self._stop.is_set():
                self.report(line)
