"""The batch machinery of ``run_all.py`` / ``moralkit.appendix`` on small notebooks written here."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT, TINY_NOTEBOOKS, write_tiny_notebooks

from moralkit import appendix
from moralkit.appendix import (
    declared_parameters,
    discover_notebooks,
    math_html,
    notebook_title,
    read_notebook,
    run_all,
    select_parameters,
)

# ----------------------------------------------------------------------------- discovery, parameters


def test_discover_orders_by_number_and_filters(tmp_path):
    write_tiny_notebooks(tmp_path)
    (tmp_path / "notes.py").write_text("x = 1\n")  # not numbered: ignored
    (tmp_path / "1_short.py").write_text("x = 1\n")  # one digit: ignored
    assert [p.name for p in discover_notebooks(tmp_path)] == sorted(TINY_NOTEBOOKS)
    assert [p.name[:2] for p in discover_notebooks(tmp_path, "04,2")] == ["02", "04"]
    assert [p.name for p in discover_notebooks(tmp_path, ["03_bad"])] == ["03_bad.py"]
    with pytest.raises(ValueError, match=r"--only '09' matches no notebook.*01_plot"):
        discover_notebooks(tmp_path, "09")
    (tmp_path / "02_again.py").write_text("x = 1\n")
    with pytest.raises(ValueError, match="share the number 02"):
        discover_notebooks(tmp_path)
    with pytest.raises(ValueError, match="does not exist"):
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
    with pytest.raises(ValueError, match="declared by none of the selected notebooks"):
        run_all(tmp_path, tmp_path / "b", parameters={"nope": 1}, log=None)
    proc = subprocess.run([sys.executable, str(ROOT / "run_all.py"), "--notebooks", str(tmp_path),
                           "--out", str(tmp_path / "b"), "-p", "nope=1"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "nope" in proc.stderr
    assert not (tmp_path / "b" / "index.html").exists()


# ----------------------------------------------------------------------------- math rendering


try:
    import latex2mathml  # noqa: F401

    HAVE_MATHML = True
except ImportError:  # the fallback (LaTeX source as code) is still tested
    HAVE_MATHML = False
needs_mathml = pytest.mark.skipif(not HAVE_MATHML, reason="latex2mathml not installed (pyproject [notebooks] extra)")


def test_math_without_latex2mathml_shows_latex_source(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name.startswith("latex2mathml"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    out = math_html(r"a < b", display=False)
    assert out == '<code class="mk-math mk-tex">$a &lt; b$</code>'


@needs_mathml
def test_math_to_mathml_keeps_source_and_falls_back():
    out = math_html(r"\frac{1}{T}\sum_t x_t", display=True)
    assert "<math" in out and "<mfrac>" in out and 'display="block"' in out
    assert r"\frac{1}{T}" in out  # LaTeX kept as annotation/title
    bad = math_html(r"\mymacro{x}", display=False)
    assert "<math" not in bad and "$\\mymacro{x}$" in bad and bad.startswith("<code")


def test_markdown_math_outside_code_only():
    store: dict[str, str] = {}
    md = "cost $p \\cdot q$ and `$code$`\n```\n$$fenced$$\n```\nprice $5 and $10 stays"
    out = appendix._protect_math(md, store)
    assert len(store) == 1 and "`$code$`" in out and "$$fenced$$" in out
    assert "$5 and $10" in out  # currency is not math


# ----------------------------------------------------------------------------- the tiny batch run


def test_failure_exits_nonzero_naming_notebook_and_cell(tiny_run):
    assert tiny_run.returncode == 1, tiny_run.stdout + tiny_run.stderr
    err = tiny_run.stderr
    assert "03_bad.py failed at cell 3" in err
    assert "line 11 of the .py" in err  # the first line of that cell in the .py source
    assert "y = x + 1" in err and "ValueError: boom in cell three" in err
    assert "04_after.py" in err and "not run" in err  # stopped at the failure
    assert not (tiny_run.build / "04_after.ipynb").exists()
    # timing summary on stdout, one line per notebook run
    assert "timing summary" in tiny_run.stdout
    for name in ("01_plot.py", "02_params.py", "03_bad.py"):
        assert re.search(rf"{name}\s+\d+\.\d s", tiny_run.stdout)
    summary = json.loads((tiny_run.build / "run.json").read_text())
    fail = [n for n in summary["notebooks"] if not n["ok"]]
    assert [n["number"] for n in fail] == ["03"]
    assert fail[0]["failure"]["cell_index"] == 3 and fail[0]["failure"]["ename"] == "ValueError"


def _injected(ipynb: Path) -> str:
    nb = nbformat.read(str(ipynb), as_version=4)
    cells = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    return cells[0].source if cells else ""


def _stdout(ipynb: Path) -> str:
    nb = nbformat.read(str(ipynb), as_version=4)
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                   if o.get("output_type") == "stream")


def test_only_declared_parameters_are_passed(tiny_run):
    inj1 = _injected(tiny_run.build / "01_plot.ipynb")
    assert "quick = True" in inj1 and "seed = 7" in inj1 and "n_jobs" not in inj1
    inj2 = _injected(tiny_run.build / "02_params.ipynb")
    assert "quick = True" in inj2 and "seed" not in inj2 and "n_jobs" not in inj2  # no --jobs given
    assert "received True 1 'default' False" in _stdout(tiny_run.build / "02_params.ipynb")


def test_jobs_runs_in_parallel_and_passes_n_jobs(tiny_run, tmp_path):
    res = run_all(tiny_run.notebooks, tmp_path / "build", only="01,02", jobs=2, seed=4,
                  parameters={"label": "from-cli"}, figures_dir=tmp_path / "figs", log=None)
    assert res.ok, [appendix.format_failure(r) for r in res.failures]
    by = {r.number: r for r in res.runs}
    assert by["01"].parameters == {"seed": 4}
    assert by["02"].parameters == {"n_jobs": 2, "label": "from-cli"}
    assert "received False 2 'from-cli' False" in _stdout(by["02"].ipynb)
    assert (tmp_path / "figs" / "01_walk.png").exists()
    assert [p.name for p in by["01"].figures] == ["01_walk.png", "01_walk.svg"]
    assert [p.name for p in by["01"].tables] == ["01_table.csv"]


def test_index_links_pages_in_order_with_titles_and_times(tiny_run):
    index = (tiny_run.build / "index.html").read_text()
    hrefs = re.findall(r'<a href="(\d\d_[a-z_]+\.html)">([^<]+)</a>', index)
    assert hrefs == [("01_plot.html", "01 — A small figure"), ("02_params.html", "02 — Parameter probe"),
                     ("03_bad.html", "03 — Fails in cell 3")]
    assert "FAILED" in index and "not run" in index and "04_after" in index
    assert re.search(r'<td class="t">\d+\.\d s</td>', index)
    assert "01_walk.png" in index  # the figures each notebook wrote are listed
    for href, _ in hrefs:
        assert (tiny_run.build / href).exists()
    # pages link to their neighbours and back to the index
    page2 = (tiny_run.build / "02_params.html").read_text()
    assert 'href="01_plot.html"' in page2 and 'href="03_bad.html"' in page2 and 'href="index.html"' in page2


class _Images(HTMLParser):
    def __init__(self):
        super().__init__()
        self.images: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.images.append(dict(attrs).get("src", ""))


def test_find_remote_assets():
    page = ('<script src="https://cdn.x/require.js"></script><link rel="stylesheet" href="//cdn.x/a.css">'
            '<img src="data:image/png;base64,AAAA"><a href="https://example.org">paper</a>'
            '<style>@import url("https://fonts.x/f.css");</style><script src="local.js"></script>')
    found = appendix.find_remote_assets(page)
    assert len(found) == 3 and "require.js" in found[0] and "//cdn.x/a.css" in found[1] and "@import" in found[2]
    assert appendix.find_remote_assets('<img src="data:image/png;base64,AAAA"><a href="https://x.org">x</a>') == []


def test_html_is_offline_with_embedded_figures_and_math(tiny_run):
    pages = sorted(tiny_run.build.glob("*.html"))
    assert len(pages) == 4
    for page in pages:
        text = page.read_text()
        assert appendix.find_remote_assets(text) == [], page.name
        assert "mathjax" not in text.lower() and "require.js" not in text.lower()
    page1 = (tiny_run.build / "01_plot.html").read_text()
    p = _Images()
    p.feed(page1)
    assert p.images and all(src.startswith("data:image/png;base64,") for src in p.images)
    if HAVE_MATHML:
        assert page1.count("<math") >= 3  # inline + display math in markdown, and the Math() output
    else:
        assert "$E_{rk} = \\mathbf{p}^r" in page1
    assert "\\mymacro{x}" in page1  # a formula that cannot be converted stays readable as LaTeX
    assert "MKMATHX" not in page1  # no placeholder left behind


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
    res = run_all(nbdir, tmp_path / "build", figures_dir=tmp_path / "figs", log=None)
    assert not res.ok
    msg = appendix.format_failure(res.runs[0])
    assert "01_die.py failed at cell 2" in msg and "line 8 of the .py" in msg and "DeadKernelError" in msg


def test_no_papermill_inference_noise_for_declared_parameters(tmp_path, caplog):
    nbdir = tmp_path / "nb"
    nbdir.mkdir()
    (nbdir / "01_c.py").write_text('# %% [markdown]\n# # Comments with = signs\n\n# %% tags=["parameters"]\n'
                                   'quick = False  # with collect=True, only 2 rounds\nseed = 0\n\n'
                                   '# %%\nprint("quick is", quick)\n')
    res = run_all(nbdir, tmp_path / "build", quick=True, figures_dir=tmp_path / "figs", log=None)
    assert res.ok and "quick is True" in _stdout(res.runs[0].ipynb)
    assert "unknown parameter" not in caplog.text and "Unable to parse" not in caplog.text
