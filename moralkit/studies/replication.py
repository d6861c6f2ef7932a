"""A paper-calibrated replication of Section 3.3 -- a SIMULATION, not LLM answers.

Question: *does the parametric heterogeneity the paper publishes (Table 2)
explain the similarity network it publishes (Table 3)?* The raw LLM answers
behind the paper are not public, so the question is asked of simulated
respondents built from the published numbers:

1. **Agents** (:func:`moralkit.studies.calibration.paper_agents`). Each of the seven models of Tables 2-3
   becomes a simulated quadratic-utility agent (eq. (7)) with its published
   weights ``a`` (Table 2 (b)) and ideal answers ``b`` (Table 2 (a)). Its
   round-0 answer is its best answer in ``X`` (it decides the corner flips).
   Every label starts with ``"sim-"`` and every dataset's provider is
   ``"simulated"``.
2. **Calibration** (:func:`moralkit.studies.calibration.calibrate`). Each agent answers the paper's design
   (:func:`moralkit.psm.design.make_design`) with logit noise of scale ``s``
   (option ``j`` chosen with probability proportional to ``exp(u_j / s)``), and
   leaves unanswered as many rounds as its Table 1 row lacks (``160 - n_obs``,
   the same rounds at every ``s``). For every ``s`` on a grid, ``n_reps``
   seeded replicates give the CCEI and its ``alpha`` (Procedure 1, eq. (4),
   against ``n_datasets`` uniformly random datasets on the agent's own option
   sets); the chosen ``s`` minimises the mean of ``|CCEI - CCEI_pub| +
   |alpha - alpha_pub|`` over the replicates, and the dataset kept is the
   replicate at that ``s`` closest to the published row. The error left is the
   **calibration error**. The index is the standard CCEI (corner coordinates,
   a multiple of 1/12): only under a convention in which passing the test means
   "more consistent than random choice", as the paper's text reads it, can a
   noisy utility maximiser reach the published ``alpha <= 0.05`` (under the
   ``origin/1-e`` reading of :mod:`moralkit.psm.indices` no noise level can:
   utility maximisers score *below* random choice there). The origin/1-e index
   of each calibrated dataset is reported beside it for comparison.
3. **Procedure 2 and the permutation study** (:func:`replicate`): T = 500
   synthetic datasets, rho = 20, e on the standard-CCEI scale (the paper's rule:
   the smallest CCEI among the simulated models passing at 5 %), exactly as
   :func:`moralkit.psm.permutation.permutation_study` runs it on real data.
4. **Comparison with Table 3** (:func:`compare_g`): correlation of the
   off-diagonal entries (Pearson, Spearman, and an exact Mantel test over the
   7! relabellings), mean absolute difference, mean, s.d. and range, and the
   connected components of every H^alpha, next to the published ones.

Nothing here is, or may be presented as, LLM output.

References
----------
Seror (2025), Section 2.3 (Procedure 1, eq. (4)), Section 2.4 (Procedure 2,
eq. (6), H^alpha), Section 3.2 (eq. (7), Table 2), Section 3.3 (T = 500,
rho = 20, e = 0.333, Table 3, Figures 3-4); Table 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import MoralkitError
from ..psm import reference
from ..psm.networks import threshold_graph
from ..psm.permutation import E_BELOW_CCEI, permutation_study, study_setup
from ..psm.random_choice import Table1
from ..psm.rationality import table1
from ..psm.simulate import logit_choices
from .calibration import NOISE_GRID, Calibration, calibrate, paper_agents, sim_label
from .crossmethod import mantel_test

__all__ = [
    "ReplicationResult",
    "Replications",
    "compare_g",
    "e_levels",
    "matched_alphas",
    "plot_g_comparison",
    "replicate",
    "redraws",
    "replications",
    "scan_e",
]

# --------------------------------------------------------------------------- comparison with Table 3


def _components(G: pd.DataFrame, alpha: float) -> list:
    import networkx as nx


    h = threshold_graph(G, alpha)
    return sorted((sorted(c) for c in nx.connected_components(h)), key=lambda c: (-len(c), c))


def compare_g(G_sim: pd.DataFrame, G_pub: pd.DataFrame | None = None, alphas: Sequence[float] = (0.65, 0.70, 0.75)):
    """Compare a simulated G with the published Table 3 (same models, short names).

    Parameters
    ----------
    G_sim : DataFrame (7, 7)
        Indexed by the published short names (:data:`moralkit.psm.reference.TABLE3_FULL_NAMES` keys) or
        by full names; it is relabelled to the short names.
    G_pub : DataFrame, optional
        Default :func:`moralkit.psm.reference.table3`.
    alphas : precision levels of H^alpha

    Returns
    -------
    stats : dict
        ``pearson``, ``spearman``, ``mantel_p`` (exact, one-sided "greater", 7! relabellings),
        ``mean_abs_diff``, ``max_abs_diff``, and ``mean``/``sd``/``min``/``max`` of both off-diagonals
        (``*_sim``, ``*_pub``).
    components : DataFrame
        One row per alpha: ``n_edges`` and connected components of H^alpha, simulated and published.

    References
    ----------
    Seror (2025), Section 3.3, Table 3, Figure 4. Mantel (1967).
    """
    from scipy.stats import pearsonr, spearmanr


    pub = reference.published_table3() if G_pub is None else G_pub
    full_to_short = {v: k for k, v in reference.TABLE3_FULL_NAMES.items()}
    ren = {m: full_to_short.get(m.removeprefix("sim-"), m) for m in G_sim.index}
    sim = G_sim.rename(index=ren, columns=ren)
    missing = set(pub.index) - set(sim.index)
    if missing:
        raise MoralkitError(f"G_sim lacks the published models {sorted(missing)}; label it with Table 3's models")
    sim = sim.loc[list(pub.index), list(pub.index)].astype(float)
    n = len(pub)
    iu = np.triu_indices(n, 1)
    x, y = sim.to_numpy()[iu], pub.to_numpy(dtype=float)[iu]
    const = np.ptp(x) == 0
    stats = {
        "pearson": np.nan if const else float(pearsonr(x, y).statistic),
        "spearman": np.nan if const else float(spearmanr(x, y).statistic),
        "mantel_p": np.nan if const else float(mantel_test(sim, pub).pvalue),
        "mean_abs_diff": float(np.abs(x - y).mean()),
        "max_abs_diff": float(np.abs(x - y).max()),
    }
    for tag, v in (("sim", x), ("pub", y)):
        stats.update({f"mean_{tag}": float(v.mean()), f"sd_{tag}": float(v.std()), f"min_{tag}": float(v.min()),
                      f"max_{tag}": float(v.max())})
    comp = []
    for a in sorted(alphas, reverse=True):
        comp.append({"alpha": float(a),
                         "n_edges_sim": threshold_graph(sim, a).number_of_edges(),
                         "n_edges_pub": threshold_graph(pub, a).number_of_edges(),
                         "components_sim": _components(sim, a), "components_pub": _components(pub, a)})
    return stats, pd.DataFrame(comp)


# --------------------------------------------------------------------------- the replication


def e_levels(k_min: int = 5, k_max: int = 8) -> list[float]:
    """The distinct rationality levels of Procedure 2 on the standard scale, from just below ``k_min/12``.

    Corner expenditures are integers and every chosen answer costs 12, so the
    relations of GARP_e only change at the multiples of 1/12. Each open interval
    ``((k-1)/12, k/12)`` is represented by ``k/12 - 1e-9``, the package's "just
    below the CCEI" rule (:data:`moralkit.psm.permutation.E_BELOW_CCEI`), for
    ``k = k_min .. k_max``.

    Examples
    --------
    >>> [round(e * 12, 6) for e in e_levels(5, 7)]
    [5.0, 6.0, 7.0]
    """

    return [k / 12 - E_BELOW_CCEI for k in range(int(k_min), int(k_max) + 1)]


def _short_g(G: pd.DataFrame) -> pd.DataFrame:
    ren = {sim_label(f): s for s, f in reference.TABLE3_FULL_NAMES.items()}
    pub = reference.published_table3()
    return G.rename(index=ren, columns=ren).loc[list(pub.index), list(pub.index)]


def scan_e(datasets, es: Sequence[float] | None = None, *, T: int = 100, rho: int = 20, seed: int = 0,
           n_jobs: int = 1) -> pd.DataFrame:
    """G against the rationality level e: one permutation study per e, compared with Table 3.

    Parameters
    ----------
    datasets : dict {sim label: PSMDataset}
        The calibrated simulated agents (:attr:`Calibration.datasets`).
    es : sequence of float, optional
        Default :func:`e_levels` (every distinct level from just below 5/12 to just below 8/12).
    T, rho, seed, n_jobs
        As in :func:`moralkit.psm.permutation.permutation_study`.

    Returns
    -------
    DataFrame
        One row per e: ``e``, ``mean_types`` and the :func:`compare_g` statistics.

    References
    ----------
    Seror (2025), Section 2.4 (the role of e) and Section 3.3.
    """

    rows = []
    for e in (e_levels() if es is None else es):
        st = permutation_study(datasets, float(e), T=int(T), rho=int(rho), seed=int(seed), n_jobs=n_jobs,
                               progress=False)
        stats, _ = compare_g(_short_g(st.G))
        rows.append({"e": float(e), "mean_types": float(st.n_types.mean()), **stats})
    return pd.DataFrame(rows)


@dataclass
class ReplicationResult:
    """Outcome of :func:`replicate` (simulated agents; see the module docstring).

    Attributes
    ----------
    calibration : Calibration
    table1 : Table1
        :func:`moralkit.psm.rationality.table1` of the calibrated simulated datasets.
    e_rule : float
        The paper's rule on the simulated data (standard-CCEI scale): just below the smallest CCEI
        among the simulated models passing at 5 %.
    e_matched : float
        The level of :func:`e_levels` whose mean off-diagonal G is closest to the published mean.
    scan : DataFrame
        :func:`scan_e` output.
    studies : dict {"rule": PermutationResult, "matched": PermutationResult}
        The two T = 500 permutation studies.
    G : dict {"rule": DataFrame, "matched": DataFrame}
        Their G with Table 3's short names and order.
    stats : dict {"rule": dict, "matched": dict}; components : dict {"rule": DataFrame, "matched": DataFrame}
        :func:`compare_g` output for each.
    """

    calibration: Calibration
    table1: Table1
    e_rule: float
    e_matched: float
    scan: pd.DataFrame
    studies: dict
    G: dict
    stats: dict
    components: dict

    def comparison(self, which: str = "matched") -> pd.DataFrame:
        """G simulated vs published, one row per model pair (short names)."""
        pub = reference.published_table3()
        names = list(pub.index)
        iu = np.triu_indices(len(names), 1)
        return pd.DataFrame({"pair": [f"{names[i]} - {names[j]}" for i, j in zip(*iu)],
                             "G_sim": self.G[which].to_numpy()[iu], "G_pub": pub.to_numpy(dtype=float)[iu]})

    def summary(self) -> pd.DataFrame:
        """One row per e (the paper's rule, the nearest level e): the comparison with Table 3."""
        rows = []
        for k, e in (("rule", self.e_rule), ("matched", self.e_matched)):
            rows.append({"e_choice": k, "e": e, "e_twelfths": e * 12, **self.stats[k]})
        return pd.DataFrame(rows).set_index("e_choice")

    def to_frame(self) -> pd.DataFrame:
        """:meth:`summary`: one row per e, the comparison with Table 3."""
        return self.summary()

    def plot(self, which: str = "matched", title: str | None = None):
        """:func:`plot_g_comparison` of the G at ``which`` (``"rule"`` or ``"matched"``); a figure."""
        return plot_g_comparison(self.G[which], title=title)

    def _repr_html_(self) -> str:
        return self.summary()._repr_html_()

    def __repr__(self) -> str:
        s = self.stats["matched"]
        return (f"<ReplicationResult (SIMULATED agents): e rule {self.e_rule:.4g}, e matched {self.e_matched:.4g}; "
                f"Spearman with Table 3 at the matched e {s['spearman']:.2f}, Mantel p {s['mantel_p']:.3g}>")


class Replications:
    """Independent simulated replications at one e (:func:`replications`); simulated agents.

    Attributes
    ----------
    G : dict {seed: DataFrame}
        Each simulation's G, with Table 3's short names and order.
    e : float
        The rationality level of every simulation (standard-CCEI scale).

    Methods
    -------
    to_frame()
        One row per seed: ``seed``, ``e``, the :func:`compare_g` statistics and the mean absolute
        calibration errors (``cal_abs_err_ccei``, ``cal_abs_err_alpha``).
    mean_G
        The average of the G (the G the published utilities and calibrated noise levels imply,
        with the luck of one simulation averaged out).
    plot(G_sim=None, title=None)
        :func:`plot_g_comparison` of ``G_sim`` (default :attr:`mean_G`) beside every simulation.

    Column access (``r["spearman"]``) and ``len(r)`` act on :meth:`to_frame`.
    """

    def __init__(self, frame: pd.DataFrame, G: dict, e: float):
        self._frame, self.G, self.e = frame, dict(G), float(e)

    def to_frame(self) -> pd.DataFrame:
        return self._frame.copy()

    @property
    def mean_G(self) -> pd.DataFrame | None:
        return sum(self.G.values()) / len(self.G) if self.G else None

    def plot(self, G_sim: pd.DataFrame | None = None, title: str | None = None):
        return plot_g_comparison(self.mean_G if G_sim is None else G_sim, self._frame, title=title)

    def __len__(self) -> int:
        return len(self._frame)

    def __getitem__(self, key):
        return self._frame[key]

    def _repr_html_(self) -> str:
        return self._frame._repr_html_()

    def __repr__(self) -> str:
        return f"<Replications (SIMULATED agents): {len(self)} simulations at e = {self.e:.4g}>"


def replicate(*, T: int = 500, rho: int = 20, T_scan: int = 100, es: Sequence[float] | None = None,
              noise_grid: Sequence[float] = NOISE_GRID, n_reps: int = 20, n_datasets: int = 1000, design=0,
              seed: int = 0, n_jobs: int = 1, progress: bool = False) -> ReplicationResult:
    """Calibrate the seven simulated agents, run the permutation study and compare G with Table 3.

    Two rationality levels are used, both on the standard-CCEI scale (the scale
    on which Procedure 2's relations are defined in Section 2.2):

    * ``"rule"`` -- the paper's rule (Section 3.3) applied to the simulated Table 1:
      just below the smallest CCEI among the simulated models passing at 5 %;
    * ``"matched"`` -- the level (of :func:`e_levels`, scanned with ``T_scan`` draws)
      whose mean off-diagonal G is closest to the published mean: the *level* of G
      is then fitted, and only its *pattern* is left to test.

    Parameters
    ----------
    T, rho : int, default 500 and 20
        The paper's permutation parameters (Section 3.3).
    T_scan : int, default 100
        Draws per level in the scan over e.
    es : sequence of float, optional
        Levels scanned (default :func:`e_levels`).
    noise_grid, n_reps, n_datasets, design, seed
        See :func:`calibrate`.
    n_jobs : int
        joblib workers of the permutation studies (results do not depend on it).

    Returns
    -------
    ReplicationResult

    Examples
    --------
    >>> res = replicate(T=10, T_scan=5, es=[0.5], n_reps=2, n_datasets=100, noise_grid=(0.5, 1.0))
    >>> sorted(res.G)
    ['matched', 'rule']
    >>> res.G["rule"].shape
    (7, 7)

    References
    ----------
    Seror (2025), Sections 2.3-2.4 and 3.3; Tables 1-3.
    """

    cal = calibrate(noise_grid, n_reps=n_reps, n_datasets=n_datasets, design=design, seed=seed)
    t1 = table1(cal.datasets, n_datasets=n_datasets, seed=int(seed))
    _, e_rule, _ = study_setup(cal.datasets, t1)
    scan = scan_e(cal.datasets, es, T=T_scan, rho=rho, seed=seed, n_jobs=n_jobs)
    target = float(reference.published_table3().to_numpy()[np.triu_indices(7, 1)].mean())
    e_matched = float(scan.loc[(scan["mean_sim"] - target).abs().idxmin(), "e"])
    studies, G, stats, comps = {}, {}, {}, {}
    for k, e in (("rule", e_rule), ("matched", e_matched)):
        studies[k] = permutation_study(cal.datasets, e, T=int(T), rho=int(rho), seed=int(seed), n_jobs=n_jobs,
                                       progress=progress)
        G[k] = _short_g(studies[k].G)
        stats[k], comps[k] = compare_g(G[k])
    return ReplicationResult(calibration=cal, table1=t1, e_rule=float(e_rule), e_matched=e_matched, scan=scan,
                             studies=studies, G=G, stats=stats, components=comps)


def replications(seeds: Sequence[int], e: float, *, T: int = 500, rho: int = 20, n_jobs: int = 1,
                 **calibrate_kwargs) -> Replications:
    """Independent simulated replications at a fixed e: calibrate with each seed, run the study, compare.

    Returns
    -------
    Replications
        ``.to_frame()``: one row per seed, the :func:`compare_g` statistics and the mean absolute
        calibration errors; ``.G`` each seed's G (short names); ``.mean_G`` their average.
    """

    rows, Gs = [], {}
    for s in seeds:
        cal = calibrate(seed=int(s), **calibrate_kwargs)
        st = permutation_study(cal.datasets, float(e), T=int(T), rho=int(rho), seed=int(s), n_jobs=n_jobs,
                               progress=False)
        Gs[int(s)] = _short_g(st.G)
        stats, _ = compare_g(Gs[int(s)])
        ct = cal.table
        rows.append({"seed": int(s), "e": float(e), **stats, "cal_abs_err_ccei": float(ct["err_ccei"].abs().mean()),
                     "cal_abs_err_alpha": float(ct["err_alpha"].abs().mean())})
    return Replications(pd.DataFrame(rows), Gs, e)


def redraws(cal: Calibration, e: float, n: int, *, T: int = 500, rho: int = 20, seed: int = 0,
            n_jobs: int = 1) -> dict:
    """Independent simulations of the *same* calibrated agents: new answers, the same noise levels.

    Each simulation ``k`` redraws every agent's answers from its calibrated logit noise
    (:attr:`Calibration.table` ``noise``) on the rounds it answers in the kept dataset (the same
    design, the same unanswered rounds), then runs the permutation study at ``e``. Two simulations
    differ only by the luck of the answers and of the permutation draws, as two runs of the paper's
    study on the same models would.

    Parameters
    ----------
    cal : Calibration
    e : float
        Rationality level (standard-CCEI scale).
    n : int
        Number of simulations.
    T, rho, seed, n_jobs
        As in :func:`moralkit.psm.permutation.permutation_study`; simulation ``k`` uses the stream
        ``(seed, k)`` for the answers and for the permutation draws.

    Returns
    -------
    dict {k: DataFrame (7, 7)}
        Each simulation's G with Table 3's short names and order.

    References
    ----------
    Seror (2025), eq. (7), Section 3.3 (T = 500, rho = 20).
    """
    if int(n) < 2:
        raise MoralkitError(f"n must be at least 2 (two simulations to correlate), got {n!r}")
    agents = paper_agents()
    noise = cal.table.set_index("model")["noise"]
    out = {}
    for k in range(int(n)):
        ss = np.random.SeedSequence([int(seed), 28, k])
        rngs = [np.random.default_rng(c) for c in ss.spawn(len(agents))]
        data = {}
        for (model, ag), rng in zip(agents.items(), rngs):
            ds = cal.datasets[sim_label(model)]
            answered = ds.chosen > 0
            v = ds.valid()
            chosen = np.zeros(ds.n_rounds, dtype=np.int64)
            chosen[answered] = logit_choices(ag.utility(v.options), float(noise.loc[model]), rng) + 1
            data[sim_label(model)] = ds.with_choices(chosen)
        st = permutation_study(data, float(e), T=int(T), rho=int(rho), seed=int(ss.generate_state(1)[0]),
                               n_jobs=n_jobs, progress=False)
        out[k] = _short_g(st.G)
    return out


def matched_alphas(G_sim: pd.DataFrame, G_pub: pd.DataFrame | None = None,
                   alphas: Sequence[float] = (0.65, 0.70, 0.75)) -> list[float]:
    """Precision levels at which the simulated H^alpha has as many edges as the published H^alpha.

    For each published ``alpha`` with ``k`` edges, the returned level links the ``k`` most similar
    simulated pairs (``1 - `` the k-th largest off-diagonal G; ties may add edges). Drawing both networks
    with the same number of edges compares *which* pairs are linked when the levels of G differ.

    Examples
    --------
    >>> from moralkit.psm.reference import published_table3
    >>> [round(a, 2) for a in matched_alphas(published_table3())]
    [0.65, 0.7, 0.75]
    """

    pub = reference.published_table3() if G_pub is None else G_pub
    v = np.sort(G_sim.to_numpy(dtype=float)[np.triu_indices(len(G_sim), 1)])[::-1]
    out = []
    for a in alphas:
        k = threshold_graph(pub, a).number_of_edges()
        thr = v[k - 1] if k >= 1 else v[0] + 1e-9
        out.append(float(min(max(1 - thr, 1e-9), 1 - 1e-9)))
    return out


# --------------------------------------------------------------------------- figures


def plot_g_comparison(G_sim: pd.DataFrame, reps: pd.DataFrame | None = None, title: str | None = None):
    """Left: simulated vs published G, one dot per model pair (short names); right: the rank correlation
    of every independent simulation (``reps`` from :func:`replications`). Simulated agents."""
    import matplotlib.pyplot as plt

    pub = reference.published_table3()
    names = list(pub.index)
    iu = np.triu_indices(len(names), 1)
    x, y = pub.to_numpy(dtype=float)[iu], G_sim.loc[names, names].to_numpy(dtype=float)[iu]
    ncol = 2 if reps is not None else 1
    fig, axes = plt.subplots(1, ncol, figsize=(6.2 * ncol, 5), squeeze=False)
    ax = axes[0, 0]
    llama = np.array(["llama3.2" in (names[i], names[j]) for i, j in zip(*iu)])
    ax.scatter(x[~llama], y[~llama], s=24, color="tab:blue", label="other pairs")
    ax.scatter(x[llama], y[llama], s=30, color="tab:red", marker="s", label="pairs with llama3.2 (the published outlier)")
    ax.legend(fontsize=8, loc="upper left")
    lo, hi = 0.0, max(1.0, float(y.max()))
    ax.plot([lo, hi], [lo, hi], color="0.7", lw=1)
    ax.set_xlabel("published G (Seror 2025, Table 3)")
    ax.set_ylabel("simulated G")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_title(title or "G per model pair: simulated vs published", fontsize=10)
    if reps is not None:
        ax = axes[0, 1]
        ax.bar(reps["seed"].astype(str), reps["spearman"], color=np.where(reps["mantel_p"] <= 0.05, "tab:green", "0.6"))
        ax.axhline(0, color="k", lw=0.8)
        ax.set_ylim(-1, 1)
        ax.set_xlabel("simulation seed")
        ax.set_ylabel("Spearman correlation with Table 3")
        ax.set_title("Independent simulations (green: Mantel p ≤ 0.05)", fontsize=10)
    fig.tight_layout()
    return fig
