"""Which request the runner sends next, and when a collection stops.

:class:`Scheduler` keeps the ready tasks in order, puts a failed request back after its backoff
(:func:`~moralkit.collect.backends.retry_delay`), gives a task up after ``max_retries + 1`` failures in one
session, and stops the session after ``max_consecutive`` failures in a row or on a response no retry can
fix (an HTTP status in :data:`~moralkit.collect.backends.FATAL_STATUS`, or a parser's
:class:`~moralkit.errors.MoralkitError`). :func:`stop_on_signals` turns the first SIGINT or SIGTERM into
:data:`STOP`: every scheduler then hands out no more tasks, and the requests in flight are awaited and
stored. :func:`moralkit.collect.runner.run_tasks` drives both.
"""

from __future__ import annotations

import contextlib
import heapq
import signal
import threading
import time
from collections import Counter, deque

from .backends import FATAL_STATUS, Completion, retry_delay

__all__ = ["Scheduler", "STOP", "STOP_REASON", "stop_requested", "stop_on_signals"]

#: Set by the first SIGINT / SIGTERM while :func:`stop_on_signals` is active: every session stops sending,
#: awaits the requests in flight and stores their answers, then ends incomplete (re-run to resume).
STOP = threading.Event()
STOP_REASON: dict = {}


def stop_requested() -> str | None:
    """Why the collection is stopping (a signal received), or None."""
    return STOP_REASON.get("why") if STOP.is_set() else None


@contextlib.contextmanager
def stop_on_signals(signals=(signal.SIGINT, signal.SIGTERM)):
    """Drain instead of dying: the first SIGINT or SIGTERM stops new requests, the requests in flight are
    awaited and their answers stored (they are paid for), and the session ends incomplete (exit status 3,
    re-run to resume). A second signal ends the process at once (SIGINT: ``KeyboardInterrupt``).

    Only the main thread can install signal handlers; elsewhere this does nothing. A SIGKILL cannot be
    caught: the answers of requests in flight at that moment are paid for and lost (their resume sends
    them again).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {}

    def handler(signum, frame):
        if STOP.is_set():  # the second signal: do not wait any more
            for s, h in old.items():
                signal.signal(s, h)
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            signal.raise_signal(signum)
            return
        STOP_REASON["why"] = (f"interrupted by {signal.Signals(signum).name}: the requests in flight were awaited "
                              "and stored; re-run the same command to resume")
        STOP.set()

    for s in signals:
        old[s] = signal.signal(s, handler)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        STOP.clear()
        STOP_REASON.clear()



class Scheduler:
    """Which task to send next: ready tasks in order, retries after their backoff, give-ups.

    Parameters
    ----------
    tasks : list of Task
        In sending order; those already done in ``store`` are left out.
    store : RecordStore
        Says which tasks are done (their stored attempts).
    max_attempts, max_retries : int
        Attempts per task; failed requests per task and session before it is given up.
    backoff : float
        Base of :func:`~moralkit.collect.backends.retry_delay`.
    max_consecutive : int
        Failures (or answers empty at the output budget) in a row that stop the session.
    """

    def __init__(self, tasks, store, max_attempts, max_retries, backoff, max_consecutive):
        self.store = store
        self.max_attempts = max_attempts
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_consecutive = max_consecutive
        self.ready = deque(t for t in tasks if not self.is_done(t))
        self.delayed: list = []
        self.seq = 0
        self.errors = Counter()
        self.consecutive = 0
        self.consecutive_length = 0
        self.stopped = None
        self.refused = None
        self.failed: dict[str, str] = {}

    def is_done(self, t) -> bool:
        """Whether task ``t`` has a valid answer, or ``max_attempts`` answers without one."""
        att = self.store.attempts(t.task)
        return any(a.get("status") == "ok" for a in att) or len(att) >= self.max_attempts

    def _promote(self):
        now = time.monotonic()
        back = []
        while self.delayed and self.delayed[0][0] <= now:
            back.append(heapq.heappop(self.delayed)[2])
        for t in reversed(back):
            self.ready.appendleft(t)

    def next_ready(self, like=None):
        """The next task to send, or None. With ``like``, only a task batchable with it."""
        if STOP.is_set() and not self.stopped:
            self.stopped = stop_requested()
        if self.stopped:
            return None
        self._promote()
        if not self.ready:
            return None
        if like is not None:
            t = self.ready[0]
            if t.group != like.group or t.sampling != like.sampling or t.system != like.system:
                return None
        return self.ready.popleft()

    def wait_time(self) -> float | None:
        """Seconds until a delayed task is due (None: nothing is waiting)."""
        if self.stopped or not self.delayed:
            return None
        return max(0.0, self.delayed[0][0] - time.monotonic())

    def answered(self, t, status=None) -> None:
        """Task ``t`` got a usable response with parse status ``status``; re-queue it if it is not done."""
        self.consecutive = 0
        self.consecutive_length = self.consecutive_length + 1 if status == "length" else 0
        if self.consecutive_length >= self.max_consecutive and not self.stopped:
            self.stopped = (f"{self.consecutive_length} answers in a row were empty at the output budget "
                            "(finish_reason length): raise --max-tokens (a reasoning model spends it on hidden "
                            "reasoning)")
            self.refused = self.refused or self.stopped
        if not self.is_done(t):
            self.ready.appendleft(t)

    def failed_try(self, t, c: Completion, message: str, fatal: bool = False) -> None:
        """A request of task ``t`` failed: stop (fatal, or too many in a row), give up, or retry after a backoff."""
        self.errors[t.task] += 1
        self.consecutive += 1
        if fatal or c.fatal or c.status_code in FATAL_STATUS:
            if self.refused is None:
                self.refused = f"request {t.task!r}: {message}"
                self.stopped = f"request {t.task!r}: {message} (retrying cannot fix this)"
            self.failed[t.task] = message
            return
        if self.consecutive >= self.max_consecutive:
            self.stopped = f"{self.consecutive} requests failed in a row; the last, {t.task!r}: {message}"
            self.failed[t.task] = message
            return
        if self.errors[t.task] > self.max_retries:
            self.failed[t.task] = f"{message} (tried {self.errors[t.task]} times this session)"
            return
        delay = retry_delay(self.errors[t.task] - 1, c.retry_after, self.backoff)
        self.seq += 1
        heapq.heappush(self.delayed, (time.monotonic() + delay, self.seq, t))

