"""Simulation study and convention audit (notebook ``06_audit``); every agent here is simulated.

* :func:`power_study` / :func:`power_table` / :func:`plot_power` -- power of
  the random-choice rationality test (Procedure 1) against simulated
  quadratic-utility agents with logit noise of increasing scale, and its size
  on uniformly random agents.
* :func:`convention_audit` / :func:`convention_summary` /
  :func:`plot_convention_nulls` / :func:`plot_alpha_fit` -- which CCEI
  convention (:mod:`moralkit.studies.conventions`) makes the random-choice null
  distribution in the paper's design reproduce the published Table 1
  (CCEI, alpha) pairs; :func:`rational_agent_indices` -- how each convention
  scores simulated utility maximisers.
* :func:`partition_recovery` / :func:`plot_partition_recovery` -- groups of
  simulated agents with distinct known utilities: how often the permutation
  approach (:func:`moralkit.psm.permutation.permutation_study`) classifies two
  agents together exactly when they share a utility, as a function of rho and e.
* :func:`nlls_recovery` -- recovery of (a, b) by NLLS under both forms of the
  predicted answer (:mod:`moralkit.psm.nlls`), with and without noise; :func:`nlls_cross_forms` -- the
  bias of each form when the answers come from the other.

References
----------
Seror (2025), Sections 2.2-2.4, 3.1-3.3, Tables 1-3; eqs. (4), (6), (7)-(11).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from ..checks import as_generator
from ..errors import MoralkitError
from ..psm import indices as ix
from ..psm import rp
from ..psm.design import Design, as_design, make_design
from ..psm.simulate import (
    QuadraticAgent,
    random_quadratic_agent,
    simulate_quadratic,
    simulate_quadratic_noises,
    simulate_random,
)
from . import conventions as cv

__all__ = [
    "power_study",
    "power_table",
    "plot_power",
    "convention_audit",
    "convention_summary",
    "alpha_envelope",
    "rational_agent_indices",
    "plot_convention_nulls",
    "plot_alpha_fit",
    "partition_recovery",
    "plot_partition_recovery",
    "nlls_recovery",
    "nlls_cross_forms",
]

LEVELS = (0.01, 0.05, 0.10)


def _designs(designs, n):
    if designs is None or isinstance(designs, (Design, int, np.integer)):
        designs = [designs]
    out = [as_design(d) for d in designs]
    if not out:
        raise MoralkitError("designs must not be empty")
    return [out[i % len(out)] for i in range(n)]


# =========================================================================== power and size


def power_study(noise_levels: Sequence[float] = (0.0, 0.1, 0.3, 0.5, 1.0, 2.0, 5.0), n_agents: int = 100,
                n_random: int = 200, n_datasets: int = 1000, *, designs=None, seed: int = 0, n_jobs: int = 1,
                progress: bool = False) -> pd.DataFrame:
    """Run the random-choice test (Procedure 1) on simulated agents.

    For each logit noise scale, ``n_agents`` quadratic agents (random ``a``,
    ``b``; :func:`moralkit.psm.simulate.random_quadratic_agent`) answer a design
    (choice probabilities proportional to ``exp(u / noise)``; 0 = best option);
    ``n_random`` uniformly random agents give the size. Each agent's dataset
    is tested with :func:`moralkit.psm.rationality.random_choice_tests`
    (``n_datasets`` synthetic datasets on the option sets it saw).

    Parameters
    ----------
    noise_levels : sequence of float
    n_agents, n_random : int
    n_datasets : int, default 1000
    designs : Design, int, sequence or None
        Designs cycled over agents (default ``make_design(0)`` for all).
    seed : int
        The same agents (utilities) are reused across noise levels.
    n_jobs : int
        joblib workers of the rationality test.

    Returns
    -------
    DataFrame
        One row per agent: ``kind`` ("quadratic"/"random"), ``noise`` (inf
        for random agents), ``agent``, ``ccei``, ``alpha``.

    References
    ----------
    Seror (2025), Section 2.3 (Procedure 1, eq. (4)); Section 3.2 (eq. (7)).
    """
    from ..psm.rationality import random_choice_tests, retest

    if n_agents < 0 or n_random < 0:
        raise MoralkitError("n_agents and n_random must be non-negative")
    ss = np.random.SeedSequence(int(seed))
    s_agents, s_noise, s_random, s_test = ss.spawn(4)
    agent_rngs = [np.random.default_rng(c) for c in s_agents.spawn(int(n_agents))]
    agents = [random_quadratic_agent(r) for r in agent_rngs]
    q0s = [ag.best_answer() for ag in agents]  # each agent's round-0 answer, the same at every noise level
    dz = _designs(designs, max(int(n_agents), int(n_random), 1))
    rows = []
    test_seed = int(s_test.generate_state(1)[0] % (2**31))
    noise_levels = [float(x) for x in noise_levels]
    noise_children = s_noise.spawn(len(noise_levels))
    it = list(enumerate(noise_levels))
    if progress:
        from tqdm.auto import tqdm
        it = tqdm(it, desc="noise levels")
    # an agent sees the same option sets at every noise level: their utilities are computed, its null drawn, once
    rngs = [[np.random.default_rng(c) for c in ch.spawn(int(n_agents))] for ch in noise_children]
    per_agent = [simulate_quadratic_noises(ag, dz[i], noise_levels, [r[i] for r in rngs], model=f"sim-quadratic-{i}",
                                           q0=q0s[i]) for i, ag in enumerate(agents)]
    by_level = [{ds[li].model: ds[li] for ds in per_agent} for li in range(len(noise_levels))]
    first = None
    for li, noise in it:
        data = by_level[li]
        if first is None:
            res = first = random_choice_tests(data, n_datasets=n_datasets, seed=test_seed, n_jobs=n_jobs) if data else {}
        else:
            res = {k: retest(first[k], ds) for k, ds in data.items()}
        rows += [("quadratic", noise, k, r.index_value, r.alpha) for k, r in res.items()]
    rr = [np.random.default_rng(c) for c in s_random.spawn(int(n_random))]
    data = {f"sim-random-{i}": simulate_random(dz[i], seed=rr[i], model=f"sim-random-{i}") for i in range(int(n_random))}
    if data:
        res = random_choice_tests(data, n_datasets=n_datasets, seed=test_seed, n_jobs=n_jobs)
        rows += [("random", np.inf, k, r.index_value, r.alpha) for k, r in res.items()]
    return pd.DataFrame(rows, columns=["kind", "noise", "agent", "ccei", "alpha"])


def power_table(study: pd.DataFrame, levels: Sequence[float] = LEVELS) -> pd.DataFrame:
    """Share of agents passing (H0 rejected, ``alpha <= level``) per kind and noise level.

    Returns
    -------
    DataFrame
        Index (kind, noise); columns ``n``, ``mean_ccei`` and ``pass_1%``, ``pass_5%``, ...
        For random agents the shares are the test's size.
    """
    out = []
    for (kind, noise), g in study.groupby(["kind", "noise"], sort=False):
        rec = {"kind": kind, "noise": noise, "n": len(g), "mean_ccei": g["ccei"].mean()}
        for lv in levels:
            rec[f"pass_{lv:.0%}"] = float((g["alpha"] <= lv + 1e-12).mean())
        out.append(rec)
    return pd.DataFrame(out).set_index(["kind", "noise"])


def plot_power(table: pd.DataFrame, ax=None):
    """Power curve: share passing at each level against the logit noise scale (random agents as a line)."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    cols = [c for c in table.columns if c.startswith("pass_")]
    q = table.xs("quadratic", level="kind") if "quadratic" in table.index.get_level_values(0) else None
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    styles = [("o", 5.0, 9), ("s", 3.0, 6), ("^", 1.5, 4)]  # thinner on top: coinciding levels stay visible
    for j, c in enumerate(cols):
        mk, lw, ms = styles[j % len(styles)]
        if q is not None and len(q):
            x = np.asarray(q.index, dtype=float)
            xp = np.where(x == 0, np.nan, x)
            ax.plot(xp, q[c], marker=mk, ms=ms, lw=lw, color=colors[j], alpha=0.8,
                    label=f"quadratic agents, {c[5:]} level")
            if (x == 0).any() and (xp > 0).any():
                ax.scatter([np.nanmin(xp[xp > 0]) / 3], [q[c][x == 0].iloc[0]], marker=mk, s=ms ** 2,
                           color=colors[j], alpha=0.8)
        if "random" in table.index.get_level_values(0):
            ax.axhline(table.xs("random", level="kind")[c].iloc[0], ls=(0, (4, 2 + 2 * j)), color=colors[j], lw=lw / 2,
                       label=f"uniform random agents (size), {c[5:]}")
    ax.set_xscale("log")
    ax.set_xlabel("logit noise scale (leftmost points: no noise)")
    ax.set_ylabel("share passing the rationality test")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("Power and size of the random-choice test (simulated agents)")
    ax.legend(fontsize=7)
    return ax


# =========================================================================== convention audit


def convention_audit(published: pd.DataFrame | None = None, n_datasets: int = 1000, *, conventions=ix.CONVENTIONS,
                     designs=None, seed: int = 0, progress: bool = False, n_jobs: int = 1):
    """Null distribution of every convention in the paper's design, and the alpha it predicts for Table 1.

    Parameters
    ----------
    published : DataFrame, optional
        Default :func:`moralkit.psm.reference.published_table1`.
    n_datasets : int
        Simulated uniformly random respondents (each with its own random round-0 answer).
    conventions, designs, seed, progress, n_jobs
        See :func:`moralkit.studies.conventions.null_distribution` (one null per distinct
        published ``n_obs``; the result does not depend on ``n_jobs``).

    Returns
    -------
    null : DataFrame
        :func:`moralkit.studies.conventions.null_distribution` output.
    predicted : DataFrame
        :func:`moralkit.studies.conventions.predicted_alpha` output.

    References
    ----------
    Seror (2025), Section 2.3 and Table 1.
    """
    from ..psm.reference import published_table1

    pub = published_table1() if published is None else published
    null = cv.null_distribution(n_datasets, conventions, n_obs=sorted(set(pub["n_obs"])), designs=designs,
                                seed=seed, progress=progress, n_jobs=n_jobs)
    return null, cv.predicted_alpha(null, pub)


def convention_summary(predicted: pd.DataFrame, null: pd.DataFrame | None = None,
                       envelope: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per convention: how well it reproduces the published Table 1.

    Columns: ``in_support`` (share of printed CCEIs the convention can produce
    at all), ``null_range`` (min-max of the simulated random-choice index at
    n = 160), ``mae_alpha`` (mean |published alpha - predicted alpha|),
    ``spearman`` (rank correlation of the two), ``n_alpha_within_0.05``;
    with ``envelope`` also ``in_envelope`` (share of published alphas inside
    the min-max of predicted alphas over several round-0 answers, +-0.03).
    """
    from scipy.stats import spearmanr

    rows = []
    for conv, g in predicted.groupby("convention", sort=False):
        d = np.abs(g["alpha"] - g["alpha_hat"])
        rho = spearmanr(g["alpha"], g["alpha_hat"]).statistic if g["alpha_hat"].nunique() > 1 else np.nan
        rec = {"convention": conv, "in_support": g["in_support"].mean(), "mae_alpha": d.mean(),
               "spearman": rho, "n_alpha_within_0.05": int((d <= 0.05).sum()), "n_models": len(g)}
        if null is not None:
            x = null[(null.convention == conv) & (null.n_obs == null.n_obs.max())]["index"]
            rec["null_range"] = f"{x.min():.3f}-{x.max():.3f}"
            rec["null_mean"] = x.mean()
        if envelope is not None:
            e = envelope[envelope.convention == conv]
            rec["in_envelope"] = float(((e["alpha"] >= e["alpha_min"] - 0.03) &
                                        (e["alpha"] <= e["alpha_max"] + 0.03)).mean())
        rows.append(rec)
    return pd.DataFrame(rows).set_index("convention")


def alpha_envelope(published: pd.DataFrame | None = None, q0s=None, n_datasets: int = 200, *,
                   conventions=ix.CONVENTIONS, designs=None, seed: int = 0, n_jobs: int = 1) -> pd.DataFrame:
    """Range of predicted alpha over several round-0 answers (the model-specific option sets).

    In Procedure 1 each model's null uses the option sets *it* saw, which depend
    on its round-0 answer through the corner flip. The paper's answers are not
    public, so the predicted alpha of each convention is computed for several
    ``q0`` (default: 0s, 5s, 2s, 3s and two mixed answers) and its min-max
    reported next to the published alpha (null at n = 160 and at each
    published n_obs, nearest used).

    Returns
    -------
    DataFrame
        ``model``, ``convention``, ``ccei``, ``n_obs``, ``alpha``, ``alpha_min``, ``alpha_max``.
    """
    from ..psm.reference import published_table1

    pub = published_table1() if published is None else published
    if q0s is None:
        q0s = [(0, 0, 0, 0, 0), (5, 5, 5, 5, 5), (2, 2, 2, 2, 2), (3, 3, 3, 3, 3), (3, 2, 2, 3, 2), (4, 1, 1, 4, 2)]
    parts = []
    for j, q0 in enumerate(q0s):
        null = cv.null_distribution(n_datasets, conventions, n_obs=sorted(set(pub["n_obs"])), designs=designs,
                                    q0=np.asarray(q0), seed=seed + 1000 * (j + 1), n_jobs=n_jobs)
        pa = cv.predicted_alpha(null, pub)
        pa["q0"] = "".join(str(int(v)) for v in q0)
        parts.append(pa)
    allp = pd.concat(parts)
    g = allp.groupby(["model", "convention"], sort=False)
    out = g.agg(ccei=("ccei", "first"), n_obs=("n_obs", "first"), alpha=("alpha", "first"),
                alpha_min=("alpha_hat", "min"), alpha_max=("alpha_hat", "max")).reset_index()
    return out


def rational_agent_indices(n_agents: int = 50, *, conventions=ix.CONVENTIONS, n_options: Sequence[int] = (100, 521),
                           seed: int = 0) -> pd.DataFrame:
    """Each convention's index for simulated utility maximisers and for uniformly random agents.

    Quadratic agents (random ``a``, ``b``) pick their best option from the
    design's 100 alternatives, or from the whole integer budget set
    (``n_options=521``: every integer answer on the budget, so the only
    restriction is integrality); random agents choose uniformly from 100.

    Returns
    -------
    DataFrame
        ``agent_kind`` ("rational-100", "rational-521", "random-100"),
        ``agent``, ``convention``, ``index``.
    """
    rows = []
    ss = np.random.SeedSequence(int(seed))
    s_ag, s_rand = ss.spawn(2)
    agents = [random_quadratic_agent(np.random.default_rng(c)) for c in s_ag.spawn(int(n_agents))]
    convs = [ix.convention(c) for c in conventions]

    def indices(ds):
        # e* once per coordinate system, then each report of it (the same values as ix.reported_index per convention)
        e = {co: ix.exact_ratio(rp.ccei(ix.expenditure_matrix(ds, co))) for co in {c.coordinates for c in convs}}
        return [(c.name, float(e[c.coordinates] if c.report == "e" else 1 - e[c.coordinates])) for c in convs]

    for nopt in n_options:
        d = make_design(0, n_options=int(nopt))
        for i, ag in enumerate(agents):
            ds = simulate_quadratic(ag, d, model=f"sim-quadratic-{i}")
            rows += [(f"rational-{nopt}", ds.model, name, v) for name, v in indices(ds)]
    d = make_design(0)
    for i, c0 in enumerate(s_rand.spawn(int(n_agents))):
        ds = simulate_random(d, seed=np.random.default_rng(c0), model=f"sim-random-{i}")
        rows += [("random-100", ds.model, name, v) for name, v in indices(ds)]
    return pd.DataFrame(rows, columns=["agent_kind", "agent", "convention", "index"])


def plot_convention_nulls(null: pd.DataFrame, published: pd.DataFrame | None = None, rational=None, ncols: int = 4):
    """One panel per convention: the random-choice null of the index (n = 160), the published CCEIs
    (ticks, red = passing at 5 %), and, if given, the index of simulated rational agents (green)."""
    import matplotlib.pyplot as plt

    from ..psm.reference import published_table1

    pub = published_table1() if published is None else published
    convs = list(dict.fromkeys(null["convention"]))
    nrows = int(np.ceil(len(convs) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(4 * ncols, 2.8 * nrows), squeeze=False)
    for ax, c in zip(axes.flat, convs):
        x = null[(null.convention == c) & (null.n_obs == null.n_obs.max())]["index"]
        bins = np.linspace(0, 1, 61)
        ax.hist(x, bins=bins, color="0.6", density=True, histtype="stepfilled", label="random choice (simulated)")
        if rational is not None:
            r = rational[(rational.convention == c) & (rational.agent_kind == "rational-100")]["index"]
            ax.hist(r, bins=bins, color="tab:green", alpha=0.5, density=True, histtype="stepfilled",
                    label="rational agents (simulated)")
        y0 = ax.get_ylim()[1]
        passing = pub["alpha"].to_numpy() <= 0.05
        ax.vlines(pub["ccei"].to_numpy()[~passing], -0.08 * y0, 0, color="k", lw=1)
        ax.vlines(pub["ccei"].to_numpy()[passing], -0.08 * y0, 0, color="tab:red", lw=1)
        ax.set_ylim(-0.1 * y0, y0)
        ax.set_title(c + (" (standard)" if c == "corner/e" else ""), fontsize=9)
        ax.set_xlim(0, 1)
    for ax in list(axes.flat)[len(convs):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=6, loc="upper right")
    fig.suptitle("Index under random choice vs published Table 1 CCEIs (ticks; red: alpha <= 5 %)", fontsize=10)
    fig.tight_layout()
    return fig


def plot_alpha_fit(predicted: pd.DataFrame, envelope: pd.DataFrame | None = None, ncols: int = 4):
    """Published alpha (Table 1) against the alpha each convention predicts (dots; bars: q0 envelope)."""
    import matplotlib.pyplot as plt

    convs = list(dict.fromkeys(predicted["convention"]))
    nrows = int(np.ceil(len(convs) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.6 * ncols, 3.4 * nrows), squeeze=False)
    for ax, c in zip(axes.flat, convs):
        g = predicted[predicted.convention == c]
        ax.plot([0, 1], [0, 1], color="0.7", lw=1)
        if envelope is not None:
            e = envelope[envelope.convention == c]
            ax.vlines(e["alpha"], e["alpha_min"], e["alpha_max"], color="tab:blue", alpha=0.4)
        col = np.where(g["in_support"], "tab:blue", "tab:red")
        ax.scatter(g["alpha"], g["alpha_hat"], s=12, c=col)
        ax.set_title(c + (" (standard)" if c == "corner/e" else ""), fontsize=9)
        ax.set_xlabel("published alpha")
        ax.set_ylabel("predicted alpha")
        ax.set_xlim(-0.03, 1.03)
        ax.set_ylim(-0.03, 1.03)
    for ax in list(axes.flat)[len(convs):]:
        ax.axis("off")
    fig.suptitle("Table 1 alpha: published vs predicted by each convention (red: CCEI not attainable)", fontsize=10)
    fig.tight_layout()
    return fig


# =========================================================================== partition sanity


DEFAULT_GROUP_IDEALS = ((1.0, 1.0, 1.0, 1.0, 1.0), (4.0, 4.0, 4.0, 4.0, 4.0), (1.0, 4.0, 1.0, 4.0, 1.0))


def _group_agents(group_ideals, per_group, noise, seed, jitter):
    rng = as_generator(seed)
    data, groups = {}, []
    k = 0
    for g, b in enumerate(group_ideals):
        a = rng.dirichlet(np.full(5, 20.0))
        for j in range(per_group):
            name = f"sim-group{g}-{j}"
            ag = QuadraticAgent(a=a, b=np.asarray(b, float) + rng.normal(0, jitter, 5))
            data[name] = simulate_quadratic(ag, make_design(1000 + k), noise=noise, seed=rng, model=name)
            groups.append(g)
            k += 1
    return data, np.array(groups)


def partition_recovery(rhos: Sequence[int] = (5, 10, 20), es: Sequence[float] = (0.333, 0.5, 0.667, 0.8, 0.9, 1.0),
                       *, group_ideals=DEFAULT_GROUP_IDEALS, per_group: int = 2, T: int = 100, noise: float = 0.0,
                       jitter: float = 0.0, seed: int = 0, return_g: bool = False):
    """Do the permutation networks recover groups of simulated agents with distinct known utilities?

    ``len(group_ideals)`` groups of ``per_group`` simulated agents; the agents of a
    group share one utility (ideal point ``b`` from ``group_ideals`` plus
    optional N(0, ``jitter``) noise, weights ``a`` drawn once per group), and each
    agent answers its own design (its own 100-option sets). For each (rho, e),
    :func:`moralkit.psm.permutation.permutation_study` (exact LS(e) solver, T draws)
    gives a type label per agent and draw; a pair of agents is *correctly
    co-classified* in a draw when "same type" equals "same group".

    Returns
    -------
    DataFrame
        One row per (rho, e): ``accuracy`` (share of correctly co-classified
        pairs over draws), ``g_within`` (mean G over same-group pairs),
        ``g_between`` (mean G over different-group pairs), ``mean_types``.
        With ``return_g=True`` also a dict {(rho, e): G DataFrame}.

    References
    ----------
    Seror (2025), Section 2.4 (eq. (6)), Procedure 2.
    """
    from ..psm.permutation import permutation_study

    data, groups = _group_agents(group_ideals, int(per_group), float(noise), seed, float(jitter))
    M = len(groups)
    truth = groups[:, None] == groups[None, :]
    iu = np.triu_indices(M, 1)
    rows, Gs = [], {}
    for rho in rhos:
        for e in es:
            res = permutation_study(data, e=float(e), T=int(T), rho=int(rho), seed=int(seed), progress=False)
            same = res.labels[:, :, None] == res.labels[:, None, :]
            acc = float((same[:, iu[0], iu[1]] == truth[iu]).mean())
            G = res.G.to_numpy()
            rows.append({"rho": int(rho), "e": float(e), "accuracy": acc,
                         "g_within": float(G[iu][truth[iu]].mean()) if truth[iu].any() else np.nan,
                         "g_between": float(G[iu][~truth[iu]].mean()) if (~truth[iu]).any() else np.nan,
                         "mean_types": float(res.n_types.mean())})
            Gs[(int(rho), float(e))] = res.G
    df = pd.DataFrame(rows)
    return (df, Gs) if return_g else df


def plot_partition_recovery(df: pd.DataFrame, ax=None):
    """Share of correct co-classification against e, one line per rho."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    for rho, g in df.groupby("rho"):
        ax.plot(g["e"], g["accuracy"], marker="o", label=f"rho = {rho}")
    ax.set_xlabel("rationality level e of Procedure 2")
    ax.set_ylabel("share of agent pairs correctly co-classified")
    ax.set_ylim(0, 1.02)
    ax.set_title("Permutation approach on simulated groups with known utilities")
    ax.legend()
    return ax


# =========================================================================== NLLS recovery


def _errors(rows, key, ag, a_hat, b_hat):
    for s in range(5):
        rows.append((*key, f"a{s + 1}", float(a_hat[s] - ag.a[s])))
        rows.append((*key, f"b{s + 1}", float(b_hat[s] - ag.b[s])))


def _summarise_errors(rows, keys):
    err = pd.DataFrame(rows, columns=[*keys, "param", "error"])
    return err.groupby([*keys, "param"])["error"].agg(
        bias="mean", rmse=lambda x: float(np.sqrt(np.nanmean(np.square(x)))) if x.notna().any() else np.nan,
        n="size").reset_index()


def _nlls_agents(n_agents, seed):
    ss = np.random.SeedSequence(int(seed))
    return [random_quadratic_agent(np.random.default_rng(c), b_range=(1.5, 3.5)) for c in ss.spawn(int(n_agents))]


def nlls_recovery(n_agents: int = 20, noise_levels: Sequence[float] = (0.0, 0.3), *, forms=("paper", "exact"),
                  seed: int = 0, design=None, n_starts: int = 3) -> pd.DataFrame:
    """Recovery of (a, b) by NLLS under both predicted-answer forms, from discrete PSM choices.

    Simulated quadratic agents with known (a, b) (``b`` uniform on [1.5, 3.5],
    ``a`` Dirichlet) pick from the design's 100 options (noiseless or with
    logit noise); each dataset is fitted with :func:`moralkit.psm.nlls.fit_utility`
    under each form.

    Returns
    -------
    DataFrame
        One row per (noise, form, parameter ``a1..a5``/``b1..b5``): ``bias``, ``rmse``, ``n``.

    References
    ----------
    Seror (2025), Section 3.2, eqs. (7)-(11).
    """
    from ..psm.nlls import fit_utility

    d = make_design(0) if design is None else design
    agents = _nlls_agents(n_agents, seed)
    rows = []
    for li, noise in enumerate(noise_levels):
        for i, ag in enumerate(agents):
            ds = simulate_quadratic(ag, d, noise=float(noise), seed=int(seed) + 7919 * li + i,
                                    model=f"sim-quadratic-{i}")
            for form in forms:
                est = fit_utility(ds, form=form, n_starts=n_starts, seed=int(seed))
                _errors(rows, (float(noise), form), ag, est.a, est.b)
    return _summarise_errors(rows, ["noise", "form"])


def nlls_cross_forms(n_agents: int = 20, *, forms=("paper", "exact"), seed: int = 0, design=None,
                     n_starts: int = 3) -> pd.DataFrame:
    """Bias of each NLLS form when the answers come from the other (continuous budget line).

    Simulated agents answer every round with the real-valued predicted answer
    of form ``generated`` (:func:`moralkit.psm.nlls.predict_answers`; corners after
    the flip rule for the agent's round-0 answer); the answers are then fitted
    by NLLS (:func:`moralkit.psm.nlls.fit_answers`) under form ``fitted``. On the
    diagonal (same form) recovery is exact up to the optimiser; off the
    diagonal the error is the misspecification bias of using the wrong form.

    Returns
    -------
    DataFrame
        One row per (generated, fitted, parameter): ``bias``, ``rmse`` (over the
        fits that converged), ``n``, ``n_failed`` (fits where the solver failed
        from every start).

    References
    ----------
    Seror (2025), Section 3.2, eqs. (8)-(11).
    """
    import warnings

    from ..psm.nlls import fit_answers, predict_answers

    d = make_design(0) if design is None else design
    agents = _nlls_agents(n_agents, seed)
    rows = []
    with warnings.catch_warnings():  # boundary (a_s -> 0) fits under misspecification: expected here
        warnings.simplefilter("ignore", RuntimeWarning)
        _cross_fit(agents, d, forms, n_starts, seed, rows, fit_answers, predict_answers)
    out = _summarise_errors(rows, ["generated", "fitted"])
    err = pd.DataFrame(rows, columns=["generated", "fitted", "param", "error"])
    fails = err.groupby(["generated", "fitted", "param"])["error"].apply(lambda x: int(x.isna().sum()))
    out["n_failed"] = fails.to_numpy()
    return out


def _cross_fit(agents, d, forms, n_starts, seed, rows, fit_answers, predict_answers):
    for i, ag in enumerate(agents):
        ds = simulate_quadratic(ag, d, model=f"sim-quadratic-{i}")  # corners after the flip rule
        for gen in forms:
            y = predict_answers(ag.a, ag.b, ds.corners, ds.prices, form=gen)
            for fitf in forms:
                # eqs. (9)-(10) as printed are off the budget line by construction: no budget check then
                try:
                    est = fit_answers(ds.corners, ds.prices, y, form=fitf, n_starts=n_starts, seed=int(seed),
                                      model=ds.model, check_budget=(gen == "exact"))
                except ValueError:  # the solver failed from every start: recorded as a failure
                    _errors(rows, (gen, fitf), ag, np.full(5, np.nan), np.full(5, np.nan))
                    continue
                _errors(rows, (gen, fitf), ag, est.a, est.b)


# =========================================================================== output


