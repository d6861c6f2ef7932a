"""Figures of the cross-method study (:mod:`moralkit.studies.crossmethod`): the two structures side by side
and the smallest p-value an exact Mantel test can reach.

References
----------
Seror (2025), Section 2.4 (eq. (6)); Scherrer et al. (2023), Section 4.3; Mantel (1967).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .crossmethod import CrossMethodResult, min_pvalue

__all__ = ["label_groups", "plot_cross_method", "plot_min_pvalue"]


def label_groups(pairs: pd.DataFrame, index: dict, xspan: float, yspan: float, tol: float = 0.08):
    """Pairs whose points lie within ``tol`` of the axes' spans of each other share one label."""
    groups: list[tuple[tuple[float, float], list[str]]] = []
    for r in pairs.sort_values(["moralchoice_corr", "psm_G"], ascending=[False, True]).itertuples():
        x, y, lab = float(r.psm_G), float(r.moralchoice_corr), f"{index[r.model_1]}–{index[r.model_2]}"
        for (gx, gy), labels in groups:
            if abs(gx - x) <= tol * xspan and abs(gy - y) <= tol * yspan:
                labels.append(lab)
                break
        else:
            groups.append(((x, y), [lab]))
    return groups


def plot_cross_method(res: CrossMethodResult, title: str | None = None):
    """Two heatmaps side by side (PSM G, MoralChoice correlation; same model order), the pairs' scatter below.

    Models are numbered 1..n: the heatmaps' rows carry the full names, their columns and the scatter's
    points the numbers, so no name is cut. Two rows rather than three panels in a line, so that the figure
    stays legible at the width of a page.
    """
    import matplotlib.pyplot as plt

    n = len(res.models)
    num = [str(i + 1) for i in range(n)]
    h = max(3.4, 0.45 * n)
    fig, ax_d = plt.subplot_mosaic([["G", "C"], ["S", "S"]], figsize=(11, 2.4 + h + 4.2), layout="constrained",
                                   gridspec_kw={"height_ratios": [h, 4.2]})
    axes = [ax_d["G"], ax_d["C"], ax_d["S"]]
    for k, (ax, M, lab, cmap, lim) in enumerate((
            (axes[0], res.G, "PSM similarity G (eq. 6)", "viridis", (0, 1)),
            (axes[1], res.C, "MoralChoice agreement (corr. of p(action))", "RdBu_r", (-1, 1)))):
        im = ax.imshow(M.to_numpy(dtype=float), cmap=cmap, vmin=lim[0], vmax=lim[1])
        ax.set_xticks(range(n), num, fontsize=8)
        ax.set_yticks(range(n), [f"{str(m)} {i}" for i, m in zip(num, res.models)] if k == 0 else num, fontsize=8)
        for i in range(n):
            for j in range(n):
                v = float(M.iloc[i, j])
                r, g, b, _ = im.cmap(im.norm(v))
                ink = "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.55 else "white"
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=8, color=ink)
        ax.set_title(lab, fontsize=9)
        fig.colorbar(im, ax=ax, shrink=0.8)
    p = res.pairs()
    ax = axes[2]
    ax.scatter(p["psm_G"], p["moralchoice_corr"])
    index = {m: i + 1 for i, m in enumerate(res.models)}
    g = p["psm_G"].to_numpy(dtype=float)
    lo, hi = (float(g.min()), float(g.max())) if len(g) else (0.0, 1.0)
    zoomed = hi - lo < 0.25  # G bunched together: zoom the axis so that the pairs can be told apart
    if zoomed:
        pad = max(0.01, 0.15 * (hi - lo))
        xlim = (max(-0.05, lo - pad), min(1.05, hi + pad))
    else:
        xlim = (-0.05, 1.08)
    ax.set_xlim(*xlim)
    ax.set_ylim(-1.08, 1.2)  # room for a label above a point at 1
    groups = sorted(label_groups(p, index, xlim[1] - xlim[0], 2.16), key=lambda t: (round(t[0][1], 1), t[0][0]))
    for k, ((x, y), labels) in enumerate(groups):
        text = "\n".join(", ".join(labels[i:i + 3]) for i in range(0, len(labels), 3))
        below = k % 2 == 0  # neighbours along G alternate below / above their points
        ax.annotate(text, (x, y), fontsize=7, xytext=(3, -6 if below else 6), textcoords="offset points",
                    va="top" if below else "bottom")
    ax.set_xlabel("PSM G (pair i–j)" + ("; axis zoomed to the data" if zoomed else ""))
    ax.set_ylabel("MoralChoice correlation")
    if res.mantel is not None:
        m = res.mantel
        ax.set_title(f"Mantel {m.method} r = {m.statistic:.2f}, p = {m.pvalue:.3f} "
                     f"({'exact' if m.exact else 'MC'}, n = {m.n})", fontsize=9)
    else:
        ax.set_title("no Mantel test (fewer than 3 common models)", fontsize=9)
    if title:
        fig.suptitle(title)
    return fig


def plot_min_pvalue(max_models: int = 9, levels=(0.05, 0.01), ax=None):
    """Smallest attainable Mantel p-value (1/n!) against the number of models, with the usual levels."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.5))
    n = np.arange(2, int(max_models) + 1)
    ax.semilogy(n, [min_pvalue(k) for k in n], marker="o", label="smallest p = 1/n!")
    for lv in levels:
        ax.axhline(lv, ls="--", lw=1, color="0.5")
        ax.text(n[-1], lv, f" {lv:g}", va="bottom", ha="right", fontsize=8)
    ax.set_xlabel("number of models answering both surveys")
    ax.set_ylabel("smallest attainable p-value")
    ax.set_title("Exact Mantel test: attainable significance", fontsize=10)
    ax.legend(fontsize=8)
    return ax
