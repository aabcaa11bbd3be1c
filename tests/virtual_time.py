"""A deterministic virtual clock for asyncio: the loop jumps to its next timer instead of waiting."""
from __future__ import annotations

import asyncio
import selectors
from concurrent.futures import Executor, Future


class _JumpingSelector(selectors.DefaultSelector):
    def __init__(self):
        super().__init__()
        self.loop = None

    def select(self, timeout=None):
        events = super().select(0)
        if not events and timeout:
            self.loop.now += timeout  # nothing to do until the next timer: let virtual time pass
        return events


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """`time()` is virtual; sleeping costs no wall time and every run is the same run."""

    def __init__(self):
        selector = _JumpingSelector()
        super().__init__(selector)
        selector.loop = self
        self.now = 0.0

    def time(self) -> float:
        return self.now


class InlineExecutor(Executor):
    """Runs submitted work at once in the loop's thread, so no real thread races virtual time."""

    def submit(self, fn, *args, **kwargs):
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
            future.set_exception(exc)
        return future
