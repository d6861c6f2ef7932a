"""The batch machinery of ``run_all.py`` / ``moralkit.book`` on small notebooks written here."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT, TINY_NOTEBOOKS, write_tiny_notebooks

from moralkit import book
from moralkit.book import (
    clear_outputs,
    declared_parameters,
    discover_notebooks,
    find_remote_assets,
    notebook_title,
    read_notebook,
    run_all,
    select_parameters,
)
from moralkit.book.publish import page_title, run_info_markdown
from moralkit.errors import MoralkitError

# ----------------------------------------------------------------------------- discovery, parameters


def test_discover_orders_by_number_and_filters(tmp_path):
    write_tiny_notebooks(tmp_path)
    (tmp_path / "notes.py").write_text("x = 1\n")  # not numbered: ignored
    (tmp_path / "1_short.py").write_text("x = 1\n")  # one digit: ignored
    assert [p.name for p in discover_notebooks(tmp_path)] == sorted(TINY_NOTEBOOKS)
    assert [p.name[:2] for p in discover_notebooks(tmp_path, "04,2")] == ["02", "04"]
    assert [p.name for p in discover_notebooks(tmp_path, ["03_bad"])] == ["03_bad.py"]
    with pytest.raises(MoralkitError, match=r"--only '09' matches no notebook.*01_plot"):
        discover_notebooks(tmp_path, "09")
    (tmp_path / "02_again.py").write_text("x = 1\n")
    with pytest.raises(MoralkitError, match="share the number 02"):
        discover_notebooks(tmp_path)
    with pytest.raises(MoralkitError, match="does not exist"):
        discover_notebooks(tmp_path / "missing")


def test_declared_parameters_and_selection(tmp_path):
    write_tiny_notebooks(tmp_path, ["01", "02"])
    nb1 = read_notebook(tmp_path / "01_plot.py")
    nb2 = read_notebook(tmp_path / "02_params.py")
    assert declared_parameters(nb1) == {"quick": "False", "seed": "0"}
    assert declared_parameters(nb2) == {"quick": "False", "n_jobs": "1", "label": '"default"'}
    req = {"quick": True, "seed": 3, "n_jobs": 2}
    assert select_parameters(nb1, req) == {"quick": True, "seed": 3}
    assert select_parameters(nb2, req) == {"quick": True, "n_jobs": 2}
    # a notebook without a kernelspec gets python3; titles come from the first heading
    assert nb2.metadata.kernelspec.name == "python3"
    assert notebook_title(nb1) == "01 — A small figure"
    assert notebook_title(nbformat.v4.new_notebook(), "fallback") == "fallback"


def test_undeclared_parameter_is_a_usage_error(tmp_path):
    write_tiny_notebooks(tmp_path, ["01"])
    with pytest.raises(MoralkitError, match="declared by none of the selected notebooks"):
        run_all(tmp_path, tmp_path / "b", parameters={"nope": 1}, log=None)
    proc = subprocess.run([sys.executable, str(ROOT / "run_all.py"), "--notebooks", str(tmp_path),
                           "--out", str(tmp_path / "b"), "-p", "nope=1"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "nope" in proc.stderr
    assert not (tmp_path / "b" / "index.html").exists()


# ----------------------------------------------------------------------------- pages


def test_a_notebook_is_parsed_once_per_version_of_its_file(tmp_path, monkeypatch):
    """main() checks the request and run_all() plans it, and the early book wants the headings of the notebooks
    still running: jupytext parses each version of a file once, and an edited file again."""
    from moralkit.book import run

    nb = tmp_path / "01_x.py"
    nb.write_text("# %% [markdown]\n# # Title $a$\n\n# %% tags=[\"parameters\"]\nseed = 0\n", encoding="utf-8")
    parsed = []
    real = run.read_notebook
    monkeypatch.setattr(run, "read_notebook", lambda p: parsed.append(p) or real(p))
    first = run._source_info(nb)
    assert first == ({"seed": "0"}, "Title a", "Title $a$")
    first[0]["seed"] = "changed by a caller"  # each call gets its own dict
    assert run._source_info(nb) == ({"seed": "0"}, "Title a", "Title $a$")
    assert len(parsed) == 1
    nb.write_text("# %% [markdown]\n# # Other\n\n# %% tags=[\"parameters\"]\nseed = 10\n", encoding="utf-8")
    assert run._source_info(nb) == ({"seed": "10"}, "Other", "Other")
    assert len(parsed) == 2


def test_mathjax_is_found_without_importing_its_package(monkeypatch):
    """The book's MathJax folder is the package's, found without importing it (which imports Jupyter Server)."""
    code = ("import sys; from moralkit.book import publish; p = publish._mathjax_static(); "
            "print((p / 'MathJax.js').is_file(), 'jupyter_server_mathjax' in sys.modules, 'jupyter_server' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120, check=True)
    assert out.stdout.split() == ["True", "False", "False"]
    import importlib.util

    from moralkit.book import publish

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(book.BookError, match="jupyter-server-mathjax"):
        publish._mathjax_static()


def test_page_titles_carry_the_number_once():
    assert page_title("02 — Rationality: GARP$_e$", "02") == "02 — Rationality: GARP$_e$"
    assert page_title("02 - Rationality", "02") == "02 — Rationality"
    assert page_title("Collecting the data", "01") == "01 — Collecting the data"


def test_run_box_says_status_time_parameters_and_where_it_failed():
    ok = run_info_markdown({"ok": True, "seconds": 12.34, "mode": "full", "started": "2026-01-01 10:00 UTC",
                            "parameters": {"quick": False, "seed": 1}, "figures": ["/x/02_a.png"], "tables": [],
                            "slowest_cell": [5, 8.0], "source": "/x/02_r.py"})
    assert "**Status:** ok" in ok and "12.3 s" in ok and "`quick=False`, `seed=1`" in ok and "`02_a.png`" in ok
    assert "/x/" not in ok and ":class: note" in ok
    bad = run_info_markdown({"ok": False, "seconds": 1.0, "parameters": {}, "source": "/x/02_r.py",
                             "failure": {"cell_index": 3, "line": 40, "ename": "DataError",
                                         "evalue": "data_path='/nope' does not exist"}})
    assert "FAILED" in bad and "cell 3 (line 40 of `02_r.py`)" in bad and "DataError" in bad
    assert ":class: error" in bad and "the notebook's defaults" in bad


def test_clear_outputs_removes_only_that_notebooks_files(tmp_path):
    figs, tabs = tmp_path / "f", tmp_path / "f" / "tables"
    tabs.mkdir(parents=True)
    for p in (figs / "02_a.png", figs / "02_a.svg", tabs / "02_t.csv", figs / "03_b.png", figs / "020.png"):
        p.write_text("x")
    removed = clear_outputs("02", figs, tabs)
    assert sorted(p.name for p in removed) == ["02_a.png", "02_a.svg", "02_t.csv"]
    assert sorted(p.name for p in figs.iterdir() if p.is_file()) == ["020.png", "03_b.png"]
    with pytest.raises(MoralkitError, match="two-digit"):
        clear_outputs("2", figs)


# ----------------------------------------------------------------------------- the tiny batch run


def test_failure_exits_nonzero_naming_notebook_and_cell(tiny_run):
    assert tiny_run.returncode == 1, tiny_run.stdout + tiny_run.stderr
    err = tiny_run.stderr
    assert "03_bad.py failed at cell 3" in err
    assert "line 11 of the .py" in err  # the first line of that cell in the .py source
    assert "y = x + 1" in err and "ValueError: boom in cell three" in err
    assert "04_after.py" in err and "not run" in err  # stopped at the failure
    assert not (tiny_run.build / "executed" / "04_after.ipynb").exists()
    # timing summary on stdout, one line per notebook run
    assert "timing summary" in tiny_run.stdout
    for name in ("01_plot.py", "02_params.py", "03_bad.py"):
        assert re.search(rf"{name}\s+\d+\.\d s", tiny_run.stdout)
    summary = json.loads((tiny_run.build / "run.json").read_text())
    assert summary["early_book_seconds"] is None  # --jobs 1: no slot is left free, the book is built after
    fail = [n for n in summary["notebooks"] if not n["ok"]]
    assert [n["number"] for n in fail] == ["03"]
    assert fail[0]["failure"]["cell_index"] == 3 and fail[0]["failure"]["ename"] == "ValueError"


def test_timing_summary_gives_cpu_seconds_and_the_overlap(tiny_run):
    """Each notebook's CPU time (its kernel's, from getrusage) is in run.json and the summary, and the summary
    says how much the notebooks overlapped (x1.00 here: --jobs 1)."""
    summary = json.loads((tiny_run.build / "run.json").read_text())
    cpu = {n["number"]: n["cpu_seconds"] for n in summary["notebooks"] if not n.get("not_run")}
    assert set(cpu) >= {"01", "02", "03"}
    assert all(isinstance(c, float) and c > 0.2 for c in cpu.values()), cpu  # a kernel's start alone costs more
    assert re.search(r"01_plot\.py\s+\d+\.\d s\s+\d+\.\d s", tiny_run.stdout)
    m = re.search(r"notebooks side by side: [\d.]+ s of notebook time in [\d.]+ s \(x([\d.]+)\)", tiny_run.stdout)
    assert m and 0.5 < float(m.group(1)) <= 1.01, tiny_run.stdout


def _injected(ipynb: Path) -> str:
    nb = nbformat.read(str(ipynb), as_version=4)
    cells = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    return cells[0].source if cells else ""


def _stdout(ipynb: Path) -> str:
    nb = nbformat.read(str(ipynb), as_version=4)
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                   if o.get("output_type") == "stream")


def test_only_declared_parameters_are_passed(tiny_run):
    inj1 = _injected(tiny_run.build / "executed" / "01_plot.ipynb")
    assert "quick = True" in inj1 and "seed = 7" in inj1 and "n_jobs" not in inj1
    inj2 = _injected(tiny_run.build / "executed" / "02_params.ipynb")
    assert "quick = True" in inj2 and "seed" not in inj2 and "n_jobs = 1" in inj2  # --jobs 1
    assert "received True 1 'default' False" in _stdout(tiny_run.build / "executed" / "02_params.ipynb")


def test_the_page_shows_each_saved_figure_once_as_its_png(tiny_run):
    """In a kernel, figures.save() displays the PNG it wrote (at the inline size) and closes the figure, so
    the inline backend neither draws it again nor puts a second copy on the page."""
    import base64

    nb = nbformat.read(str(tiny_run.build / "executed" / "01_plot.ipynb"), as_version=4)
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if "image/png" in o.get("data", {})]
    assert len(images) == 1, f"{len(images)} images on the page of one saved figure"
    png = (tiny_run.figures / "01_walk.png").read_bytes()
    assert base64.b64decode(images[0]["data"]["image/png"]) == png
    # shown at the inline backend's size: the 150-dpi PNG's width in pixels at the figure's 100 dpi
    assert images[0]["metadata"]["image/png"]["width"] == round(int.from_bytes(png[16:20], "big") * 100 / 150)


def test_jobs_runs_in_parallel_and_passes_n_jobs(tiny_run, tmp_path):
    res = run_all(tiny_run.notebooks, tmp_path / "build", only="01,02", jobs=2, seed=4,
                  parameters={"label": "from-cli"}, figures_dir=tmp_path / "figs", book=False, log=None)
    assert res.ok, [book.format_failure(r) for r in res.failures]
    assert res.early_book_seconds is None  # --no-book: no early build either
    by = {r.number: r for r in res.runs}
    assert by["01"].parameters == {"seed": 4}
    # two notebooks side by side: the budget runs them in parallel, each with one worker
    assert by["02"].parameters == {"n_jobs": 1, "label": "from-cli"}
    assert "received False 1 'from-cli' False" in _stdout(by["02"].ipynb)
    # a notebook run alone gets the whole budget as n_jobs; -p n_jobs overrides either rule
    alone = run_all(tiny_run.notebooks, tmp_path / "build", only="02", jobs=2, figures_dir=tmp_path / "figs",
                    book=False, log=None)
    assert alone.runs[0].parameters == {"n_jobs": 2}
    # (a notebook that does not declare n_jobs never receives it: test_only_declared_parameters_are_passed)
    forced = run_all(tiny_run.notebooks, tmp_path / "build", only="02", jobs=2, parameters={"n_jobs": 3},
                     figures_dir=tmp_path / "figs", book=False, log=None)
    assert forced.runs[0].parameters == {"n_jobs": 3}
    assert (tmp_path / "figs" / "01_walk.png").exists()
    assert [p.name for p in by["01"].figures] == ["01_walk.png", "01_walk.svg"]
    assert [p.name for p in by["01"].tables] == ["01_table.csv"]


def test_book_index_lists_pages_in_order_with_status_times_and_parameters(tiny_run):
    index = (tiny_run.build / "index.html").read_text()
    article = index[index.index("<article"):index.index("</article>")]
    hrefs = re.findall(r'<a class="reference internal" href="(\d\d_[a-z_]+\.html)"><span[^>]*>([^<]+)</span></a>',
                       article)
    assert hrefs == [("01_plot.html", "A small figure"), ("02_params.html", "Parameter probe"),
                     ("03_bad.html", "Fails in cell 3")]
    assert "FAILED" in article and "not run" in article and "After the failure" in article
    assert re.search(r"<td><p>\d+\.\d s</p></td>", article)
    assert "seed=7" in article
    for href, _ in hrefs:
        assert (tiny_run.build / href).exists()
    # every page: its number once in the title, the run box, and links to its neighbours
    page2 = (tiny_run.build / "02_params.html").read_text()
    assert "02 — Parameter probe" in page2 and "02 02" not in page2
    assert "This run" in page2 and "quick=True" in page2 and "run time:" in page2
    assert 'href="01_plot.html"' in page2 and 'href="03_bad.html"' in page2 and 'href="index.html"' in page2
    page3 = (tiny_run.build / "03_bad.html").read_text()
    assert "This run FAILED" in page3 and "boom in cell three" in page3
    assert "An Exception was encountered" not in page3  # papermill's banner: the run box says it
    # search is Sphinx's, offline
    assert (tiny_run.build / "search.html").exists() and (tiny_run.build / "searchindex.js").exists()


def test_find_remote_assets():
    page = ('<script src="https://cdn.x/require.js"></script><link rel="stylesheet" href="//cdn.x/a.css">'
            '<img src="data:image/png;base64,AAAA"><a href="https://example.org">paper</a>'
            '<style>@import url("https://fonts.x/f.css");</style><script src="local.js"></script>')
    found = find_remote_assets(page)
    assert len(found) == 3 and "require.js" in found[0] and "//cdn.x/a.css" in found[1] and "@import" in found[2]
    assert find_remote_assets('<img src="data:image/png;base64,AAAA"><a href="https://x.org">x</a>') == []


def test_book_is_offline_with_local_mathjax(tiny_run):
    pages = sorted(tiny_run.build.glob("*.html"))
    assert {"index.html", "01_plot.html", "02_params.html", "03_bad.html", "search.html"} <= {p.name for p in pages}
    for page in pages:
        assert find_remote_assets(page.read_text()) == [], page.name
    page1 = (tiny_run.build / "01_plot.html").read_text()
    assert 'src="_static/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full"' in page1
    assert (tiny_run.build / "_static" / "MathJax.js").exists()
    assert (tiny_run.build / "_static" / "jax" / "output" / "HTML-CSS").is_dir()
    assert page1.count('class="math notranslate nohighlight"') >= 3  # inline, display and the Math() output
    assert re.search(r'<img alt="[^"]*" src="_images/[^"]+\.png"', page1)  # the figure, as a file of the book


def test_only_updates_its_pages_and_keeps_the_others(tiny_run, tmp_path):
    build = tmp_path / "build"
    shutil.copytree(tiny_run.build, build)
    before = (build / "02_params.html").read_text()
    res = run_all(tiny_run.notebooks, build, only="04", figures_dir=tmp_path / "figs", log=None)
    assert res.ok and [r.number for r in res.runs] == ["04"]
    index = (build / "index.html").read_text()
    for name in ("01_plot.html", "02_params.html", "03_bad.html", "04_after.html"):
        assert f'href="{name}"' in index, name
    assert "After the failure" in index and "not run" not in index[index.index("<article"):]
    assert (build / "02_params.html").read_text().count("run time:") == before.count("run time:") == 1
    summary = json.loads((build / "run.json").read_text())
    assert [n["number"] for n in summary["notebooks"]] == ["01", "02", "03", "04"]


def test_a_notebooks_earlier_outputs_are_removed_before_it_runs(tiny_run):
    # conftest left 03_stale.png and 04_stale.png from an "earlier run": 03 ran (and failed before
    # saving anything), 04 did not run
    assert not (tiny_run.figures / "03_stale.png").exists()
    assert (tiny_run.figures / "04_stale.png").exists()


def test_figures_and_tables_go_to_the_figures_dir(tiny_run):
    assert (tiny_run.figures / "01_walk.png").stat().st_size > 1000
    assert (tiny_run.figures / "01_walk.svg").exists()
    assert (tiny_run.figures / "tables" / "01_table.csv").exists()
    assert not (ROOT / "figures" / "01_walk.png").exists()
def test_list_option(tmp_path):
    write_tiny_notebooks(tmp_path, ['01', '02'])
    proc = subprocess.run([sys.executable, str(ROOT / 'run_all.py'), '--list', '--notebooks', str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert '01_plot.py' in proc.stdout and '02 — Parameter probe' in proc.stdout
    assert 'n_jobs=1' in proc.stdout and 'label="default"' in proc.stdout


def test_dead_kernel_names_the_cell(tmp_path):
    nbdir = tmp_path / "nb"
    nbdir.mkdir()
    (nbdir / "01_die.py").write_text('# %% [markdown]\n# # Dies\n\n# %% tags=["parameters"]\nquick = False\n\n'
                                     "# %%\nimport os\nos._exit(3)\n\n# %%\nx = 1\n")
    res = run_all(nbdir, tmp_path / "build", figures_dir=tmp_path / "figs", book=False, log=None)
    assert not res.ok
    msg = book.format_failure(res.runs[0])
    assert "01_die.py failed at cell 2" in msg and "line 8 of the .py" in msg and "DeadKernelError" in msg


def test_no_papermill_inference_noise_for_declared_parameters(tmp_path, caplog):
    nbdir = tmp_path / "nb"
    nbdir.mkdir()
    (nbdir / "01_c.py").write_text('# %% [markdown]\n# # Comments with = signs\n\n# %% tags=["parameters"]\n'
                                   'quick = False  # with collect=True, only 2 rounds\nseed = 0\n\n'
                                   '# %%\nprint("quick is", quick)\n')
    res = run_all(nbdir, tmp_path / "build", quick=True, figures_dir=tmp_path / "figs", book=False, log=None)
    assert res.ok and "quick is True" in _stdout(res.runs[0].ipynb)
    assert "unknown parameter" not in caplog.text and "Unable to parse" not in caplog.text


def test_kernel_shutdown_prints_no_keyboard_interrupt(tmp_path):
    """jupyter_client interrupts a kernel before shutting it down; the run's stderr must not show it."""
    nbdir = tmp_path / "nb"
    nbdir.mkdir()
    (nbdir / "01_q.py").write_text('# %% [markdown]\n# # Quiet\n\n# %% tags=["parameters"]\nquick = False\n\n'
                                   '# %%\nprint("done")\n')
    code = ("import sys; from pathlib import Path; from moralkit.book import run_all; "
            f"res = run_all(Path({str(nbdir)!r}), Path({str(tmp_path / 'build')!r}), "
            f"figures_dir=Path({str(tmp_path / 'figs')!r}), book=False, log=None); sys.exit(0 if res.ok else 1)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=600,
                          env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "KeyboardInterrupt" not in proc.stderr + proc.stdout, proc.stderr[-2000:]


def test_the_kernel_manager_does_not_interrupt_a_kernel_that_is_shutting_down(monkeypatch):
    """The source of "KeyboardInterrupt caught in kernel": jupyter_client's shutdown sends SIGINT first."""
    import asyncio

    from jupyter_client.manager import AsyncKernelManager

    from moralkit.book.execute import _kernel_manager_class

    calls = []

    async def interrupt(self):
        calls.append(self.shutting_down)

    monkeypatch.setattr(AsyncKernelManager, "_async_interrupt_kernel", interrupt)
    km = _kernel_manager_class()()
    km.shutting_down = True
    asyncio.run(km._async_interrupt_kernel())
    assert calls == []  # no SIGINT on the way out
    km.shutting_down = False
    asyncio.run(km._async_interrupt_kernel())
    assert calls == [False]  # an interrupt asked for by the user still goes through


# ----------------------------------------------------------------------------- the manual (docs/) in the book


def test_the_manual_builds_with_the_appendix_and_drafts_do_not(tmp_path):
    """docs/*.md become the toc's part "The manual", after the notebooks' pages; docs/_incoming/ (drafts other
    work hands in) is never copied, and a page removed from docs/ leaves the book's sources."""
    import yaml

    from moralkit.book.publish import MANUAL_FOLDER, write_book_sources

    docs, book_dir = tmp_path / "docs", tmp_path / "_book"
    (docs / "_incoming").mkdir(parents=True)
    (docs / "psm.md").write_text("# The PSM\n")
    (docs / "run_all.md").write_text("# Running\n")
    (docs / "zz_extra.md").write_text("# Extra\n")
    (docs / "_incoming" / "branch.md").write_text("## for: somewhere\n")
    book_dir.mkdir()
    (book_dir / "01_plot.ipynb").write_text("{}")
    rec = {"name": "01_plot", "number": "01", "title": "Plot", "ok": True, "seconds": 1.0}
    write_book_sources(book_dir, [rec], {}, docs_dir=docs)
    toc = yaml.safe_load((book_dir / "_toc.yml").read_text())
    assert [p["caption"] for p in toc["parts"]] == ["The appendix", "The manual"]
    assert toc["parts"][0]["chapters"] == [{"file": "01_plot"}]
    # the reading order of MANUAL_ORDER, then the others by name
    assert toc["parts"][1]["chapters"] == [{"file": f"{MANUAL_FOLDER}/{s}"} for s in ("run_all", "psm", "zz_extra")]
    copied = sorted(p.relative_to(book_dir).as_posix() for p in (book_dir / MANUAL_FOLDER).rglob("*") if p.is_file())
    assert copied == ["docs/psm.md", "docs/run_all.md", "docs/zz_extra.md"]
    (docs / "zz_extra.md").unlink()
    write_book_sources(book_dir, [rec], {}, docs_dir=docs)
    assert not (book_dir / MANUAL_FOLDER / "zz_extra.md").exists()
    assert "zz_extra" not in (book_dir / "_toc.yml").read_text()


def test_readme_links_every_page_of_the_manual_and_the_dependency_table():
    """The README is the short entry point (issue 29): each manual page is linked from its tour, in the book's
    reading order, and every page has an order; the dependency table, each addition justified, is one link away."""
    from moralkit.book.publish import MANUAL_ORDER, manual_pages

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    pages = manual_pages()
    assert [p.stem for p in pages] == list(MANUAL_ORDER)  # no page outside the reading order
    links = re.findall(r"\]\((docs/[^)#]+\.md)\)", readme)
    assert list(dict.fromkeys(links)) == [f"docs/{s}.md" for s in MANUAL_ORDER]
    for p in pages:
        assert p.read_text(encoding="utf-8").startswith("# "), f"{p.name} must open with its page title"
    deps = (ROOT / "docs" / "package.md").read_text(encoding="utf-8")
    assert deps.startswith("# Dependencies and why each is here") and "| package | why |" in deps
    assert "[Dependencies and why each is here](docs/package.md)" in readme
    # the two commands stay in the README, and .ci/run calls exactly the test command
    assert "bash scripts/setup.sh && .venv/bin/python -m pytest" in readme
    assert "bash scripts/setup.sh && .venv/bin/python run_all.py" in readme


def test_notebooks_get_a_cache_folder_in_the_build(tmp_path, monkeypatch):
    """The kernels run with MORALKIT_MEMO_DIR=<out>/memo (moralkit.paths.memo_dir), unless the user set one."""
    from moralkit.book.run import _plan

    write_tiny_notebooks(tmp_path, ["01"])
    kw = dict(only=None, quick=False, seed=None, jobs=1, parameters=None, figures_dir=tmp_path / "f",
              tables_dir=tmp_path / "t", kernel_name="python3")
    monkeypatch.delenv("MORALKIT_MEMO_DIR", raising=False)
    plan = _plan(tmp_path, tmp_path / "out", **kw)
    assert plan.env["MORALKIT_MEMO_DIR"] == str((tmp_path / "out" / "memo").resolve())
    assert plan.tasks[0][1]["env"]["MORALKIT_MEMO_DIR"] == plan.env["MORALKIT_MEMO_DIR"]
    monkeypatch.setenv("MORALKIT_MEMO_DIR", str(tmp_path / "mine"))
    assert _plan(tmp_path, tmp_path / "out", **kw).env["MORALKIT_MEMO_DIR"] == str(tmp_path / "mine")


def test_a_fresh_build_starts_the_longest_notebook_first_by_the_benchmark_record(tmp_path):
    """On a fresh clone there is no earlier run.json: the order comes from the latest full run of command 1
    in benchmarks/results.jsonl (longest first); an earlier run in the output folder overrides it, and a
    notebook known to neither starts first."""
    from moralkit.book.notebooks import expected_seconds

    srcs = [Path(f"{n}_x.py") for n in ("01", "02", "03", "04")]
    rec = tmp_path / "results.jsonl"
    old = {"bench": "run_all", "key": "all-first", "date": "2026-01-01T00:00:00Z", "quick": False,
           "per_notebook": {"01": [90.0, 1.0], "02": [1.0, 1.0], "03": [2.0, 1.0]}}
    new = {**old, "date": "2026-02-01T00:00:00Z", "per_notebook": {"01": [3.0, 1.0], "02": [9.0, 8.0],
                                                                   "03": [5.0, 4.0]}}
    quick = {**old, "date": "2026-03-01T00:00:00Z", "quick": True, "per_notebook": {"01": [99.0, 1.0]}}
    rec.write_text("\n".join(json.dumps(r) for r in (old, new, quick)) + "\nnot json\n", encoding="utf-8")
    assert expected_seconds(srcs, {}, rec) == {"01_x": 3.0, "02_x": 9.0, "03_x": 5.0}
    assert expected_seconds(srcs, {"03_x": {"seconds": 20.0}}, rec)["03_x"] == 20.0
    assert expected_seconds(srcs, {}, tmp_path / "missing.jsonl") == {}
    # the committed record orders the real notebooks longest first, 01 (the shortest) not first
    real = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
    got = expected_seconds(real, {})
    assert set(got) == {s.stem for s in real}, "every notebook needs a figure in benchmarks/results.jsonl"
    order = sorted(real, key=lambda s: -got[s.stem])
    assert order[0].name[:2] != "01"
    # and the plan follows it: tiny notebooks 01 and 02 side by side on a fresh output folder, 02 first
    from moralkit.book.run import _plan

    write_tiny_notebooks(tmp_path / "nb", ["01", "02"])
    plan = _plan(tmp_path / "nb", tmp_path / "out", only=None, quick=False, seed=None, jobs=2, parameters=None,
                 figures_dir=tmp_path / "f", tables_dir=tmp_path / "t", kernel_name="python3")
    assert [s.name[:2] for s, _ in plan.tasks] == ["02", "01"]


def test_book_processes_do_not_build_jsonschemas_iri_grammars():
    """A process that imports moralkit.book (run_all's, each notebook worker, the Sphinx build) keeps jsonschema
    from importing the optional rfc3987_syntax (~2 CPU s of Lark grammars each, benchmarks/bench_imports.py),
    and nbformat still validates notebooks."""
    code = ("import sys, moralkit.book, papermill, nbformat\n"
            "assert sys.modules['rfc3987_syntax'] is None, 'rfc3987_syntax was imported'\n"
            "nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('1')])\n"
            "nbformat.validate(nb)\n"
            "bad = nbformat.v4.new_notebook(); bad.cells = [{'cell_type': 'nonsense'}]\n"
            "try:\n    nbformat.validate(bad)\nexcept nbformat.ValidationError:\n    print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_the_output_notebook_is_written_at_most_every_save_every_seconds_and_at_the_end(tmp_path, monkeypatch):
    """papermill writes the whole notebook when each cell starts and ends; the run throttles that."""
    import papermill.engines

    from moralkit.book import execute

    writes = []
    real = papermill.engines.write_ipynb
    monkeypatch.setattr(papermill.engines, "write_ipynb", lambda nb, path: (writes.append(path), real(nb, path)))
    monkeypatch.setattr(execute, "SAVE_EVERY", 3600.0)
    src = tmp_path / "01_many.py"
    src.write_text('# %% [markdown]\n# # Many cells\n\n# %% tags=["parameters"]\nquick = False\n\n'
                   + "".join(f"# %%\nx{i} = {i}\n\n" for i in range(15)) + "# %%\nprint(x14)\n",
                   encoding="utf-8")
    run = execute.execute_notebook(src, tmp_path / "out.ipynb")
    assert run.ok and len(run.cell_seconds) == 17
    assert 1 <= len(writes) <= 3, len(writes)  # papermill alone: two per cell
    out = nbformat.read(str(tmp_path / "out.ipynb"), as_version=4)
    assert out.cells[-1].outputs[0]["text"] == "14\n"
    assert out.metadata.papermill["duration"] is not None
