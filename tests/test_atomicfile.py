"""Atomic writes: a killed writer leaves the old file and, until the next write, a hidden folder."""

from __future__ import annotations

import os
import subprocess
import sys

from moralkit.atomicfile import atomic_path, remove_stale_temporaries


def test_a_killed_writers_folder_is_removed_by_the_next_write(tmp_path):
    target = tmp_path / "x.csv.gz"
    target.write_text("old")
    # a writer killed with SIGKILL inside the block: its folder stays, the target is intact
    code = (f"import os, signal; from moralkit.atomicfile import atomic_path\n"
            f"with atomic_path({str(target)!r}) as t:\n"
            f"    t.write_text('half')\n"
            f"    os.kill(os.getpid(), signal.SIGKILL)\n")
    proc = subprocess.run([sys.executable, "-c", code])
    assert proc.returncode == -9
    left = [p.name for p in tmp_path.iterdir() if p.name != "x.csv.gz"]
    assert len(left) == 1 and left[0].startswith(".x.csv.gz.tmp") and target.read_text() == "old"
    with atomic_path(target) as t:
        t.write_text("new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.csv.gz"] and target.read_text() == "new"


def test_a_live_writers_folder_is_left_alone(tmp_path):
    target = tmp_path / "y.txt"
    live = tmp_path / f".y.txt.tmp{os.getppid()}"  # the parent process (pytest's launcher) is alive
    live.mkdir()
    assert remove_stale_temporaries(target) == [] and live.is_dir()


class _FakeKernel32:
    """SIMULATED kernel32 (OpenProcess, GetExitCodeProcess, CloseHandle) for the Windows branch on Linux."""

    def __init__(self, procs):
        self.procs, self.closed = procs, []  # pid -> exit code; a missing pid has no process

    def OpenProcess(self, access, inherit, pid):  # noqa: N802 (the Windows name)
        assert access == 0x1000 and inherit is False
        return 1000 + pid if pid in self.procs else 0

    def GetExitCodeProcess(self, handle, ref):  # noqa: N802
        ref._obj.value = self.procs[handle - 1000]
        return 1

    def CloseHandle(self, handle):  # noqa: N802
        self.closed.append(handle)


def test_on_windows_the_pid_probe_reads_the_exit_code_and_never_calls_os_kill(tmp_path, monkeypatch):
    """os.kill(pid, 0) terminates the process on Windows: the probe must use OpenProcess/GetExitCodeProcess."""
    import ctypes

    from moralkit import atomicfile

    fake = _FakeKernel32({111: 259, 222: 0})  # 111 runs (STILL_ACTIVE), 222 has exited
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setattr(atomicfile, "_kernel32", lambda: fake)
    monkeypatch.setattr(ctypes, "get_last_error", lambda: 87, raising=False)  # ERROR_INVALID_PARAMETER
    monkeypatch.setattr(os, "kill", lambda *a: (_ for _ in ()).throw(AssertionError("os.kill on Windows")))
    assert atomicfile._pid_alive(111) is True
    assert atomicfile._pid_alive(222) is False and atomicfile._pid_alive(333) is False
    assert fake.closed == [1111, 1222]
    monkeypatch.setattr(ctypes, "get_last_error", lambda: 5, raising=False)  # access denied: it exists
    assert atomicfile._pid_alive(444) is True
    monkeypatch.setattr(ctypes, "get_last_error", lambda: 87, raising=False)
    for pid in (111, 222, 333):
        (tmp_path / f".x.csv.tmp{pid}").mkdir()
    removed = sorted(p.name for p in remove_stale_temporaries(tmp_path / "x.csv"))
    assert removed == [".x.csv.tmp222", ".x.csv.tmp333"]  # the live writer's folder stays
