"""Steerability: do system-prompt personas move a model's answers to both surveys as expected?

A *persona-respondent* is one model answering under a short system prompt
(:mod:`moralkit.collect.personas`): the same weights, not a different model.
This module compares each persona-respondent with the same model without a
persona (the *baseline*), on both instruments:

* **PSM** (Seror 2025): the NLLS ideal points b of eq. (7) (Table 2 (a)), with
  the difference's percentile interval from the two fits' bootstrap replicates
  over rounds (independent resamples, paired by replicate index), and the CCEI
  with the random-choice test's alpha (Table 1) side by side;
* **MoralChoice** (Scherrer et al. 2023): the marginal action likelihood (eq. 8)
  on the scenarios both respondents answered, as the mean difference and as a
  *directed* effect: each scenario gets a sign from the rules its two actions
  violate (the ``a1_*`` / ``a2_*`` columns of the survey) that matter to the
  persona's theory (:data:`PERSONA_RULES`): +1 when action1 violates fewer of
  them. The directed effect is the mean of sign x difference over the signed
  scenarios, with a bootstrap interval over scenarios and a sign-flip
  permutation p-value (one-sided: the persona moves towards the action its
  theory favours).

The expected directions (:data:`PERSONA_RULES`, :data:`PSM_EXPECTED`) were
written down before the persona runs finished, from the persona texts and the
cited theories; they are hypotheses, and the tables report whether the data
agree, not the other way round.

A natural reference for noise: the same model with another sampling seed
(``qwen2.5-coder-0.5b-instruct-s1`` in ``data/psm``) moves b by sampling alone;
pass it as a respondent to see that spread.

References
----------
Seror (2025), Section 3.2 (eq. 7, Table 2), Section 3.1 (Table 1); Scherrer et al.
(2023), Definitions 3-4 (eq. 8), Appendix A (the rule annotations, Gert's rules).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import DataError

__all__ = ["PERSONA_RULES", "PSM_EXPECTED", "rule_direction", "likelihood_effects", "psm_effects",
           "psm_effects_summary", "rationality_effects"]

#: The MoralChoice rules (column suffixes of ``a1_*``/``a2_*``) that each persona's theory weighs most.
PERSONA_RULES: dict[str, tuple[str, ...]] = {
    # welfare consequences: killing, pain, disabling, depriving of pleasure (Mill's "happiness")
    "utilitarian": ("death", "pain", "disable", "pleasure"),
    # duties and respect for persons: no deception, cheating, broken promises or laws, duty, autonomy
    "deontological": ("deceive", "cheat", "break_promise", "break_law", "duty", "freedom"),
    # protecting the particular people affected from harm
    "care": ("death", "pain", "disable"),
    "virtue": ("deceive", "cheat", "break_promise", "pain"),
}

#: Expected sign of the persona's shift of b on the five PSM statements (Truth, Machine, Consent, Risk,
#: Autonomy); 0 = no expectation. Every statement asks whether an act is acceptable *for a benefit*
#: (a consequentialist trade-off), so a utilitarian should agree more and a deontologist less; the care
#: persona is expected to accept withholding the truth "to prevent emotional harm" and to want a human in
#: the loop (Machine).
PSM_EXPECTED: dict[str, tuple[int, ...]] = {
    "utilitarian": (1, 1, 1, 1, 1),
    "deontological": (-1, -1, -1, -1, -1),
    "care": (1, -1, 0, 0, 0),
    "virtue": (0, 0, 0, 0, 0),
}


def _persona_of(label: str) -> str | None:
    if "+persona-" not in label:
        return None
    return label.split("+persona-", 1)[1].split("/")[0]


def rule_direction(scenarios: pd.DataFrame, rules) -> pd.Series:
    """Per scenario, +1 if action1 violates fewer of ``rules`` than action2, -1 if more, 0 if as many.

    Parameters
    ----------
    scenarios : DataFrame
        A scenario table (:func:`moralkit.moralchoice.load_scenarios`) with the
        ``a1_<rule>``/``a2_<rule>`` columns (``Yes`` counts as a violation).
    rules : tuple of str or str
        Rule suffixes, or a persona name of :data:`PERSONA_RULES`.

    Returns
    -------
    Series indexed by scenario_id (int)

    Examples
    --------
    >>> sc = pd.DataFrame({"scenario_id": ["x", "y"], "a1_pain": ["No", "Yes"], "a2_pain": ["Yes", "No"]})
    >>> rule_direction(sc, ("pain",)).tolist()
    [1, -1]
    """
    if isinstance(rules, str):
        if rules not in PERSONA_RULES:
            raise DataError(f"unknown persona {rules!r}; PERSONA_RULES has {sorted(PERSONA_RULES)}")
        rules = PERSONA_RULES[rules]
    missing = [f"a{k}_{r}" for r in rules for k in (1, 2) if f"a{k}_{r}" not in scenarios.columns]
    if missing:
        raise DataError(f"the scenario table lacks the rule columns {missing}; pass load_scenarios(...) output.")
    v1 = sum((scenarios[f"a1_{r}"] == "Yes").astype(int) for r in rules)
    v2 = sum((scenarios[f"a2_{r}"] == "Yes").astype(int) for r in rules)
    return pd.Series(np.sign(v2 - v1).astype(int).to_numpy(), index=scenarios["scenario_id"].to_numpy(),
                     name="direction")


def _boot_mean_ci(x, n_boot, rng, level):
    x = np.asarray(x, float)
    if len(x) < 2:
        return np.nan, np.nan
    idx = rng.integers(0, len(x), size=(int(n_boot), len(x)))
    m = x[idx].mean(axis=1)
    a = (1 - level) / 2
    return float(np.quantile(m, a)), float(np.quantile(m, 1 - a))


def _signflip_p(x, n_perm, rng):
    """One-sided p-value of mean(x) > 0 under random sign flips (x symmetric about 0 under H0)."""
    x = np.asarray(x, float)
    if len(x) == 0:
        return np.nan
    obs = x.mean()
    signs = rng.choice((-1.0, 1.0), size=(int(n_perm), len(x)))
    null = (signs * x).mean(axis=1)
    return float((1 + np.sum(null >= obs - 1e-15)) / (1 + int(n_perm)))


def likelihood_effects(metrics: pd.DataFrame, baseline: str, scenarios: pd.DataFrame, respondents=None, *,
                       n_boot: int = 2000, n_perm: int = 9999, level: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Persona effects on the marginal action likelihood (eq. 8), per respondent.

    Parameters
    ----------
    metrics : DataFrame
        :func:`moralkit.moralchoice.scenario_metrics` output holding the baseline
        and the persona-respondents (same estimator for all, e.g. token probabilities).
    baseline : str
        The baseline respondent's ``model`` (the model without a persona).
    scenarios : DataFrame
        The scenario table (for the rule annotations).
    respondents : list of str, optional
        Default: every other respondent whose label holds ``+persona-``.
    n_boot, n_perm, level, seed
        Bootstrap replicates over scenarios, sign-flip permutations, interval
        level, seed. Each respondent draws from its own stream (seed and label),
        so its row does not depend on which other respondents are analysed.

    Returns
    -------
    DataFrame
        One row per respondent: ``persona``, ``n_scenarios`` (common with the
        baseline), ``mean_delta`` (mean of p_action1(persona) - p_action1(baseline))
        with ``delta_lo``/``delta_hi``; ``n_signed`` (scenarios whose actions
        differ on the persona's rules), ``directed_effect`` (mean of sign x delta;
        > 0: towards the action the theory favours) with ``directed_lo``/
        ``directed_hi`` and ``p_directed`` (one-sided sign-flip p-value);
        ``estimator``.

    References
    ----------
    Scherrer et al. (2023), eq. 8 and the rule annotations (Section 3.1, Appendix A).
    """
    for c in ("model", "scenario_id", "p_action1"):
        if c not in metrics.columns:
            raise DataError(f"metrics lack the column {c!r}; pass moralkit.moralchoice.scenario_metrics output.")
    models = set(metrics["model"])
    if baseline not in models:
        raise DataError(f"baseline {baseline!r} is not in the metrics; they hold {sorted(models)}.")
    if respondents is None:
        respondents = sorted(m for m in models if m != baseline and _persona_of(m))
    base = metrics[metrics["model"] == baseline].set_index("scenario_id")["p_action1"]
    rows = []
    for r in respondents:
        if r not in models:
            raise DataError(f"respondent {r!r} is not in the metrics; they hold {sorted(models)}.")
        per = metrics[metrics["model"] == r].set_index("scenario_id")["p_action1"]
        common = sorted(set(per.index) & set(base.index))
        delta = (per.loc[common] - base.loc[common]).to_numpy()
        persona = _persona_of(r)
        # one stream per respondent: its intervals do not move when another respondent's data change
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), 15, 3, *r.encode()]))
        row = dict(respondent=r, persona=persona, n_scenarios=len(common),
                   mean_delta=float(delta.mean()) if len(delta) else np.nan)
        row["delta_lo"], row["delta_hi"] = _boot_mean_ci(delta, n_boot, rng, level)
        if persona in PERSONA_RULES and len(common):
            s = rule_direction(scenarios, persona).reindex(common).fillna(0).to_numpy()
            d = (s * delta)[s != 0]
            row.update(n_signed=int((s != 0).sum()), directed_effect=float(d.mean()) if len(d) else np.nan)
            row["directed_lo"], row["directed_hi"] = _boot_mean_ci(d, n_boot, rng, level)
            row["p_directed"] = _signflip_p(d, n_perm, rng)
        rows.append(row)
    out = pd.DataFrame(rows)
    est = metrics.attrs.get("estimator") or (metrics["estimator"].iloc[0] if "estimator" in metrics.columns
                                             and len(metrics) else None)
    out["estimator"] = est
    return out


def psm_effects(fits: dict, baseline: str, respondents=None, *, expected=None, level: float = 0.95) -> pd.DataFrame:
    """Persona effects on the NLLS ideal points b (eq. 7), per respondent and statement.

    Parameters
    ----------
    fits : dict {model: UtilityFit}
        :func:`moralkit.psm.nlls.fit_models` output with ``n_boot > 0`` (the
        intervals come from the bootstrap replicates).
    baseline : str
    respondents : list of str, optional
        Default: every other model of ``fits``.
    expected : dict {persona: tuple of 5 signs}, optional
        Default :data:`PSM_EXPECTED`.
    level : float, default 0.95

    Returns
    -------
    DataFrame
        One row per (respondent, dimension): ``b``, ``b_baseline``, ``delta``,
        ``delta_lo``/``delta_hi`` (percentile interval of the differences of the
        two fits' bootstrap replicates), ``expected`` (sign or 0), ``agrees``
        (the interval lies on the expected side of 0; None without expectation).

    References
    ----------
    Seror (2025), Section 3.2, eq. (7), Table 2 (a).
    """
    from ..psm.design import DIMENSIONS

    expected = PSM_EXPECTED if expected is None else expected
    if baseline not in fits:
        raise DataError(f"baseline {baseline!r} has no fit; fits hold {sorted(fits)}.")
    if respondents is None:
        respondents = [m for m in fits if m != baseline]
    fb = fits[baseline]
    if fb.boot_b is None or len(fb.boot_b) < 2:
        raise DataError("the fits have no bootstrap replicates; fit them with fit_models(..., n_boot=200).")
    a = (1 - level) / 2
    rows = []
    for r in respondents:
        f = fits[r]
        if f.boot_b is None or len(f.boot_b) < 2:
            raise DataError(f"the fit of {r!r} has no bootstrap replicates; use fit_models(..., n_boot=200).")
        n = min(len(f.boot_b), len(fb.boot_b))
        diff = f.boot_b[:n] - fb.boot_b[:n]
        exp = expected.get(_persona_of(r) or "", (0,) * 5)
        for s, dim in enumerate(DIMENSIONS):
            lo, hi = np.quantile(diff[:, s], [a, 1 - a])
            e = int(exp[s])
            agrees = None if e == 0 else bool((lo > 0) if e > 0 else (hi < 0))
            rows.append(dict(respondent=r, persona=_persona_of(r), dimension=dim, b=float(f.b[s]),
                             b_baseline=float(fb.b[s]), delta=float(f.b[s] - fb.b[s]), delta_lo=float(lo),
                             delta_hi=float(hi), expected=e, agrees=agrees))
    return pd.DataFrame(rows)


def psm_effects_summary(effects: pd.DataFrame) -> pd.DataFrame:
    """One row per respondent of :func:`psm_effects`: how many shifts of b are distinguishable from 0.

    Parameters
    ----------
    effects : DataFrame
        :func:`psm_effects` output.

    Returns
    -------
    DataFrame
        ``respondent``, ``persona``, ``statements`` (rows), ``interval_excludes_0``
        (shifts whose interval lies on one side of 0), ``with_expectation``
        (statements with an expected sign), ``expected_side`` / ``opposite_side``
        (of those, intervals wholly on the expected / the opposite side of 0),
        ``mean_abs_delta`` and ``max_abs_delta`` (|b - b_baseline|). A
        respondent without a persona (another sampling seed) shows how far b
        moves by sampling alone.

    Examples
    --------
    >>> eff = pd.DataFrame({"respondent": ["m+persona-care"] * 2, "persona": ["care"] * 2,
    ...                     "delta": [0.5, -0.1], "delta_lo": [0.2, -0.4], "delta_hi": [0.8, 0.2],
    ...                     "expected": [1, -1]})
    >>> psm_effects_summary(eff)[["interval_excludes_0", "expected_side", "opposite_side"]].values.tolist()
    [[1, 1, 0]]

    References
    ----------
    Seror (2025), Section 3.2, eq. (7), Table 2 (a).
    """
    need = ["respondent", "persona", "delta", "delta_lo", "delta_hi", "expected"]
    missing = [c for c in need if c not in effects.columns]
    if missing:
        raise DataError(f"effects lack the columns {missing}; pass moralkit.studies.steerability.psm_effects output.")
    rows = []
    for r, g in effects.groupby("respondent", sort=False):
        above, below = g["delta_lo"] > 0, g["delta_hi"] < 0
        e = g["expected"].astype(int)
        rows.append(dict(respondent=r, persona=g["persona"].iloc[0], statements=len(g),
                         interval_excludes_0=int((above | below).sum()), with_expectation=int((e != 0).sum()),
                         expected_side=int(((e > 0) & above).sum() + ((e < 0) & below).sum()),
                         opposite_side=int(((e > 0) & below).sum() + ((e < 0) & above).sum()),
                         mean_abs_delta=float(g["delta"].abs().mean()), max_abs_delta=float(g["delta"].abs().max())))
    return pd.DataFrame(rows)


def rationality_effects(table: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """CCEI and alpha (Table 1) of each respondent next to the baseline's.

    Parameters
    ----------
    table : DataFrame
        :func:`moralkit.psm.rationality.table1` output.
    baseline : str

    Returns
    -------
    DataFrame
        ``respondent``, ``persona``, ``ccei_exact``, ``ccei``, ``alpha``, ``ccei_minus_baseline``.
    """
    t = table.set_index("model")
    if baseline not in t.index:
        raise DataError(f"baseline {baseline!r} is not in the table; it holds {sorted(t.index)}.")
    out = t[["ccei_exact", "ccei", "alpha"]].copy()
    out["ccei_minus_baseline"] = out["ccei"] - float(t.loc[baseline, "ccei"])
    out.insert(0, "persona", [_persona_of(m) for m in out.index])
    return out.reset_index().rename(columns={"model": "respondent"})
