"""Networks of the permutation approach: H^alpha, Table 3, the Section 3.3 statistics, Figures 3-4.

Everything here takes a similarity matrix G (eq. (6)): the one
:func:`moralkit.psm.permutation.permutation_study` estimates, or a published
one (:func:`moralkit.psm.reference.published_table3`). ``H^alpha`` links m and
w when ``G[m, w] >= 1 - alpha``.

References
----------
Seror, A. (2025). *The Moral Mind(s) of Large Language Models*, Section 2.4
(H^alpha), Section 3.3 (alpha = 0.65, 0.70, 0.75; Table 3; Figures 3-4).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ..errors import MoralkitError

__all__ = [
    "PAPER_ALPHAS",
    "similarity_graph",
    "threshold_graph",
    "similarity_summary",
    "similarity_summary_table",
    "table3",
    "plot_similarity",
    "plot_networks",
]

#: Precision levels of H^alpha in the paper (Section 3.3).
PAPER_ALPHAS = (0.65, 0.70, 0.75)


# --------------------------------------------------------------------------- networks and tables


def _check_G(G) -> pd.DataFrame:
    if not isinstance(G, pd.DataFrame):
        G = pd.DataFrame(np.asarray(G, dtype=float))
    if G.shape[0] != G.shape[1] or G.shape[0] < 1:
        raise MoralkitError(f"G must be a square similarity matrix, got shape {G.shape}")
    return G


def _check_alpha(alpha) -> float:
    alpha = float(alpha)
    if not 0.0 < alpha < 1.0:
        raise MoralkitError(f"alpha (precision level) must be in (0, 1), got {alpha}; the paper uses 0.65, 0.70, 0.75")
    return alpha


def similarity_graph(G):
    """Weighted undirected graph of G: an edge ``m - w`` with ``weight = G[m, w]`` for m != w
    (edges of weight 0 are left out)."""
    import networkx as nx

    G = _check_G(G)
    g = nx.Graph()
    g.add_nodes_from(G.index)
    names = list(G.index)
    for i, m in enumerate(names):
        for j in range(i + 1, len(names)):
            w = float(G.iat[i, j])
            if w > 0:
                g.add_edge(m, names[j], weight=w)
    return g


def threshold_graph(G, alpha: float):
    """H^alpha: m and w are linked when ``G[m, w] >= 1 - alpha`` (Section 2.4)."""
    import networkx as nx

    G = _check_G(G)
    alpha = _check_alpha(alpha)
    g = nx.Graph(alpha=alpha)
    g.add_nodes_from(G.index)
    names = list(G.index)
    thr = 1.0 - alpha - 1e-12  # G is a share of T draws; guard against 0.35 stored as 0.3499999
    for i, m in enumerate(names):
        for j in range(i + 1, len(names)):
            if float(G.iat[i, j]) >= thr:
                g.add_edge(m, names[j], weight=float(G.iat[i, j]))
    return g


def similarity_summary(G, alphas: Sequence[float] = PAPER_ALPHAS) -> dict:
    """The statistics Section 3.3 quotes: range, mean and s.d. (population, ddof=0) of the
    off-diagonal G, the most and least similar pairs, and the connected components of each
    H^alpha."""
    import networkx as nx

    G = _check_G(G)
    n = G.shape[0]
    iu = np.triu_indices(n, 1)
    v = G.to_numpy()[iu]
    names = list(G.index)
    out = {"n_models": n}
    if len(v):
        out.update(min=float(v.min()), max=float(v.max()), mean=float(v.mean()), sd=float(v.std()),
                   least_similar=(names[iu[0][v.argmin()]], names[iu[1][v.argmin()]]),
                   most_similar=(names[iu[0][v.argmax()]], names[iu[1][v.argmax()]]))
    comps = {}
    for a in alphas:
        h = threshold_graph(G, a)
        cc = sorted((sorted(c) for c in nx.connected_components(h)), key=lambda c: (-len(c), c))
        comps[float(a)] = {"n_edges": h.number_of_edges(), "n_components": len(cc), "components": cc,
                           "isolated": sorted(nx.isolates(h))}
    out["H"] = comps
    return out


def similarity_summary_table(summaries: Mapping[str, dict]) -> pd.DataFrame:
    """:func:`similarity_summary` results side by side: one row per source (e.g. published, this run).

    Columns: the off-diagonal G's ``min``, ``max``, ``mean``, ``sd``, the ``most similar`` and
    ``least similar`` pairs, and per alpha the connected components of H^alpha, written
    ``{a, b} {c}`` (isolated models are components of one).

    Examples
    --------
    >>> G = pd.DataFrame([[1, .8, .1], [.8, 1, .2], [.1, .2, 1]], index=list("abc"), columns=list("abc"))
    >>> similarity_summary_table({"x": similarity_summary(G, [0.75])}).loc["x", "H^0.75 components"]
    '{a, b} {c}'
    """
    rows = {}
    for name, s in summaries.items():
        row = {k: s[k] for k in ("min", "max", "mean", "sd") if k in s}
        for k in ("most_similar", "least_similar"):
            if k in s:
                row[k.replace("_", " ")] = " - ".join(s[k])
        for a, h in s["H"].items():
            row[f"H^{a:.2f} components"] = " ".join("{" + ", ".join(c) + "}" for c in h["components"])
        rows[name] = row
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "source"
    return out


def table3(G, short_names: Mapping[str, str] | None = None, decimals: int = 2) -> pd.DataFrame:
    """Table 3: the probabilistic network matrix G, rounded, with optional short names."""
    G = _check_G(G).copy()
    if short_names:
        G = G.rename(index=dict(short_names), columns=dict(short_names))
    return G.round(decimals)


# --------------------------------------------------------------------------- figures


def _colors(names):
    import matplotlib.pyplot as plt

    cmap = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")
    return {m: cmap(i % cmap.N) for i, m in enumerate(names)}


def plot_similarity(G, short_names: Mapping[str, str] | None = None, title=None):
    """Figure 3: heatmap of G (left) and the weighted network of G (right; darker = more similar).

    Returns the matplotlib Figure.
    """
    import matplotlib.pyplot as plt
    import networkx as nx

    G = _check_G(G)
    lab = [short_names.get(m, m) if short_names else m for m in G.index]
    num = [str(i + 1) for i in range(len(lab))]  # the network's nodes carry numbers, the heatmap the names
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 1.4 + max(4.2, 0.5 * len(lab))), layout="constrained",
                                 gridspec_kw={"width_ratios": [1.1, 1]})
    im = a1.imshow(G.to_numpy(), cmap="Blues", vmin=0, vmax=1)
    a1.set_xticks(range(len(lab)), num)
    a1.set_yticks(range(len(lab)), [f"{name} {k}" for name, k in zip(lab, num)])
    for i in range(len(lab)):
        for j in range(len(lab)):
            val = G.iat[i, j]
            a1.text(j, i, f"{val:.2f}", ha="center", va="center", fontsize=8,
                    color="white" if val > 0.6 else "black")
    fig.colorbar(im, ax=a1, fraction=0.046, pad=0.04, label="$G_{m,w}$")
    a1.set_title("Similarity matrix $G$ (eq. 6)")
    g = similarity_graph(G)
    pos = nx.circular_layout(list(G.index))
    w = np.array([d["weight"] for _, _, d in g.edges(data=True)]) if g.number_of_edges() else np.array([])
    from matplotlib.colors import ListedColormap

    cmap = ListedColormap(plt.get_cmap("Blues")(np.linspace(0.3, 1.0, 256)))  # lightest edges stay visible
    if len(w):
        lo, hi = float(w.min()), float(w.max())
        norm = plt.Normalize(lo, hi if hi > lo else lo + 1e-9)
        nx.draw_networkx_edges(g, pos, ax=a2, edge_color=[cmap(norm(x)) for x in w],
                               width=1 + 5 * (w - w.min()) / (np.ptp(w) + 1e-9))
        sm = plt.cm.ScalarMappable(cmap=cmap, norm=norm)
        fig.colorbar(sm, ax=a2, fraction=0.046, pad=0.04, label="$G_{m,w}$")
    nx.draw_networkx_nodes(g, pos, ax=a2, node_color="#dddddd", edgecolors="black", node_size=500)
    nx.draw_networkx_labels(g, pos, ax=a2, labels=dict(zip(G.index, num)), font_size=9)
    a2.set_title("Weighted network of $G$ (nodes numbered as the rows)")
    a2.set_xlim(-1.3, 1.3)
    a2.set_ylim(-1.3, 1.3)
    a2.set_aspect("equal")
    a2.axis("off")
    if title:
        fig.suptitle(title)
    return fig


def plot_networks(G, alphas: Sequence[float] = PAPER_ALPHAS, short_names: Mapping[str, str] | None = None,
                  title=None):
    """Figure 4: one panel per H^alpha (in decreasing alpha, as the paper), a colour per model and a
    legend. Returns the matplotlib Figure."""
    import matplotlib.pyplot as plt
    import networkx as nx
    from matplotlib.lines import Line2D

    G = _check_G(G)
    alphas = sorted((_check_alpha(a) for a in alphas), reverse=True)
    names = list(G.index)
    col = _colors(names)
    pos = nx.circular_layout(names)
    # the legend goes below the panels (never over a node), in type as large as the titles: nodes are
    # numbered and the legend maps each number and colour to the model
    label = {m: (short_names.get(m, m) if short_names else m) for m in names}
    ncol = 3 if max(len(v) for v in label.values()) <= 24 else 2
    legend_rows = -(-len(names) // ncol)
    legend_h = 0.45 + 0.3 * legend_rows
    width, panel_h = 4.2 * len(alphas), 4.4
    fig, axes = plt.subplots(1, len(alphas), figsize=(width, panel_h + legend_h), squeeze=False)
    for k, (ax, a) in enumerate(zip(axes[0], alphas)):
        h = threshold_graph(G, a)
        nx.draw_networkx_edges(h, pos, ax=ax, width=2, edge_color="#555555")
        nx.draw_networkx_nodes(h, pos, ax=ax, node_color=[col[m] for m in names], edgecolors="black",
                               node_size=420)
        nx.draw_networkx_labels(h, pos, labels={m: str(i + 1) for i, m in enumerate(names)}, ax=ax, font_size=10,
                                font_weight="bold", bbox=dict(boxstyle="circle,pad=0.1", fc="white", ec="none",
                                                              alpha=0.8))
        ax.set_title(f"({chr(97 + k)}) $H^{{{a:.2f}}}$: link if $G_{{m,w}} \\geq {1 - a:.2f}$", fontsize=12)
        ax.set_xlim(-1.3, 1.3)
        ax.set_ylim(-1.3, 1.3)
        ax.axis("off")
    handles = [Line2D([], [], marker="o", ls="", markersize=11, markerfacecolor=col[m], markeredgecolor="black",
                      label=f"{i + 1}  {label[m]}") for i, m in enumerate(names)]
    fig.legend(handles=handles, loc="lower center", ncol=ncol, title="Model", frameon=False, fontsize=11,
               title_fontsize=11, columnspacing=2.0)
    if title:
        fig.suptitle(title, fontsize=13)
    fig.tight_layout(rect=(0, legend_h / (panel_h + legend_h), 1, 1))
    return fig


