"""The book built early, beside the last notebooks (moralkit.book.early), and the build after them."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import nbformat
import pytest

from moralkit.book import early as early_mod
from moralkit.book.early import EARLY_LOG, EarlyBook
from moralkit.book.publish import BookError, build_book, is_placeholder_page, write_placeholder_page


def _outputs(d: Path) -> dict[str, bytes]:
    files = [p for p in d.rglob("*.html") if ".doctrees" not in p.parts] + [d / "searchindex.js"]
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in files}


def _running(rec: dict) -> dict:
    return {k: rec[k] for k in ("name", "number", "title", "heading", "source")}


def test_the_early_build_then_the_final_one_give_the_book_a_single_build_gives(tiny_run, tmp_path):
    """The tiny run's book (one Sphinx build after every notebook, --jobs 1) is the reference. From the same
    sources, page 02 is a stand-in while the early build runs; then page 02 and the index are written as the
    run's end writes them, and the final build (the waiting process, incremental) must give every HTML page and
    the search index byte for byte. Slow (~10 CPU s at load 5: two Sphinx processes, a full build of the tiny
    book with the manual's 9 pages and an incremental one), because it is the acceptance test of the early
    build; it reuses the session's tiny run as the single build, so no third build is needed."""
    out = tmp_path / "build"
    book = out / "_book"
    shutil.copytree(tiny_run.build / "_book", book, ignore=shutil.ignore_patterns("sphinx*.log"))
    records = json.loads((tiny_run.build / "run.json").read_text())["notebooks"]
    index, page = (book / "index.md").read_bytes(), (book / "02_params.ipynb").read_bytes()
    (book / "02_params.ipynb").unlink()
    rec02 = next(r for r in records if r["name"] == "02_params")
    at_start = [{**r, "not_run": True} if r["name"] == "02_params" else r for r in records]

    eb = EarlyBook(book, out)
    eb.start(at_start, [_running(rec02)], {"built": "early", "seconds": 1.0})
    eb.wait()
    assert eb.error is None, eb.error
    assert "This notebook is still running" in (out / "02_params.html").read_text()  # the stand-in was built
    assert '"01_plot.html"' in (out / "02_params.html").read_text()  # with its final place in the navigation

    (book / "02_params.ipynb").write_bytes(page)  # the last notebook ends, then the run's end writes the index
    eb.page_written("02_params")
    fresh, prepared = eb.finish(records)
    (book / "index.md").write_bytes(index)
    assert not fresh and prepared is not None
    build_book(book, out, prepared=prepared)

    want, got = _outputs(tiny_run.build), _outputs(out)
    assert sorted(got) == sorted(want)
    assert [k for k in want if got[k] != want[k]] == []
    assert "still running" not in (out / "index.html").read_text()


# ----------------------------------------------------------------------------- without Sphinx (fakes)


class _FakeProcess:
    def __init__(self):
        self.killed = False

    def poll(self):
        return None

    def kill(self):
        self.killed = True


@pytest.fixture
def fake_sphinx(monkeypatch):
    """EarlyBook with the Sphinx processes replaced: ``calls`` records the builds, ``fail`` makes them fail."""
    state = {"calls": [], "fail": False, "log": ""}

    def build(book_dir, out_dir, **kw):
        state["calls"].append(kw)
        (Path(book_dir) / "sphinx.log").write_text(state["log"])
        if state["fail"]:
            raise BookError("the Jupyter Book build failed (exit 2)")
        return Path(out_dir) / "index.html"

    monkeypatch.setattr(early_mod, "build_book", build)
    monkeypatch.setattr(early_mod, "prepare_build", lambda book, out: _FakeProcess())
    return state


def _tiny_book(tmp_path, names=("01_a", "02_b", "03_c")):
    book = tmp_path / "_book"
    records = []
    for n in names:
        rec = {"name": n, "number": n[:2], "title": f"Title {n}", "heading": f"Title {n}", "source": f"{n}.py",
               "ok": True, "seconds": 1.0}
        records.append(rec)
    return book, records


def _page(book: Path, rec: dict) -> Path:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"# {rec['title']}\n\ntext")])
    book.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(book / f"{rec['name']}.ipynb"))
    return book / f"{rec['name']}.ipynb"


def test_stand_ins_never_reach_the_final_book_and_pages_written_meanwhile_are_read_again(fake_sphinx, tmp_path):
    """02 has an earlier page (kept during the early build), 03 none (a stand-in). 03 dies without an executed
    notebook: its stand-in is removed and the final build starts from scratch (the pages differ from those the
    early build saw). 02's new page, written during the early build, is marked newer than that build's reading."""
    book, recs = _tiny_book(tmp_path)
    _page(book, recs[0])
    old02 = _page(book, recs[1])
    eb = EarlyBook(book, tmp_path)
    eb.start([recs[0], recs[1], {**recs[2], "not_run": True}], [_running(recs[1]), _running(recs[2])], {})
    eb.wait()
    assert eb.error is None and len(fake_sphinx["calls"]) == 1
    assert is_placeholder_page(book / "03_c.ipynb") and not is_placeholder_page(old02)
    toc = (book / "_toc.yml").read_text()
    assert "03_c" in toc and "still running" in (book / "index.md").read_text()
    assert (book / EARLY_LOG).exists() and not (book / "sphinx.log").exists()

    past = time.time() - 3600
    _page(book, recs[1])
    os.utime(book / "02_b.ipynb", (past, past))  # as if written before Sphinx stamped its reading time
    eb.page_written("02_b")
    t = time.time()
    fresh, prepared = eb.finish(recs)
    assert not (book / "03_c.ipynb").exists()  # no stand-in left for the final build
    assert (book / "02_b.ipynb").stat().st_mtime >= t - 1  # read again by the final build
    assert fresh and prepared is not None  # 03 left the table of contents: from scratch


def test_same_pages_build_incrementally_and_early_warnings_are_kept_only_for_pages_not_read_again(fake_sphinx,
                                                                                                  tmp_path):
    book, recs = _tiny_book(tmp_path)
    for r in recs[:2]:
        _page(book, r)
    fake_sphinx["log"] = (f"{book}/01_a.ipynb:3: WARNING: kept\n{book}/03_c.ipynb:1: WARNING: read again\n"
                          f"{book}/index.md:9: WARNING: index\nplain line\n")
    eb = EarlyBook(book, tmp_path)
    eb.start([recs[0], recs[1], {**recs[2], "not_run": True}], [_running(recs[2])], {})
    eb.wait()
    _page(book, recs[2])
    eb.page_written("03_c")
    fresh, _ = eb.finish(recs)
    assert not fresh
    assert eb.kept_warnings() == [f"{book}/01_a.ipynb:3: WARNING: kept"]


def test_a_failed_early_build_means_a_build_from_scratch(fake_sphinx, tmp_path):
    book, recs = _tiny_book(tmp_path, ("01_a", "02_b"))
    _page(book, recs[0])
    fake_sphinx["fail"] = True
    eb = EarlyBook(book, tmp_path)
    eb.start([recs[0], {**recs[1], "not_run": True}], [_running(recs[1])], {})
    eb.wait()
    assert "BookError" in eb.error
    _page(book, recs[1])
    eb.page_written("02_b")
    fresh, prepared = eb.finish(recs)
    assert fresh and prepared is not None and eb.kept_warnings() == []


def test_a_title_changed_since_the_earlier_run_means_a_build_from_scratch(fake_sphinx, tmp_path):
    """The early build keeps 02's page of an earlier run, whose title the notebook has changed since: the other
    pages' navigation would keep the old title, so the final build starts from scratch."""
    book, recs = _tiny_book(tmp_path, ("01_a", "02_b"))
    _page(book, recs[0])
    _page(book, recs[1])
    eb = EarlyBook(book, tmp_path)
    eb.start(recs, [_running(recs[1])], {})
    eb.wait()
    renamed = {**recs[1], "title": "A new title", "heading": "A new title"}
    eb.page_written("02_b")
    assert eb.finish([recs[0], renamed])[0] is True


def test_a_placeholder_page_has_the_pages_title_and_is_recognised(tmp_path):
    rec = {"name": "05_x", "number": "05", "title": "MoralChoice", "heading": "MoralChoice: $p$"}
    path = write_placeholder_page(rec, tmp_path)
    nb = nbformat.read(str(path), as_version=4)
    assert nb.cells[0].source.startswith("# 05 — MoralChoice: $p$\n")
    assert is_placeholder_page(path)
    real = _page(tmp_path, {"name": "06_y", "title": "Y"})
    assert not is_placeholder_page(real) and not is_placeholder_page(tmp_path / "missing.ipynb")


def test_without_an_early_build_the_final_build_runs_as_before(fake_sphinx, tmp_path):
    """All notebooks ended together (no slot was ever free while one ran): no stand-in, no build from
    scratch, no waiting process."""
    book, recs = _tiny_book(tmp_path)
    assert EarlyBook(book, tmp_path).finish(recs) == (False, None) and fake_sphinx["calls"] == []


def test_an_abandoned_run_stops_the_early_processes(fake_sphinx, tmp_path):
    book, recs = _tiny_book(tmp_path, ("01_a", "02_b"))
    _page(book, recs[0])
    eb = EarlyBook(book, tmp_path)
    eb.start([recs[0], {**recs[1], "not_run": True}], [_running(recs[1])], {})
    eb.wait()
    final = eb._final
    eb.abandon()
    assert final.killed


# ----------------------------------------------------------------------------- the waiting Sphinx process


def _child(code: str):
    import subprocess
    import sys

    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.fixture
def new_process(monkeypatch):
    """build_book's own Sphinx process replaced: ``calls`` holds the commands it would have run."""
    import subprocess

    from moralkit.book import publish

    calls = []

    def run(cmd, **kw):
        calls.append(cmd)
        out = Path(cmd[-1] if not cmd[-1].startswith("--") else cmd[-2])
        out.mkdir(exist_ok=True)
        (out / "index.html").write_text("new")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(publish.subprocess, "run", run)
    return calls


def test_build_book_gives_the_waiting_process_the_go(new_process, tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "index.html").write_text("built by the waiting process")
    waiting = _child("import sys; sys.exit(0 if sys.stdin.readline() == 'build\\n' else 3)")
    assert build_book(tmp_path, tmp_path / "out", prepared=waiting).read_text() == "built by the waiting process"
    assert waiting.returncode == 0 and new_process == []


def test_build_book_builds_anew_when_the_waiting_process_ended_or_for_a_build_from_scratch(new_process, tmp_path):
    dead = _child("pass")
    dead.wait()
    build_book(tmp_path, tmp_path / "out", prepared=dead)
    assert len(new_process) == 1 and "--fresh" not in new_process[0]
    waiting = _child("import sys; sys.exit(0 if sys.stdin.read() == '' else 3)")  # must get no go
    build_book(tmp_path, tmp_path / "out", prepared=waiting, fresh=True)
    assert waiting.returncode != 3 and new_process[1][-1] == "--fresh"


def test_the_waiting_process_builds_only_on_the_go_and_keeps_the_stylesheet_without_it(monkeypatch, tmp_path):
    import io
    import sys

    import jupyter_book.sphinx
    from sphinx.application import Sphinx

    from moralkit.book import sphinx_build

    built, went = [], []
    monkeypatch.setattr(Sphinx, "build", lambda app, *a, **k: built.append(app))
    sphinx_build._wait_for_go(lambda: went.append(1))  # patches Sphinx.build (restored by monkeypatch)
    monkeypatch.setattr(sys, "stdin", io.StringIO("build\n"))
    Sphinx.build("app")
    assert built == ["app"] and went == [1]
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    with pytest.raises(SystemExit) as no_go:
        Sphinx.build("app")
    assert no_go.value.code == 0 and built == ["app"] and went == [1]

    # the stylesheet that MyST-NB copies at the end of a build is back when the build does not happen
    style = tmp_path / "_static" / "mystnb.abc.css"
    style.parent.mkdir()
    style.write_text("css")

    def no_go_build(*a, **k):
        assert not style.exists()  # removed while the pages are written
        raise sphinx_build._NoGo(0)

    monkeypatch.setattr(jupyter_book.sphinx, "build_sphinx", no_go_build)
    with pytest.raises(SystemExit):
        sphinx_build.build(tmp_path / "book", tmp_path)
    assert style.read_text() == "css"


def test_the_early_build_starts_only_if_the_last_notebook_is_expected_to_run_long_enough():
    """run_all asks the executor how long the running notebooks still need (their expected seconds, from the
    earlier run or the benchmark record, minus the time they have run): below EARLY_MIN_SECONDS the book is
    built after them, as before; an unknown notebook counts as long."""
    from types import SimpleNamespace

    from moralkit.book.run import EARLY_MIN_SECONDS, _Executor

    ex = _Executor(SimpleNamespace(expected={"06_a": 40.0, "01_b": 3.0, "05_c": 10.0}), False, lambda s: None)
    now = time.perf_counter()
    ex.started = {Path("06_a.py"): now - 30.0, Path("01_b.py"): now - 1.0, Path("09_new.py"): now}
    assert 9.0 < ex.remaining([Path("06_a.py")]) <= 10.0
    assert ex.remaining([Path("01_b.py")]) < EARLY_MIN_SECONDS <= ex.remaining([Path("06_a.py"), Path("01_b.py")])
    assert ex.remaining([Path("09_new.py")]) == float("inf")
    # a notebook that ended took twice its expected time (a loaded machine): the others are expected to, too
    ex.runs = {Path("05_c.py"): SimpleNamespace(seconds=20.0)}
    assert 49.0 < ex.remaining([Path("06_a.py")]) <= 50.0 and 4.0 < ex.remaining([Path("01_b.py")]) <= 5.0


def test_run_all_hooks_the_early_build_only_with_a_free_slot_and_a_book(monkeypatch, tmp_path):
    """The executor calls on_idle (every notebook started, a slot free) with the notebooks still running: the
    early build starts with their records, unless the last is expected to end too soon; --jobs 1, a single
    notebook and --no-book never hook it."""
    from types import SimpleNamespace

    from moralkit.book import run as run_mod

    started = []
    monkeypatch.setattr(run_mod.EarlyBook, "start", lambda self, pages, still, meta: started.append(
        ([p["name"] for p in pages], [r["name"] for r in still])) or setattr(self, "started", 1.0))
    srcs = [tmp_path / "01_a.py", tmp_path / "02_b.py"]
    for s in srcs:
        s.write_text("# %% [markdown]\n# # A title\n")
    plan = SimpleNamespace(jobs=2, tasks=[1, 2], book_dir=tmp_path / "_book", out_dir=tmp_path, every=srcs,
                           previous={}, expected={"02_b": 100.0}, titles={s: "A title" for s in srcs},
                           mode="quick")
    for jobs, tasks, book in ((1, [1, 2], True), (2, [1], True), (2, [1, 2], False)):
        ex = run_mod._Executor(SimpleNamespace(**{**vars(plan), "jobs": jobs, "tasks": tasks}), False, print)
        run_mod._early_book(ex.plan, ex, book, print, 0.0)
        assert ex.on_idle is None and ex.on_page is None
    ex = run_mod._Executor(plan, False, print)
    early = run_mod._early_book(plan, ex, True, print, 0.0)
    ex.started = {srcs[1]: time.perf_counter() - 99.0}  # expected to end within a second: too late
    ex.on_idle({}, [srcs[1]])
    assert started == [] and early.started is None
    ex.started = {srcs[1]: time.perf_counter()}
    ex.on_idle({}, [srcs[1]])
    assert started == [(["01_a", "02_b"], ["02_b"])]
    assert ex.on_page == early.page_written
