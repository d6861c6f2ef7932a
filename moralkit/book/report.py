"""What a run of ``run_all.py`` gives (:class:`BookRun`) and prints: the failure of a notebook, the timing summary.

Examples
--------
>>> shown("/nowhere/x.txt")
'/nowhere/x.txt'
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .execute import NotebookRun

__all__ = ["BookRun", "format_failure", "format_timing", "shown"]


@dataclass
class BookRun:
    """The result of :func:`moralkit.book.run.run_all`."""

    runs: list[NotebookRun]
    not_run: list[Path]
    out_dir: Path
    index: Path | None
    figures_dir: Path
    tables_dir: Path
    seconds: float
    parameters: dict[str, Any]
    book_seconds: float = 0.0
    book_error: str | None = None
    early_book_seconds: float | None = None  # the early build's (moralkit.book.early); None when there was none
    early_book_error: str | None = None

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.runs) and not self.not_run and self.book_error is None

    @property
    def failures(self) -> list[NotebookRun]:
        return [r for r in self.runs if not r.ok]


def shown(path) -> str:
    """A path for the terminal: relative to the project when inside it, else absolute."""
    from moralkit.paths import project_root

    p = Path(path).resolve()
    try:
        return p.relative_to(project_root().resolve()).as_posix()
    except ValueError:
        return str(p)


def format_failure(run: NotebookRun, root: str | os.PathLike | None = None) -> str:
    """A readable message naming the notebook, the cell (index, line, first source line) and the error."""
    f = run.failure
    src = shown(run.source)
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
    lines.append(f"  executed notebook: {shown(run.ipynb)}"
                 + (f"  (page: {shown(run.html)})" if run.html else ""))
    return "\n".join(lines)


def format_timing(result: BookRun) -> str:
    """The timing summary: one line per notebook (wall and CPU time, its slowest cell), the book, the total,
    and how much the notebooks overlapped (the sum of their wall times over the wall time they took)."""
    lines = ["timing summary:                      wall       CPU"]
    for r in result.runs:
        slow = max(r.cell_seconds, key=lambda t: t[1]) if r.cell_seconds else None
        cpu = f"{r.cpu_seconds:8.1f} s" if r.cpu_seconds is not None else f"{'-':>8}  "
        s = f"  {r.source.name:<32} {r.seconds:8.1f} s {cpu}  {'ok' if r.ok else 'FAILED'}"
        if slow is not None:
            s += f"   (slowest: cell {slow[0]}, {slow[1]:.1f} s)"
        lines.append(s)
    for p in result.not_run:
        lines.append(f"  {p.name:<32} {'—':>8}    not run (stopped after a failure)")
    if result.early_book_seconds is not None:  # moralkit.book.early: beside the last notebooks, not after them
        lines.append(f"  {'Jupyter Book, early':<32} {result.early_book_seconds:8.1f} s  beside the last notebook(s)")
    lines.append(f"  {'Jupyter Book':<32} {result.book_seconds:8.1f} s  "
                 + ("ok" if result.book_error is None and result.index else "FAILED" if result.book_error else "-")
                 + ("  (after the last notebook)" if result.early_book_seconds is not None else ""))
    lines.append(f"  {'total (wall)':<32} {result.seconds:8.1f} s")
    notebooks_wall = result.seconds - result.book_seconds
    if len(result.runs) > 1 and notebooks_wall > 0:
        serial = sum(r.seconds for r in result.runs)
        lines.append(f"  notebooks side by side: {serial:.1f} s of notebook time in {notebooks_wall:.1f} s "
                     f"(x{serial / notebooks_wall:.2f})")
    return "\n".join(lines)
