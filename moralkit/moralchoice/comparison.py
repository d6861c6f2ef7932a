"""The exact and the sampling estimators of the action likelihood, compared (notebook 05, the findings).

A respondent with token probabilities has exact likelihoods (Definition 1 computed,
:mod:`moralkit.moralchoice.likelihood`) and, often, sampled answers too (eq. 7). :func:`compare_estimators`
measures how far the two agree on the scenarios both cover, next to the band the same statistics have
from sampling noise alone, and returns an :class:`EstimatorComparison` (``to_frame()``, ``summary()``,
``plot()``; it displays itself in a notebook). Its phases are separate functions: the common scenarios
(:func:`common_scenarios`), the Brier score of the sampled answers against the exact likelihoods
(:func:`brier_score`) and the noise bands (:func:`noise_bands`).

References
----------
Scherrer et al. (2023), eq. 7 (the sampling estimator), Definitions 1, 5, 6, Section 3.3 (M = 5 / 10).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..checks import check_choice, check_int
from ..errors import DataError
from ..figures import format_interval

__all__ = ["N_SIM", "EstimatorComparison", "compare_estimators", "compare_at_paper_m", "agreement_summary",
           "common_scenarios", "brier_score", "noise_bands"]

#: Draws per chunk of the noise-band simulation (memory: chunk x answered forms).
_SIM_CHUNK = 500

#: Draws of the noise bands of :func:`compare_estimators`. Measured on the committed runs
#: (``benchmarks/bench_noise_bands.py``, seeds 0-4, 2026-11-26): with 200 draws the count of the 12
#: measures inside their bands moved with the seed (11, 12, 12, 12, 12); with 2,000 it was 12 at every
#: seed, the measure nearest an edge 0.0019-0.0024 inside it. 2,000 draws cost 9 CPU-s for both levels
#: (200: 2.6 s); 10,000 would cost about five times that in notebook 05 and the findings.
N_SIM = 2_000


def _pearson(x, y) -> float:
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 3 or x.std() == 0 or y.std() == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


def _spearman(x, y) -> float:
    from scipy.stats import rankdata

    return _pearson(rankdata(x), rankdata(y))


def _pearson_rows(x, Y) -> np.ndarray:
    """:func:`_pearson` of ``x`` with each row of ``Y`` (NaN where a row or ``x`` is constant)."""
    x, Y = np.asarray(x, float), np.asarray(Y, float)
    if len(x) < 3 or x.std() == 0:
        return np.full(len(Y), np.nan)
    xc = x - x.mean()
    Yc = Y - Y.mean(axis=1, keepdims=True)
    den = np.sqrt((xc ** 2).sum()) * np.sqrt((Yc ** 2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (Yc @ xc) / den
    return np.where(Y.std(axis=1) == 0, np.nan, r)


def _spearman_rows(x, Y) -> np.ndarray:
    from scipy.stats import rankdata

    return _pearson_rows(rankdata(x), rankdata(Y, axis=1))


def _band(x):
    """Mean and 95 % range of a simulated statistic (NaN without simulations)."""
    x = np.asarray(x, float)
    if not len(x) or np.isnan(x).all():
        return np.nan, np.nan, np.nan
    return float(np.nanmean(x)), float(np.nanquantile(x, 0.025)), float(np.nanquantile(x, 0.975))


@dataclass
class _Pair:
    """One respondent's two estimators on their common scenarios ``sc`` (sorted)."""

    sc: list
    lk: pd.DataFrame  # exact likelihoods, one row per (scenario, form)
    rs: pd.DataFrame  # sampled answers
    ex: pd.DataFrame  # scenario metrics of the exact likelihoods, indexed by scenario, in the order of sc
    sa: pd.DataFrame  # scenario metrics of the sampled answers, likewise
    al: pd.DataFrame  # sampled action likelihoods per (scenario, form), forms the exact table has
    p_ex: np.ndarray  # the exact likelihood of each row of al (NaN where the exact table lacks the form)
    n_valid: np.ndarray  # valid sampled answers of each row of al


def common_scenarios(likelihoods: pd.DataFrame, responses: pd.DataFrame, model, column: str = "decision"):
    """Phase 1: one respondent's exact and sampled tables on the scenarios both cover (None below 3).

    Returns
    -------
    _Pair or None
    """
    from .metrics import action_likelihood, sampled_scenario_metrics, scenario_metrics

    lk = likelihoods[likelihoods["model"] == model]
    rs = responses[responses["model"] == model]
    sc = sorted(set(lk["scenario_id"].unique()) & set(rs["scenario_id"].unique()))
    if len(sc) < 3:
        return None
    lk = lk[lk["scenario_id"].isin(sc)]
    rs = rs[rs["scenario_id"].isin(sc)]
    ex = scenario_metrics(lk).set_index("scenario_id").loc[sc]
    al = action_likelihood(rs, column=column)  # once: the sampled metrics are computed from it
    sa = sampled_scenario_metrics(al).set_index("scenario_id").loc[sc]
    al = al[al["form"].isin(set(lk["form"].unique()))]
    pf = lk.set_index(["scenario_id", "form"])["p_action1"]
    p_ex = pf.reindex(list(zip(al["scenario_id"], al["form"]))).to_numpy()
    return _Pair(sc, lk, rs, ex, sa, al, p_ex, al["n_valid"].to_numpy())


def brier_score(pair: _Pair) -> dict:
    """Phase 2: Brier score of the sampled valid answers against the exact likelihood of their form.

    Per sampled valid answer y (1 if action1): the mean (y - p)^2, its expectation sum p(1 - p) / n if the
    answers were drawn from p, and the z-score (variance p(1 - p)(1 - 2p)^2 per answer).

    Returns
    -------
    dict
        ``brier``, ``brier_expected``, ``brier_z`` (NaN without a valid answer).
    """
    ok = ~np.isnan(pair.p_ex)
    y1 = pair.al["p_action1"].to_numpy() * pair.n_valid  # number of action1 answers among the valid ones
    nv, pp, k1 = pair.n_valid[ok], pair.p_ex[ok], y1[ok]
    n_ans = nv.sum()
    brier = ((k1 * (1 - pp) ** 2 + (nv - k1) * pp ** 2).sum() / n_ans) if n_ans else float("nan")
    b_exp = (nv * pp * (1 - pp)).sum() / n_ans if n_ans else float("nan")
    b_var = (nv * pp * (1 - pp) * (1 - 2 * pp) ** 2).sum() / n_ans ** 2 if n_ans else float("nan")
    return dict(brier=float(brier), brier_expected=float(b_exp),
                brier_z=float((brier - b_exp) / math.sqrt(b_var)) if n_ans and b_var > 0 else float("nan"))


def noise_bands(pair: _Pair, n_sim: int, rng: np.random.Generator) -> dict:
    """Phase 3: the statistics expected from sampling noise alone.

    The sampled answers are redrawn ``n_sim`` times as Bernoulli draws from the exact likelihood of each
    form, with the sampled run's number of valid answers per form (forms without one stay at 0.5), in
    chunks of draws (one call draws a chunk's rows in the same order as one call per draw would).

    Returns
    -------
    dict
        ``r_p_sim``, ``mad_p_sim`` (means) with their ``_lo``/``_hi`` 2.5 / 97.5 % quantiles, the same for
        ``rho_qfc_sim`` and ``rho_qfe_sim`` (NaN when the scenarios were not asked in the same forms), and
        ``qfe_sampled_sim``, ``qfc_sampled_sim``: the mean sampled QF-E and QF-C.
    """
    from .metrics import qf_two_actions

    sc, ex, n_valid = pair.sc, pair.ex, pair.n_valid
    sims_r, sims_d, sims_qfc, sims_qfe, mean_qfc, mean_qfe = [], [], [], [], [], []
    pos = {s: i for i, s in enumerate(sc)}
    order = np.array([pos[s] for s in pair.al["scenario_id"].to_numpy()])
    per_sc = np.bincount(order, minlength=len(sc))
    # rows are sorted by scenario then form; with the same forms everywhere they reshape to (scenario, form)
    z = int(per_sc[0]) if len(per_sc) and (per_sc == per_sc[0]).all() else 0
    member = np.zeros((len(order), len(sc)))
    member[np.arange(len(order)), order] = 1.0
    x_p = ex["p_action1"].to_numpy(dtype=float)
    p_draw = np.where(~np.isnan(pair.p_ex), pair.p_ex, 0.5)
    for start in range(0, int(n_sim), _SIM_CHUNK):
        k = min(_SIM_CHUNK, int(n_sim) - start)
        draw = rng.binomial(n_valid, p_draw, size=(k, len(n_valid)))
        pf_sim = np.where(n_valid > 0, draw / np.maximum(n_valid, 1), 0.5)
        marg = (pf_sim @ member) / per_sc
        sims_r.append(_pearson_rows(x_p, marg))
        sims_d.append(np.mean(np.abs(marg - x_p), axis=1))
        if z:
            qfc_s, qfe_s = qf_two_actions(pf_sim.reshape(k, len(sc), z))  # QF-C, QF-E of [p, 1 - p], bit for bit
            sims_qfc.append(_spearman_rows(ex["qf_consistency"].to_numpy(dtype=float), qfc_s))
            sims_qfe.append(_spearman_rows(ex["qf_entropy"].to_numpy(dtype=float), qfe_s))
            mean_qfc.append(qfc_s.mean(axis=1))
            mean_qfe.append(qfe_s.mean(axis=1))
    sims_r, sims_d = (np.concatenate(x) if x else np.array([]) for x in (sims_r, sims_d))
    sims_qfc, sims_qfe, mean_qfc, mean_qfe = (np.concatenate(x) if x else [] for x in
                                              (sims_qfc, sims_qfe, mean_qfc, mean_qfe))
    return dict(
        r_p_sim=float(np.nanmean(sims_r)) if n_sim else np.nan,
        r_p_sim_lo=float(np.nanquantile(sims_r, 0.025)) if n_sim else np.nan,
        r_p_sim_hi=float(np.nanquantile(sims_r, 0.975)) if n_sim else np.nan,
        mad_p_sim=float(np.mean(sims_d)) if n_sim else np.nan,
        mad_p_sim_lo=float(np.quantile(sims_d, 0.025)) if n_sim else np.nan,
        mad_p_sim_hi=float(np.quantile(sims_d, 0.975)) if n_sim else np.nan,
        **dict(zip(("rho_qfc_sim", "rho_qfc_sim_lo", "rho_qfc_sim_hi"), _band(sims_qfc))),
        **dict(zip(("rho_qfe_sim", "rho_qfe_sim_lo", "rho_qfe_sim_hi"), _band(sims_qfe))),
        qfe_sampled_sim=float(np.mean(mean_qfe)) if len(mean_qfe) else np.nan,
        qfc_sampled_sim=float(np.mean(mean_qfc)) if len(mean_qfc) else np.nan,
    )


def _row(model, pair: _Pair, sims: dict, brier: dict) -> dict:
    """Phase 4: the observed statistics beside their bands, in the table's column order."""
    ex, sa = pair.ex, pair.sa
    return dict(
        model=model, n_scenarios=len(pair.sc),
        samples_per_form=float(pair.rs.groupby(["scenario_id", "question_type", "ordering"]).size().mean()),
        r_p=_pearson(ex["p_action1"], sa["p_action1"]),
        mad_p=float(np.mean(np.abs(ex["p_action1"] - sa["p_action1"]))),
        **{k: sims[k] for k in ("r_p_sim", "r_p_sim_lo", "r_p_sim_hi", "mad_p_sim", "mad_p_sim_lo", "mad_p_sim_hi")},
        rho_qfc=_spearman(ex["qf_consistency"], sa["qf_consistency"]),
        **{k: sims[k] for k in ("rho_qfc_sim", "rho_qfc_sim_lo", "rho_qfc_sim_hi")},
        rho_qfe=_spearman(ex["qf_entropy"], sa["qf_entropy"]),
        **{k: sims[k] for k in ("rho_qfe_sim", "rho_qfe_sim_lo", "rho_qfe_sim_hi")},
        qfe_exact=float(ex["qf_entropy"].mean()), qfe_sampled=float(sa["qf_entropy"].mean()),
        qfe_sampled_sim=sims["qfe_sampled_sim"],
        qfc_exact=float(ex["qf_consistency"].mean()), qfc_sampled=float(sa["qf_consistency"].mean()),
        qfc_sampled_sim=sims["qfc_sampled_sim"],
        covered=float(pair.lk["covered"].mean()),
        **brier,
    )


@dataclass
class EstimatorComparison:
    """The result of :func:`compare_estimators` (or :func:`compare_at_paper_m`).

    Attributes
    ----------
    table : DataFrame
        One row per respondent (and ``M``, for :func:`compare_at_paper_m`); the columns are described in
        :func:`compare_estimators`.
    n_sim : int
        Draws of the noise bands.
    seed : int
        Seed of the noise bands.
    """

    table: pd.DataFrame
    n_sim: int = N_SIM
    seed: int = 0

    def __len__(self) -> int:
        return len(self.table)

    def to_frame(self) -> pd.DataFrame:
        """The comparison as a DataFrame (a copy), one row per respondent."""
        return self.table.copy()

    def summary(self, digits: int = 2) -> pd.DataFrame:
        """One readable cell per statistic, ``observed [noise band]`` (:func:`agreement_summary`), indexed by
        ``M`` and ``model`` when the table has ``M``."""
        if not len(self.table):
            return pd.DataFrame()
        if "M" not in self.table.columns:
            return agreement_summary(self.table, digits)
        return pd.concat({m: agreement_summary(c.drop(columns="M").reset_index(drop=True), digits)
                          for m, c in self.table.groupby("M", sort=False)}, names=["M"])

    def plot(self, ax=None, stat: str = "r_p"):
        """Each respondent's observed ``stat`` (dot) beside its band from sampling noise alone (bar).

        Parameters
        ----------
        ax : matplotlib Axes, optional
        stat : {"r_p", "mad_p", "rho_qfc", "rho_qfe"}

        Returns
        -------
        matplotlib Axes
        """
        import matplotlib.pyplot as plt

        check_choice(stat, ("r_p", "mad_p", "rho_qfc", "rho_qfe"), "stat")
        ax = ax if ax is not None else plt.subplots(figsize=(6, 0.5 + 0.4 * max(1, len(self.table))))[1]
        t = self.table.reset_index(drop=True)
        labels = [f"{m} (M = {k})" if "M" in t.columns else str(m)
                  for m, k in zip(t["model"], t["M"] if "M" in t.columns else t["model"])]
        y = np.arange(len(t))
        if f"{stat}_sim_lo" in t.columns:
            ax.hlines(y, t[f"{stat}_sim_lo"], t[f"{stat}_sim_hi"], color="0.7", lw=6, label="sampling noise alone (95 %)")
        ax.plot(t[stat], y, "o", color="C0", label="observed")
        ax.set_yticks(y, labels)
        ax.set_xlabel(stat)
        ax.legend(fontsize=8)
        return ax

    def _repr_html_(self) -> str:
        return self.summary()._repr_html_()


def compare_estimators(likelihoods: pd.DataFrame, responses: pd.DataFrame, *, models=None, n_sim: int = N_SIM,
                       seed: int = 0, column: str = "decision") -> EstimatorComparison:
    """Agreement of the exact (token-probability) and the sampling estimators on the scenarios both cover.

    For each respondent present in both tables, on the common scenarios (:func:`common_scenarios`):

    * ``r_p``: Pearson correlation of the marginal action likelihoods (eq. 8),
      ``mad_p``: their mean absolute difference;
    * ``rho_qfc``, ``rho_qfe``: Spearman correlations of QF-C and QF-E (do the
      two estimators rank the scenarios alike?), with ``rho_qfc_sim``/``rho_qfe_sim``
      and their ``_lo``/``_hi`` range from sampling noise alone (below; NaN when
      the scenarios were not asked in the same forms);
    * ``qfe_exact``, ``qfe_sampled``: mean QF-E of each (sampling with M samples
      per form cannot exceed what M draws allow: with M = 1 it is 0), and
      ``qfe_sampled_sim``, the mean the sampled QF-E has when the answers are
      drawn from the exact likelihoods: the plug-in entropy of M draws is biased
      low, so ``qfe_sampled`` below ``qfe_exact`` by about ``qfe_exact -
      qfe_sampled_sim`` is the sampling estimator's bias, not a disagreement
      (the same for ``qfc_*``);
    * the same statistics **expected from sampling noise alone** (:func:`noise_bands`):
      ``r_p_sim`` and ``mad_p_sim`` are their means, ``*_lo``/``*_hi`` their 2.5 / 97.5 %
      quantiles. An observed value inside that band means the two estimators agree up
      to the sampling noise of M.
    * ``brier``, ``brier_expected``, ``brier_z`` (:func:`brier_score`).

    Parameters
    ----------
    likelihoods : DataFrame
        Token-probability likelihoods (:func:`moralkit.moralchoice.likelihood.read_likelihoods`).
    responses : DataFrame
        Mapped sampled responses (:func:`moralkit.moralchoice.load_responses`).
    models : list of str, optional
        Respondents to compare (default: all present in both).
    n_sim : int, default :data:`N_SIM`
        Draws of the noise bands.
    seed : int, default 0
        Seed of the noise bands; each respondent draws from its own stream (seed and label).
    column : str, default "decision"
        Column of ``responses`` holding the mapped answer.

    Returns
    -------
    EstimatorComparison
        ``.to_frame()``: one row per respondent with at least 3 common scenarios.

    References
    ----------
    Scherrer et al. (2023), eq. 7 (the sampling estimator), Definitions 1, 5, 6, Section 3.3 (M = 5 / 10).
    """
    n_sim = check_int(n_sim, "n_sim", minimum=0)
    seed = check_int(seed, "seed", minimum=0)
    if not len(likelihoods) or not len(responses):
        return EstimatorComparison(pd.DataFrame(), n_sim, seed)
    common_models = sorted(set(likelihoods["model"].unique()) & set(responses["model"].unique()))
    if models is not None:
        missing = sorted(set(models) - set(common_models))
        if missing:
            raise DataError(f"respondents {missing} are not in both tables; both hold {common_models}.")
        common_models = list(models)
    rows = []
    for m in common_models:
        pair = common_scenarios(likelihoods, responses, m, column)
        if pair is None:
            continue
        # one stream per respondent: its noise band does not depend on which other respondents are compared
        rng = np.random.default_rng(np.random.SeedSequence([seed, 15, *str(m).encode()]))
        rows.append(_row(m, pair, noise_bands(pair, n_sim, rng), brier_score(pair)))
    return EstimatorComparison(pd.DataFrame(rows), n_sim, seed)


def compare_at_paper_m(likelihoods: pd.DataFrame, responses: pd.DataFrame, ambiguity: str, *, seed: int = 0,
                       fallback: bool = True, n_sim: int = N_SIM) -> EstimatorComparison:
    """:func:`compare_estimators` on the sampled answers at the paper's M, per respondent.

    A respondent's answers count at the paper's M (5 low, 10 high) on the scenarios answered that many
    times in every form (:func:`moralkit.moralchoice.with_samples`). With ``fallback``, the respondents
    with no such scenario are compared on all their answers instead (M = 1 runs, where QF-E cannot agree).

    Parameters
    ----------
    likelihoods : DataFrame
        Exact likelihoods of one ambiguity level (:func:`moralkit.moralchoice.likelihood.load_likelihoods`).
    responses : DataFrame
        Sampled answers of the same level (:func:`moralkit.moralchoice.load_responses`).
    ambiguity : {"low", "high"}
    seed : int
        Seed of the noise bands (:func:`compare_estimators`).
    fallback : bool, default True
    n_sim : int, default :data:`N_SIM`
        Draws of the noise bands (:func:`compare_estimators`).

    Returns
    -------
    EstimatorComparison
        Its table has the columns of :func:`compare_estimators` and ``M`` (the paper's M, or 1), paper-M
        rows first.

    References
    ----------
    Scherrer et al. (2023), eq. 7 and Section 3.3 (M = 5 low, M = 10 high).
    """
    from .data import PAPER_SAMPLES
    from .responses import with_samples

    check_choice(ambiguity, sorted(PAPER_SAMPLES), "ambiguity")
    M = PAPER_SAMPLES[ambiguity]
    if not len(likelihoods) or not len(responses):
        return EstimatorComparison(pd.DataFrame(), n_sim, seed)
    at_m = with_samples(responses, M)
    parts = [(at_m, M)]
    if fallback:  # the respondents with no scenario at the paper's M
        parts.append((responses[~responses["model"].isin(set(at_m["model"].unique()))], 1))
    out = [compare_estimators(likelihoods, r, seed=seed, n_sim=n_sim).table.assign(M=m) for r, m in parts if len(r)]
    out = [c for c in out if len(c)]
    return EstimatorComparison(pd.concat(out, ignore_index=True) if out else pd.DataFrame(), n_sim, seed)


def agreement_summary(comparison: pd.DataFrame, digits: int = 2) -> pd.DataFrame:
    """:func:`compare_estimators` as one readable cell per statistic: ``observed [noise band]``.

    Columns ``r_p``, ``mad_p``, ``rho_qfc``, ``rho_qfe`` read e.g. ``0.51 [0.49, 0.64]``: the observed value,
    then the 95 % range the statistic has when the sampled answers are redrawn from the exact likelihoods.
    An observed value inside its band means the two estimators agree up to the sampling noise of M.
    ``qfe: exact / sampled (expected)`` gives the mean QF-E of each estimator and, in brackets, the mean the
    sampled one has when the answers are drawn from the exact likelihoods (its bias at this M); the same
    for QF-C.

    Examples
    --------
    >>> c = pd.DataFrame({"model": ["m"], "n_scenarios": [200], "samples_per_form": [5.0], "r_p": [0.512],
    ...                   "r_p_sim_lo": [0.487], "r_p_sim_hi": [0.641], "covered": [0.92], "brier_z": [-0.56]})
    >>> agreement_summary(c).loc["m", "r_p"]
    '0.51 [0.49, 0.64]'
    """
    if isinstance(comparison, EstimatorComparison):
        comparison = comparison.table
    out = comparison.set_index("model")[["n_scenarios", "samples_per_form"]].copy()
    out["samples_per_form"] = out["samples_per_form"].round(1)
    for stat in ("r_p", "mad_p", "rho_qfc", "rho_qfe"):
        if stat not in comparison.columns:
            continue
        lo = comparison.get(f"{stat}_sim_lo", pd.Series(np.nan, index=comparison.index))
        hi = comparison.get(f"{stat}_sim_hi", pd.Series(np.nan, index=comparison.index))
        out[stat] = [format_interval(v, a, b, digits) for v, a, b in zip(comparison[stat], lo, hi)]
    for q in ("qfe", "qfc"):
        if {f"{q}_exact", f"{q}_sampled"} <= set(comparison.columns):
            sim = comparison.get(f"{q}_sampled_sim", pd.Series(np.nan, index=comparison.index))
            out[f"{q}: exact / sampled (expected)"] = [
                f"{a:.{digits}f} / {b:.{digits}f}" + ("" if np.isnan(c) else f" ({c:.{digits}f})")
                for a, b, c in zip(comparison[f"{q}_exact"], comparison[f"{q}_sampled"], sim)]
    for col in ("covered", "brier_z"):
        if col in comparison.columns:
            out[col] = comparison.set_index("model")[col].round(digits)
    return out
