"""``run_all.py``: execute the numbered notebooks with papermill, then publish them as a Jupyter Book.

:func:`run_all` is the whole batch; :func:`main` is its command line. What happens, in order:

1. the notebooks ``notebooks/NN_name.py`` are selected (``only``) and their parameters checked: each
   notebook receives only the parameters its ``parameters`` cell declares, and a ``-p`` name that no
   selected notebook declares is an error;
2. before a notebook runs, the figures and tables it wrote last time (``NN_*``) are removed;
3. papermill executes it (up to ``jobs`` notebooks at a time, longest first by the earlier run or,
   on a fresh clone, by the benchmark record (:func:`moralkit.book.notebooks.expected_seconds`); when one notebook is
   selected, it gets ``n_jobs=jobs`` if it declares ``n_jobs``); a failure names the cell and its line
   in the ``.py`` file;
4. its page is written into the book's sources (:mod:`moralkit.book.publish`), with a box giving its
   status, run time and parameters;
5. the book is built into ``build/`` (entry point ``build/index.html``) and ``build/run.json`` records
   every notebook's run. Pages of notebooks not selected this time are kept from the earlier run. With
   ``jobs >= 2``, most of the build runs early, on the slot the last notebooks leave free
   (:mod:`moralkit.book.early`), and the build after them reads only the changed pages.

The notebooks run with ``MORALKIT_MEMO_DIR=build/memo`` (unless it is set already): results of pure
computations that several notebooks repeat are kept there (:func:`moralkit.paths.memo_dir`), keyed on
everything they depend on; deleting the folder is always safe.

Examples
--------
>>> from moralkit.paths import project_root
>>> main(["--list", "--only", "02"])  # doctest: +ELLIPSIS
02_rationality.py ...
0
"""

from __future__ import annotations

import argparse
import datetime as _dt
import functools
import json
import math
import multiprocessing
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..errors import MoralkitError
from .early import EarlyBook
from .execute import CellFailure, NotebookRun, clear_outputs, environ, execute_notebook
from .notebooks import (
    DEFAULT_KERNEL,
    declared_parameters,
    discover_notebooks,
    expected_seconds,
    notebook_title,
    parse_value,
    read_notebook,
)
from .publish import (
    BOOK_SOURCES,
    BookError,
    build_book,
    find_remote_assets,
    read_json,
    write_book_sources,
    write_page,
)
from .report import BookRun, format_failure, format_timing
from .report import shown as _shown

__all__ = ["main", "publish", "run_all"]

#: the early book build (moralkit.book.early) starts only if the last notebook is expected to run this much
#: longer: about what the build after it takes then (``benchmarks/bench_book_tail.py``)
EARLY_MIN_SECONDS = 5.0


def _fmt_seconds(s: float) -> str:
    return f"{s:.1f} s" if s < 120 else f"{int(s // 60)} min {s % 60:02.0f} s"


def _git_commit(root: Path) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10, check=False)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _record(run: NotebookRun, mode: str) -> dict[str, Any]:
    slow = max(run.cell_seconds, key=lambda t: t[1]) if run.cell_seconds else None
    return {"name": run.name, "number": run.number, "title": run.title, "heading": run.heading or run.title,
            "source": str(run.source),
            "ok": run.ok, "seconds": run.seconds, "cpu_seconds": run.cpu_seconds, "started": run.started,
            "mode": mode,
            "parameters": run.parameters, "ipynb": str(run.ipynb),
            "html": str(run.html) if run.html else None,
            "failure": asdict(run.failure) if run.failure else None, "cell_seconds": run.cell_seconds,
            "slowest_cell": list(slow) if slow else None, "stderr_cells": run.stderr_cells,
            "figures": [str(p) for p in run.figures], "tables": [str(p) for p in run.tables]}


@dataclass
class _Plan:
    """What a run will do, checked before any notebook starts (phase 1 of :func:`run_all`)."""

    every: list[Path]
    sources: list[Path]
    out_dir: Path
    book_dir: Path
    executed_dir: Path
    fig_dir: Path
    tab_dir: Path
    env: dict[str, str]
    requested: dict[str, Any]
    titles: dict[Path, str]
    tasks: list[tuple[Path, dict[str, Any]]]
    previous: dict[str, dict[str, Any]]
    jobs: int
    mode: str
    expected: dict[str, float]  # seconds each notebook is expected to run (longest first; the early build)


@functools.lru_cache(maxsize=64)
def _parsed_source(path: str, text: str) -> tuple[dict[str, str], str, str]:
    """``(declared parameters, title, heading)`` of the notebook ``path`` whose text is ``text``."""
    nb = read_notebook(path)
    return declared_parameters(nb), notebook_title(nb, Path(path).stem), notebook_title(nb, Path(path).stem,
                                                                                          plain=False)


def _source_info(s: Path) -> tuple[dict[str, str], str, str]:
    """A notebook's declared parameters, plain title and heading (:func:`notebook_title` with ``plain=False``).

    Parsing a notebook with jupytext is what costs: ``main`` checks the request before :func:`run_all` plans it,
    and the early book needs the headings of the notebooks still running, so each version of a file (keyed on
    its text) is parsed once per process.
    """
    declared, title, heading = _parsed_source(str(s), Path(s).read_text(encoding="utf-8"))
    return dict(declared), title, heading


def _check_request(notebooks_dir, only, jobs, parameters):
    """The checks of a request that need no data and no output folder: the notebooks selected, ``jobs``, and
    every ``-p`` name declared by one of them. Returns ``(every, sources, titles, declared, jobs)``."""
    if jobs is not None and int(jobs) < 1:
        raise MoralkitError(f"jobs must be >= 1, got {jobs}; pass --jobs 1 or more")
    jobs = int(jobs) if jobs is not None else (os.cpu_count() or 1)
    every = discover_notebooks(notebooks_dir)
    sources = discover_notebooks(notebooks_dir, only)
    if not sources:
        raise MoralkitError(f"no NN_name.py notebooks found in {notebooks_dir or 'notebooks/'}; "
                            "pass the folder that holds them (--notebooks)")
    infos = {s: _source_info(s) for s in sources}
    declared = {s: info[0] for s, info in infos.items()}
    extra = [k for k in (parameters or {}) if not any(k in d for d in declared.values())]
    if extra:
        raise MoralkitError(f"parameter(s) {', '.join(extra)} are declared by none of the selected notebooks "
                            f"({', '.join(s.stem for s in sources)}); check the name against their parameters cell")
    return every, sources, {s: info[1] for s, info in infos.items()}, declared, jobs


def _plan(notebooks_dir, out_dir, only, quick, seed, jobs, parameters, figures_dir, tables_dir,
          kernel_name) -> _Plan:
    """Phase 1: select the notebooks, check the arguments and the parameters, create the folders."""
    from moralkit import paths

    every, sources, titles, declared, jobs = _check_request(notebooks_dir, only, jobs, parameters)
    out_dir = Path(out_dir).resolve()
    env: dict[str, str] = {"TQDM_DISABLE": "1"}  # tqdm bars would be stderr blocks on the pages
    # results of pure computations that several notebooks repeat (moralkit.paths.memo_dir), kept in the build
    env["MORALKIT_MEMO_DIR"] = os.environ.get("MORALKIT_MEMO_DIR") or str(out_dir / "memo")
    if figures_dir is not None:
        env["MORALKIT_FIGURES_DIR"] = str(Path(figures_dir).resolve())
    if tables_dir is not None:
        env["MORALKIT_TABLES_DIR"] = str(Path(tables_dir).resolve())
    with environ(env):
        fig_dir = paths.figures_dir(create=True).resolve()
        tab_dir = paths.tables_dir(create=True).resolve()

    requested: dict[str, Any] = dict(parameters or {})
    if quick:
        requested["quick"] = True
    if seed is not None:
        requested["seed"] = int(seed)
    # several notebooks share the budget side by side; worker processes only for a notebook run alone
    requested.setdefault("n_jobs", jobs if len(sources) == 1 else 1)
    book_dir, executed_dir = out_dir / BOOK_SOURCES, out_dir / "executed"
    for d in (out_dir, book_dir, executed_dir):
        d.mkdir(parents=True, exist_ok=True)
    previous = {r["name"]: r for r in read_json(out_dir / "run.json").get("notebooks", [])}
    tasks = [(s, {"source": str(s), "output": str(executed_dir / f"{s.stem}.ipynb"),
                  "parameters": {k: v for k, v in requested.items() if k in declared[s]},
                  "kernel_name": kernel_name, "env": env}) for s in sources]
    expected = expected_seconds(sources, previous) if jobs > 1 else {}
    if jobs > 1:  # longest first, so that the last to finish is a short one
        tasks.sort(key=lambda t: -expected.get(t[0].stem, math.inf))
    return _Plan(every=every, sources=sources, out_dir=out_dir, book_dir=book_dir, executed_dir=executed_dir,
                 fig_dir=fig_dir, tab_dir=tab_dir, env=env, requested=requested,
                 titles=titles, tasks=tasks,
                 previous=previous, jobs=jobs, mode="quick" if quick else "full", expected=expected)


class _Executor:
    """Phase 2: run the notebooks (one after the other, or side by side) and write each one's page as it ends."""

    def __init__(self, plan: _Plan, keep_going: bool, say: Callable[[str], None],
                 on_idle: Callable[[dict[Path, NotebookRun], list[Path]], None] | None = None,
                 on_page: Callable[[str], None] | None = None):
        self.plan, self.keep_going, self.say = plan, keep_going, say
        self.on_idle, self.on_page = on_idle, on_page  # the early book build (moralkit.book.early)
        self.runs: dict[Path, NotebookRun] = {}
        self.started: dict[Path, float] = {}
        self.stop = False

    def start(self, s: Path, kw: dict) -> None:
        clear_outputs(s.name[:2], self.plan.fig_dir, self.plan.tab_dir)
        self.say(f"[run] {s.name} {kw['parameters']}")
        self.started[s] = time.perf_counter()

    def remaining(self, running: Sequence[Path]) -> float:
        """Seconds until the last of ``running`` ends, by the expected times (infinite when one is unknown),
        scaled by how long the notebooks that ended took against theirs (the load, the quick mode)."""
        done = [(r.seconds, self.plan.expected[s.stem]) for s, r in self.runs.items()
                if self.plan.expected.get(s.stem, 0) > 0]
        scale = sum(a for a, _ in done) / sum(e for _, e in done) if done else 1.0
        now = time.perf_counter()
        return max(self.plan.expected.get(s.stem, math.inf) * scale - (now - self.started.get(s, now))
                   for s in running)

    def finished(self, run: NotebookRun) -> None:
        p = self.plan
        run.figures = sorted(f for f in p.fig_dir.glob(f"{run.number}_*") if f.is_file())
        run.tables = sorted(f for f in p.tab_dir.glob(f"{run.number}_*") if f.is_file())
        self.runs[run.source] = run
        if run.ipynb.exists():
            write_page(run.ipynb, _record(run, p.mode), p.book_dir)
            if self.on_page is not None:
                self.on_page(run.name)
        note = f"; stderr output in cell(s) {run.stderr_cells}" if run.stderr_cells else ""
        self.say(f"[{'ok' if run.ok else 'FAILED'}] {run.source.name} ({_fmt_seconds(run.seconds)}){note}")
        if not run.ok and not self.keep_going:
            self.stop = True

    def died(self, s: Path, kw: dict, e: BaseException) -> None:
        """The worker process itself died: reported as a failure before any cell."""
        self.finished(NotebookRun(source=s, number=s.name[:2], title=self.plan.titles[s],
                                  parameters=kw["parameters"], ipynb=Path(kw["output"]),
                                  failure=CellFailure(None, "", None, None, "", type(e).__name__, str(e))))

    def run(self) -> dict[Path, NotebookRun]:
        if self.plan.jobs == 1 or len(self.plan.tasks) == 1:
            for s, kw in self.plan.tasks:
                if self.stop:
                    break
                self.start(s, kw)
                self.finished(execute_notebook(**kw))
        else:
            self._side_by_side()
        return self.runs

    def _side_by_side(self) -> None:
        """Up to ``jobs`` notebooks at a time, each in a spawned process."""
        ctx = multiprocessing.get_context("spawn")
        pending: set = set()
        submitted: dict = {}

        def drain(limit: int) -> None:
            nonlocal pending
            while len(pending) > limit:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in done:
                    try:
                        self.finished(f.result())
                    except Exception as e:  # noqa: BLE001  (the worker process itself died: reported)
                        self.died(*submitted[f], e)
                if limit == 0 and pending and self.on_idle is not None:  # nothing queued, a slot free
                    self.on_idle(self.runs, [submitted[f][0] for f in pending])

        with ProcessPoolExecutor(max_workers=self.plan.jobs, mp_context=ctx) as pool:
            for s, kw in self.plan.tasks:
                if self.stop:
                    break
                drain(self.plan.jobs - 1)
                if self.stop:
                    break
                self.start(s, kw)
                fut = pool.submit(execute_notebook, **kw)
                submitted[fut] = (s, kw)
                pending.add(fut)
            drain(0)


def _page_records(plan: _Plan, runs: Mapping[Path, NotebookRun]) -> list[dict[str, Any]]:
    """Phase 3: every page of the book: this run's, the earlier run's for notebooks not run now, and a
    "not run" row for the rest. Sources of notebooks renamed or deleted since are removed."""
    records = []
    for s in plan.every:
        run = runs.get(s)
        if run is not None:
            records.append(_record(run, plan.mode))
        elif s.stem in plan.previous and (plan.book_dir / f"{s.stem}.ipynb").exists():
            records.append(plan.previous[s.stem])
        else:
            _, title, heading = _source_info(s)
            records.append({"name": s.stem, "number": s.name[:2], "title": title, "heading": heading,
                            "source": str(s), "not_run": True})
    for stale in plan.book_dir.glob("[0-9][0-9]_*.ipynb"):
        if stale.stem not in {s.stem for s in plan.every}:
            stale.unlink()
    return records


def _early_book(plan: _Plan, executor: _Executor, book: bool, say: Callable[[str], None], t0: float) -> EarlyBook:
    """The book built early, on the slot the last notebooks leave free (:mod:`moralkit.book.early`), hooked
    to ``executor``; never started with one slot, one notebook or no book."""
    early = EarlyBook(plan.book_dir, plan.out_dir, say)
    if not book or plan.jobs < 2 or len(plan.tasks) < 2:
        return early

    def start(runs_so_far: dict[Path, NotebookRun], running: list[Path]) -> None:
        # too late when the last notebook is expected to end before an incremental build would have taken
        if early.started is None and executor.remaining(running) >= EARLY_MIN_SECONDS:
            try:
                pages, still = _page_records(plan, runs_so_far), [_running_record(plan, s) for s in running]
            except Exception as ex:  # noqa: BLE001  (no early build: the final build runs as before)
                early.error = f"{type(ex).__name__}: {ex}"
                return
            early.start(pages, still, _meta(plan, time.perf_counter() - t0))

    executor.on_idle, executor.on_page = start, early.page_written
    return early


def _build_after(plan: _Plan, early: EarlyBook, ordered: Sequence[NotebookRun], records, meta, book: bool,
                 say: Callable[[str], None]) -> tuple[Path | None, str | None, float]:
    """Phases 4 and 5, after the last notebook: ``(index, error, seconds)``."""
    t_book = time.perf_counter()
    fresh, prepared = early.finish(records)
    index, book_error = publish(plan.book_dir, plan.out_dir, records, meta, book=book, say=say, fresh=fresh,
                                prepared=prepared)
    book_seconds = time.perf_counter() - t_book
    if index is not None:
        _check_pages(ordered, plan.out_dir, plan.book_dir, book_seconds, index, say, earlier=early.kept_warnings())
    return index, book_error, book_seconds


def _running_record(plan: _Plan, s: Path) -> dict[str, Any]:
    """What the early build knows of a notebook still running: its name and titles."""
    return {"name": s.stem, "number": s.name[:2], "title": plan.titles[s],
            "heading": _source_info(s)[2], "source": str(s)}


def _meta(plan: _Plan, seconds: float) -> dict[str, Any]:
    """The run's line on the book's index page."""
    from moralkit import paths

    return {"built": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": _git_commit(paths.project_root()), "seconds": seconds, "mode": plan.mode, "jobs": plan.jobs}


def publish(book_dir: Path, out_dir: Path, records: Sequence[Mapping[str, Any]], meta: Mapping[str, Any], *,
            book: bool = True, say: Callable[[str], None] = lambda s: None, fresh: bool = False,
            prepared: subprocess.Popen | None = None) -> tuple[Path | None, str | None]:
    """Phase 4: write the book's sources (pages, the manual in ``docs/``, index, table of contents) and build it.

    ``fresh`` and ``prepared`` are passed to :func:`moralkit.book.publish.build_book` (after an early build).
    Returns ``(index, error)``: the book's ``index.html`` (None when not built) and why the build failed.
    """
    write_book_sources(book_dir, records, meta)
    if not book:
        return None, None
    say("[book] building the Jupyter Book")
    try:
        return build_book(book_dir, out_dir, fresh=fresh, prepared=prepared), None
    except (BookError, subprocess.TimeoutExpired) as ex:
        say(f"[book] FAILED: {ex}")
        return None, str(ex)


def _check_pages(ordered: Sequence[NotebookRun], out_dir: Path, book_dir: Path, seconds: float,
                 index: Path, say: Callable[[str], None], earlier: Sequence[str] = ()) -> None:
    """Phase 5: link each run to its page, warn about pages that load assets from the network, count
    Sphinx's warnings (``earlier``: the early build's, about pages the final build did not read again)."""
    for r in ordered:
        page = out_dir / f"{r.name}.html"
        r.html = page if page.exists() else None
        if r.html is not None:
            remote = find_remote_assets(r.html.read_text(encoding="utf-8"))
            if remote:
                say(f"warning: {r.html.name} loads {len(remote)} asset(s) from the network and will not "
                    f"render fully offline (an output embedding a CDN script?): {remote[:2]}")
    warnings = [ln for ln in (book_dir / "sphinx.log").read_text(encoding="utf-8").splitlines()
                if "WARNING" in ln or "ERROR" in ln] + list(earlier)
    note = f"; {len(warnings)} Sphinx warning(s) in {_shown(book_dir / 'sphinx.log')}" if warnings else ""
    say(f"[book] {_shown(index)} ({_fmt_seconds(seconds)}){note}")


def _write_summary(result: BookRun, plan: _Plan, records: Sequence[Mapping[str, Any]], built: str) -> None:
    """Phase 6: ``run.json``, the machine-readable record of the run."""
    by_name = {r.name: _record(r, plan.mode) for r in result.runs}
    summary = {
        "ok": result.ok, "seconds": result.seconds, "book_seconds": result.book_seconds,
        "early_book_seconds": result.early_book_seconds, "early_book_error": result.early_book_error,
        "book_error": result.book_error, "parameters": dict(plan.requested), "jobs": plan.jobs, "mode": plan.mode,
        "built": built, "figures_dir": str(plan.fig_dir), "tables_dir": str(plan.tab_dir),
        "notebooks": [by_name.get(r["name"], r) for r in records if not r.get("not_run")],
        "not_run": [str(p) for p in result.not_run],
    }
    (plan.out_dir / "run.json").write_text(json.dumps(summary, indent=1, default=str), encoding="utf-8")


def run_all(notebooks_dir: str | os.PathLike | None = None, out_dir: str | os.PathLike = "build", *,
            only: str | Iterable[str] | None = None, quick: bool = False, seed: int | None = None,
            jobs: int | None = None, parameters: Mapping[str, Any] | None = None,
            figures_dir: str | os.PathLike | None = None, tables_dir: str | os.PathLike | None = None,
            keep_going: bool = False, kernel_name: str = DEFAULT_KERNEL, book: bool = True,
            log: Callable[[str], None] | None = print) -> BookRun:
    """Execute the numbered notebooks and publish them as a Jupyter Book.

    Phases: plan (select, check), execute (papermill; each page written as its notebook ends), page records,
    publish (sources, Sphinx), check the pages, ``run.json``.

    Parameters
    ----------
    notebooks_dir : path, optional
        Folder of ``NN_name.py`` notebooks (default ``<project root>/notebooks``).
    out_dir : path
        The book (``index.html``, one ``NN_name.html`` per notebook, the manual's pages, search), the executed
        notebooks (``executed/NN_name.ipynb``), the book's sources (``_book/``) and ``run.json``.
    only : str or iterable, optional
        Notebook numbers or names, e.g. ``"02,04"`` (see :func:`discover_notebooks`). The pages of the
        other notebooks are kept from the earlier run.
    quick : bool
        Passed as ``quick=True`` to notebooks that declare ``quick``.
    seed : int, optional
        Passed as ``seed`` to notebooks that declare it.
    jobs : int, optional
        CPU budget (default: the number of CPUs): up to ``jobs`` notebooks side by side, longest first, each
        with ``n_jobs=1`` (not worker processes inside each, which would compete for the same cores); a single
        selected notebook declaring ``n_jobs`` gets ``n_jobs=jobs``; ``-p n_jobs=K`` overrides both; ``jobs=1``
        runs them one after the other, in number order. Results do not depend on it.
    parameters : mapping, optional
        Further parameters (``-p name=value``); each notebook receives only those it declares.
    figures_dir, tables_dir : path, optional
        Set ``MORALKIT_FIGURES_DIR`` / ``MORALKIT_TABLES_DIR`` for the kernels
        (defaults: ``figures/`` and ``figures/tables/``, see :mod:`moralkit.paths`).
    keep_going : bool
        Run every notebook even after a failure (the default stops at the first one).
    kernel_name : str
        Jupyter kernel (``python3``).
    book : bool
        Build the book (default). ``False`` only executes the notebooks and writes the pages' sources.
    log : callable or None
        Progress messages (``print`` by default; ``None`` for silence).

    Returns
    -------
    BookRun
        ``.ok`` is False if a notebook or the book build failed; ``.failures`` say where
        (see :func:`format_failure`), ``.book_error`` why the book was not built.

    Raises
    ------
    MoralkitError
        For bad arguments (unknown ``--only`` entry, ``jobs < 1``, a parameter no notebook declares).
    """
    say, t0 = log or (lambda s: None), time.perf_counter()
    plan = _plan(notebooks_dir, out_dir, only, quick, seed, jobs, parameters, figures_dir, tables_dir, kernel_name)
    say(f"run_all: {len(plan.sources)} notebook(s), {plan.mode} mode, jobs={plan.jobs}, output {_shown(plan.out_dir)}")
    executor = _Executor(plan, keep_going, say)
    early = _early_book(plan, executor, book, say, t0)
    try:
        runs = executor.run()
    except BaseException:
        early.abandon()
        raise
    ordered = [runs[s] for s in plan.sources if s in runs]
    not_run = [s for s in plan.sources if s not in runs]
    run_seconds = time.perf_counter() - t0

    records = _page_records(plan, runs)
    meta = _meta(plan, run_seconds)
    index, book_error, book_seconds = _build_after(plan, early, ordered, records, meta, book, say)
    result = BookRun(runs=ordered, not_run=not_run, out_dir=plan.out_dir, index=index, figures_dir=plan.fig_dir,
                     tables_dir=plan.tab_dir, seconds=time.perf_counter() - t0, parameters=dict(plan.requested),
                     book_seconds=book_seconds, book_error=book_error,
                     early_book_seconds=early.seconds if early.started is not None else None,
                     early_book_error=early.error)
    _write_summary(result, plan, records, meta["built"])
    return result


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="run_all.py",
        description="Execute the numbered notebooks (notebooks/NN_*.py) with papermill and publish them as an "
                    "offline Jupyter Book (build/index.html).",
    )
    p.add_argument("--quick", action="store_true", help="pass quick=True (small, fast runs)")
    p.add_argument("--only", metavar="NN,NN",
                   help="run only these notebooks, e.g. 02,04 or 02_rationality (the other pages are kept)")
    p.add_argument("--jobs", "-j", type=int, default=None, metavar="N",
                   help="CPU budget (default: the number of CPUs): N notebooks at a time, longest first, "
                        "each with n_jobs=1; a single selected notebook declaring n_jobs gets n_jobs=N")
    p.add_argument("--seed", type=int, default=None, help="pass seed=S to every notebook")
    p.add_argument("-p", "--parameter", action="append", default=[], metavar="NAME=VALUE",
                   help="extra parameter (Python literal or string) for the notebooks that declare NAME")
    p.add_argument("--out", "-o", default=None, metavar="DIR", help="output folder (default: build/)")
    p.add_argument("--notebooks", default=None, metavar="DIR", help="notebooks folder (default: notebooks/)")
    p.add_argument("--figures-dir", default=None, metavar="DIR",
                   help="where notebooks write figures (sets MORALKIT_FIGURES_DIR; default figures/)")
    p.add_argument("--tables-dir", default=None, metavar="DIR",
                   help="where notebooks write CSV tables (sets MORALKIT_TABLES_DIR; default <figures>/tables/)")
    p.add_argument("--keep-going", action="store_true", help="run every notebook even after a failure")
    p.add_argument("--no-book", action="store_true", help="execute the notebooks but do not build the book")
    p.add_argument("--kernel", default=DEFAULT_KERNEL, help="Jupyter kernel name (default python3)")
    p.add_argument("--list", action="store_true", help="list the notebooks, titles and parameters, then exit")
    return p


def check_data(data: str | os.PathLike | None = None) -> None:
    """Read the project's data strictly before any notebook runs (``data/psm`` with
    :func:`moralkit.psm.dataset.read_psm`, ``data/moralchoice`` with
    :func:`moralkit.moralchoice.responses.read_responses`). A bad file raises
    :class:`~moralkit.errors.DataError` naming the file, the row and the fix. ``data`` defaults to
    :func:`moralkit.paths.data_dir`."""
    from moralkit.moralchoice.responses import read_responses
    from moralkit.psm.dataset import read_psm
    from moralkit.runs import run_dir

    if any(run_dir("psm", data).glob("*.csv.gz")):
        read_psm(run_dir("psm", data))
    if any(run_dir("responses", data).glob("*.csv*")):
        read_responses(run_dir("responses", data))


def main(argv: Sequence[str] | None = None) -> int:
    """Command line of ``run_all.py``; returns the exit status (0 ok, 1 a notebook or the book failed, 2 bad usage
    or bad data)."""
    from moralkit.paths import project_root

    parser = _parser()
    a = parser.parse_args(argv)
    params: dict[str, Any] = {}
    for item in a.parameter:
        if "=" not in item:
            parser.error(f"-p expects NAME=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        params[k.strip()] = parse_value(v.strip())
    root = project_root()
    out = Path(a.out) if a.out else root / "build"
    if a.list:
        try:
            sources = discover_notebooks(a.notebooks or root / "notebooks", a.only)
        except MoralkitError as e:
            print(f"run_all: error: {e}", file=sys.stderr)
            return 2
        for s in sources:
            nb = read_notebook(s)
            decl = ", ".join(f"{k}={v}" for k, v in declared_parameters(nb).items()) or "no parameters cell"
            print(f"{s.name:<28} {notebook_title(nb, s.stem)}\n{'':<28} parameters: {decl}")
        return 0
    try:  # a usage error is reported before the data are read
        _check_request(a.notebooks or root / "notebooks", a.only, a.jobs, params)
    except MoralkitError as e:
        print(f"run_all: error: {e}", file=sys.stderr)
        return 2
    try:
        check_data()
    except ValueError as e:
        print(f"run_all: error: bad data, no notebook was run: {e}", file=sys.stderr)
        return 2
    try:
        result = run_all(a.notebooks or root / "notebooks", out, only=a.only, quick=a.quick, seed=a.seed,
                         jobs=a.jobs, parameters=params, figures_dir=a.figures_dir, tables_dir=a.tables_dir,
                         keep_going=a.keep_going, kernel_name=a.kernel, book=not a.no_book)
    except MoralkitError as e:
        print(f"run_all: error: {e}", file=sys.stderr)
        return 2
    print(format_timing(result))
    if result.index is not None:
        print(f"book:     {_shown(result.index)}")
    print(f"figures:  {_shown(result.figures_dir)}\ntables:   {_shown(result.tables_dir)}")
    if not result.ok:
        for r in result.failures:
            print("run_all: FAILED " + format_failure(r, root), file=sys.stderr)
        if result.not_run:
            print("run_all: not run after the failure: " + ", ".join(p.name for p in result.not_run)
                  + " (use --keep-going to run them anyway)", file=sys.stderr)
        if result.book_error:
            print(f"run_all: the book was not built: {result.book_error}", file=sys.stderr)
        return 1
    return 0
