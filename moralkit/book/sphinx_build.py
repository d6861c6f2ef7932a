"""``python -m moralkit.book.sphinx_build BOOK OUT``: Jupyter Book's Sphinx build of BOOK into OUT.

:func:`moralkit.book.publish.build_book` runs this in a subprocess, so that Sphinx's global state
(docutils registries, logging) never touches the caller's process.
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["build", "setup"]


def setup(app):
    """Sphinx extension: MathJax on every page, since the navigation shows titles with math."""
    app.set_html_assets_policy("always")
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def build(book: Path, out: Path) -> int:
    """Build the HTML book; returns Sphinx's exit status."""
    import myst_nb.sphinx_ext
    from jupyter_book.sphinx import build_sphinx

    # MyST-NB stages notebook outputs in <outdir>/../jupyter_execute; keep them inside the output folder
    myst_nb.sphinx_ext.OUTPUT_FOLDER = f"{out.name}/.jupyter_execute"
    res = build_sphinx(book, out, path_config=book / "_config.yml", doctreedir=out / ".doctrees",
                       confoverrides={"latex_individualpages": False}, noconfig=True, quiet=True,
                       builder="html")
    return res if isinstance(res, int) else 1


if __name__ == "__main__":  # pragma: no cover - run by build_book in a subprocess
    sys.exit(build(Path(sys.argv[1]), Path(sys.argv[2])))
