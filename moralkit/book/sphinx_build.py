"""``python -m moralkit.book.sphinx_build BOOK OUT [--fresh | --wait]``: Jupyter Book's Sphinx build of BOOK into OUT.

:func:`moralkit.book.publish.build_book` runs this in a subprocess, so that Sphinx's global state
(docutils registries, logging) never touches the caller's process.

With ``--wait`` the process first imports Sphinx, Jupyter Book and the extensions the book loads, and sets up
the Sphinx application (configuration, table of contents, extensions, theme, the saved environment): most of
a build's fixed cost (``ahead_cpu_s`` in ``benchmarks/bench_book_tail.py``). ``--fresh`` ignores the saved
environment and writes every page. Then it waits for one line on its standard input: ``build`` builds (Sphinx
finds the changed pages only now); anything else or the end of the input (the caller went away) exits
without building. :func:`moralkit.book.publish.prepare_build` starts it while the last notebooks still run,
once the table of contents is final, so that the final build only reads the changed pages and writes.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

__all__ = ["build", "setup", "warm_imports"]

#: modules a build of the book imports (Jupyter Book's extensions and theme), imported ahead by ``--wait``
WARM_MODULES = ("myst_nb.sphinx_ext", "jupyter_book.sphinx", "sphinx.application", "sphinx.builders.html",
                "myst_parser.sphinx_ext.main", "sphinx_book_theme", "pydata_sphinx_theme", "sphinx_design",
                "sphinx_external_toc", "sphinx_togglebutton", "sphinx_copybutton", "sphinx_comments",
                "sphinx_thebe", "sphinx_jupyterbook_latex", "sphinx_multitoc_numbering", "bs4")


def setup(app):
    """Sphinx extension: MathJax on every page, since the navigation shows titles with math."""
    app.set_html_assets_policy("always")
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def warm_imports() -> None:
    """Import :data:`WARM_MODULES` (those missing are skipped: the build itself then says what is missing)."""
    for name in WARM_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            pass


class _NoGo(SystemExit):
    """The waiting process was told not to build (it exits with status 0)."""


def _wait_for_go(on_go=lambda: None) -> None:
    """Patch Sphinx so that the application is set up now and builds only after ``build`` on stdin (then
    ``on_go()`` runs first)."""
    from sphinx.application import Sphinx

    setup_done = Sphinx.build

    def build_on_go(app, *args, **kwargs):
        if sys.stdin.readline().strip() != "build":
            raise _NoGo(0)
        on_go()
        return setup_done(app, *args, **kwargs)

    Sphinx.build = build_on_go


def build(book: Path, out: Path, *, fresh: bool = False, wait: bool = False) -> int:
    """Build the HTML book; returns Sphinx's exit status. ``fresh``: ignore the saved environment
    (``out/.doctrees``) and write every page; ``wait``: set up, then build on ``build`` from stdin."""
    import myst_nb.sphinx_ext
    from jupyter_book.sphinx import build_sphinx

    # MyST-NB stages notebook outputs in <outdir>/../jupyter_execute; keep them inside the output folder
    myst_nb.sphinx_ext.OUTPUT_FOLDER = f"{out.name}/.jupyter_execute"
    # MyST-NB copies its stylesheet _static/mystnb.<sha256>.css when the build has finished; Sphinx links a
    # stylesheet present while it writes a page with "?v=<checksum>". Removed first, every page links it as a
    # build into an empty folder does, so an incremental build (moralkit.book.early) writes the same bytes.
    # The file is copied again at the end (its name already changes with its content).
    styles: dict[Path, bytes] = {}

    def drop_styles() -> None:
        styles.update({p: p.read_bytes() for p in (out / "_static").glob("mystnb.*.css")})
        for p in styles:
            p.unlink()

    if wait:
        _wait_for_go(drop_styles)  # nothing is written before the go
    else:
        drop_styles()
    try:
        res = build_sphinx(book, out, path_config=book / "_config.yml", doctreedir=out / ".doctrees",
                           confoverrides={"latex_individualpages": False}, noconfig=True, quiet=True,
                           builder="html", freshenv=fresh, force_all=fresh)
    finally:  # a failed build (or no go) leaves the earlier pages with their stylesheet
        for p, data in styles.items():
            if not p.exists():
                p.write_bytes(data)
    return res if isinstance(res, int) else 1


def main(argv: list[str]) -> int:
    """The command line (see the module's docstring)."""
    book, out = Path(argv[0]), Path(argv[1])
    if "--wait" in argv[2:]:
        warm_imports()
        return build(book, out, wait=True)
    return build(book, out, fresh="--fresh" in argv[2:])


if __name__ == "__main__":  # pragma: no cover - run by build_book in a subprocess
    status = main(sys.argv[1:])
    # the book is written and its files closed: ending here skips the interpreter's teardown of Sphinx and its
    # extensions (about 0.3 s of processor time per build, two builds per run with the early one)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
