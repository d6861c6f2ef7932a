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
