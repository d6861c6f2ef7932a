"""Shared pytest fixtures.

``tiny_run``
    (session) four small notebooks written by the tests (a figure with math, a
    parameter probe, one that raises in cell 3, one after it) executed once by
    ``run_all.py`` as a subprocess, ``--quick --seed 7 --jobs 1`` (one after the other).
``quick_run``
    (session) ``run_all --quick`` over the project's real ``notebooks/`` into a
    temporary book, with ``MORALKIT_FIGURES_DIR`` in a temporary folder,
    ``keep_going=True`` so every notebook gets its own verdict. Shared by
    ``test_notebooks.py`` and ``test_appendix_browser.py``.

The README's test command runs on two pytest-xdist workers (``-n 2 --dist loadfile`` in
``pyproject.toml``): each test file runs on one worker, so its module-scoped fixtures (servers, loaded
models, fitted data) are built once. The two session fixtures above are built once for all workers
(:func:`_once`): the first worker that needs one builds it under a file lock, the other reads it.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

_HEADER = """# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---
"""

TINY_NOTEBOOKS = {
    "01_plot.py": _HEADER + r'''
# %% [markdown]
# # 01 — A small figure
#
# The CCEI is $e^* = \sup\{e \in [0,1]\}$ and the expenditure is
# $$E_{rk} = \mathbf{p}^r \cdot \mathbf{q}^k_{o^r}.$$
# An unknown macro stays readable: $\mymacro{x}$. Code `$not math$` stays.

# %% tags=["parameters"]
quick = False
seed = 0

# %%
import matplotlib.pyplot as plt
import numpy as np
from moralkit.figures import save
from moralkit.paths import tables_dir

rng = np.random.default_rng(seed)
fig, ax = plt.subplots(figsize=(4, 3))
ax.plot(rng.normal(size=20 if quick else 200).cumsum(), color="C3", lw=3)
save(fig, "01_walk")  # figures_dir()/01_walk.png and .svg; the page shows the PNG
(tables_dir() / "01_table.csv").write_text("a,b\n1,2\n")
plt.show()  # nothing left to show: save() closed the figure

# %%
from IPython.display import Math
Math(r"\alpha^2 + \beta")
''',
    "02_params.py": """
# %% [markdown]
# # 02 — Parameter probe

# %% tags=["parameters"]
quick = False
n_jobs = 1
label = "default"

# %%
print("received", repr(quick), repr(n_jobs), repr(label), "seed" in globals())
""",
    "03_bad.py": """
# %% [markdown]
# # 03 — Fails in cell 3

# %% tags=["parameters"]
quick = False

# %%
x = 1

# %%
y = x + 1
raise ValueError("boom in cell three")

# %%
z = 3
""",
    "04_after.py": """
# %% [markdown]
# # 04 — After the failure

# %% tags=["parameters"]
quick = False

# %%
print("ran")
""",
}


def write_tiny_notebooks(folder: Path, names=None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in TINY_NOTEBOOKS.items():
        if names is None or name[:2] in names:
            (folder / name).write_text(text.lstrip("\n"), encoding="utf-8")
    return folder


@dataclass
class TinyRun:
    notebooks: Path
    build: Path
    figures: Path
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def pytest_collection_modifyitems(config, items):
    """Every test under ``tests/book/`` is end to end (``-m "not e2e"`` leaves them out)."""
    book = Path(__file__).resolve().parent / "book"
    for item in items:
        if book in item.path.parents:
            item.add_marker(pytest.mark.e2e)


def kill_when(cmd, ready, rng, env, t_max=60.0) -> bool:
    """Start ``python -m moralkit CMD`` (with ``env``); when ``ready()`` turns true (polled every ms), wait a
    random 0-30 ms and SIGKILL it. Returns True if it was killed, False if it had already exited. The SIGKILL
    suites of collection, likelihoods and export share it."""
    import signal

    p = subprocess.Popen([sys.executable, "-m", "moralkit", *map(str, cmd)], cwd=ROOT, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = time.time()
    try:
        while p.poll() is None and time.time() - t0 < t_max and not ready():
            time.sleep(0.001)
        time.sleep(rng.uniform(0, 0.03))
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait(30)
            return True
        return False
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(30)


def _once(tmp_path_factory, name: str, build):
    """``build()`` once per test session, also across pytest-xdist workers.

    Without xdist this is ``build()``. Under xdist the workers share the parent of their base
    temporaries: the first to get here builds under a file lock and pickles the result there; the
    others wait on the lock and unpickle it (pytest-xdist's documented pattern for session fixtures).
    """
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return build()
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp().parent
    with FileLock(str(shared / f"{name}.lock")):
        done = shared / f"{name}.pickle"
        if done.is_file():
            return pickle.loads(done.read_bytes())
        result = build()
        done.write_bytes(pickle.dumps(result))
        return result


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> TinyRun:
    return _once(tmp_path_factory, "tiny_run", lambda: _tiny_run(tmp_path_factory))


def _tiny_run(tmp_path_factory) -> TinyRun:
    base = tmp_path_factory.mktemp("tiny")
    nbdir = write_tiny_notebooks(base / "notebooks")
    build, figs = base / "build", base / "figures"
    figs.mkdir()
    for stale in ("03_stale.png", "04_stale.png"):  # outputs of an "earlier run"
        (figs / stale).write_bytes(b"old")
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(ROOT / "run_all.py"), "--notebooks", str(nbdir), "--out", str(build),
         "--figures-dir", str(figs), "--quick", "--seed", "7", "--jobs", "1"],
        capture_output=True, text=True, timeout=600, cwd=str(base),
    )
    return TinyRun(nbdir, build, figs, proc.returncode, proc.stdout, proc.stderr, time.perf_counter() - t0)


@pytest.fixture(scope="session")
def quick_run(tmp_path_factory):
    """``moralkit.book.run_all`` in quick mode over the real notebooks (once per session)."""
    return _once(tmp_path_factory, "quick_run", lambda: _quick_run(tmp_path_factory))


def _quick_run(tmp_path_factory):
    from moralkit.book import discover_notebooks, run_all

    if not discover_notebooks(ROOT / "notebooks"):
        pytest.fail("notebooks/ holds no NN_name.py notebook")
    base = tmp_path_factory.mktemp("quick_run")
    return run_all(ROOT / "notebooks", base / "build", quick=True, jobs=2,
                   figures_dir=base / "figures", keep_going=True, log=None)
