"""Every notebook in notebooks/ follows the conventions and executes in quick mode.

The notebooks are executed once per test session by the ``quick_run`` fixture
(``moralkit.book.run_all(quick=True)`` into a temporary book, with
``MORALKIT_FIGURES_DIR`` pointing to a fresh temporary folder), so every file in
that folder was written by this run and its ``NN_`` prefix tells which notebook
wrote it.
"""

from __future__ import annotations

import re

import pytest
from conftest import ROOT

from moralkit.book import (
    declared_parameters,
    discover_notebooks,
    find_remote_assets,
    format_failure,
    read_notebook,
)

NOTEBOOKS = discover_notebooks(ROOT / "notebooks")
IDS = [p.stem for p in NOTEBOOKS]
# a notebook "makes figures" when its source saves into figures_dir() or calls a plotting helper
FIGURE_HINT = re.compile(r"figures_dir\(|savefig\(|save_figure\(|\bplot_\w+\(")


def _source(path) -> str:
    return path.read_text(encoding="utf-8")


def _printed(ipynb) -> str:
    import nbformat

    nb = nbformat.read(str(ipynb), as_version=4)
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                   if o.get("output_type") == "stream")


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ holds no NN_name.py notebook"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_conventions(path):
    """Jupytext percent header with kernel python3 and one parameters cell declaring quick and seed."""
    text = _source(path)
    assert text.startswith("# ---\n# jupyter:"), f"{path.name}: start with the jupytext header (jupytext --set-formats)"
    assert re.search(r"format_name:\s*percent", text), f"{path.name}: use the jupytext percent format"
    nb = read_notebook(path)
    assert nb.metadata.kernelspec.name == "python3", f"{path.name}: kernelspec must be python3"
    tagged = [c for c in nb.cells if "parameters" in (c.metadata.get("tags") or [])]
    assert len(tagged) == 1, f"{path.name}: exactly one cell tagged parameters (found {len(tagged)})"
    params = declared_parameters(nb)
    assert "quick" in params and "seed" in params, f"{path.name}: the parameters cell must declare quick and seed"
    assert params["quick"] == "False", f"{path.name}: quick defaults to False (the full run)"
    assert any(c.cell_type == "markdown" for c in nb.cells), f"{path.name}: no markdown cell"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_executes_in_quick_mode(path, quick_run):
    run = next((r for r in quick_run.runs if r.source == path), None)
    assert run is not None, f"{path.name} was not run"
    assert run.ok, format_failure(run, ROOT)
    assert run.parameters.get("quick") is True
    assert run.html is not None and run.html.exists()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_writes_its_figures(path, quick_run):
    run = next((r for r in quick_run.runs if r.source == path), None)
    assert run is not None, f"{path.name} was not run"
    if not run.ok:
        pytest.skip(f"{path.name} failed (see test_notebook_executes_in_quick_mode)")
    makes_figures = bool(FIGURE_HINT.search(_source(path)))
    pngs = sorted(p for p in run.figures if p.suffix == ".png")
    if not makes_figures:
        pytest.skip(f"{path.name} saves no figure (no figures_dir/savefig/plot_ call in its source)")
    printed = _printed(run.ipynb)
    assert pngs, (f"{path.name} plots but wrote no {run.number}_*.png to figures_dir() in quick mode "
                  f"(is its input data committed? what it printed: {printed[:400]!r})")
    from PIL import Image

    for png in pngs:
        with Image.open(png) as im:
            im.verify()
        assert png.with_suffix(".svg").exists(), f"{png.name} has no SVG twin (figures are saved as PNG and SVG)"


def test_outputs_are_named_after_their_notebook(quick_run):
    """Every file the run wrote to the figures and tables folders starts with a notebook number."""
    numbers = {r.number for r in quick_run.runs}
    written = [p for p in quick_run.figures_dir.rglob("*") if p.is_file()]
    bad = [str(p.relative_to(quick_run.figures_dir)) for p in written
           if not (p.name[:2] in numbers and p.name[2:3] == "_")]
    assert not bad, f"files not prefixed with their notebook number NN_: {bad}"


def test_tables_are_readable_csv(quick_run):
    import pandas as pd

    tables = [p for r in quick_run.runs for p in r.tables if p.suffix == ".csv"]
    for t in tables:
        df = pd.read_csv(t)
        assert len(df.columns) >= 1, f"{t.name} is an empty table"


def test_appendix_pages_render_offline(quick_run):
    """No page of the appendix fetches a script, style sheet or image from the network."""
    pages = [quick_run.index] + [r.html for r in quick_run.runs if r.html is not None]
    for page in pages:
        assert find_remote_assets(page.read_text(encoding="utf-8")) == [], page.name


def test_the_book_shows_no_stand_in_of_a_notebook_that_was_running(quick_run):
    """With two slots, run_all builds the book early beside the last notebook (moralkit.book.early) unless that
    one is expected to end too soon (tests/book/test_early_book.py); either way the final book has every
    notebook's own page and never the stand-in of a notebook that was still running."""
    from moralkit.book.publish import is_placeholder_page

    assert quick_run.early_book_error is None
    assert not any(is_placeholder_page(p) for p in (quick_run.out_dir / "_book").glob("*.ipynb"))
    for page in [quick_run.index] + [r.html for r in quick_run.runs]:
        assert "This notebook is still running" not in page.read_text(encoding="utf-8"), page.name


def test_an_explicit_data_path_that_does_not_exist_fails_the_run(tmp_path):
    """``run_all -p data_path=/nonexistent.csv.gz --only 02`` exits 1 and names the parameter."""
    import subprocess
    import sys

    figs = tmp_path / "figures"
    (figs / "tables").mkdir(parents=True)
    (figs / "tables" / "02_table1.csv").write_text("model,alpha\nold,0.5\n")  # an earlier run's table
    proc = subprocess.run([sys.executable, str(ROOT / "run_all.py"), "--only", "02", "--quick", "--no-book",
                           "-p", "data_path=/nonexistent.csv.gz", "--out", str(tmp_path / "build"),
                           "--figures-dir", str(figs)], capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAILED" in proc.stdout and "02_rationality.py failed" in proc.stderr
    assert "data_path='/nonexistent.csv.gz' does not exist" in proc.stderr
    assert not (figs / "tables" / "02_table1.csv").exists()  # no page or folder mixes two runs
