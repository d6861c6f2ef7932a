"""Where the project's data, figures and tables live.

Paths are resolved from the project root (the folder holding ``pyproject.toml``
next to the ``moralkit`` package) and can be overridden with environment
variables, so notebooks run the same from JupyterLab, papermill or pytest.

==========================  ==================================  =======================
what                        default                             override
==========================  ==================================  =======================
committed data              ``<root>/data``                     ``MORALKIT_DATA_DIR``
figures (PNG, SVG)          ``<root>/figures``                  ``MORALKIT_FIGURES_DIR``
tables (CSV)                ``<figures>/tables``                ``MORALKIT_TABLES_DIR``
MoralChoice survey files    ``<root>/../shared/moralchoice``    ``MORALKIT_MORALCHOICE_DIR``
caches of pure computations none (no cache)                     ``MORALKIT_MEMO_DIR``
==========================  ==================================  =======================

``run_all.py`` sets ``MORALKIT_MEMO_DIR`` to ``<build>/memo`` for its notebooks (see :func:`memo_dir`).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["project_root", "data_dir", "figures_dir", "tables_dir", "moralchoice_dir", "memo_dir"]


def project_root() -> Path:
    """The project root (parent of the ``moralkit`` package in a source checkout)."""
    here = Path(__file__).resolve().parent.parent
    if (here / "pyproject.toml").exists():
        return here
    return Path.cwd()


def _dir(env: str, default: Path, create: bool) -> Path:
    p = Path(os.environ.get(env) or default)
    if create:
        p.mkdir(parents=True, exist_ok=True)
    return p


def data_dir() -> Path:
    return _dir("MORALKIT_DATA_DIR", project_root() / "data", create=False)


def figures_dir(create: bool = True) -> Path:
    return _dir("MORALKIT_FIGURES_DIR", project_root() / "figures", create)


def tables_dir(create: bool = True) -> Path:
    return _dir("MORALKIT_TABLES_DIR", figures_dir(create) / "tables", create)


def moralchoice_dir() -> Path | None:
    """The MoralChoice survey directory if one is available locally, else ``None``."""
    env = os.environ.get("MORALKIT_MORALCHOICE_DIR")
    if env:
        return Path(env)
    default = project_root().parent / "shared" / "moralchoice"
    return default if default.exists() else None


def memo_dir() -> Path | None:
    """Where results of pure computations may be kept between processes (``MORALKIT_MEMO_DIR``), or ``None``.

    Nothing is cached on disk unless the variable is set; ``run_all.py`` sets it to ``<build>/memo``,
    so that notebooks running side by side, and later runs, reuse what one of them computed
    (:mod:`moralkit.moralchoice.mapping`'s stems). Every cache file is keyed on what its results depend
    on, so a stale file is never read; deleting the folder is always safe.
    """
    env = os.environ.get("MORALKIT_MEMO_DIR")
    return Path(env) if env else None
