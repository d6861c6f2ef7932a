"""Saving figures: one function shared by every analysis module and notebook."""

from __future__ import annotations

from pathlib import Path

from .paths import figures_dir

__all__ = ["save_figure"]


def save_figure(fig, stem: str, directory=None) -> list[Path]:
    """Save ``fig`` as ``<stem>.png`` (150 dpi) and ``<stem>.svg``.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    stem : str
        File name without extension; notebooks prefix it with their number (``"04_fig3_similarity"``).
    directory : path-like, optional
        Default :func:`moralkit.paths.figures_dir` (``figures/`` or ``MORALKIT_FIGURES_DIR``).

    Returns
    -------
    list of Path
        The PNG and SVG paths.
    """
    d = Path(directory) if directory is not None else figures_dir()
    d.mkdir(parents=True, exist_ok=True)
    out = []
    for ext in ("png", "svg"):
        p = d / f"{stem}.{ext}"
        fig.savefig(p, dpi=150 if ext == "png" else None, bbox_inches="tight")
        out.append(p)
    return out
