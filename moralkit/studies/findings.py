"""What the committed runs show: every number the README states about them, computed from ``data/``.

``python -m moralkit findings`` prints :func:`findings_markdown`, and the README's section "What the
committed runs show" is that output (a test recomputes it from the committed data and compares), so a
stated finding cannot drift from the data or the code. The notebooks draw the same numbers with the
same functions (05: coverage and estimator agreement; 07: Mantel test and persona effects).

All respondents are small local models (or one of them under a persona system prompt); their answers
are real, and near-random on the PSM.

References
----------
Scherrer et al. (2023), Section 2.3 (Definition 1, eq. 7-8), Section 3.3 (M = 5 / 10), Section 4.3.
Seror (2025), Section 2.4 (eq. 6), Section 3.1 (Table 1), Section 3.2 (eq. 7, Table 2).
"""

from __future__ import annotations

import functools
import warnings

import pandas as pd

from .. import runs
from ..figures import format_interval

__all__ = ["psm_runs", "likelihood_coverage", "sampling_coverage", "estimator_agreement", "both_instruments",
           "persona_effects", "findings", "findings_markdown"]

BASE = "qwen2.5-coder-0.5b-instruct"


def _quiet(fn, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **k)


@functools.lru_cache(maxsize=4)
def _runs(level: str):
    """``crossmethod.load_own_runs`` of the committed data at one ambiguity level, read once per process."""
    from . import crossmethod as xm

    return _quiet(xm.load_own_runs, ambiguity=level)


def psm_runs(*, seed: int = 0, n_datasets: int = 1000) -> pd.DataFrame:
    """Per PSM respondent: rounds answered, the share of answers that are "Option 1", CCEI and alpha.

    Returns
    -------
    DataFrame
        ``respondent``, ``answered`` (of 160 constrained rounds), ``option1`` (share of the answered
        rounds whose answer is Option 1), ``ccei`` (exact fraction, as a string), ``alpha`` (the
        random-choice test, Seror 2025, Section 2.3, ``n_datasets`` random datasets).
    """
    import numpy as np

    from ..psm.dataset import read_psm
    from ..psm.rationality import table1

    data = _quiet(read_psm, runs.run_dir("psm"))
    t1 = table1(data, n_datasets=n_datasets, seed=seed).set_index("model")
    rows = [dict(respondent=m, answered=int(ds.n_obs), option1=float(np.mean(ds.chosen[ds.chosen > 0] == 1)),
                 ccei=str(t1.loc[m, "ccei_exact"]), alpha=float(t1.loc[m, "alpha"])) for m, ds in sorted(data.items())]
    return pd.DataFrame(rows)


def likelihood_coverage(path=None) -> pd.DataFrame:
    """Scenarios x forms covered by exact token-probability likelihoods, per respondent and level.

    Returns
    -------
    DataFrame
        ``respondent``, ``ambiguity``, ``scenarios``, ``of`` (the level's scenarios, degenerate ones
        excluded), ``forms`` (rows: scenario x question form), ``covered`` (mean probability mass of
        the canonical answers).
    """
    from .. import moralchoice as mc
    from ..moralchoice.likelihood import load_likelihoods

    rows = []
    for a in ("low", "high"):
        lik = load_likelihoods(a, path)
        if not len(lik):
            continue
        total = len(_quiet(mc.load_scenarios, a))
        for m, g in lik.groupby("model"):
            rows.append(dict(respondent=m, ambiguity=a, scenarios=g["scenario_id"].nunique(), of=total,
                             forms=len(g), covered=float(g["covered"].mean())))
    return pd.DataFrame(rows, columns=["respondent", "ambiguity", "scenarios", "of", "forms", "covered"])


def _own_responses(ambiguity, path=None):
    from .. import moralchoice as mc

    own = path if path is not None else runs.run_dir("responses")
    return _quiet(mc.load_responses, ambiguity, own_data=own, include_shared=False)


def sampling_coverage(path=None) -> pd.DataFrame:
    """Scenarios each respondent answered at M = 1 and at the paper's M (5 low, 10 high) in every form.

    Returns
    -------
    DataFrame
        ``respondent``, ``ambiguity``, ``scenarios`` (answered), ``paper_M``, ``scenarios_at_paper_M``,
        ``invalid_or_refusal`` (share of answers mapped to neither action).
    """
    from .. import moralchoice as mc

    rows = []
    for a, M in mc.PAPER_SAMPLES.items():
        r = _own_responses(a, path)
        if not len(r):
            continue
        atm = mc.with_samples(r, M)
        for m, g in r.groupby("model"):
            rows.append(dict(respondent=m, ambiguity=a, scenarios=g["scenario_id"].nunique(), paper_M=M,
                             scenarios_at_paper_M=int(atm.loc[atm["model"] == m, "scenario_id"].nunique()),
                             invalid_or_refusal=float((~g["stored_decision"].isin(["action1", "action2"])).mean())))
    return pd.DataFrame(rows)


def estimator_agreement(*, seed: int = 0, responses_path=None, likelihood_path=None) -> pd.DataFrame:
    """:func:`moralkit.moralchoice.comparison.compare_estimators` on the scenarios sampled at the paper's M.

    Returns
    -------
    DataFrame
        One row per respondent and level with both estimators: ``ambiguity``, ``M`` and the columns of
        ``compare_estimators`` (``n_scenarios``, ``r_p`` with its noise band ``r_p_lo``/``r_p_hi``,
        ``mad_p`` with its band, ``qfe_exact``, ``qfe_sampled``, ``qfe_sampled_sim``, ...).
    """
    from .. import moralchoice as mc
    from ..moralchoice.comparison import compare_at_paper_m
    from ..moralchoice.likelihood import load_likelihoods

    out = []
    for a in mc.PAPER_SAMPLES:
        cmp = compare_at_paper_m(load_likelihoods(a, likelihood_path), _own_responses(a, responses_path), a,
                                 seed=seed, fallback=False)
        if len(cmp):
            out.append(cmp.to_frame().assign(ambiguity=a))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def both_instruments(*, seed: int = 0, T: int = 500, rho: int = 20):
    """The respondents with both instruments, and the Mantel test of PSM similarity G against
    MoralChoice agreement (notebook 07 at its default parameters).

    Returns
    -------
    moralkit.studies.crossmethod.CrossMethodResult or None
    """
    from . import crossmethod as xm

    psm, metrics, _ = _runs("high")
    return _quiet(xm.cross_method_from_data, psm, metrics, T=T, rho=rho, seed=seed)


def persona_effects(*, seed: int = 0, n_boot: int = 2000, n_perm: int = 9999, psm_boot: int = 200):
    """Persona effects (notebook 07 at its default parameters, without the placebo table).

    Returns
    -------
    PersonaEffects
        :func:`moralkit.studies.personas.persona_study` on the committed runs: ``moralchoice`` (per level,
        on the exact likelihoods), ``psm`` (the paired shifts of b, one row per respondent and statement)
        and ``psm_summary`` (with ``paired`` and ``rounds_options_differ``).
    """
    from ..moralchoice import load_scenarios
    from .personas import persona_study

    metrics, psm = {}, {}
    for level in ("low", "high"):
        psm, metrics[level], _ = _runs(level)
    res = _quiet(persona_study, psm, metrics, {a: _quiet(load_scenarios, a) for a in metrics}, BASE, n_boot=n_boot,
                 n_perm=n_perm, psm_boot=psm_boot, seed=seed, placebos=False, unpaired=False)
    if len(res.psm):
        eff = res.psm
        res.psm_summary["paired"] = eff.groupby("respondent", sort=False)["paired"].first().to_numpy()
        res.psm_summary["rounds_options_differ"] = (
            eff.groupby("respondent", sort=False)["rounds_options_differ"].first().to_numpy())
    return res


def findings(*, seed: int = 0) -> dict:
    """Every table of :func:`findings_markdown`, as DataFrames (keys ``psm_runs``, ``coverage``, ``sampling``,
    ``agreement``, ``cross_method``, ``persona_moralchoice``, ``persona_psm``, ``persona_psm_effects``)."""
    persona = persona_effects(seed=seed)
    return dict(psm_runs=psm_runs(seed=seed), coverage=likelihood_coverage(), sampling=sampling_coverage(),
                agreement=estimator_agreement(seed=seed), cross_method=both_instruments(seed=seed),
                persona_moralchoice=persona.moralchoice, persona_psm=persona.psm_summary,
                persona_psm_effects=persona.psm)


def _table(df: pd.DataFrame) -> list[str]:
    cells = df.astype(str)
    return (["| " + " | ".join(df.columns) + " |", "|" + " --- |" * len(df.columns)]
            + ["| " + " | ".join(row) + " |" for row in cells.itertuples(index=False)])


def _within_noise(r, r_lo, r_hi, mad, mad_lo, mad_hi) -> str:
    """Which of the two agreement measures lie in their sampling-noise band, in words."""
    r_in, mad_in = r_lo <= r <= r_hi, mad_lo <= mad <= mad_hi
    return {(True, True): "both", (True, False): "r only", (False, True): "mean abs. diff. only",
            (False, False): "neither"}[(bool(r_in), bool(mad_in))]


def _significance(p: float, level: float = 0.05) -> str:
    """``"significant at the 5 % level"`` or ``"not significant at the 5 % level"``."""
    return f"{'' if p <= level else 'not '}significant at the {100 * level:g} % level"


def findings_markdown(*, seed: int = 0, results: dict | None = None) -> str:
    """The README's "What the committed runs show" section body (``python -m moralkit findings``).

    Parameters
    ----------
    seed : int, default 0
        Passed to :func:`findings` when ``results`` is not given.
    results : dict, optional
        :func:`findings` output, to format without recomputing it.

    Returns
    -------
    str
        Markdown: one block per table of :func:`findings` that has rows, in the order of the README.
    """
    f = results if results is not None else findings(seed=seed)
    out = (_psm_runs_block(f.get("psm_runs", pd.DataFrame())) + _coverage_block(f["coverage"])
           + _sampling_block(f["sampling"]) + _agreement_block(f["agreement"])
           + _both_instruments_block(f["cross_method"]) + _persona_moralchoice_block(f["persona_moralchoice"])
           + _persona_psm_block(f["persona_psm"], f.get("persona_psm_effects")))
    return "\n".join(out).rstrip() + "\n"


def _psm_runs_block(psm: pd.DataFrame) -> list[str]:
    """The PSM runs: rounds answered, share of "Option 1", CCEI and alpha (:func:`psm_runs`)."""
    if not len(psm):
        return []
    t = psm.assign(option1=psm["option1"].map(lambda x: f"{100 * x:.1f} %"), alpha=psm["alpha"].map("{:.3f}".format))
    return (["**PSM runs** (160 constrained rounds each, temperature 1; `option 1`: share of the answered rounds "
             "answered \"Option 1\"; CCEI and α of the random-choice test, 1,000 random datasets):", ""]
            + _table(t.rename(columns={"option1": "option 1", "alpha": "α"})) + [""])


def _coverage_block(cov: pd.DataFrame) -> list[str]:
    """The exact likelihoods' coverage (:func:`likelihood_coverage`)."""
    if not len(cov):
        return []
    t = cov.assign(covered=cov["covered"].map("{:.3f}".format),
                   scenarios=[f"{s} / {o}" for s, o in zip(cov["scenarios"], cov["of"])])
    return (["**Exact likelihoods** (token probabilities, all six forms per scenario; `covered`: mean "
             "probability of the canonical answers):", ""]
            + _table(t[["respondent", "ambiguity", "scenarios", "forms", "covered"]]) + [""])


def _sampling_block(smp: pd.DataFrame) -> list[str]:
    """The sampled answers' coverage at M = 1 and at the paper's M (:func:`sampling_coverage`)."""
    if not len(smp):
        return []
    t = smp.assign(invalid_or_refusal=smp["invalid_or_refusal"].map("{:.3f}".format))
    return (["**Sampled answers** (temperature 1; the paper's M: 5 low, 10 high; `invalid_or_refusal`: share "
             "of answers mapped to neither action):", ""]
            + _table(t[["respondent", "ambiguity", "scenarios", "paper_M", "scenarios_at_paper_M",
                        "invalid_or_refusal"]]) + [""])


def _agreement_block(ag: pd.DataFrame) -> list[str]:
    """Exact likelihoods against sampled answers, with the sampling-noise bands (:func:`estimator_agreement`)."""
    if not len(ag):
        return []
    t = pd.DataFrame({
        "respondent": ag["model"], "ambiguity": ag["ambiguity"], "M": ag["M"], "scenarios": ag["n_scenarios"],
        "r (noise band)": [format_interval(*v) for v in ag[["r_p", "r_p_sim_lo", "r_p_sim_hi"]].to_numpy()],
        "mean abs. diff. (noise band)": [format_interval(*v, digits=3) for v in ag[["mad_p", "mad_p_sim_lo", "mad_p_sim_hi"]].to_numpy()],
        "QF-E exact / sampled / expected": [f"{a:.2f} / {b:.2f} / {c:.2f}" for a, b, c in
                                           ag[["qfe_exact", "qfe_sampled", "qfe_sampled_sim"]].to_numpy()],
        "within noise": [_within_noise(*v) for v in
                         ag[["r_p", "r_p_sim_lo", "r_p_sim_hi", "mad_p", "mad_p_sim_lo", "mad_p_sim_hi"]].to_numpy()]})
    return (["**Exact against sampled** at the paper's M, on the scenarios both cover (marginal likelihood of "
             "action 1: Pearson r and mean absolute difference; in brackets the 95 % range from sampling "
             "noise alone; `expected`: the sampled QF-E that answers drawn from the exact likelihoods give; "
             "`within noise`: whether r and the mean abs. diff. lie in their bands):", ""]
            + _table(t) + [""])


def _both_instruments_block(res) -> list[str]:
    """One paragraph on the respondents with both instruments and the Mantel test (:func:`both_instruments`)."""
    if res is None:
        return []
    text = f"**Both instruments:** {len(res.models)} respondents ({', '.join(f'`{m}`' for m in res.models)})."
    if res.mantel is not None:
        m = res.mantel
        from ..psm.permutation import describe_e

        text += (f" Mantel test of PSM similarity G ({describe_e(res.e)}, T = {res.T}, "
                 f"ρ = {res.rho}) against MoralChoice agreement (high ambiguity): "
                 f"{m.method} r = {m.statistic:.3f}, p = {m.pvalue:.3f} "
                 + (f"(exact over {m.n_permutations} relabellings)" if m.exact else "(Monte Carlo)")
                 + f", {_significance(m.pvalue)}.")
    for k, v in res.same_model.items():
        text += (f" {len(v)} of these {len(res.models)} respondents are one model (`{k}`"
                 + (" and its persona or seed variants" if k in v else "") + f"): {len(v) * (len(v) - 1) // 2} "
                 f"of the {len(res.models) * (len(res.models) - 1) // 2} pairs compare it with itself, so the "
                 "relabelling null, which treats the respondents as exchangeable, does not hold.")
    d = res.distinct
    if d is not None and d.mantel is not None:
        md = d.mantel
        text += (f" On one respondent per distinct model ({', '.join(f'`{m}`' for m in d.models)}): "
                 f"{md.method} r = {md.statistic:.3f}, p = {md.pvalue:.3f} over {md.n_permutations} "
                 f"relabellings, whose smallest attainable p is {md.min_pvalue:.3f}: "
                 + ("the test cannot reach the 5 % level." if md.min_pvalue > 0.05 else f"{_significance(md.pvalue)}."))
    return [text, ""]


def _persona_moralchoice_block(eff: pd.DataFrame) -> list[str]:
    """Persona effects on MoralChoice with their placebos (:func:`persona_effects` ``.moralchoice``)."""
    if not len(eff):
        return []
    t = pd.DataFrame({
        "respondent": eff["respondent"], "ambiguity": eff["ambiguity"], "scenarios": eff["n_scenarios"],
        "mean change of p(action 1) [95 % CI]": [format_interval(*v, digits=4, signed=True) for v in
                                                 eff[["mean_delta", "delta_lo", "delta_hi"]].to_numpy()],
        "signed by its rules: share favouring action 1": eff["share_plus"].map("{:.3f}".format),
        "towards the persona's rules [95 % CI]": [format_interval(*v, digits=4, signed=True) for v in
                                                  eff[["directed_effect", "directed_lo", "directed_hi"]].to_numpy()],
        "p (one-sided)": eff["p_directed"].map("{:.4f}".format),
        "p, random signs": eff["p_specific"].map("{:.4f}".format),
        "p, other personas' rules": eff["placebo_p"],
        "p, beats them": eff["p_beats_placebos"].map("{:.4f}".format),
        "verdict": eff["verdict"]})
    return (["**Persona effects on MoralChoice** (exact likelihoods, persona-respondent minus the model without "
             "a persona, per scenario; bootstrap intervals over scenarios, sign-flip p-values. Placebos: `random "
             "signs` shuffles the persona's rule signs over the scenarios; `other personas' rules` signs the same "
             "changes by another persona's rules (a small p there: the placebo works as well); `beats them`: "
             "paired bootstrap p that the effect exceeds every placebo's. `verdict` says \"towards its rules\" "
             "only when all three p-values are at most 0.05):", ""]
            + _table(t) + [""])


def _persona_psm_block(ps: pd.DataFrame, eff: pd.DataFrame | None) -> list[str]:
    """Persona effects on the PSM: a paragraph from the summary ``ps``, then the shifts of b per statement
    (``eff``) when given (:func:`persona_effects` ``.psm_summary`` and ``.psm``)."""
    if not len(ps):
        return []
    signed = ps[ps["persona"].notna()]
    seed_only = ps.loc[ps["persona"].isna(), "max_abs_delta"]
    differ = ps.loc[ps["persona"].isna(), "rounds_options_differ"] if "rounds_options_differ" in ps else []
    paired = "paired bootstrap over rounds: " if "paired" in ps and signed["paired"].all() else "bootstrap over rounds: "
    out = [f"**Persona effects on the PSM** (NLLS ideal points b, {paired}"
           + ("each persona answered the baseline's option sets, so every replicate refits both on the same "
              "resampled rounds): " if paired.startswith("paired") else "")
           + f"{int(signed['interval_excludes_0'].sum())} of {int(signed['statements'].sum())} shifts of b have a "
           f"95 % interval that excludes 0; {int(signed['expected_side'].sum())} of "
           f"{int(signed['with_expectation'].sum())} signed predictions are met. Largest |shift| "
           f"{signed['max_abs_delta'].max():.2f}"
           + (f"; a second sampling seed of the same model, whose round-0 answer differs and with it the option "
              f"sets of {int(max(differ))} of the 160 rounds, moves b by up to {seed_only.max():.2f}." if len(seed_only)
              else ".")]
    if eff is not None and len(eff):
        wide = eff.assign(cell=[format_interval(*v, digits=2, signed=True) for v in
                                eff[["delta", "delta_lo", "delta_hi"]].to_numpy()])
        wide = wide.pivot(index="respondent", columns="dimension", values="cell")
        wide = wide.loc[list(dict.fromkeys(eff["respondent"])), list(dict.fromkeys(eff["dimension"]))]
        kind = eff.groupby("respondent", sort=False)["paired"].first().map({True: "paired", False: "unpaired"})
        wide.insert(0, "bootstrap", kind.loc[wide.index])
        out += ["", "Shift of b per statement, respondent minus the model without a persona [95 % interval]:", ""]
        out += _table(wide.reset_index())
    return out
