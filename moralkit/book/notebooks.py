"""The numbered notebooks: discovery, reading (jupytext), titles and parameters.

The companion's notebooks are ``notebooks/NN_name.py`` files in jupytext's percent format; a cell
tagged ``parameters`` declares what ``run_all.py`` may pass to them (papermill's convention).

Examples
--------
>>> from moralkit.paths import project_root
>>> [p.name[:2] for p in discover_notebooks(project_root() / "notebooks", "2,1")]
['01', '02']
>>> parse_value("0.5"), parse_value("data/psm")
(0.5, 'data/psm')
"""

from __future__ import annotations

import ast
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import MoralkitError

__all__ = [
    "DEFAULT_KERNEL",
    "NOTEBOOK_PATTERN",
    "declared_parameters",
    "discover_notebooks",
    "expected_seconds",
    "notebook_title",
    "parse_value",
    "read_notebook",
    "select_parameters",
]

NOTEBOOK_PATTERN = re.compile(r"^(\d{2})_[A-Za-z0-9_\-]+\.py$")
DEFAULT_KERNEL = "python3"


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
    MoralkitError
        If the folder does not exist, two notebooks share a number, or an
        ``only`` entry matches no notebook (the message lists the available ones).
    """
    if notebooks_dir is None:
        from moralkit.paths import project_root

        notebooks_dir = project_root() / "notebooks"
    folder = Path(notebooks_dir)
    if not folder.is_dir():
        raise MoralkitError(f"notebooks folder {folder} does not exist; pass the folder holding the NN_name.py notebooks")
    found = sorted(p for p in folder.iterdir() if p.is_file() and NOTEBOOK_PATTERN.match(p.name))
    numbers: dict[str, Path] = {}
    for p in found:
        n = p.name[:2]
        if n in numbers:
            raise MoralkitError(f"notebooks {numbers[n].name} and {p.name} share the number {n}; renumber one of them")
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
            raise MoralkitError(f"--only {w!r} matches no notebook in {folder} (available: {avail})")
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


_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def notebook_title(nb, default: str = "", *, plain: bool = True) -> str:
    """The text of the first markdown heading of ``nb`` (``default`` if there is none).

    ``plain=True`` drops math delimiters and emphasis (for a terminal); ``plain=False`` keeps the
    heading's markdown, math included (for the book).
    """
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        m = _HEADING.search(cell.source)
        if m:
            t = m.group(1)
            if not plain:
                return t.strip()
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
        raise MoralkitError(f"the parameters cell does not parse as Python ({exc}); fix its syntax") from exc
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



def parse_value(text: str) -> Any:
    """A ``-p NAME=VALUE`` value: a Python literal when it is one, else the string itself."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def expected_seconds(sources: Sequence[Path], previous: Mapping[str, Mapping[str, Any]],
                     records: Path | None = None) -> dict[str, float]:
    """How long each notebook is expected to run, to start the longest first when several run side by side.

    The earlier run's wall seconds in this output folder (``previous``, from its ``run.json``) where there
    is one; otherwise, as on a fresh clone, the latest first (numba compiling) full run of README command 1
    on record (``benchmarks/results.jsonl``, the ``run_all`` record ``all-first`` of
    ``benchmarks/bench_run_all.py``, by notebook number). A notebook with neither is missing from the result (the caller starts it first).
    Only the order depends on these figures, never a result.

    Examples
    --------
    >>> expected_seconds([Path("02_a.py"), Path("03_b.py")], {"02_a": {"seconds": 5.0}}, records=Path("none"))
    {'02_a': 5.0}
    """
    if records is None:
        from moralkit import paths

        records = paths.project_root() / "benchmarks" / "results.jsonl"
    on_record: dict[str, float] = {}
    try:
        lines = Path(records).read_text(encoding="utf-8").splitlines()
    except OSError:
        lines = []
    latest = ""
    for line in lines:
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue
        if (isinstance(r, dict) and r.get("bench") == "run_all" and r.get("key") == "all-first"
                and not r.get("quick") and isinstance(r.get("per_notebook"), dict) and str(r.get("date")) >= latest):
            latest = str(r.get("date"))
            on_record = {str(k): float(v[0]) for k, v in r["per_notebook"].items()
                         if isinstance(v, list) and v and isinstance(v[0], (int, float))}
    out = {}
    for s in sources:
        seconds = (previous.get(s.stem) or {}).get("seconds")
        if seconds is None:
            seconds = on_record.get(s.name[:2])
        if seconds is not None:
            out[s.stem] = float(seconds)
    return out
