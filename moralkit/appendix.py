"""Batch-run the numbered notebooks and render them as an offline HTML appendix.

The notebooks in ``notebooks/NN_name.py`` (jupytext percent format) are the
source of the companion. This module converts each one with jupytext, executes
it with papermill (kernel ``python3``), writes the executed notebook and an
HTML rendering of it, and links the pages in order from an ``index.html``.
``run_all.py`` at the project root is a thin command line over :func:`run_all`.

The appendix is readable offline: the HTML template loads no script or style
sheet from a CDN (no require.js, no MathJax, no mermaid), figures are embedded
as data URIs, and LaTeX in markdown cells (``$...$``, ``$$...$$``, ``\\[...\\]``,
``\\begin{align}...``) is rendered server-side to MathML with the pure-Python
``latex2mathml`` when it is installed (browsers draw MathML natively). A formula
that cannot be converted is shown as its LaTeX source.

==========================  ============================================
entry point                 what it does
==========================  ============================================
:func:`run_all`             the whole batch (discover, execute, render, index)
:func:`discover_notebooks`  the ``NN_*.py`` notebooks, in order
:func:`read_notebook`       jupytext ``.py`` -> ``NotebookNode``
:func:`declared_parameters` names in a notebook's ``parameters`` cell
:func:`execute_notebook`    one papermill run -> :class:`NotebookRun`
:func:`render_html`         one executed notebook -> offline HTML page
:func:`write_index`         the ``index.html`` appendix
:func:`main`                the command line of ``run_all.py``
==========================  ============================================

References
----------
Seror (2025), *The Moral Mind(s) of LLMs*, and Scherrer et al. (2023),
*Evaluating the Moral Beliefs Encoded in LLMs*: the notebooks reproduce their
sections; this module only runs and renders them (issue 7 of the project).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import datetime as _dt
import html as _html
import json
import multiprocessing
import os
import re
import subprocess
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

__all__ = [
    "CellFailure",
    "NotebookRun",
    "AppendixRun",
    "discover_notebooks",
    "read_notebook",
    "notebook_title",
    "declared_parameters",
    "select_parameters",
    "execute_notebook",
    "render_html",
    "write_index",
    "run_all",
    "find_remote_assets",
    "math_html",
    "format_failure",
    "format_timing",
    "main",
]

NOTEBOOK_PATTERN = re.compile(r"^(\d{2})_[A-Za-z0-9_\-]+\.py$")
DEFAULT_KERNEL = "python3"

# --------------------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------------------


@dataclass
class CellFailure:
    """Where and how a notebook failed.

    ``cell_index`` counts every cell of the source notebook (markdown and code,
    0-based, the papermill-injected parameters cell excluded), ``line`` is the
    1-based line of the ``.py`` file where the cell's first source line sits
    (``None`` if it could not be located).
    """

    cell_index: int | None
    cell_type: str
    execution_count: int | None
    line: int | None
    first_line: str
    ename: str
    evalue: str
    traceback: str = ""


@dataclass
class NotebookRun:
    """One executed notebook."""

    source: Path
    number: str
    title: str
    parameters: dict[str, Any]
    ipynb: Path
    html: Path | None = None
    seconds: float = 0.0
    ok: bool = False
    failure: CellFailure | None = None
    cell_seconds: list[tuple[int, float]] = field(default_factory=list)
    figures: list[Path] = field(default_factory=list)
    tables: list[Path] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.source.stem


@dataclass
class AppendixRun:
    """The result of :func:`run_all`."""

    runs: list[NotebookRun]
    not_run: list[Path]
    out_dir: Path
    index: Path | None
    figures_dir: Path
    tables_dir: Path
    seconds: float
    parameters: dict[str, Any]

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.runs) and not self.not_run

    @property
    def failures(self) -> list[NotebookRun]:
        return [r for r in self.runs if not r.ok]


# --------------------------------------------------------------------------------------
# discovery, conversion, parameters
# --------------------------------------------------------------------------------------


def discover_notebooks(notebooks_dir: str | os.PathLike | None = None,
                       only: str | Iterable[str] | None = None) -> list[Path]:
    """The numbered notebooks ``NN_name.py`` of ``notebooks_dir``, in number order.

    Parameters
    ----------
    notebooks_dir : path, optional
        Defaults to ``<project root>/notebooks``.
    only : str or iterable of str, optional
        Keep only these notebooks, given by number (``"02"``, ``"2"``) or by name
        (``"02_rationality"``); a string is split on commas (``"02,04"``).

    Raises
    ------
    ValueError
        If the folder does not exist, two notebooks share a number, or an
        ``only`` entry matches no notebook (the message lists the available ones).
    """
    if notebooks_dir is None:
        from moralkit.paths import project_root

        notebooks_dir = project_root() / "notebooks"
    folder = Path(notebooks_dir)
    if not folder.is_dir():
        raise ValueError(f"notebooks folder {folder} does not exist; pass the folder holding the NN_name.py notebooks")
    found = sorted(p for p in folder.iterdir() if p.is_file() and NOTEBOOK_PATTERN.match(p.name))
    numbers: dict[str, Path] = {}
    for p in found:
        n = p.name[:2]
        if n in numbers:
            raise ValueError(f"notebooks {numbers[n].name} and {p.name} share the number {n}; renumber one of them")
        numbers[n] = p
    if only is None:
        return found
    wanted = [w.strip() for w in (only.split(",") if isinstance(only, str) else only) if str(w).strip()]
    chosen: list[Path] = []
    for w in wanted:
        w = str(w)
        key = w.zfill(2) if w.isdigit() else None
        match = [p for p in found if (key is not None and p.name[:2] == key) or p.stem == w or p.name == w]
        if not match:
            avail = ", ".join(p.stem for p in found) or "none"
            raise ValueError(f"--only {w!r} matches no notebook in {folder} (available: {avail})")
        for p in match:
            if p not in chosen:
                chosen.append(p)
    return sorted(chosen)


def read_notebook(path: str | os.PathLike):
    """Read a jupytext notebook (``.py`` percent format, or ``.ipynb``) as a ``NotebookNode``.

    The kernelspec is forced to ``python3`` when the file declares none, so that
    papermill and JupyterLab pick the project's default kernel.
    """
    import jupytext

    nb = jupytext.read(str(path))
    ks = nb.metadata.get("kernelspec") or {}
    if not ks.get("name"):
        nb.metadata["kernelspec"] = {"name": DEFAULT_KERNEL, "display_name": "Python 3", "language": "python"}
    return nb


_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def notebook_title(nb, default: str = "") -> str:
    """The text of the first markdown heading of ``nb`` (``default`` if there is none)."""
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        m = _HEADING.search(cell.source)
        if m:
            t = m.group(1)
            t = re.sub(r"\$+([^$]*)\$+", r"\1", t)  # drop math delimiters for plain-text use
            t = re.sub(r"\*\*|__|[*`]", "", t)
            return t.strip()
    return default


def _parameters_cell(nb):
    cells = [c for c in nb.cells if c.cell_type == "code" and "parameters" in (c.metadata.get("tags") or [])]
    return cells[0] if cells else None


def declared_parameters(nb) -> dict[str, str]:
    """Names assigned in the notebook's ``parameters`` cell, with their default's source text.

    Returns an empty dict when the notebook has no cell tagged ``parameters``.
    """
    cell = _parameters_cell(nb)
    if cell is None:
        return {}
    try:
        tree = ast.parse(cell.source)
    except SyntaxError as exc:
        raise ValueError(f"the parameters cell does not parse as Python ({exc}); fix its syntax") from exc
    out: dict[str, str] = {}
    for node in tree.body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        for t in targets:
            if isinstance(t, ast.Name):
                out[t.id] = ast.get_source_segment(cell.source, node.value) or ""
    return out


def select_parameters(nb, requested: Mapping[str, Any]) -> dict[str, Any]:
    """The subset of ``requested`` that the notebook's ``parameters`` cell declares."""
    declared = declared_parameters(nb)
    return {k: v for k, v in requested.items() if k in declared}


# --------------------------------------------------------------------------------------
# execution
# --------------------------------------------------------------------------------------


@contextlib.contextmanager
def _environ(env: Mapping[str, str] | None):
    if not env:
        yield
        return
    old = {k: os.environ.get(k) for k in env}
    os.environ.update({k: str(v) for k, v in env.items()})
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _is_injected(cell) -> bool:
    tags = cell.get("metadata", {}).get("tags") or []
    return "injected-parameters" in tags or "papermill-error-cell-tag" in tags


def _locate_line(py_text: str, nb_cells: Sequence, upto: int) -> int | None:
    """1-based line in the ``.py`` source of the first code line of source cell ``upto``."""
    lines = [ln.rstrip() for ln in py_text.splitlines()]
    pos = 0
    found = None
    for i, cell in enumerate(nb_cells[: upto + 1]):
        if cell.cell_type != "code":
            continue
        first = next((ln.rstrip() for ln in cell.source.splitlines() if ln.strip()), None)
        if first is None:
            continue
        hit = next((j for j in range(pos, len(lines)) if lines[j] == first), None)
        if hit is None:
            if i == upto:
                return None
            continue
        pos = hit + 1
        found = hit + 1
        if i == upto:
            return found
    return None


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _find_failure(executed, source_nb, py_text: str, exc: BaseException | None) -> CellFailure | None:
    """The first failing cell of an executed notebook, in source-notebook coordinates."""
    src_index = -1
    candidate = None
    for cell in executed.cells:
        if _is_injected(cell):
            continue
        src_index += 1
        pm = cell.get("metadata", {}).get("papermill", {})
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"
                  and not (o.get("ename") == "SystemExit" and o.get("evalue") in ("", "0"))]
        if errors:
            o = errors[0]
            candidate = (src_index, cell, o.get("ename", ""), o.get("evalue", ""),
                         _ANSI.sub("", "\n".join(o.get("traceback", []))))
            break
        if pm.get("exception") is True or pm.get("status") == "running":
            candidate = (src_index, cell, type(exc).__name__ if exc else "CellExecutionError",
                         str(exc) if exc else "", "")
            break
    if candidate is None and exc is not None:
        # no error output (e.g. the kernel died): blame the last cell that started
        src_index = -1
        for cell in executed.cells:
            if _is_injected(cell):
                continue
            src_index += 1
            if cell.cell_type == "code" and cell.get("metadata", {}).get("papermill", {}).get("start_time"):
                candidate = (src_index, cell, type(exc).__name__, str(exc).strip(), "")
    if candidate is None:
        if exc is None:
            return None
        return CellFailure(None, "", None, None, "", type(exc).__name__, str(exc).strip())
    idx, cell, ename, evalue, tb = candidate
    first = next((ln for ln in cell.source.splitlines() if ln.strip()), "")
    return CellFailure(
        cell_index=idx,
        cell_type=cell.cell_type,
        execution_count=cell.get("execution_count"),
        line=_locate_line(py_text, source_nb.cells, idx),
        first_line=first.strip(),
        ename=ename,
        evalue=evalue,
        traceback=tb,
    )


class _ParameterInferenceNoise:
    """Drop papermill's own parameter-inference warnings.

    Papermill re-parses the ``parameters`` cell with a line regex that fails on
    comments holding ``=`` or quotes, then warns "Passed unknown parameter" for
    parameters that *are* declared. :func:`select_parameters` already passes only
    the names the cell declares (parsed with :mod:`ast`), so these are noise.
    """

    def filter(self, record) -> bool:  # logging.Filter protocol
        msg = record.getMessage()
        return not (msg.startswith("Unable to parse line") or msg.startswith("Passed unknown parameter"))


def _quiet_papermill_inference() -> None:
    import logging

    for name in ("papermill", "papermill.translators"):
        lg = logging.getLogger(name)
        if not any(isinstance(f, _ParameterInferenceNoise) for f in lg.filters):
            lg.addFilter(_ParameterInferenceNoise())


def _kernel_manager_class():
    """A kernel manager that provisions CurveZMQ keys when the kernel supports them.

    ipykernel >= 7 warns on every start when its TCP channels are unencrypted;
    jupyter_client >= 8.10 can provision keys (``transport_encryption="auto"``).
    Returns None (papermill's default manager) when that is not available.
    """
    try:
        import zmq
        from jupyter_client.manager import AsyncKernelManager
    except ImportError:  # pragma: no cover
        return None
    if "transport_encryption" not in AsyncKernelManager.class_trait_names() or not zmq.has("curve"):
        return None

    class _EncryptedKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.transport_encryption = "auto"

    return _EncryptedKernelManager


def execute_notebook(source: str | os.PathLike, output: str | os.PathLike,
                     parameters: Mapping[str, Any] | None = None, *,
                     kernel_name: str = DEFAULT_KERNEL, cwd: str | os.PathLike | None = None,
                     env: Mapping[str, str] | None = None, start_timeout: int = 120) -> NotebookRun:
    """Convert one jupytext notebook and execute it with papermill.

    Parameters
    ----------
    source : path
        The ``NN_name.py`` notebook.
    output : path
        Where the executed ``.ipynb`` is written (also when it fails: it then
        holds the outputs up to the error and papermill's error banner).
    parameters : mapping, optional
        Candidate parameters; only those the notebook's ``parameters`` cell
        declares are injected (see :func:`select_parameters`).
    kernel_name : str
        Jupyter kernel, ``python3`` by default.
    cwd : path, optional
        Working directory of the kernel (default: the notebook's folder).
    env : mapping, optional
        Environment variables set while the kernel runs (e.g. ``MORALKIT_FIGURES_DIR``).

    Returns
    -------
    NotebookRun
        ``ok`` is False and ``failure`` says which cell raised what if the run failed.
        The function does not raise on notebook errors.
    """
    import nbformat
    import papermill as pm

    _quiet_papermill_inference()
    source = Path(source)
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    nb = read_notebook(source)
    params = select_parameters(nb, dict(parameters or {}))
    run = NotebookRun(source=source, number=source.name[:2], title=notebook_title(nb, source.stem),
                      parameters=params, ipynb=output)
    exc: BaseException | None = None
    t0 = time.perf_counter()
    with _environ(env):
        extra = {}
        km_class = _kernel_manager_class()
        if km_class is not None:
            extra["kernel_manager_class"] = km_class
        try:
            pm.execute_notebook(nb, str(output), parameters=params, kernel_name=kernel_name,
                                cwd=str(cwd or source.parent), progress_bar=False, log_output=False,
                                start_timeout=start_timeout, **extra)
        except pm.PapermillExecutionError as e:
            exc = e
        except Exception as e:  # dead kernel, timeout, missing kernel, ...
            exc = e
    run.seconds = time.perf_counter() - t0
    executed = None
    if output.exists():
        try:
            executed = nbformat.read(str(output), as_version=4)
        except Exception:
            executed = None
    if executed is not None:
        i = -1
        for cell in executed.cells:
            if _is_injected(cell):
                continue
            i += 1
            d = cell.get("metadata", {}).get("papermill", {}).get("duration")
            if cell.cell_type == "code" and d is not None:
                run.cell_seconds.append((i, float(d)))
        run.failure = _find_failure(executed, nb, source.read_text(encoding="utf-8"), exc)
    elif exc is not None:
        run.failure = CellFailure(None, "", None, None, "", type(exc).__name__, str(exc).strip())
    run.ok = exc is None and run.failure is None
    return run


# --------------------------------------------------------------------------------------
# rendering: math, template, pages
# --------------------------------------------------------------------------------------

_CODE_SPANS = re.compile(r"(^|\n)(```|~~~)[^\n]*\n.*?\n\2[^\n]*(?=\n|$)|`[^`\n]+`", re.S)
_MATH = re.compile(
    r"\$\$(?P<dd>.+?)\$\$"
    r"|\\\[(?P<br>.+?)\\\]"
    r"|(?P<env>\\begin\{(?P<envname>equation|align|gather|multline|eqnarray|displaymath)\*?\}.+?\\end\{(?P=envname)\*?\})"
    r"|\\\((?P<pa>.+?)\\\)"
    r"|(?<![\\$])\$(?P<d>[^\s$](?:[^$\n]|\n(?!\n))*?(?<![\s\\]))\$(?!\d)",
    re.S,
)


def _latex_to_mathml(tex: str, display: bool) -> str | None:
    """MathML for ``tex`` via latex2mathml, or None if unavailable or not convertible."""
    try:
        from latex2mathml.converter import convert
    except ImportError:
        return None
    t = re.sub(r"\\label\{[^}]*\}", "", tex)
    t = t.replace("{aligned}", "{split}").replace("\\nonumber", "").replace("\\notag", "")
    try:
        out = convert(t.strip(), display="block" if display else "inline")
    except Exception:
        return None
    if "\\" in out or "<mi>&</mi>" in out:  # an unknown command or stray alignment: not trustworthy
        return None
    # keep the LaTeX source as an annotation (copy/paste, accessibility)
    m = re.match(r"(<math[^>]*>)(.*)(</math>)$", out, re.S)
    if m:
        out = (f"{m.group(1)}<semantics>{m.group(2)}<annotation encoding=\"application/x-tex\">"
               f"{_html.escape(tex.strip())}</annotation></semantics>{m.group(3)}")
    return out


def math_html(tex: str, display: bool) -> str:
    """HTML for one formula: MathML if it converts, else its LaTeX source as code."""
    title = _html.escape(tex.strip(), quote=True)
    mml = _latex_to_mathml(tex, display)
    cls = "mk-math mk-math-block" if display else "mk-math"
    if mml is not None:
        return f'<span class="{cls}" title="{title}">{mml}</span>'
    delim = ("$$", "$$") if display else ("$", "$")
    return f'<code class="{cls} mk-tex">{_html.escape(delim[0] + tex.strip() + delim[1])}</code>'


def _math_match_html(m: re.Match) -> str:
    if m.group("dd") is not None:
        return math_html(m.group("dd"), True)
    if m.group("br") is not None:
        return math_html(m.group("br"), True)
    if m.group("env") is not None:
        return math_html(m.group("env"), True)
    if m.group("pa") is not None:
        return math_html(m.group("pa"), False)
    return math_html(m.group("d"), False)


def _protect_math(markdown: str, store: dict[str, str]) -> str:
    """Replace formulas in markdown (outside code) by alphanumeric placeholders."""
    out = []
    last = 0

    def sub(text: str) -> str:
        def repl(m: re.Match) -> str:
            key = f"MKMATHX{len(store):05d}X"
            store[key] = _math_match_html(m)
            return key

        return _MATH.sub(repl, text)

    for m in _CODE_SPANS.finditer(markdown):
        out.append(sub(markdown[last:m.start()]))
        out.append(m.group(0))
        last = m.end()
    out.append(sub(markdown[last:]))
    return "".join(out)


def text_with_math_html(text: str) -> str:
    """Escape ``text`` as HTML, rendering its ``$...$``/``$$...$$`` formulas (for ``text/latex`` outputs)."""
    pieces, last = [], 0
    for m in _MATH.finditer(text):
        pieces.append(_html.escape(text[last:m.start()]))
        pieces.append(_math_match_html(m))
        last = m.end()
    pieces.append(_html.escape(text[last:]))
    s = "".join(pieces).strip()
    if not any(m for m in _MATH.finditer(text)):  # bare LaTeX (e.g. IPython.display.Latex without $)
        s = math_html(text, True)
    return s


_PLACEHOLDER = re.compile(r"MKMATHX\d{5}X")


def _restore_math(page: str, store: Mapping[str, str]) -> str:
    # inside attribute values (heading anchors, titles) a placeholder becomes nothing
    page = re.sub(r'="[^"<>]*MKMATHX\d{5}X[^"<>]*"', lambda m: _PLACEHOLDER.sub("", m.group(0)), page)
    page = re.sub(r"(<title>[^<]*</title>)", lambda m: _PLACEHOLDER.sub("", m.group(1)), page)
    return _PLACEHOLDER.sub(lambda m: store.get(m.group(0), ""), page)


_CSS = """
:root { --mk-accent: #1f5f8b; }
.mk-nav { display: flex; justify-content: space-between; gap: 1em; align-items: baseline;
  font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; padding: 8px 16px;
  margin: 0 0 12px 0; background: #f3f6f9; border-bottom: 1px solid #d5dde5; }
.mk-nav a { color: var(--mk-accent); text-decoration: none; }
.mk-nav a:hover { text-decoration: underline; }
.mk-nav .mk-run { color: #555; font-size: 12px; }
.mk-nav-bottom { border-top: 1px solid #d5dde5; border-bottom: 0; margin: 24px 0 0 0; }
.mk-math-block { display: block; text-align: center; margin: 0.6em 0; padding: 0.2em 0;
  overflow-x: auto; overflow-y: hidden; }
math { font-size: 1.15em; }
math[display="block"] { display: block math; }
code.mk-tex { background: #f6f6f6; padding: 0 3px; white-space: pre-wrap; }
.jp-RenderedImage img { max-width: 100%; height: auto; }
"""

_TEMPLATE = r"""{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block extra_css -%}<style type="text/css">{{ resources.moralkit_css }}</style>{%- endblock extra_css -%}
{%- block body_header -%}
{{ super() }}
{{ resources.moralkit_nav_top }}
{%- endblock body_header -%}
{% block body_footer %}
{{ resources.moralkit_nav_bottom }}
{{ super() }}
{% endblock body_footer %}
"""


def _nav_html(nav: Mapping[str, Any] | None, bottom: bool) -> str:
    if not nav:
        return ""
    parts = []
    prev, nxt = nav.get("prev"), nav.get("next")
    left = (f'<a href="{_html.escape(prev[0])}">&larr; {_html.escape(prev[1])}</a>' if prev else "<span></span>")
    right = (f'<a href="{_html.escape(nxt[0])}">{_html.escape(nxt[1])} &rarr;</a>' if nxt else "<span></span>")
    mid = f'<a href="{_html.escape(nav.get("index", "index.html"))}">Appendix index</a>'
    if nav.get("run") and not bottom:
        mid += f' <span class="mk-run">{_html.escape(nav["run"])}</span>'
    parts.append(f'<nav class="mk-nav{" mk-nav-bottom" if bottom else ""}">{left}<span>{mid}</span>{right}</nav>')
    return "".join(parts)


def render_html(executed: Any, html_path: str | os.PathLike, *, title: str | None = None,
                nav: Mapping[str, Any] | None = None, resources_dir: str | os.PathLike | None = None) -> Path:
    """Render an executed notebook as a self-contained, offline HTML page.

    Parameters
    ----------
    executed : NotebookNode or path
        The executed notebook (or the path of its ``.ipynb``).
    html_path : path
        Output file.
    title : str, optional
        The page title (default: the first heading).
    nav : mapping, optional
        ``{"prev": (href, title) | None, "next": (href, title) | None, "index": href, "run": text}``:
        the navigation bar drawn at the top and bottom of the page.
    resources_dir : path, optional
        Folder against which relative image links in markdown are resolved and embedded.

    Returns
    -------
    Path
        ``html_path``.
    """
    import copy

    import jinja2
    import nbformat
    from nbconvert import HTMLExporter

    nb = nbformat.read(str(executed), as_version=4) if isinstance(executed, (str, os.PathLike)) else executed
    nb = copy.deepcopy(nb)
    store: dict[str, str] = {}
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = _protect_math(cell.source, store)
        elif cell.cell_type == "code":
            for o in cell.get("outputs", []):
                data = o.get("data")
                if data and "text/latex" in data and "text/html" not in data:
                    latex = data["text/latex"]
                    latex = "".join(latex) if isinstance(latex, list) else latex
                    data["text/html"] = text_with_math_html(latex)
    page_title = title or notebook_title(nb, Path(html_path).stem)
    nb.metadata["title"] = page_title
    exporter = HTMLExporter(
        template_name="lab",
        template_file="moralkit_appendix.html.j2",
        extra_loaders=[jinja2.DictLoader({"moralkit_appendix.html.j2": _TEMPLATE})],
        embed_images=True,
    )
    resources = {
        "moralkit_css": _CSS,
        "moralkit_nav_top": _nav_html(nav, bottom=False),
        "moralkit_nav_bottom": _nav_html(nav, bottom=True),
        "metadata": {"name": page_title, "path": str(resources_dir or Path(html_path).parent)},
    }
    body, _ = exporter.from_notebook_node(nb, resources=resources)
    body = _restore_math(body, store)
    html_path = Path(html_path)
    html_path.parent.mkdir(parents=True, exist_ok=True)
    html_path.write_text(body, encoding="utf-8")
    return html_path


_REMOTE = re.compile(r"^\s*(https?:)?//", re.I)
_CSS_REMOTE = re.compile(r"(@import\s+(url\()?|url\()\s*['\"]?\s*(https?:)?//", re.I)


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


# --------------------------------------------------------------------------------------
# index
# --------------------------------------------------------------------------------------


def _fmt_seconds(s: float) -> str:
    return f"{s:.1f} s" if s < 120 else f"{int(s // 60)} min {s % 60:02.0f} s"


def _git_commit(root: Path) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip() or None
    except Exception:
        return None


def _rel(path: Path, start: Path) -> str:
    try:
        return Path(os.path.relpath(path, start)).as_posix()
    except ValueError:
        return path.resolve().as_uri()


def _display_path(path: Path, root: Path | None) -> str:
    """``path`` relative to ``root`` when it lies inside it, else absolute."""
    path = Path(path).resolve()
    if root is not None:
        try:
            return path.relative_to(Path(root).resolve()).as_posix()
        except ValueError:
            pass
    return str(path)


def write_index(runs: Sequence[NotebookRun], out_dir: str | os.PathLike, *,
                parameters: Mapping[str, Any] | None = None, seconds: float | None = None,
                not_run: Sequence[Path] = (), title: str = "moralkit — executed notebooks (appendix)") -> Path:
    """Write ``index.html``: the notebooks in order, linked, with title, timing, status and files.

    The page is plain HTML with inline CSS (no scripts), so it opens offline.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    root = Path(__file__).resolve().parent.parent
    commit = _git_commit(root)
    params = dict(parameters or {})
    mode = "quick" if params.get("quick") else "full"
    rows = []
    for r in runs:
        link = _rel(r.html, out_dir) if r.html else None
        name = _html.escape(r.title)
        title_cell = f'<a href="{_html.escape(link)}">{name}</a>' if link else name
        status = "ok" if r.ok else "FAILED"
        detail = ""
        if r.failure is not None:
            f = r.failure
            where = f"cell {f.cell_index}" if f.cell_index is not None else "before any cell"
            detail = (f'<div class="mk-fail">{where}: <code>{_html.escape(f.first_line)}</code><br>'
                      f'{_html.escape(f.ename)}: {_html.escape(f.evalue[:300])}</div>')
        files = [f'<a href="{_html.escape(_rel(p, out_dir))}">{_html.escape(p.name)}</a>'
                 for p in list(r.figures) + list(r.tables)]
        files_cell = ", ".join(files) if files else '<span class="mk-dim">—</span>'
        ptxt = ", ".join(f"{k}={v!r}" for k, v in r.parameters.items()) or "defaults"
        rows.append(
            f'<tr class="{"ok" if r.ok else "fail"}"><td class="num">{_html.escape(r.number)}</td>'
            f"<td>{title_cell}<div class=\"mk-dim\">{_html.escape(r.source.name)} · "
            f'<a href="{_html.escape(_rel(r.ipynb, out_dir))}">executed .ipynb</a> · {_html.escape(ptxt)}</div>'
            f"{detail}</td><td class=\"t\">{_fmt_seconds(r.seconds)}</td><td>{status}</td>"
            f"<td class=\"files\">{files_cell}</td></tr>"
        )
    for p in not_run:
        rows.append(f'<tr class="skip"><td class="num">{_html.escape(p.name[:2])}</td><td>{_html.escape(p.stem)}'
                    f'</td><td class="t">—</td><td>not run</td><td></td></tr>')
    total = _fmt_seconds(seconds if seconds is not None else sum(r.seconds for r in runs))
    meta = f"{mode} run · {now}" + (f" · commit {commit}" if commit else "") + f" · total {total}"
    if "seed" in params:
        meta += f" · seed {params['seed']}"
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>{_html.escape(title)}</title>
<style>
body {{ font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222;
  max-width: 1100px; margin: 2em auto; padding: 0 1em; }}
h1 {{ font-size: 1.6em; margin-bottom: 0.2em; }}
.meta, .mk-dim {{ color: #666; font-size: 0.85em; }}
table {{ border-collapse: collapse; width: 100%; margin-top: 1.2em; }}
th, td {{ text-align: left; padding: 8px 10px; border-bottom: 1px solid #e2e6ea; vertical-align: top; }}
th {{ background: #f3f6f9; font-weight: 600; }}
td.num {{ font-weight: 600; color: #1f5f8b; }}
td.t {{ white-space: nowrap; font-variant-numeric: tabular-nums; }}
td.files {{ font-size: 0.85em; max-width: 320px; }}
tr.fail td {{ background: #fff3f3; }}
tr.skip td {{ color: #999; }}
.mk-fail {{ color: #a00; font-size: 0.9em; margin-top: 4px; }}
a {{ color: #1f5f8b; }}
p.howto {{ font-size: 0.9em; color: #444; }}
</style></head>
<body>
<h1>{_html.escape(title)}</h1>
<div class="meta">{_html.escape(meta)}</div>
<p class="howto">Each page is a notebook of <code>notebooks/</code> executed top to bottom by
<code>run_all.py</code>; the cell tagged <code>injected-parameters</code> shows the parameters of this run.
Figures are embedded in the pages and also written as PNG/SVG (tables as CSV) to the files listed.</p>
<table>
<thead><tr><th>#</th><th>notebook</th><th>time</th><th>status</th><th>figures and tables</th></tr></thead>
<tbody>
{chr(10).join(rows)}
</tbody></table>
</body></html>
"""
    index = out_dir / "index.html"
    index.write_text(page, encoding="utf-8")
    return index


# --------------------------------------------------------------------------------------
# the batch
# --------------------------------------------------------------------------------------


def _task(source: str, ipynb: str, html: str, parameters: dict, kernel_name: str, env: dict,
          nav: dict) -> NotebookRun:
    """Execute + render one notebook (runs in a worker process when --jobs > 1)."""
    run = execute_notebook(source, ipynb, parameters, kernel_name=kernel_name, env=env)
    if Path(ipynb).exists():
        try:
            run.html = render_html(ipynb, html, title=run.title, nav=nav, resources_dir=Path(source).parent)
        except Exception as e:  # a rendering problem must not hide the execution result
            if run.ok:
                run.ok = False
                run.failure = CellFailure(None, "", None, None, "", "RenderError", f"{type(e).__name__}: {e}")
    return run


def _parse_value(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def run_all(notebooks_dir: str | os.PathLike | None = None, out_dir: str | os.PathLike = "build", *,
            only: str | Iterable[str] | None = None, quick: bool = False, seed: int | None = None,
            jobs: int | None = None, parameters: Mapping[str, Any] | None = None,
            figures_dir: str | os.PathLike | None = None, tables_dir: str | os.PathLike | None = None,
            keep_going: bool = False, kernel_name: str = DEFAULT_KERNEL,
            log: Callable[[str], None] | None = print) -> AppendixRun:
    """Execute the numbered notebooks and write the HTML appendix.

    Parameters
    ----------
    notebooks_dir : path, optional
        Folder of ``NN_name.py`` notebooks (default ``<project root>/notebooks``).
    out_dir : path
        Where executed ``NN_name.ipynb``, ``NN_name.html``, ``index.html`` and
        ``run.json`` are written (default ``build``).
    only : str or iterable, optional
        Notebook numbers or names, e.g. ``"02,04"`` (see :func:`discover_notebooks`).
    quick : bool
        Passed as ``quick=True`` to notebooks that declare ``quick``.
    seed : int, optional
        Passed as ``seed`` to notebooks that declare it.
    jobs : int, optional
        CPU budget. Up to ``jobs`` notebooks run at the same time; a notebook whose
        parameters cell declares ``n_jobs`` gets ``n_jobs=jobs`` and runs alone.
        ``None`` (default): one notebook at a time, ``n_jobs`` left at the notebook's default.
    parameters : mapping, optional
        Further parameters (``-p name=value``); each notebook receives only those it declares.
    figures_dir, tables_dir : path, optional
        Set ``MORALKIT_FIGURES_DIR`` / ``MORALKIT_TABLES_DIR`` for the kernels
        (defaults: ``figures/`` and ``figures/tables/``, see :mod:`moralkit.paths`).
    keep_going : bool
        Run every notebook even after a failure (the default stops at the first one).
    kernel_name : str
        Jupyter kernel (``python3``).
    log : callable or None
        Progress messages (``print`` by default; ``None`` for silence).

    Returns
    -------
    AppendixRun
        ``.ok`` is False if a notebook failed; ``.failures`` say where (see :func:`format_failure`).

    Raises
    ------
    ValueError
        For bad arguments (unknown ``--only`` entry, ``jobs < 1``, a parameter no notebook declares).
    """
    from moralkit import paths

    say = log or (lambda s: None)
    if jobs is not None and int(jobs) < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    jobs_given = jobs is not None
    jobs = int(jobs) if jobs_given else 1
    sources = discover_notebooks(notebooks_dir, only)
    if not sources:
        raise ValueError(f"no NN_name.py notebooks found in {notebooks_dir or 'notebooks/'}")
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)

    env: dict[str, str] = {}
    if figures_dir is not None:
        env["MORALKIT_FIGURES_DIR"] = str(Path(figures_dir).resolve())
    if tables_dir is not None:
        env["MORALKIT_TABLES_DIR"] = str(Path(tables_dir).resolve())
    with _environ(env):
        fig_dir = paths.figures_dir(create=True).resolve()
        tab_dir = paths.tables_dir(create=True).resolve()

    requested: dict[str, Any] = dict(parameters or {})
    if quick:
        requested["quick"] = True
    if seed is not None:
        requested["seed"] = int(seed)
    requested_n_jobs = "n_jobs" in requested
    if jobs_given:
        requested.setdefault("n_jobs", jobs)

    nbs = {s: read_notebook(s) for s in sources}
    declared = {s: declared_parameters(nb) for s, nb in nbs.items()}
    extra = [k for k in (parameters or {}) if not any(k in d for d in declared.values())]
    if extra:
        raise ValueError(f"parameter(s) {', '.join(extra)} are declared by none of the selected notebooks "
                         f"({', '.join(s.stem for s in sources)}); check the name against their parameters cell")
    titles = {s: notebook_title(nb, s.stem) for s, nb in nbs.items()}
    mode = "quick" if quick else "full"

    tasks = []
    for i, s in enumerate(sources):
        params = {k: v for k, v in requested.items() if k in declared[s]}
        exclusive = "n_jobs" in params and jobs > 1 and not requested_n_jobs
        nav = {
            "prev": (f"{sources[i - 1].stem}.html", titles[sources[i - 1]]) if i > 0 else None,
            "next": (f"{sources[i + 1].stem}.html", titles[sources[i + 1]]) if i + 1 < len(sources) else None,
            "index": "index.html",
            "run": f"{mode} run" + (f", seed {requested['seed']}" if "seed" in requested else ""),
        }
        tasks.append((s, dict(source=str(s), ipynb=str(out_dir / f"{s.stem}.ipynb"),
                                html=str(out_dir / f"{s.stem}.html"), parameters=params,
                                kernel_name=kernel_name, env=env, nav=nav), exclusive))

    t_start = time.time()
    t0 = time.perf_counter()
    runs: dict[Path, NotebookRun] = {}
    stop = False

    def finished(run: NotebookRun) -> None:
        nonlocal stop
        runs[run.source] = run
        say(f"[{'ok' if run.ok else 'FAILED'}] {run.source.name} ({_fmt_seconds(run.seconds)})")
        if not run.ok and not keep_going:
            stop = True

    say(f"run_all: {len(sources)} notebook(s), {mode} mode, jobs={jobs}, output {out_dir}")
    if jobs == 1 or len(tasks) == 1:
        for s, kw, _ in tasks:
            if stop:
                break
            say(f"[run] {s.name} {kw['parameters']}")
            finished(_task(**kw))
    else:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            pending: set = set()
            submitted: dict = {}

            def drain(limit: int) -> None:
                nonlocal pending
                while len(pending) > limit:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for f in done:
                        try:
                            finished(f.result())
                        except Exception as e:  # the worker process itself died
                            s, kw = submitted[f]
                            finished(NotebookRun(source=s, number=s.name[:2], title=titles[s],
                                                 parameters=kw["parameters"], ipynb=Path(kw["ipynb"]),
                                                 failure=CellFailure(None, "", None, None, "",
                                                                     type(e).__name__, str(e))))

            for s, kw, exclusive in tasks:
                if stop:
                    break
                drain(0 if exclusive else jobs - 1)
                if stop:
                    break
                say(f"[run] {s.name} {kw['parameters']}" + (" (alone)" if exclusive else ""))
                fut = pool.submit(_task, **kw)
                submitted[fut] = (s, kw)
                pending.add(fut)
                if exclusive:
                    drain(0)
            drain(0)

    ordered = [runs[s] for s in sources if s in runs]
    not_run = [s for s in sources if s not in runs]
    for r in ordered:
        r.figures = sorted(p for p in fig_dir.glob(f"{r.number}_*")
                           if p.is_file() and p.stat().st_mtime >= t_start - 1)
        r.tables = sorted(p for p in tab_dir.glob(f"{r.number}_*")
                          if p.is_file() and p.stat().st_mtime >= t_start - 1)
    for r in ordered:
        if r.html is not None and r.html.exists():
            remote = find_remote_assets(r.html.read_text(encoding="utf-8"))
            if remote:
                say(f"warning: {r.html.name} loads {len(remote)} asset(s) from the network and will not "
                    f"render fully offline (an output embedding a CDN script?): {remote[:2]}")
    seconds = time.perf_counter() - t0
    public_params = dict(requested)
    index = write_index(ordered, out_dir, parameters=public_params, seconds=seconds, not_run=not_run)
    result = AppendixRun(runs=ordered, not_run=not_run, out_dir=out_dir, index=index, figures_dir=fig_dir,
                         tables_dir=tab_dir, seconds=seconds, parameters=public_params)
    summary = {
        "ok": result.ok, "seconds": seconds, "parameters": public_params, "jobs": jobs,
        "figures_dir": str(fig_dir), "tables_dir": str(tab_dir),
        "notebooks": [
            {"source": str(r.source), "number": r.number, "title": r.title, "ok": r.ok, "seconds": r.seconds,
             "parameters": r.parameters, "ipynb": str(r.ipynb), "html": str(r.html) if r.html else None,
             "failure": asdict(r.failure) if r.failure else None, "cell_seconds": r.cell_seconds,
             "figures": [str(p) for p in r.figures], "tables": [str(p) for p in r.tables]}
            for r in ordered
        ],
        "not_run": [str(p) for p in not_run],
    }
    (out_dir / "run.json").write_text(json.dumps(summary, indent=1, default=str), encoding="utf-8")
    return result


def format_failure(run: NotebookRun, root: str | os.PathLike | None = None) -> str:
    """A readable message naming the notebook, the cell (index, line, first source line) and the error."""
    f = run.failure
    src = _display_path(run.source, Path(root) if root else None)
    if f is None:
        return f"{src}: ok"
    if f.cell_index is None:
        where = "before any cell ran"
    else:
        bits = [f"{f.cell_type} cell"]
        if f.execution_count is not None:
            bits.append(f"In [{f.execution_count}]")
        if f.line is not None:
            bits.append(f"line {f.line} of the .py")
        where = f"cell {f.cell_index} ({', '.join(bits)})"
    lines = [f"notebook {src} failed at {where}"]
    if f.first_line:
        lines.append(f"    {f.first_line}")
    lines.append(f"  {f.ename}: {f.evalue}".rstrip())
    if f.traceback:
        tb = f.traceback.strip().splitlines()
        lines.append("  traceback (last lines):")
        lines.extend("    " + ln for ln in tb[-12:])
    lines.append(f"  executed notebook: {run.ipynb}" + (f"  (HTML: {run.html})" if run.html else ""))
    return "\n".join(lines)


def format_timing(result: AppendixRun) -> str:
    """The timing summary: one line per notebook (with its slowest cell) and the total."""
    lines = ["timing summary:"]
    for r in result.runs:
        slow = max(r.cell_seconds, key=lambda t: t[1]) if r.cell_seconds else None
        s = f"  {r.source.name:<32} {r.seconds:8.1f} s  {'ok' if r.ok else 'FAILED'}"
        if slow is not None:
            s += f"   (slowest: cell {slow[0]}, {slow[1]:.1f} s)"
        lines.append(s)
    for p in result.not_run:
        lines.append(f"  {p.name:<32} {'—':>8}    not run (stopped after a failure)")
    lines.append(f"  {'total (wall)':<32} {result.seconds:8.1f} s")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="run_all.py",
        description="Execute the numbered notebooks (notebooks/NN_*.py) with papermill and write an offline "
                    "HTML appendix (index.html + one page per notebook).",
    )
    p.add_argument("--quick", action="store_true", help="pass quick=True (small, fast runs)")
    p.add_argument("--only", metavar="NN,NN", help="run only these notebooks, e.g. 02,04 or 02_rationality")
    p.add_argument("--jobs", "-j", type=int, default=None, metavar="N",
                   help="CPU budget: N notebooks at a time; notebooks declaring n_jobs get n_jobs=N and run alone")
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
    p.add_argument("--kernel", default=DEFAULT_KERNEL, help="Jupyter kernel name (default python3)")
    p.add_argument("--list", action="store_true", help="list the notebooks, titles and parameters, then exit")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Command line of ``run_all.py``; returns the exit status (0 ok, 1 a notebook failed, 2 bad usage)."""
    from moralkit.paths import project_root

    parser = _parser()
    a = parser.parse_args(argv)
    params: dict[str, Any] = {}
    for item in a.parameter:
        if "=" not in item:
            parser.error(f"-p expects NAME=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        params[k.strip()] = _parse_value(v.strip())
    root = project_root()
    out = Path(a.out) if a.out else root / "build"
    if a.list:
        try:
            sources = discover_notebooks(a.notebooks or root / "notebooks", a.only)
        except ValueError as e:
            print(f"run_all: error: {e}", file=sys.stderr)
            return 2
        for s in sources:
            nb = read_notebook(s)
            decl = ", ".join(f"{k}={v}" for k, v in declared_parameters(nb).items()) or "no parameters cell"
            print(f"{s.name:<28} {notebook_title(nb, s.stem)}\n{'':<28} parameters: {decl}")
        return 0
    try:
        result = run_all(a.notebooks or root / "notebooks", out, only=a.only, quick=a.quick, seed=a.seed,
                         jobs=a.jobs, parameters=params, figures_dir=a.figures_dir, tables_dir=a.tables_dir,
                         keep_going=a.keep_going, kernel_name=a.kernel)
    except ValueError as e:
        print(f"run_all: error: {e}", file=sys.stderr)
        return 2
    print(format_timing(result))
    print(f"appendix: {result.index}")
    print(f"figures:  {result.figures_dir}\ntables:   {result.tables_dir}")
    if not result.ok:
        for r in result.failures:
            print("run_all: FAILED " + format_failure(r, root), file=sys.stderr)
        if result.not_run:
            print("run_all: not run after the failure: " + ", ".join(p.name for p in result.not_run)
                  + " (use --keep-going to run them anyway)", file=sys.stderr)
        return 1
    return 0
