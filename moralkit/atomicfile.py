"""Writing files so that a kill at any moment leaves either the old file or the new one, never half of one.

:func:`atomic_path` gives a temporary path *with the target's own file name* (in a hidden directory
next to it), so writers that embed the name, such as gzip headers written by pandas, produce the same
bytes as when writing to the target directly; on success the file is fsynced and renamed over the
target. :func:`atomic_write_bytes` does the same for bytes in memory.

Examples
--------
>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> with atomic_path(d / "x.txt") as tmp:
...     _ = tmp.write_text("hello")
>>> (d / "x.txt").read_text(), sorted(p.name for p in d.iterdir())
('hello', ['x.txt'])
"""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path

__all__ = ["atomic_path", "atomic_write_bytes", "fsync_dir", "remove_stale_temporaries", "remove_stale_temporaries_in"]


def fsync_dir(d) -> None:
    """fsync a directory (makes a rename in it durable); a no-op where directories cannot be opened."""
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _kernel32():  # pragma: no cover - Windows only (the tests replace it)
    import ctypes

    return ctypes.WinDLL("kernel32", use_last_error=True)


#: Windows: the access right that suffices to read a process's exit code, and the code of a running one.
_PROCESS_QUERY_LIMITED_INFORMATION = 0x1000
_STILL_ACTIVE = 259
_ERROR_ACCESS_DENIED = 5


def _pid_alive_windows(pid: int) -> bool:
    """Windows: ``OpenProcess`` + ``GetExitCodeProcess``. ``os.kill(pid, 0)`` must not be used there: it
    calls ``TerminateProcess`` with exit code 0, killing the process it means to probe."""
    import ctypes

    k32 = _kernel32()
    handle = k32.OpenProcess(_PROCESS_QUERY_LIMITED_INFORMATION, False, int(pid))
    if not handle:  # no such process, or one we may not query (it exists: leave its folder alone)
        return ctypes.get_last_error() == _ERROR_ACCESS_DENIED
    try:
        code = ctypes.c_ulong()
        if not k32.GetExitCodeProcess(handle, ctypes.byref(code)):
            return True  # cannot tell: keep the folder
        return code.value == _STILL_ACTIVE
    finally:
        k32.CloseHandle(handle)


def _pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this machine (POSIX: signal 0; Windows: its exit code)."""
    import sys

    if sys.platform == "win32":
        return _pid_alive_windows(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def remove_stale_temporaries(path) -> list[Path]:
    """Remove the hidden temporary folders of ``path`` left by writers that were killed.

    A writer killed between creating its ``.<name>.tmp<pid>`` folder and renaming the file leaves the
    folder behind (the target itself is intact). A folder whose process no longer runs on this
    machine is removed; one of a live process is left alone. Returns the folders removed.
    """
    path = Path(path)
    removed = []
    for d in path.parent.glob(f".{path.name}.tmp*"):
        pid = d.name[len(f".{path.name}.tmp"):]
        if d.is_dir() and pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid)):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


def remove_stale_temporaries_in(directory) -> list[Path]:
    """Remove every hidden temporary folder (``.<name>.tmp<pid>``, any target name) that a killed writer
    left in ``directory``; folders of live processes are left alone. Returns the folders removed.

    Collectors call it when they open a run directory, and :func:`atomic_path` before each write, so a
    kill's leftovers (up to the size of the file being written) are gone on the next start.
    """
    directory = Path(directory)
    removed = []
    if not directory.is_dir():
        return removed
    for d in directory.glob(".*.tmp*"):
        pid = d.name.rsplit(".tmp", 1)[-1]
        if d.is_dir() and pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid)):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


@contextmanager
def atomic_path(path):
    """Yield a temporary path with ``path``'s file name; rename it over ``path`` if the block succeeds.

    Temporary folders that killed writers left next to ``path`` (for any target) are removed first
    (:func:`remove_stale_temporaries_in`). A ``path`` that is a directory is refused
    (:class:`~moralkit.errors.MoralkitError`), before anything is written.
    """
    path = Path(path)
    if path.is_dir():
        from .errors import MoralkitError

        raise MoralkitError(f"{path} is a directory: give a file name to write, e.g. {path / 'NAME.csv.gz'}")
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries_in(path.parent)
    tmpdir = path.parent / f".{path.name}.tmp{os.getpid()}"
    tmpdir.mkdir(exist_ok=True)
    tmp = tmpdir / path.name
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


def atomic_write_bytes(path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_path`)."""
    path = Path(path)
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return path
