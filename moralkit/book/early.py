"""The book built early, on the core the notebooks leave idle, so that the build after the last one is short.

When every notebook has started and a worker slot is free (``run_all`` with ``jobs >= 2``), :class:`EarlyBook`
writes the book's sources with every page known so far and builds the book in the background:

* a notebook that has ended has its page (:func:`moralkit.book.publish.write_page`);
* a notebook still running keeps its page of an earlier run if there is one, else gets a stand-in with the same
  title (:func:`moralkit.book.publish.write_placeholder_page`), so that the navigation is already final;
* then it starts the Sphinx process of the final build (:func:`moralkit.book.publish.prepare_build`), which
  imports Sphinx and waits.

After the last notebook, :meth:`EarlyBook.finish` waits for the early build, removes every stand-in that no
notebook replaced (a notebook that died without an executed notebook), and marks the pages written since the
early build started as changed, so that Sphinx reads them again: Sphinx records when it *read* a page, and a
page written while it was reading would otherwise look older than that. The final build then reads only the
changed pages and writes. It starts from scratch (``fresh``) when the early build failed or when the pages or
their titles differ from those the early build saw (its navigation would be stale on the pages not written
again). The final book is the one a single build of the same sources gives
(``tests/book/test_early_book.py``).
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .publish import (
    build_book,
    is_placeholder_page,
    page_title,
    prepare_build,
    write_book_sources,
    write_placeholder_page,
)

__all__ = ["EarlyBook", "page_titles"]

#: the early build's Sphinx log, next to the final build's ``sphinx.log``
EARLY_LOG = "sphinx-early.log"


def page_titles(book_dir: Path, records: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """The pages of the book (those listed in its table of contents) with their titles, in order."""
    return [(r["name"], page_title(r.get("heading") or r["title"], r["number"])) for r in records
            if not r.get("not_run") and (book_dir / f"{r['name']}.ipynb").exists()]


class EarlyBook:
    """One early build of a run (see the module's docstring).

    Parameters
    ----------
    book_dir, out_dir : path
        The book's sources and the output folder (those of the final build).
    say : callable
        Progress messages.
    """

    def __init__(self, book_dir: Path, out_dir: Path, say: Callable[[str], None] = lambda s: None):
        self.book_dir, self.out_dir, self.say = Path(book_dir), Path(out_dir), say
        self.started: float | None = None
        self.seconds = 0.0
        self.error: str | None = None
        self.titles: list[tuple[str, str]] = []
        self.placeholders: set[str] = set()
        self.written: set[str] = set()  # pages written since the early build started
        self._build: subprocess.Popen | None = None
        self._final: subprocess.Popen | None = None
        self._thread: threading.Thread | None = None
        self._abandoned = False
        self.fresh = False

    def start(self, records: Sequence[Mapping[str, Any]], running: Sequence[Mapping[str, Any]],
              meta: Mapping[str, Any]) -> None:
        """Write the sources and start the build in the background (once; later calls do nothing).

        ``records`` are the book's pages as the final build would list them now (:func:`moralkit.book.run`'s
        page records); ``running`` the records of the notebooks still running, which get a stand-in page
        unless ``records`` already holds their page of an earlier run.
        """
        if self.started is not None:
            return
        self.started = time.perf_counter()
        try:
            by_name = {r["name"]: r for r in running}
            pages = []
            for r in records:
                if r["name"] in by_name and (r.get("not_run") or not (self.book_dir / f"{r['name']}.ipynb").exists()):
                    r = {**by_name[r["name"]], "running": True, "ok": True, "seconds": 0.0}
                    write_placeholder_page(r, self.book_dir)
                    self.placeholders.add(r["name"])
                pages.append(r)
            write_book_sources(self.book_dir, pages, meta)
            self.titles = page_titles(self.book_dir, pages)
            self._build = prepare_build(self.book_dir, self.out_dir)
        except Exception as ex:  # noqa: BLE001  (only an optimisation: the final build then runs from scratch)
            self.error = f"{type(ex).__name__}: {ex}"
            return
        self.say(f"[book] early build beside the running notebook(s) {', '.join(sorted(by_name))}")
        self._thread = threading.Thread(target=self._run, name="moralkit-early-book", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            build_book(self.book_dir, self.out_dir, prepared=self._build)
        except Exception as ex:  # noqa: BLE001  (any failure only means the final build starts from scratch)
            self.error = f"{type(ex).__name__}: {ex}"
        log = self.book_dir / "sphinx.log"
        if log.exists():
            os.replace(log, self.book_dir / EARLY_LOG)
        self.seconds = time.perf_counter() - (self.started or 0.0)
        if self._abandoned:
            return
        try:  # the final build's process: its imports done while the last notebook runs
            self._final = prepare_build(self.book_dir, self.out_dir)
        except OSError:
            self._final = None

    def wait(self) -> None:
        """Until the early build has ended (and the final build's process is started)."""
        if self._thread is not None:
            self._thread.join()

    def page_written(self, name: str) -> None:
        """A notebook's page was written (from the main thread, as it ends)."""
        if self.started is not None:
            self.written.add(name)
            self.placeholders.discard(name)

    def finish(self, records: Sequence[Mapping[str, Any]]) -> tuple[bool, subprocess.Popen | None]:
        """Wait for the early build and make the sources ready for the final one.

        Returns ``(fresh, prepared)``: whether the final build must start from scratch, and the waiting Sphinx
        process for it (None when there is none). Without an early build, ``(False, None)``: the final build
        runs as it would have.
        """
        if self.started is None:
            return False, None
        self.wait()
        for name in self.placeholders:  # a notebook that wrote no page: no stand-in in the final book
            page = self.book_dir / f"{name}.ipynb"
            if page.exists() and is_placeholder_page(page):
                page.unlink()
        now = time.time()
        for name in self.written:
            page = self.book_dir / f"{name}.ipynb"
            if page.exists():
                os.utime(page, (now, now))
        fresh = self.error is not None or page_titles(self.book_dir, records) != self.titles
        self.fresh = fresh
        if self.error is not None:
            self.say(f"[book] the early build failed, the book is built from scratch: {self.error.splitlines()[0]}")
        elif fresh:
            self.say("[book] the pages changed since the early build, the book is built from scratch")
        return fresh, self._final

    def kept_warnings(self) -> list[str]:
        """The early build's warnings about pages the final build did not read again (its own log has only
        those it read): empty after a build from scratch."""
        log = self.book_dir / EARLY_LOG
        if self.started is None or self.fresh or not log.exists():
            return []
        again = [f"{n}.ipynb" for n in self.written | self.placeholders] + ["index.md"]
        return [ln for ln in log.read_text(encoding="utf-8").splitlines()
                if ("WARNING" in ln or "ERROR" in ln) and not any(a in ln for a in again)]

    def abandon(self) -> None:
        """Stop the early build and the waiting process (the run ended without a final build)."""
        self._abandoned = True
        for proc in (self._build, self._final):
            if proc is not None and proc.poll() is None:
                proc.kill()
