"""How far the similarity matrix G can agree with itself -- simulated agents, not LLM answers.

Two simulations of the same calibrated agents (:mod:`moralkit.studies.calibration`,
:func:`moralkit.studies.replication.redraws`) bound what any comparison of a simulated G with the
published Table 3 can show. :func:`g_power` measures that bound (the correlation between simulations,
the power of their Mantel tests, and where Table 3 falls among them); :func:`plot_power` draws it.

References
----------
Seror (2025), Section 3.3, Table 3. Mantel, N. (1967), The detection of disease clustering and a
generalized regression approach.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import MoralkitError
from ..psm import reference

__all__ = ["g_power", "power_table", "plot_power", "POWER_COLUMNS"]

#: The columns of :func:`power_table`, in order.
POWER_COLUMNS = ("n_simulations", "n_pairs", "mean", "sd", "min", "q05", "q25", "median", "q75", "q95", "max",
                 "power", "published_mean", "published_percentile", "published_rank_p")


def g_power(Gs: dict, G_pub: pd.DataFrame | None = None, *, level: float = 0.05) -> dict:
    """How far G can agree with itself: the correlation between independent simulations, and Table 3 in it.

    If the published utilities (Table 2) and noise levels (Table 1) were all there is to the
    published network, Table 3 would be one more draw from the same process as the simulations.
    Two simulations of the same agents then bound what any comparison with Table 3 can show: if
    they barely correlate with each other, a weak correlation with Table 3 is no evidence against
    the agents, and a strong one no evidence for them.

    Parameters
    ----------
    Gs : dict {k: DataFrame}
        Simulated G of the same agents (:func:`moralkit.studies.replication.redraws`), Table 3's short names.
    G_pub : DataFrame, optional
        Default :func:`moralkit.psm.reference.published_table3`.
    level : float, default 0.05
        Level of the Mantel tests counted in ``power``.

    Returns
    -------
    dict
        ``pairs`` (DataFrame: one row per pair of simulations, ``spearman`` and exact Mantel
        ``mantel_p``); ``published`` (DataFrame: one row per simulation, its ``spearman`` with
        Table 3 and ``loo_mean``, its mean Spearman with the other simulations); ``summary``
        (dict: ``n_simulations``, ``n_pairs``, ``mean``, ``sd``, ``min``, ``q05``, ``q25``,
        ``median``, ``q75``, ``q95``, ``max`` of the simulation-simulation Spearman; ``power``, the
        share of those pairs whose Mantel test rejects at ``level``; ``published_mean``, the mean
        Spearman of Table 3 with the simulations; ``published_percentile``, its percentile among
        the simulations' leave-one-out means (ties count half): about 50 when Table 3 behaves like
        one more simulation; ``published_rank_p``, the share of simulations whose leave-one-out
        mean is at most Table 3's (a one-sided test that Table 3 agrees *less* with the agents
        than their own simulations do)).

    Examples
    --------
    >>> from moralkit.psm.reference import published_table3
    >>> pub = published_table3()
    >>> out = g_power({0: pub, 1: pub, 2: pub.T})
    >>> round(out["summary"]["mean"], 6), out["summary"]["n_pairs"]
    (1.0, 3)

    References
    ----------
    Seror (2025), Section 3.3, Table 3. Mantel (1967).
    """
    from scipy.stats import rankdata

    pub = reference.published_table3() if G_pub is None else G_pub
    names = list(pub.index)
    keys = list(Gs)
    if len(keys) < 2:
        raise MoralkitError(f"g_power needs at least 2 simulations, got {len(keys)}")
    iu = np.triu_indices(len(names), 1)
    vec = {k: Gs[k].loc[names, names].to_numpy(dtype=float)[iu] for k in keys}
    y = pub.to_numpy(dtype=float)[iu]
    P = _relabellings(len(names), iu)
    ranks = {k: rankdata(vec[k]) for k in keys}
    rows = []
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            r = _spearman(vec[a], vec[b])
            p = np.nan if np.isnan(r) else float(np.sum(_unit(ranks[b][P]) @ _unit(ranks[a]) >= r - 1e-12) / len(P))
            rows.append({"sim_a": a, "sim_b": b, "spearman": r, "mantel_p": p})
    pairs = pd.DataFrame(rows)
    R = pd.DataFrame(np.nan, index=keys, columns=keys)
    for r in rows:
        R.loc[r["sim_a"], r["sim_b"]] = R.loc[r["sim_b"], r["sim_a"]] = r["spearman"]
    pub_r = pd.Series({k: _spearman(vec[k], y) for k in keys})
    loo = R.mean(axis=1, skipna=True)
    published = pd.DataFrame({"simulation": keys, "spearman": pub_r.to_numpy(), "loo_mean": loo.to_numpy()})
    return {"pairs": pairs, "published": published, "summary": _power_summary(pairs, pub_r, loo, level)}


def _spearman(a, b) -> float:
    from scipy.stats import spearmanr

    return np.nan if np.ptp(a) == 0 or np.ptp(b) == 0 else float(spearmanr(a, b).statistic)


def _relabellings(n: int, iu) -> np.ndarray:
    """(n!, pairs): the entry of the upper triangle each relabelling of the n models puts at each pair.

    The exact Mantel tests of every pair at once, as :func:`moralkit.studies.crossmethod.mantel_test`
    computes them: a relabelling permutes the ranks of the upper triangle; the p-value counts the
    relabellings whose correlation reaches the observed one."""
    import itertools

    perms = np.array(list(itertools.permutations(range(n))), dtype=np.int64)
    pos = np.full((n, n), -1)
    pos[iu] = np.arange(len(iu[0]))
    pos = np.maximum(pos, pos.T)
    return pos[perms[:, iu[0]], perms[:, iu[1]]]


def _unit(v):
    c = v - v.mean(axis=-1, keepdims=True)
    return c / np.sqrt((c ** 2).sum(axis=-1, keepdims=True))


def _power_summary(pairs: pd.DataFrame, pub_r: pd.Series, loo: pd.Series, level: float) -> dict:
    """The ``summary`` of :func:`g_power`: the spread of the simulation-simulation Spearman, the power of
    the Mantel tests, and where Table 3's mean correlation falls among the leave-one-out means."""
    s = pairs["spearman"].dropna().to_numpy()
    pm = float(pub_r.mean())
    lv = loo.to_numpy()
    return {"n_simulations": len(pub_r), "n_pairs": int(len(s)), "mean": float(s.mean()),
            "sd": float(s.std(ddof=1)) if len(s) > 1 else np.nan, "min": float(s.min()), "max": float(s.max()),
            **{k: float(np.quantile(s, q)) for k, q in (("q05", .05), ("q25", .25), ("median", .5), ("q75", .75),
                                                         ("q95", .95))},
            "power": float((pairs["mantel_p"].dropna() <= level).mean()), "level": float(level),
            "published_mean": pm,
            "published_percentile": float(100 * ((lv < pm).sum() + 0.5 * (lv == pm).sum()) / len(lv)),
            "published_rank_p": float(((lv <= pm).sum() + 1) / (len(lv) + 1))}


def power_table(powers: dict) -> pd.DataFrame:
    """One row per :func:`g_power` output (``{row label: output}``; ``None`` values are left out).

    Columns :data:`POWER_COLUMNS`: the spread of the simulation-simulation Spearman, the Mantel power
    and where Table 3 falls among the simulations.

    Examples
    --------
    >>> from moralkit.psm.reference import published_table3
    >>> pub = published_table3()
    >>> t = power_table({"copies": g_power({0: pub, 1: pub}), "none": None})
    >>> list(t.index), float(t.loc["copies", "mean"])
    (['copies'], 1.0)
    """
    rows = {k: v["summary"] for k, v in powers.items() if v is not None}
    return pd.DataFrame(rows).T[list(POWER_COLUMNS)]


def plot_power(power: dict, other: dict | None = None, labels=("redrawn answers", "recalibrated"), ax=None):
    """Histogram of the Spearman correlation between independent simulations of the same agents, with
    Table 3's mean correlation with them (:func:`g_power` output; ``other``: a second one). Simulated agents.

    Draws on ``ax`` (default: a new figure) and returns the axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 4.8))
    bins = np.linspace(-1, 1, 21)
    for pw, lab, col in ((power, labels[0], "tab:blue"), (other, labels[1], "tab:orange")):
        if pw is None:
            continue
        s = pw["summary"]
        ax.hist(pw["pairs"]["spearman"].dropna(), bins=bins, alpha=0.55, color=col,
                label=f"simulation vs simulation, {lab} ({s['n_pairs']} pairs, mean {s['mean']:.2f})")
        ax.axvline(s["published_mean"], color=col, ls="--", lw=1.5,
                   label=f"Table 3 vs these simulations, mean {s['published_mean']:.2f} "
                         f"(percentile {s['published_percentile']:.0f} of their own)")
    ax.set_xlabel("Spearman correlation of the off-diagonal G")
    ax.set_ylabel("pairs of simulations")
    ax.set_title("SIMULATED: how well G agrees with itself (the same calibrated agents)", fontsize=10)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), frameon=False)  # below: no bar hidden
    ax.figure.tight_layout()
    return ax
