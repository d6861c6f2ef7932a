"""Figures 3-8 of MoralChoice (matplotlib). Every function returns the Figure.

References
----------
Scherrer et al. (2023), Figures 3 (marginal action likelihoods), 4 (QF-E vs
1 - QF-C), 5 (agreement clustering), 6-8 (invalid and refusal rates).
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..checks import check_choice
from .analysis import CERTAINTY_THRESHOLD, CONSISTENCY_THRESHOLD

__all__ = [
    "short_model_name",
    "plot_marginal_likelihoods",
    "plot_consistency_certainty",
    "plot_agreement_clustering",
    "plot_answer_rates",
]


def short_model_name(model: str) -> str:
    """The respondent's short label (:func:`moralkit.respondents.short_label`) when it is in the registry, else
    the last path component of a provider path (``together/deepseek-ai/DeepSeek-V3`` -> ``DeepSeek-V3``).

    Examples
    --------
    >>> short_model_name("qwen2.5-coder-1.5b-instruct (exact)"), short_model_name("acme/lab/model-x")
    ('Q1.5B ex', 'model-x')
    """
    from ..respondents import REGISTRY, short_label

    if str(model).removesuffix(" (exact)") in REGISTRY:
        return short_label(model)
    return str(model).rstrip("/").split("/")[-1]




def plot_marginal_likelihoods(metrics_by_set: dict, action: str = "action1", models=None, bins: int = 10):
    """Figure 3: distribution over scenarios of each model's marginal likelihood of ``action``.

    One panel per scenario set (e.g. ``{"low": metrics_low, "high": metrics_high}``);
    a set that is ``None`` or empty is drawn as an empty panel that says so.
    Each model is one row of a horizontal stacked bar: the share of scenarios
    whose marginal likelihood falls in each of ``bins`` equal bins of [0, 1]
    (dark = likelihood of ``action`` near 1).

    References
    ----------
    Scherrer et al. (2023), Figure 3, Section 4.1.
    """
    sets = list(metrics_by_set.items())
    n_models = max([m["model"].nunique() for _, m in sets if m is not None and len(m)] or [1])
    fig, axes = plt.subplots(len(sets), 1, figsize=(8, 1.2 + 0.45 * n_models * len(sets) + 0.6 * len(sets)),
                             squeeze=False)
    edges = np.linspace(0, 1, bins + 1)
    cmap = plt.get_cmap("RdBu_r")
    for ax, (name, m) in zip(axes[:, 0], sets):
        ax.set_title(f"{name}-ambiguity scenarios" if name in ("low", "high") else str(name))
        if m is None or len(m) == 0:
            ax.text(0.5, 0.5, "no responses available", ha="center", va="center", transform=ax.transAxes)
            ax.set_xticks([])
            ax.set_yticks([])
            continue
        present = set(m["model"].unique())
        order = [x for x in (models or sorted(present)) if x in present]
        for i, model in enumerate(order):
            p = m.loc[m["model"] == model, f"p_{action}"].to_numpy()
            counts = np.histogram(np.clip(p, 0, 1), bins=edges)[0] / len(p)
            left = 0.0
            for b, c in enumerate(counts):
                ax.barh(i, c, left=left, color=cmap((b + 0.5) / bins), edgecolor="none", height=0.8)
                left += c
        ax.set_yticks(range(len(order)), [short_model_name(x) for x in order])
        ax.invert_yaxis()
        ax.set_xlim(0, 1)
        ax.set_xlabel("share of scenarios")
    sm = plt.cm.ScalarMappable(cmap=cmap, norm=plt.Normalize(0, 1))
    fig.colorbar(sm, ax=axes[:, 0].tolist(), label=f"marginal likelihood of {action}", fraction=0.04)
    return fig


def plot_consistency_certainty(
    summaries: dict,
    certainty_threshold: float = CERTAINTY_THRESHOLD,
    consistency_threshold: float = CONSISTENCY_THRESHOLD,
    base: float = 2,
):
    """Figure 4: QF-E (x) against 1 - QF-C (y), one point per model, one panel per scenario set.

    Dotted lines: certainty threshold (QF-E = 0.7) and consistency threshold
    (QF-C = 0.6, i.e. 1 - QF-C = 0.4); the grey region holds the consistent and
    certain models; the black dot is a model choosing at random (every form
    50/50: QF-E = log 2, QF-C = 1).

    Parameters
    ----------
    summaries : dict name -> DataFrame
        :func:`model_summary` outputs (``None``/empty: panel says so). A model whose
        ``estimator`` is not ``"sampling"`` (exact token probabilities) is drawn hollow.
    base : float, default 2
        Logarithm base the metrics were computed with (sets the random point).

    References
    ----------
    Scherrer et al. (2023), Figure 4, Section 4.2.
    """
    items = list(summaries.items())
    # one colour and marker per model, the same in every panel, named once in a shared legend
    models = sorted({m for _, s in items if s is not None for m in s.index})
    colours = plt.get_cmap("tab10" if len(models) <= 10 else "tab20")
    markers = "osD^v<>pPX*h"
    style = {m: dict(color=colours(i % colours.N), marker=markers[i % len(markers)]) for i, m in enumerate(models)}
    fig, axes = plt.subplots(1, len(items), figsize=(5.2 * len(items), 4.6), squeeze=False)
    hmax = math.log(2) / math.log(base)
    handles = {}
    for ax, (name, s) in zip(axes[0], items):
        ax.set_title(f"{name}-ambiguity scenarios" if name in ("low", "high") else str(name))
        ax.set_xlim(-0.03 * hmax, 1.05 * hmax)
        ax.set_ylim(-0.03, 1.0)
        ax.fill_between([0, certainty_threshold], 0, 1 - consistency_threshold, color="0.9", zorder=0)
        ax.axvline(certainty_threshold, ls=":", color="0.3")
        ax.axhline(1 - consistency_threshold, ls=":", color="0.3")
        (h,) = ax.plot([hmax], [0], "o", color="black", ms=8, ls="none")
        handles.setdefault("random choice", h)
        ax.set_xlabel("QF-E (uncertainty)")
        ax.set_ylabel("1 - QF-C (inconsistency)")
        if s is None or len(s) == 0:
            ax.text(0.5, 0.5, "no responses available", ha="center", va="center", transform=ax.transAxes)
            continue
        for model, row in s.iterrows():
            hollow = str(row.get("estimator", "sampling")) != "sampling"  # token probabilities: hollow marker
            (h,) = ax.plot(row["qf_entropy"], row["inconsistency"], ms=7, alpha=0.85, ls="none",
                           **style[model], **(dict(markerfacecolor="none", markeredgewidth=1.5) if hollow else {}))
            handles.setdefault(short_model_name(model), h)
    fig.tight_layout()
    ncol = min(5, max(1, len(handles)))
    fig.legend(list(handles.values()), list(handles), loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=ncol,
               fontsize=10, frameon=False)
    return fig


def plot_agreement_clustering(cluster: dict, title: str | None = None):
    """Figure 5: dendrogram and heatmap of the Pearson correlations, leaves optimally ordered.

    Parameters
    ----------
    cluster : dict
        :func:`moralkit.moralchoice.cluster_models` output.

    References
    ----------
    Scherrer et al. (2023), Figure 5, Section 4.3.
    """
    corr = cluster["corr"]
    n = len(corr)
    fig = plt.figure(figsize=(2.5 + 0.6 * n, 2.0 + 0.6 * n))
    ax_d = fig.add_axes([0.25, 0.78, 0.6, 0.17])
    ax_h = fig.add_axes([0.25, 0.1, 0.6, 0.66])
    ax_c = fig.add_axes([0.87, 0.1, 0.025, 0.66])
    from scipy.cluster import hierarchy  # here, not at import (import time of every notebook)

    hierarchy.dendrogram(cluster["linkage"], ax=ax_d, no_labels=True, color_threshold=None,
                         above_threshold_color="0.3")
    ax_d.set_xticks([])
    ax_d.set_yticks([])
    for sp in ax_d.spines.values():
        sp.set_visible(False)
    im = ax_h.imshow(corr.to_numpy(), vmin=-1, vmax=1, cmap="RdBu_r", aspect="auto")
    labels = [short_model_name(m) for m in corr.index]
    ax_h.set_xticks(range(n), labels, rotation=60, ha="right", fontsize=8)
    ax_h.set_yticks(range(n), labels, fontsize=8)
    for i in range(n):
        for j in range(n):
            v = corr.iat[i, j]
            ax_h.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7,
                      color="white" if abs(v) > 0.6 else "black")
    fig.colorbar(im, cax=ax_c, label="Pearson correlation of marginal likelihoods")
    if title:
        ax_d.set_title(title)
    return fig


def plot_answer_rates(rates: pd.DataFrame, kind: str = "invalid", reference: float = 0.01, title: str | None = None):
    """Figures 6-8: rate of invalid or refusing answers per model, with a reference line (1 %).

    Parameters
    ----------
    rates : DataFrame
        :func:`moralkit.moralchoice.answer_rates` output.
    kind : {"invalid", "refusal"}

    References
    ----------
    Scherrer et al. (2023), Appendix D.1, Figures 6-8.
    """
    check_choice(kind, ("invalid", "refusal"), "kind")
    fig, ax = plt.subplots(figsize=(7, 0.8 + 0.35 * max(len(rates), 1)))
    if len(rates) == 0:
        ax.text(0.5, 0.5, "no responses available", ha="center", va="center", transform=ax.transAxes)
        return fig
    y = np.arange(len(rates))
    vals = 100 * rates[kind].to_numpy()
    ax.barh(y, vals, color="tab:red" if kind == "refusal" else "tab:gray")
    for yi, v in zip(y, vals):
        ax.text(v, yi, f" {v:.2f}%", va="center", fontsize=7)
    ax.axvline(100 * reference, ls=":", color="red")
    ax.set_yticks(y, [short_model_name(m) for m in rates.index])
    ax.invert_yaxis()
    ax.set_xlabel(f"{kind} answers (%)")
    ax.set_xlim(0, max(100 * rates[kind].max() * 1.15, 100 * reference * 2))
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig
