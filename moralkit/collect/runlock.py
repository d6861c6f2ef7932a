"""The lock of a run directory: one writer at a time, released by the operating system if it dies.

:class:`RunLock` holds ``run_dir/.lock`` with :mod:`filelock` (``flock`` on POSIX, ``msvcrt.locking`` on
Windows) for a whole session, so a second collector, or a repair, on the same run is refused with
:class:`RunLockedError` naming the holder (its pid, host and start time are in ``run_dir/.lock.holder``).
:class:`moralkit.collect.store.RecordStore` and :func:`moralkit.collect.repair.repair_run` take it.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from ..errors import MoralkitError
from .provenance import utc_now

__all__ = ["RunLock", "RunLockedError", "LOCK", "LOCK_HOLDER"]

LOCK = ".lock"
LOCK_HOLDER = ".lock.holder"  # who holds LOCK: pid, host, since (JSON)


class RunLockedError(MoralkitError):
    """Another process holds the run directory's lock (its pid and host are in the message)."""


class RunLock:
    """An exclusive lock on ``run_dir/.lock`` for a whole session, held with :mod:`filelock` (``flock`` on
    POSIX, ``msvcrt.locking`` on Windows), so it is released by the operating system if the process dies.
    The holder's pid, host and start time go to ``run_dir/.lock.holder``, for the second writer's error.

    Raises
    ------
    RunLockedError
        Another process holds the lock.
    """

    def __init__(self, run_dir: Path):
        from filelock import FileLock, Timeout

        self.path = run_dir / LOCK
        self.holder = run_dir / LOCK_HOLDER
        self.lock = FileLock(str(self.path), timeout=0)
        try:
            self.lock.acquire()
        except Timeout:
            try:
                holder = json.loads(self.holder.read_bytes() or b"{}")
            except (OSError, ValueError):
                holder = {}
            self.lock = None
            raise RunLockedError(
                f"{run_dir} is in use by another collector (pid {holder.get('pid', '?')} on host "
                f"{holder.get('host', '?')}, since {holder.get('since', '?')}). Two writers would duplicate "
                "requests: wait for it to finish, or stop it, then re-run this command to resume.") from None
        info = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": utc_now()}).encode()
        self.holder.write_bytes(info)

    def release(self):
        """Give the lock up (idempotent); the holder file goes first."""
        if self.lock is not None:
            try:
                self.holder.unlink(missing_ok=True)
            finally:
                self.lock.release()
                self.lock = None
