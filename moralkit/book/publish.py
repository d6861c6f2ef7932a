"""Publishing the executed notebooks as a Jupyter Book that works offline.

Jupyter Book 1.x (Sphinx + MyST-NB, ``execute_notebooks: off``) renders the pages, the navigation
and the search. This module only writes what the book needs and no library knows:

* the book's sources in ``<out>/_book/``: each executed notebook with a first cell that says how
  it ran (status, time, parameters, files written), ``index.md`` (the table of the run), the table
  of contents and the configuration;
* MathJax 2 from the ``jupyter-server-mathjax`` package, copied into the book's ``_static``
  folder, so that formulas render without the network;
* the Sphinx build itself, in a subprocess, into ``<out>/`` (entry point ``<out>/index.html``).

Pages not rebuilt keep their sources, so a run of a few notebooks (``run_all.py --only``) updates
those pages and keeps the others.

Examples
--------
>>> find_remote_assets('<script src="https://cdn.example/x.js"></script><a href="https://x.org">x</a>')
['<script src=https://cdn.example/x.js>']
>>> page_title("02 — Rationality: GARP$_e$", "02")
'02 — Rationality: GARP$_e$'
>>> page_title("Collecting the data", "01")
'01 — Collecting the data'
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "BOOK_SOURCES",
    "BookError",
    "MANUAL_ORDER",
    "build_book",
    "find_remote_assets",
    "is_placeholder_page",
    "manual_pages",
    "page_title",
    "prepare_build",
    "run_info_markdown",
    "write_book_sources",
    "write_page",
    "write_placeholder_page",
]

#: the folder, inside the output folder, that holds the book's sources
BOOK_SOURCES = "_book"
#: the folder, inside the book's sources, that holds the manual (the project's ``docs/*.md``)
MANUAL_FOLDER = "docs"
#: the manual's pages in reading order (stems of ``docs/*.md``); others follow by name
MANUAL_ORDER = ("run_all", "psm", "moralchoice", "collecting", "cost", "audit", "replication", "dask", "package")

_HEADING = re.compile(r"^(\s{0,3}#\s+)(.+?)\s*#*\s*$", re.MULTILINE)
_NUMBER_PREFIX = re.compile(r"^\d{2}\s*[—–-]\s*")


class BookError(RuntimeError):
    """Sphinx could not build the book (the message ends with the end of its log)."""


def page_title(title: str, number: str) -> str:
    """``"NN — title"``: the page's number once, however the notebook's own heading starts."""
    return f"{number} — {_NUMBER_PREFIX.sub('', title.strip())}"


def _fmt_seconds(s: float) -> str:
    return f"{s:.1f} s" if s < 120 else f"{int(s // 60)} min {s % 60:02.0f} s"


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;")


def run_info_markdown(record: Mapping[str, Any]) -> str:
    """The box at the top of a page: status, run time, parameters and files of that notebook's run.

    ``record`` is one entry of ``run.json`` (see :func:`moralkit.book.run.run_all`).
    """
    ok = record["ok"]
    params = record.get("parameters") or {}
    ptxt = ", ".join(f"`{k}={v!r}`" for k, v in params.items()) or "none passed (the notebook's defaults)"
    lines = [(f"**Status:** {'ok' if ok else 'FAILED'} · **run time:** {_fmt_seconds(record['seconds'])} · "
              f"**{record.get('mode', 'full')} run**, {record.get('started', '')}"),
             "",
             f"**Parameters:** {ptxt}"]
    slow = record.get("slowest_cell")
    if slow:
        lines[0] += f" · slowest cell: {slow[0]} ({slow[1]:.1f} s)"
    files = [Path(p).name for p in list(record.get("figures") or []) + list(record.get("tables") or [])]
    if files:
        lines += ["", "**Files written:** " + ", ".join(f"`{f}`" for f in files)]
    f = record.get("failure")
    if f:
        where = f"cell {f['cell_index']}" if f.get("cell_index") is not None else "before any cell ran"
        if f.get("line"):
            where += f" (line {f['line']} of `{Path(record['source']).name}`)"
        lines += ["", f"**Failed at {where}:** `{_md_escape(f['ename'])}: {_md_escape(f['evalue'][:400])}`"]
    kind = "note" if ok else "error"
    title = "This run" if ok else "This run FAILED"
    return f"```{{admonition}} {title}\n:class: {kind} mk-run-info\n" + "\n".join(lines) + "\n```\n"


def write_page(executed, record: Mapping[str, Any], book_dir: str | os.PathLike) -> Path:
    """Write one page's source: the executed notebook, titled ``NN — title``, with the run box.

    Parameters
    ----------
    executed : NotebookNode or path
        The notebook papermill executed.
    record : mapping
        Its entry of ``run.json``.
    book_dir : path
        The book's source folder.
    """
    import nbformat

    nb = nbformat.read(str(executed), as_version=4) if isinstance(executed, (str, os.PathLike)) else executed
    nb = copy.deepcopy(nb)
    # papermill's red "An Exception was encountered" banners: the run box says where it failed
    nb.cells = [c for c in nb.cells if "papermill-error-cell-tag" not in (c.metadata.get("tags") or [])]
    box = nbformat.v4.new_markdown_cell(run_info_markdown(record))
    box.metadata["tags"] = ["moralkit-run-info"]
    first = next((i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and _HEADING.search(c.source)),
                 None)
    title = page_title(record.get("heading") or record["title"], record["number"])
    if first is None:
        nb.cells.insert(0, nbformat.v4.new_markdown_cell(f"# {title}"))
        first = 0
    else:
        cell = nb.cells[first]
        m = _HEADING.search(cell.source)
        head, rest = cell.source[: m.end()], cell.source[m.end():]
        head = head[: m.start()] + m.group(1) + title
        if rest.strip():  # the heading alone, then the box, then the introduction
            nb.cells.insert(first + 1, nbformat.v4.new_markdown_cell(rest.strip("\n")))
        cell.source = head
    nb.cells.insert(first + 1, box)
    out = Path(book_dir) / f"{record['name']}.ipynb"
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(out))
    return out


#: the tag of the only cell of a placeholder page (:func:`write_placeholder_page`)
PLACEHOLDER_TAG = "moralkit-still-running"


def write_placeholder_page(record: Mapping[str, Any], book_dir: str | os.PathLike) -> Path:
    """Write a stand-in page for a notebook that is still running: its title (the same ``NN — title`` as
    :func:`write_page` gives, so that the navigation of the other pages does not change) and a note.

    The early book build of :func:`moralkit.book.run.run_all` uses it to warm Sphinx's environment while the
    last notebooks run; the page is always replaced (or removed) before the final build.
    """
    import nbformat

    title = page_title(record.get("heading") or record["title"], record["number"])
    cell = nbformat.v4.new_markdown_cell(f"# {title}\n\nThis notebook is still running.")
    cell.metadata["tags"] = [PLACEHOLDER_TAG]
    nb = nbformat.v4.new_notebook(cells=[cell], metadata={"kernelspec": {"name": "python3", "display_name":
                                                                         "Python 3", "language": "python"},
                                                         "language_info": {"name": "python"}})
    out = Path(book_dir) / f"{record['name']}.ipynb"
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(out))
    return out


def is_placeholder_page(path: str | os.PathLike) -> bool:
    """True when ``path`` is a page written by :func:`write_placeholder_page`."""
    import nbformat

    try:
        nb = nbformat.read(str(path), as_version=4)
    except (OSError, ValueError):
        return False
    return len(nb.cells) == 1 and PLACEHOLDER_TAG in (nb.cells[0].metadata.get("tags") or [])


_STATIC = Path(__file__).parent / "static"  # moralkit.css


def _mathjax_static() -> Path:
    """MathJax 2 as shipped by the ``jupyter-server-mathjax`` package (TeX input, HTML-CSS output).

    The package is found, not imported: importing it imports Jupyter Server (about 0.3 s of processor time in
    ``run_all``'s process, for a folder's name).
    """
    import importlib.util

    spec = importlib.util.find_spec("jupyter_server_mathjax")
    if spec is None or spec.origin is None:
        raise BookError("the offline book needs MathJax from the 'jupyter-server-mathjax' package: "
                        "pip install 'moralkit[notebooks]'")
    return Path(spec.origin).parent / "static"


def _config(title: str) -> dict:
    return {
        "title": title,
        "author": "moralkit",
        "copyright": "",
        "only_build_toc_files": True,
        "exclude_patterns": ["**.ipynb_checkpoints", "sphinx.log", "docs/_incoming"],
        "execute": {"execute_notebooks": "off"},
        "html": {"use_repository_button": False, "use_issues_button": False, "use_edit_page_button": False,
                 "home_page_in_navbar": True},
        "launch_buttons": {"notebook_interface": "classic", "binderhub_url": "", "jupyterhub_url": "",
                           "thebe": False, "colab_url": ""},
        "sphinx": {"extra_extensions": ["moralkit.book.sphinx_build"], "config": {
            # MathJax 2 from the book's own _static folder: nothing is fetched from the network
            "mathjax_path": "MathJax.js?config=TeX-AMS-MML_HTMLorMML-full",
            "mathjax3_config": None,
            "myst_update_mathjax": False,  # it would write a MathJax 3 configuration
            # MyST marks each page "tex2jax_ignore" and its formulas "math": MathJax typesets only those
            "mathjax2_config": {"tex2jax": {"inlineMath": [["\\(", "\\)"]], "displayMath": [["\\[", "\\]"]],
                                            "processEscapes": True, "ignoreClass": "tex2jax_ignore|mathjax_ignore",
                                            "processClass": "tex2jax_process|mathjax_process|math|output_area"},
                                "HTML-CSS": {"availableFonts": [], "webFont": "STIX-Web",
                                             "imageFont": None},
                                # HTML-CSS output with the local STIX-Web fonts everywhere: the native MathML
                                # output (chosen by browsers that render MathML) asks for the TeX fonts
                                # MathJax_Caligraphic and MathJax_Script, which the package does not ship, so
                                # \mathcal fell back to italic
                                # the hidden MathML copy for screen readers (AssistiveMML) is styled with the
                                # same missing TeX fonts (MathJax_Script, MathJax_AMS): it is left out
                                "MMLorHTML": {"prefer": "HTML"}, "AssistiveMML": {"disabled": True},
                                "menuSettings": {"zoom": "None", "renderer": "HTML-CSS", "assistiveMML": False},
                                "messageStyle": "none"},
            # copied into <out>/_static: MathJax and moralkit.css (both outside the output folder)
            "html_static_path": [str(_mathjax_static()), str(_STATIC)],
            "html_css_files": ["moralkit.css"],
            "html_show_copyright": False,
            "html_show_sphinx": False,
            "html_theme_options": {"use_download_button": True, "use_fullscreen_button": False,
                                   "show_toc_level": 2, "search_bar_text": "Search the appendix..."},
            "nb_merge_streams": True,
            "myst_dmath_double_inline": True,  # $$...$$ inside a paragraph is display math, as in Jupyter
            "nb_output_stderr": "show",
            "suppress_warnings": ["myst.header", "mystnb.unknown_mime_type"],
        }},
    }


def _index_markdown(records: Sequence[Mapping[str, Any]], meta: Mapping[str, Any], title: str) -> str:
    rows = []
    for r in records:
        if r.get("not_run"):
            rows.append(f"| {r['number']} | {_md_escape(_NUMBER_PREFIX.sub('', r.get('heading') or r['title']))} "
                        "| not run | — | | |")
            continue
        if r.get("running"):  # the early build's stand-in (write_placeholder_page)
            rows.append(f"| {r['number']} | [{_md_escape(_NUMBER_PREFIX.sub('', r.get('heading') or r['title']))}]"
                        f"({r['name']}.ipynb) | still running | — | | |")
            continue
        params = ", ".join(f"`{k}={v!r}`" for k, v in (r.get("parameters") or {}).items()) or "defaults"
        status = "ok" if r["ok"] else "**FAILED**"
        name = _NUMBER_PREFIX.sub("", r.get("heading") or r["title"])
        rows.append(f"| {r['number']} | [{_md_escape(name)}]({r['name']}.ipynb) | {status} | "
                    f"{_fmt_seconds(r['seconds'])} | {r.get('mode', 'full')}, {r.get('started', '')} | {params} |")
    built = f"Built {meta.get('built', '')}" + (f" from commit `{meta['commit']}`" if meta.get("commit") else "")
    return f"""# {title}

A reproducible companion to two studies of the moral preferences of large language models:
Seror (2025), *The Moral Mind(s) of Large Language Models* (the Priced Survey Methodology), and
Scherrer et al. (2023), *Evaluating the Moral Beliefs Encoded in LLMs* (MoralChoice).

Each page is one notebook of `notebooks/`, executed top to bottom by `run_all.py` (papermill) and
published here with Jupyter Book. The box at the top of a page gives that notebook's run: status, run
time and the parameters it received. Figures are also saved as PNG and SVG in `figures/`, tables as
CSV in `figures/tables/`, named after their notebook. After the notebooks comes **the manual**
(the project's `docs/` folder): each method, command and option, section by section.

{built}. The last run took {_fmt_seconds(meta.get('seconds', 0.0))}
({meta.get('mode', 'full')} mode{', jobs ' + str(meta['jobs']) if meta.get('jobs') else ''}).

| # | page | status | run time | run | parameters |
| --- | --- | --- | --- | --- | --- |
{chr(10).join(rows)}

## The respondents

Every page labels its respondents from one registry (`moralkit.respondents`). A **real model** is an
LLM's own answers; a **second sampling seed** (`-s<k>`) is the same model asked again with another seed
(its PSM option sets can differ, because each round's corner depends on the model's own first answer);
a **persona-prompted** respondent (`+persona-<name>`) is the same model under a short system prompt; a
**simulated** one (`sim-…`, page 08) is numbers drawn by `moralkit.psm.simulate`, never LLM output.
On the MoralChoice page, the suffix **ex** marks exact likelihoods computed from token probabilities.

{_respondents_markdown()}
"""


def _respondents_markdown() -> str:
    from ..respondents import respondents_markdown

    return respondents_markdown(what=False)  # the README's table also says what each one is


def manual_pages(docs_dir: str | os.PathLike | None = None) -> list[Path]:
    """The manual's pages: ``docs/*.md`` of the project in :data:`MANUAL_ORDER`, then any others by name.

    Only the folder's own ``.md`` files count: sub-folders (``docs/_incoming/``, drafts that other work
    hands in for the README or the manual) are not part of the book.
    """
    if docs_dir is None:
        from moralkit.paths import project_root

        docs_dir = project_root() / "docs"
    found = sorted(p for p in Path(docs_dir).glob("*.md") if p.is_file())
    rank = {name: i for i, name in enumerate(MANUAL_ORDER)}
    return sorted(found, key=lambda p: (rank.get(p.stem, len(rank)), p.name))


def _copy_manual(book: Path, docs_dir: str | os.PathLike | None) -> list[str]:
    """Copy the manual's pages into ``book/docs/`` (unchanged files left alone); returns their toc entries."""
    target = book / MANUAL_FOLDER
    target.mkdir(parents=True, exist_ok=True)
    pages = manual_pages(docs_dir)
    for p in pages:
        _write_if_changed(target / p.name, p.read_text(encoding="utf-8"))
    for stale in target.glob("*.md"):  # a page removed from docs/ leaves the book too
        if stale.name not in {p.name for p in pages}:
            stale.unlink()
    return [f"{MANUAL_FOLDER}/{p.stem}" for p in pages]


def write_book_sources(book_dir: str | os.PathLike, records: Sequence[Mapping[str, Any]],
                       meta: Mapping[str, Any], *, title: str = "moralkit — the appendix",
                       docs_dir: str | os.PathLike | None = None) -> None:
    """Write ``index.md``, ``_toc.yml`` and ``_config.yml`` into ``book_dir``, and copy the manual.

    The pages themselves (:func:`write_page`) are written when each notebook has run; the table of
    contents lists those present, in number order, as the part "The appendix", then the manual's pages
    (:func:`manual_pages`, from ``docs_dir``, default the project's ``docs/``) as the part "The manual".
    """
    import yaml

    book = Path(book_dir)
    book.mkdir(parents=True, exist_ok=True)
    pages = [r for r in records if not r.get("not_run") and (book / f"{r['name']}.ipynb").exists()]
    manual = _copy_manual(book, docs_dir)
    _write_if_changed(book / "_config.yml", yaml.safe_dump(_config(title), sort_keys=False, allow_unicode=True))
    toc: dict[str, Any] = {"format": "jb-book", "root": "index"}
    parts = [{"caption": caption, "chapters": [{"file": f} for f in files]}
             for caption, files in (("The appendix", [r["name"] for r in pages]), ("The manual", manual)) if files]
    if parts:
        toc["parts"] = parts
    _write_if_changed(book / "_toc.yml", yaml.safe_dump(toc, sort_keys=False))
    _write_if_changed(book / "index.md", _index_markdown(records, meta, title))


def _write_if_changed(path: Path, text: str) -> None:
    """Leave an unchanged file alone, so that Sphinx rebuilds only what changed."""
    if not (path.exists() and path.read_text(encoding="utf-8") == text):
        path.write_text(text, encoding="utf-8")


def _sphinx_command(book: Path, out: Path, *flags: str) -> list[str]:
    return [sys.executable, "-m", "moralkit.book.sphinx_build", str(book), str(out), *flags]


def prepare_build(book_dir: str | os.PathLike, out_dir: str | os.PathLike) -> subprocess.Popen:
    """Start the Sphinx process of a later :func:`build_book` now: it imports Sphinx and the book's extensions
    and sets up the application, reading the configuration and the table of contents as they are now, then
    waits for :func:`build_book` (``prepared=``) to say go (``python -m moralkit.book.sphinx_build --wait``).
    It exits without building when its standard input closes, e.g. when the caller ends."""
    book, out = Path(book_dir).resolve(), Path(out_dir).resolve()
    return subprocess.Popen(_sphinx_command(book, out, "--wait"), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def build_book(book_dir: str | os.PathLike, out_dir: str | os.PathLike, *, timeout: float = 900,
               fresh: bool = False, prepared: subprocess.Popen | None = None) -> Path:
    """Build the HTML book from ``book_dir`` into ``out_dir`` (Sphinx, in a subprocess).

    Sphinx keeps its environment in ``out_dir/.doctrees`` and re-reads only the pages whose sources
    changed. The log is ``book_dir/sphinx.log``.

    Parameters
    ----------
    book_dir, out_dir : path
        The book's sources and the output folder.
    timeout : float
        Seconds before the build is stopped (``subprocess.TimeoutExpired``).
    fresh : bool
        Ignore the saved environment and write every page again (a build from scratch).
    prepared : Popen, optional
        A process started by :func:`prepare_build` for the same folders, after which the configuration and
        the table of contents have not changed: it gets the go, which saves its start-up. If it has already
        ended, or with ``fresh``, it is stopped (it has written nothing) and a new process builds instead.

    Returns
    -------
    Path
        ``out_dir/index.html``.

    Raises
    ------
    BookError
        When Sphinx fails; the message ends with the end of its log.
    """
    book, out = Path(book_dir).resolve(), Path(out_dir).resolve()
    log = book / "sphinx.log"
    if prepared is not None and (fresh or prepared.poll() is not None):  # a new process builds
        prepared.kill()  # it has not written anything yet: it waits for the go before Sphinx builds
        prepared.communicate()
        prepared = None
    if prepared is not None:
        try:
            stdout, stderr = prepared.communicate("build\n", timeout=timeout)
        except subprocess.TimeoutExpired:
            prepared.kill()
            prepared.communicate()
            raise
        returncode = prepared.returncode
    else:
        proc = subprocess.run(_sphinx_command(book, out, *(["--fresh"] if fresh else [])), capture_output=True,
                              text=True, timeout=timeout, check=False)
        stdout, stderr, returncode = proc.stdout, proc.stderr, proc.returncode
    log.write_text(stdout + stderr, encoding="utf-8")
    if returncode != 0 or not (out / "index.html").exists():
        tail = "\n".join((stdout + stderr).strip().splitlines()[-25:])
        raise BookError(f"the Jupyter Book build failed (exit {returncode}); end of {log.name}:\n{tail}")
    return out / "index.html"


_REMOTE = re.compile(r"^\s*(https?:)?//", re.IGNORECASE)
_CSS_REMOTE = re.compile(r"(@import\s+(url\()?|url\()\s*['\"]?\s*(https?:)?//", re.IGNORECASE)


def find_remote_assets(page: str) -> list[str]:
    """Resources a page would fetch from the network (script/img/link/iframe/... sources, CSS imports).

    Plain hyperlinks (``<a href>``) are not counted: they are navigation, not assets.
    An empty list means the page renders offline.
    """
    from html.parser import HTMLParser

    found: list[str] = []

    class _Refs(HTMLParser):
        def handle_starttag(self, tag, attrs):
            for key, value in attrs:
                if value is None or (tag == "a" and key == "href"):
                    continue
                if key in ("src", "href", "data", "poster", "srcset") and _REMOTE.match(value):
                    found.append(f"<{tag} {key}={value[:100]}>")

    _Refs().feed(page)
    for m in _CSS_REMOTE.finditer(page):
        found.append(page[m.start(): m.end() + 60])
    return found


def read_json(path: Path) -> dict:
    """``run.json`` of an earlier run (empty when absent or unreadable)."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
