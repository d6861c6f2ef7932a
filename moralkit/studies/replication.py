"""A paper-calibrated replication of Section 3.3 -- a SIMULATION, not LLM answers.

Question: *does the parametric heterogeneity the paper publishes (Table 2)
explain the similarity network it publishes (Table 3)?* The raw LLM answers
behind the paper are not public, so the question is asked of simulated
respondents built from the published numbers:

1. **Agents** (:func:`paper_agents`). Each of the seven models of Tables 2-3
   becomes a simulated quadratic-utility agent (eq. (7)) with its published
   weights ``a`` (Table 2 (b)) and ideal answers ``b`` (Table 2 (a)). Its
   round-0 answer is its best answer in ``X`` (it decides the corner flips).
   Every label starts with ``"sim-"`` and every dataset's provider is
   ``"simulated"``.
2. **Calibration** (:func:`calibrate`). Each agent answers the paper's design
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
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import MoralkitError
from ..psm import reference, rp
from ..psm.design import as_design
from ..psm.indices import reported_index
from ..psm.networks import threshold_graph
from ..psm.permutation import E_BELOW_CCEI, permutation_study, study_setup
from ..psm.rationality import random_choice_test, stars, table1
from ..psm.simulate import QuadraticAgent, logit_choices, simulate_quadratic
from .crossmethod import mantel_test

__all__ = [
    "NOISE_GRID",
    "Calibration",
    "ReplicationResult",
    "calibrate",
    "compare_g",
    "e_levels",
    "g_power",
    "matched_alphas",
    "missing_rounds",
    "paper_agents",
    "plot_calibration",
    "plot_g_comparison",
    "plot_power",
    "replicate",
    "redraws",
    "replications",
    "scan_e",
    "sim_label",
]

#: Logit noise scales tried by :func:`calibrate` (geometric, 0.1 to 3).
NOISE_GRID: tuple[float, ...] = tuple(float(x) for x in np.round(np.geomspace(0.1, 3.0, 25), 4))


def sim_label(model: str) -> str:
    """Label of the simulated agent standing for a published model: ``"sim-" + model``."""
    return f"sim-{model}"


def paper_agents() -> dict[str, QuadraticAgent]:
    """The seven models of Tables 2-3 as quadratic agents with their published ``(a, b)``.

    Returns
    -------
    dict {published model name: QuadraticAgent}
        In Table 2's order. ``a`` is renormalised to sum to 1 (printed to two
        decimals, the rows sum to 0.99-1.01).

    Examples
    --------
    >>> ag = paper_agents()["gpt-4-0125-preview"]
    >>> [round(float(x), 2) for x in ag.b]
    [3.05, 2.39, 2.29, 3.06, 2.91]

    References
    ----------
    Seror (2025), Table 2 and eq. (7).
    """
    t2 = reference.published_table2()
    return {m: QuadraticAgent(a=t2["a"].loc[m].to_numpy(), b=t2["b"].loc[m].to_numpy()) for m in t2["b"].index}


def missing_rounds(n_rounds: int, n_obs: int, seed) -> np.ndarray:
    """Boolean mask of the ``n_rounds - n_obs`` rounds left unanswered (drawn uniformly, seeded)."""
    if not 1 <= n_obs <= n_rounds:
        raise MoralkitError(f"n_obs must be in 1..{n_rounds}, got {n_obs}")
    rng = np.random.default_rng(seed)
    miss = np.zeros(n_rounds, dtype=bool)
    miss[rng.choice(n_rounds, size=n_rounds - n_obs, replace=False)] = True
    return miss


def _with_missing(ds, miss):
    chosen = ds.chosen.copy()
    chosen[miss] = 0
    return ds.with_choices(chosen)


@dataclass
class Calibration:
    """Outcome of :func:`calibrate`.

    Attributes
    ----------
    table : DataFrame
        One row per model: published ``ccei``, ``alpha``, ``n_obs``; the chosen
        ``noise``; the kept dataset's ``ccei_sim``, ``alpha_sim``, ``stars_sim``,
        ``index_origin_1e`` (its origin/1-e index); the calibration errors
        ``err_ccei = ccei_sim - ccei``, ``err_alpha = alpha_sim - alpha``; and the
        expected errors at the chosen noise over the replicates
        (``mean_abs_err_ccei``, ``mean_abs_err_alpha``).
    grid : DataFrame
        Every (model, noise, replicate): ``ccei``, ``alpha``.
    datasets : dict {sim label: PSMDataset}
        The calibrated simulated datasets (labels ``sim-<model>``).
    nulls : dict {sim label: ndarray}
        Each agent's random-choice null CCEIs (``n_datasets``), shared by all
        noise levels (it depends only on the option sets the agent saw).
    """

    table: pd.DataFrame
    grid: pd.DataFrame
    datasets: dict
    nulls: dict = field(repr=False)


def _alpha(null: np.ndarray, c: np.ndarray) -> np.ndarray:
    # eq. (4): share of random datasets with a CCEI at least the model's (exact: multiples of 1/12)
    s = np.sort(np.rint(null * 12).astype(np.int64))
    k = np.rint(np.asarray(c) * 12).astype(np.int64)
    return (len(s) - np.searchsorted(s, k, side="left")) / len(s)


def calibrate(noise_grid: Sequence[float] = NOISE_GRID, *, n_reps: int = 20, n_datasets: int = 1000,
              design=0, seed: int = 0, published: pd.DataFrame | None = None) -> Calibration:
    """Calibrate one logit-noise scale per published model to its Table 1 row (simulated agents).

    Parameters
    ----------
    noise_grid : sequence of float
        Logit noise scales tried (> 0).
    n_reps : int, default 20
        Seeded replicates per noise scale.
    n_datasets : int, default 1000
        Random datasets of the random-choice test (the paper: 1,000).
    design : Design or int, default 0
        The design all agents answer (the paper's own option sets are not public).
    seed : int
        Root seed: missing rounds, replicates and the test's random datasets.
    published : DataFrame, optional
        Table 1 (default :func:`moralkit.psm.reference.table1`).

    Returns
    -------
    Calibration

    References
    ----------
    Seror (2025), Section 2.3 (Procedure 1), Table 1, Table 2, eq. (7).
    """

    grid = [float(s) for s in noise_grid]
    if not grid or min(grid) <= 0:
        raise MoralkitError("noise_grid must hold positive logit noise scales")
    if n_reps < 1:
        raise MoralkitError(f"n_reps must be a positive integer, got {n_reps!r}")
    pub = (reference.published_table1() if published is None else published).set_index("model")
    agents = paper_agents()
    d = as_design(design)
    root = np.random.SeedSequence(int(seed))
    per_model = root.spawn(len(agents))
    rows, grid_rows, datasets, nulls = [], [], {}, {}
    for (model, ag), ss in zip(agents.items(), per_model):
        label = sim_label(model)
        target_c, target_a, n_obs = float(pub.loc[model, "ccei"]), float(pub.loc[model, "alpha"]), int(pub.loc[model, "n_obs"])
        s_miss, s_reps = ss.spawn(2)
        base = simulate_quadratic(ag, d, model=label)
        miss = missing_rounds(base.n_rounds, n_obs, s_miss)
        base = _with_missing(base, miss)
        null = random_choice_test(base, n_datasets=n_datasets, seed=int(seed)).null_index
        nulls[label] = null
        v = base.valid()
        u = ag.utility(v.options)
        grid_seeds = s_reps.spawn(len(grid))
        C = np.concatenate([logit_choices(u, s, np.random.default_rng(g), size=int(n_reps))
                            for s, g in zip(grid, grid_seeds)])  # (len(grid) * n_reps, n_obs)
        c_all = rp.ccei_choices(v.corners, v.prices, v.options, C).reshape(len(grid), int(n_reps))
        a_all = _alpha(null, c_all)
        err_all = np.abs(c_all - target_c) + np.abs(a_all - target_a)
        best = int(np.argmin(err_all.mean(axis=1)))
        k = int(np.argmin(err_all[best]))
        chosen = np.zeros(base.n_rounds, dtype=np.int64)
        chosen[~miss] = C[best * int(n_reps) + k] + 1
        ds = base.with_choices(chosen)
        datasets[label] = ds
        c, a = c_all[best], a_all[best]
        grid_rows += [(model, s, r, float(c_all[gi, r]), float(a_all[gi, r]))
                      for gi, s in enumerate(grid) for r in range(int(n_reps))]
        rows.append({"model": model, "sim_label": label, "ccei": target_c, "alpha": target_a, "n_obs": n_obs,
                         "noise": grid[best], "ccei_sim": float(c[k]), "alpha_sim": float(a[k]), "stars_sim": stars(float(a[k])),
                         "index_origin_1e": reported_index(ds, "origin/1-e"),
                         "err_ccei": float(c[k] - target_c), "err_alpha": float(a[k] - target_a),
                         "mean_abs_err_ccei": float(np.mean(np.abs(c - target_c))),
                         "mean_abs_err_alpha": float(np.mean(np.abs(a - target_a)))})
    table = pd.DataFrame(rows)
    table.attrs["note"] = "SIMULATED agents with the published Table 2 utilities; not LLM answers"
    grid_df = pd.DataFrame(grid_rows, columns=["model", "noise", "replicate", "ccei", "alpha"])
    return Calibration(table=table, grid=grid_df, datasets=datasets, nulls=nulls)


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
    table1 : DataFrame
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
    table1: pd.DataFrame
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
                 **calibrate_kwargs) -> pd.DataFrame:
    """Independent simulated replications at a fixed e: calibrate with each seed, run the study, compare.

    Returns
    -------
    DataFrame
        One row per seed: ``seed``, the :func:`compare_g` statistics and the mean absolute
        calibration errors (``cal_abs_err_ccei``, ``cal_abs_err_alpha``). ``attrs["G"]`` holds each
        seed's G (short names), ``attrs["mean_G"]`` their average (the G the published utilities and
        calibrated noise levels imply, with the luck of one simulation averaged out).
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
    out = pd.DataFrame(rows)
    out.attrs["G"] = Gs
    out.attrs["mean_G"] = sum(Gs.values()) / len(Gs) if Gs else None
    return out


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
        Simulated G of the same agents (:func:`redraws`), Table 3's short names.
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
    import itertools

    from scipy.stats import rankdata, spearmanr

    pub = reference.published_table3() if G_pub is None else G_pub
    names = list(pub.index)
    keys = list(Gs)
    if len(keys) < 2:
        raise MoralkitError(f"g_power needs at least 2 simulations, got {len(keys)}")
    iu = np.triu_indices(len(names), 1)
    vec = {k: Gs[k].loc[names, names].to_numpy(dtype=float)[iu] for k in keys}
    y = pub.to_numpy(dtype=float)[iu]

    def rho(a, b):
        return np.nan if np.ptp(a) == 0 or np.ptp(b) == 0 else float(spearmanr(a, b).statistic)

    # exact Mantel tests of every pair at once (as mantel_test computes them: a relabelling permutes the
    # ranks of the upper triangle; the p-value counts the relabellings whose correlation reaches the observed)
    n = len(names)
    perms = np.array(list(itertools.permutations(range(n))), dtype=np.int64)
    pos = np.full((n, n), -1)
    pos[iu] = np.arange(len(iu[0]))
    pos = np.maximum(pos, pos.T)
    P = pos[perms[:, iu[0]], perms[:, iu[1]]]  # (n!, pairs): entry of the triangle each relabelling puts there

    def unit(v):
        c = v - v.mean(axis=-1, keepdims=True)
        return c / np.sqrt((c ** 2).sum(axis=-1, keepdims=True))

    ranks = {k: rankdata(vec[k]) for k in keys}
    rows = []
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            r = rho(vec[a], vec[b])
            if np.isnan(r):
                p = np.nan
            else:
                null = unit(ranks[b][P]) @ unit(ranks[a])
                p = float(np.sum(null >= r - 1e-12) / len(perms))
            rows.append({"sim_a": a, "sim_b": b, "spearman": r, "mantel_p": p})
    pairs = pd.DataFrame(rows)
    R = pd.DataFrame(np.nan, index=keys, columns=keys)
    for r in rows:
        R.loc[r["sim_a"], r["sim_b"]] = R.loc[r["sim_b"], r["sim_a"]] = r["spearman"]
    pub_r = pd.Series({k: rho(vec[k], y) for k in keys})
    loo = R.mean(axis=1, skipna=True)
    published = pd.DataFrame({"simulation": keys, "spearman": pub_r.to_numpy(), "loo_mean": loo.to_numpy()})
    s = pairs["spearman"].dropna().to_numpy()
    pm = float(pub_r.mean())
    lv = loo.to_numpy()
    summary = {"n_simulations": len(keys), "n_pairs": int(len(s)), "mean": float(s.mean()), "sd": float(s.std(ddof=1)) if len(s) > 1 else np.nan,
               "min": float(s.min()), "max": float(s.max()),
               **{k: float(np.quantile(s, q)) for k, q in (("q05", .05), ("q25", .25), ("median", .5), ("q75", .75),
                                                            ("q95", .95))},
               "power": float((pairs["mantel_p"].dropna() <= level).mean()), "level": float(level),
               "published_mean": pm,
               "published_percentile": float(100 * ((lv < pm).sum() + 0.5 * (lv == pm).sum()) / len(lv)),
               "published_rank_p": float(((lv <= pm).sum() + 1) / (len(lv) + 1))}
    return {"pairs": pairs, "published": published, "summary": summary}


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


def plot_calibration(cal: Calibration, ncols: int = 4):
    """One panel per model: CCEI and alpha of the simulated agent against the logit noise scale.

    Lines: mean over the replicates (blue: CCEI, red: alpha, both on [0, 1]); dashed: the published
    Table 1 values; markers: the chosen noise and the dataset kept. Simulated agents.
    """
    import matplotlib.pyplot as plt

    t = cal.table.set_index("model")
    models = list(t.index)
    nrows = int(np.ceil(len(models) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols, 2.7 * nrows), squeeze=False, sharey=True)
    for ax, m in zip(axes.flat, models):
        g = cal.grid[cal.grid.model == m].groupby("noise")[["ccei", "alpha"]].mean()
        ax.plot(g.index, g["ccei"], color="tab:blue", lw=1.5, label="CCEI, mean of replicates")
        ax.plot(g.index, g["alpha"], color="tab:red", lw=1.5, label="α, mean of replicates")
        ax.axhline(t.loc[m, "ccei"], color="tab:blue", ls="--", lw=1, label="CCEI published")
        ax.axhline(t.loc[m, "alpha"], color="tab:red", ls="--", lw=1, label="α published")
        ax.plot([t.loc[m, "noise"]] * 2, [t.loc[m, "ccei_sim"], t.loc[m, "alpha_sim"]], "ko", ms=4,
                label="dataset kept")
        ax.set_xscale("log")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(f"sim-{m}", fontsize=8)
        ax.set_xlabel("logit noise scale", fontsize=7)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(models):]:
        ax.axis("off")
    h, lab = axes.flat[0].get_legend_handles_labels()
    fig.legend(h, lab, loc="lower right", fontsize=7, frameon=False)
    fig.suptitle("SIMULATED agents: calibration to the published Table 1", fontsize=10)
    fig.tight_layout()
    return fig


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


def plot_power(power: dict, other: dict | None = None, labels=("redrawn answers", "recalibrated")):
    """Histogram of the Spearman correlation between independent simulations of the same agents, with
    Table 3's mean correlation with them (:func:`g_power` output; ``other``: a second one). Simulated agents."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.8))
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
    fig.tight_layout()
    return fig
