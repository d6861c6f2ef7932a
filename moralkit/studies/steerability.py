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

The committed ``qwen2.5-coder-0.5b-instruct-s1`` is the same model with another sampling
seed. Its round-0 answer differs, so the corner flips, and with them the option sets, differ from
the baseline's in 68 of the 160 rounds (:func:`option_sets_differ`): it is not the same design
answered twice, and the b it moves mixes sampling noise with the different option sets. Persona
runs answered exactly the baseline's option sets; :func:`psm_paired_effects` uses that.

Placebos (:func:`placebo_effects`, the ``p_specific`` and ``placebo_*`` columns of
:func:`likelihood_effects`): at low ambiguity the rules favour action 1 in nearly every signed
scenario, so "towards the rules" is there the same as "towards action 1". An effect is called
"towards its rules" only when it also beats random assignments of its signs to the scenarios and
every other persona's rules.

References
----------
Seror (2025), Section 3.2 (eq. 7, Table 2), Section 3.1 (Table 1); Scherrer et al.
(2023), Definitions 3-4 (eq. 8), Appendix A (the rule annotations, Gert's rules).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..checks import check_int
from ..errors import DataError
from .resampling import assignment_p, beats_p, boot_mean_ci, signflip_p

__all__ = ["PERSONA_RULES", "PSM_EXPECTED", "rule_direction", "likelihood_effects", "placebo_effects",
           "psm_effects", "psm_paired_effects", "psm_effects_summary", "rationality_effects", "option_sets_differ"]

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


class _Directions:
    """:func:`rule_direction` of one scenario table, each rule set computed once (a persona's own rules are
    another persona's placebo: 42 calls for 14 rule sets in notebook 07)."""

    def __init__(self, scenarios: pd.DataFrame):
        self.scenarios, self._by_rules = scenarios, {}

    def on(self, rules, common) -> np.ndarray:
        """The directions of ``rules`` on the scenarios ``common`` (0 for a scenario the table lacks)."""
        if rules not in self._by_rules:
            self._by_rules[rules] = rule_direction(self.scenarios, rules)
        return self._by_rules[rules].reindex(common).fillna(0).to_numpy()


def placebo_rules(persona: str | None, placebos=None) -> list[str]:
    """The placebo rule sets for ``persona``: ``placebos`` (persona names of :data:`PERSONA_RULES`) other
    than its own, default every other rule set of :data:`PERSONA_RULES`.

    Examples
    --------
    >>> placebo_rules("care", ["utilitarian", "deontological", "care"])
    ['utilitarian', 'deontological']
    """
    names = list(PERSONA_RULES) if placebos is None else list(placebos)
    unknown = [q for q in names if q not in PERSONA_RULES]
    if unknown:
        raise DataError(f"unknown placebo rule sets {unknown}; PERSONA_RULES has {sorted(PERSONA_RULES)}")
    return [q for q in names if q != persona]


def _verdict(row, alpha) -> str:
    """Words for a directed effect, calling it "towards its rules" only when it beats the placebos."""
    eff, hi = row["directed_effect"], row["directed_hi"]
    if np.isnan(eff):
        return "no signed scenario"
    if hi < 0:
        return "away from its rules" if row.get("p_specific_away", 1.0) <= alpha else "a shift away, not specific to its rules"
    if row["p_directed"] > alpha:
        return "no shift towards its rules"
    if row["p_specific"] <= alpha and row["p_beats_placebos"] <= alpha:
        return "towards its rules"
    return "a shift, not specific to its rules"


def likelihood_effects(metrics: pd.DataFrame, baseline: str, scenarios: pd.DataFrame, respondents=None, *,
                       n_boot: int = 2000, n_perm: int = 9999, level: float = 0.95, seed: int = 0,
                       placebos=None) -> pd.DataFrame:
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
    placebos : list of str, optional
        The rule sets given to each persona as placebos (persona names of
        :data:`PERSONA_RULES`; its own is skipped). Default: every rule set of
        :data:`PERSONA_RULES` (so that a row does not depend on the other
        respondents); notebook 07 and the findings pass the personas that were
        run ("give each persona the other personas' rules").

    Returns
    -------
    DataFrame
        One row per respondent: ``persona``, ``n_scenarios`` (common with the
        baseline), ``mean_delta`` (mean of p_action1(persona) - p_action1(baseline))
        with ``delta_lo``/``delta_hi``; ``n_signed`` (scenarios whose actions
        differ on the persona's rules), ``directed_effect`` (mean of sign x delta;
        > 0: towards the action the theory favours) with ``directed_lo``/
        ``directed_hi`` and ``p_directed`` (one-sided sign-flip p-value);
        the placebos (:func:`placebo_effects`): ``share_plus`` (share of the signed
        scenarios where the rules favour action 1), ``p_specific`` (the directed
        effect against random assignments of the same signs to the scenarios),
        ``placebos`` (the placebo rule sets), ``placebo_effect_max`` and
        ``placebo_p_min`` (the largest directed effect, and the smallest sign-flip
        p-value, under another persona's rules), ``placebo_p`` (each placebo's
        p-value, in words), ``p_beats_placebos`` (the largest, over the placebos,
        of the paired-bootstrap p-value that the own-rule effect exceeds the
        placebo's), ``verdict``: "towards its rules" only when ``p_directed``,
        ``p_specific`` and ``p_beats_placebos`` are all at most ``1 - level``; "a
        shift, not specific to its rules" when only ``p_directed`` is; "away from
        its rules" when the interval lies below 0 and ``p_specific_away`` (the
        specificity test of the opposite direction, computed then) is at most
        ``1 - level``, "a shift away, not specific to its rules" otherwise;
        ``estimator``.

    References
    ----------
    Scherrer et al. (2023), eq. 8 and the rule annotations (Section 3.1, Appendix A).
    """
    respondents = _checked_respondents(metrics, baseline, respondents)
    base = metrics[metrics["model"] == baseline].set_index("scenario_id")["p_action1"]
    directions = _Directions(scenarios)
    rows = [_likelihood_row(r, metrics[metrics["model"] == r].set_index("scenario_id")["p_action1"], base,
                            directions, n_boot=n_boot, n_perm=n_perm, level=level, seed=seed, placebos=placebos)
            for r in respondents]
    out = pd.DataFrame(rows)
    est = metrics["estimator"].iloc[0] if "estimator" in metrics.columns and len(metrics) else None
    out["estimator"] = est
    return out


def _likelihood_row(r: str, per: pd.Series, base: pd.Series, directions: _Directions, *, n_boot, n_perm, level,
                    seed, placebos) -> dict:
    """One respondent's row of :func:`likelihood_effects`: ``per`` and ``base`` are p(action 1) by scenario of
    the respondent ``r`` and of the baseline, ``directions`` the rule directions of the scenario table."""
    common = sorted(set(per.index) & set(base.index))
    delta = (per.loc[common] - base.loc[common]).to_numpy()
    persona = _persona_of(r)
    # one stream per respondent: its intervals do not move when another respondent's data change
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 15, 3, *r.encode()]))
    row = dict(respondent=r, persona=persona, n_scenarios=len(common),
               mean_delta=float(delta.mean()) if len(delta) else np.nan)
    row["delta_lo"], row["delta_hi"] = boot_mean_ci(delta, n_boot, rng, level)
    if persona in PERSONA_RULES and len(common):
        s = directions.on(persona, common)
        row.update(_directed_columns(s, delta, n_boot, n_perm, level, rng))
        # placebos, on a stream of their own (the columns above do not move when they are added)
        prng = np.random.default_rng(np.random.SeedSequence([int(seed), 28, 5, *r.encode()]))
        row.update(_placebo_columns(s, delta, common, directions, placebo_rules(persona, placebos), n_boot,
                                    n_perm, prng, row["directed_hi"]))
        row["verdict"] = _verdict(row, 1 - level)
    return row


def _checked_respondents(metrics: pd.DataFrame, baseline: str, respondents) -> list:
    """The respondents :func:`likelihood_effects` compares with ``baseline``, after checking that the metrics
    have the columns it reads and hold the baseline and every respondent (default: the persona-respondents)."""
    for c in ("model", "scenario_id", "p_action1"):
        if c not in metrics.columns:
            raise DataError(f"metrics lack the column {c!r}; pass moralkit.moralchoice.scenario_metrics output.")
    models = set(metrics["model"].unique())
    if baseline not in models:
        raise DataError(f"baseline {baseline!r} is not in the metrics; they hold {sorted(models)}.")
    if respondents is None:
        respondents = sorted(m for m in models if m != baseline and _persona_of(m))
    for r in respondents:
        if r not in models:
            raise DataError(f"respondent {r!r} is not in the metrics; they hold {sorted(models)}.")
    return respondents


def _directed_columns(s, delta, n_boot, n_perm, level, rng) -> dict:
    """The directed effect of :func:`likelihood_effects` under the persona's signs ``s`` (+1, -1, 0 per
    scenario): ``n_signed``, ``directed_effect`` with its bootstrap interval, and the sign-flip ``p_directed``,
    drawn from ``rng`` in that order."""
    d = (s * delta)[s != 0]
    out = dict(n_signed=int((s != 0).sum()), directed_effect=float(d.mean()) if len(d) else np.nan)
    out["directed_lo"], out["directed_hi"] = boot_mean_ci(d, n_boot, rng, level)
    out["p_directed"] = signflip_p(d, n_perm, rng)
    return out


def _placebo_columns(s, delta, common, directions, placebos, n_boot, n_perm, prng, directed_hi) -> dict:
    """The placebo columns of :func:`likelihood_effects` (see there), drawn from the placebo stream ``prng``.

    ``s`` are the persona's own signs on the ``common`` scenarios, ``placebos`` the other rule sets
    (:func:`placebo_rules`); ``p_specific_away`` is computed only when ``directed_hi`` is below 0.
    """
    out = {"share_plus": float((s[s != 0] > 0).mean()) if (s != 0).any() else np.nan,
           "p_specific": assignment_p(s, delta, n_perm, prng)}
    pl = {}
    boot = prng.integers(0, len(common), size=(int(n_boot), len(common)))
    for q in placebos:
        sq = directions.on(q, common)
        dq = (sq * delta)[sq != 0]
        pl[q] = (float(dq.mean()) if len(dq) else np.nan, signflip_p(dq, n_perm, prng), beats_p(s, sq, delta, boot))
    out["placebos"] = ", ".join(pl)
    out["placebo_effect_max"] = max((v[0] for v in pl.values()), default=np.nan)
    out["placebo_p_min"] = min((v[1] for v in pl.values()), default=np.nan)
    out["placebo_p"] = "; ".join(f"{q} {v[1]:.4f}" for q, v in pl.items())
    out["p_beats_placebos"] = max((v[2] for v in pl.values()), default=np.nan)
    if directed_hi < 0:  # the same specificity test for a shift the other way
        out["p_specific_away"] = assignment_p(s, -delta, n_perm, prng)
    return out


def placebo_effects(metrics: pd.DataFrame, baseline: str, scenarios: pd.DataFrame, respondents=None, *,
                    n_perm: int = 9999, seed: int = 0) -> pd.DataFrame:
    """Each persona's change of p(action 1) signed by *every* rule set of :data:`PERSONA_RULES`.

    A placebo assignment gives a persona another persona's rules. An effect "towards the persona's
    rules" that is as large under the placebo rules says the persona moves p(action 1) whatever
    the rules, not towards its own.

    Returns
    -------
    DataFrame
        One row per (respondent, rules): ``own`` (the persona's own rules), ``n_signed``,
        ``share_plus`` (share of signed scenarios whose rules favour action 1), ``effect`` (mean of
        sign x delta) and ``p`` (one-sided sign-flip p-value).

    References
    ----------
    Scherrer et al. (2023), eq. 8 and the rule annotations (Appendix A).
    """
    models = set(metrics["model"].unique())
    if baseline not in models:
        raise DataError(f"baseline {baseline!r} is not in the metrics; they hold {sorted(models)}.")
    if respondents is None:
        respondents = sorted(m for m in models if m != baseline and _persona_of(m))
    base = metrics[metrics["model"] == baseline].set_index("scenario_id")["p_action1"]
    directions = _Directions(scenarios)
    rows = []
    for r in respondents:
        per = metrics[metrics["model"] == r].set_index("scenario_id")["p_action1"]
        common = sorted(set(per.index) & set(base.index))
        delta = (per.loc[common] - base.loc[common]).to_numpy()
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), 28, 6, *r.encode()]))
        for q in PERSONA_RULES:
            s = directions.on(q, common)
            d = (s * delta)[s != 0]
            rows.append(dict(respondent=r, persona=_persona_of(r), rules=q, own=q == _persona_of(r),
                             n_signed=int((s != 0).sum()), share_plus=float((s[s != 0] > 0).mean()) if len(d) else np.nan,
                             effect=float(d.mean()) if len(d) else np.nan, p=signflip_p(d, n_perm, rng)))
    return pd.DataFrame(rows)


def option_sets_differ(a, b) -> int:
    """Number of rounds, answered by both, whose option sets differ between two PSM datasets."""
    both = (a.chosen > 0) & (b.chosen > 0)
    return int(sum(not np.array_equal(a.options[i], b.options[i]) for i in np.flatnonzero(both)))


def psm_paired_effects(datasets: dict, baseline: str, respondents=None, *, n_boot: int = 200, seed: int = 0,
                       level: float = 0.95, form: str = "exact", expected=None, unpaired: bool = True) -> pd.DataFrame:
    """Persona shifts of b with a **paired** bootstrap where the two answered the same option sets.

    A persona-respondent and its baseline answered the same rounds with the same options (the same
    design and round-0 answer), so the rounds, not the respondents, are the sampling unit: each
    bootstrap replicate draws one multiset of rounds and refits *both* on it
    (:func:`moralkit.psm.nlls.refit_rounds`). Round-to-round differences in difficulty then cancel
    in the difference. A respondent whose option sets differ in some round (another sampling seed
    with another round-0 answer, hence other corner flips) cannot be paired; its replicates are
    drawn independently of the baseline's (``paired`` False).

    Parameters
    ----------
    datasets : dict {label: PSMDataset}
    baseline : str
    respondents : list of str, optional
        Default: every other label of ``datasets``.
    n_boot, seed, level, form
        Replicates, seed, interval level, NLLS form (:func:`moralkit.psm.nlls.fit_utility`).
    expected : dict, optional
        Default :data:`PSM_EXPECTED`.
    unpaired : bool, default True
        Also compute the unpaired intervals of the paired respondents (twice the refits).

    Returns
    -------
    DataFrame
        The columns of :func:`psm_effects`, plus ``paired``, ``rounds`` (rounds resampled),
        ``rounds_options_differ`` (answered rounds whose option sets differ from the baseline's),
        ``delta_lo_unpaired``/``delta_hi_unpaired`` (independent resamples of the two, for
        comparison; NaN with ``unpaired=False``) and ``n_boot_ok`` (replicates in which both fits converged).

    References
    ----------
    Seror (2025), Section 3.2, eq. (7), Table 2 (a); Efron & Tibshirani (1993), Chapter 6.
    """
    from ..psm import nlls

    expected = PSM_EXPECTED if expected is None else expected
    respondents = _checked_psm_respondents(datasets, baseline, respondents)
    n_boot = check_int(n_boot, "n_boot", minimum=2)
    fits = nlls.fit_models({m: datasets[m] for m in [baseline, *respondents]}, form=form, seed=seed)
    b0 = datasets[baseline]
    differ = {r: option_sets_differ(b0, datasets[r]) for r in respondents}
    paired = [r for r in respondents if differ[r] == 0]
    common, sets = _paired_round_sets(b0, [datasets[r] for r in paired], n_boot, seed)
    base_paired = nlls.refit_rounds(b0, fits[baseline], sets)[:, 5:] if paired else None
    need_indep = unpaired or len(paired) < len(respondents)
    base_indep = (nlls.refit_rounds(b0, fits[baseline], _own_round_sets(b0, baseline, n_boot, seed))[:, 5:]
                  if need_indep else None)
    rows = []
    for r in respondents:
        ds, f = datasets[r], fits[r]
        if unpaired or r not in paired:
            indep = nlls.refit_rounds(ds, f, _own_round_sets(ds, r, n_boot, seed))[:, 5:] - base_indep
            indep = indep[np.isfinite(indep).all(axis=1)]
        else:
            indep = np.full((2, 5), np.nan)
        diff = nlls.refit_rounds(ds, f, sets)[:, 5:] - base_paired if r in paired else indep
        diff = diff[np.isfinite(diff).all(axis=1)]
        rows += _paired_shift_rows(r, f, fits[baseline], diff, indep, expected, level, paired=r in paired,
                                   rounds=int(len(common) if r in paired else (ds.chosen > 0).sum()),
                                   differ=differ[r])
    return pd.DataFrame(rows)


def _checked_psm_respondents(datasets: dict, baseline: str, respondents) -> list:
    """The respondents :func:`psm_paired_effects` compares with ``baseline`` (default: every other label),
    after checking that ``datasets`` hold the baseline and each of them."""
    if baseline not in datasets:
        raise DataError(f"baseline {baseline!r} is not in the data; they hold {sorted(datasets)}.")
    if respondents is None:
        respondents = [m for m in datasets if m != baseline]
    missing = [r for r in respondents if r not in datasets]
    if missing:
        raise DataError(f"respondents {missing} are not in the data; they hold {sorted(datasets)}.")
    return respondents


def _paired_round_sets(b0, paired, n_boot: int, seed: int):
    """``(common, sets)``: the rounds the baseline ``b0`` and every paired respondent answered, and one
    multiset of them per bootstrap replicate (the paired bootstrap of :func:`psm_paired_effects`)."""
    ans = b0.chosen > 0
    for ds in paired:
        ans &= ds.chosen > 0
    common = b0.round_index[ans]
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 28, 1]))
    return common, [np.sort(rng.choice(common, size=len(common), replace=True)) for _ in range(int(n_boot))]


def _own_round_sets(ds, key: str, n_boot: int, seed: int) -> list:
    """Independent resamples of one respondent's answered rounds, on a stream keyed by its label ``key``."""
    g = np.random.default_rng(np.random.SeedSequence([int(seed), 28, 2, *key.encode()]))
    rounds = ds.round_index[ds.chosen > 0]
    return [np.sort(g.choice(rounds, size=len(rounds), replace=True)) for _ in range(int(n_boot))]


def _paired_shift_rows(r: str, f, f0, diff, indep, expected: dict, level: float, *, paired: bool, rounds: int,
                       differ: int) -> list[dict]:
    """The rows of one respondent in :func:`psm_paired_effects`, one per statement: the shift of b from
    the baseline's fit ``f0`` to ``f``, with percentile intervals of the replicate differences ``diff``
    (paired or not) and ``indep`` (unpaired)."""
    from ..psm.design import DIMENSIONS

    a = (1 - level) / 2
    exp = expected.get(_persona_of(r) or "", (0,) * 5)
    rows = []
    for s, dim in enumerate(DIMENSIONS):
        lo, hi = np.quantile(diff[:, s], [a, 1 - a])
        ulo, uhi = np.quantile(indep[:, s], [a, 1 - a])
        e = int(exp[s])
        agrees = None if e == 0 else bool((lo > 0) if e > 0 else (hi < 0))
        rows.append(dict(respondent=r, persona=_persona_of(r), dimension=dim, b=float(f.b[s]),
                         b_baseline=float(f0.b[s]), delta=float(f.b[s] - f0.b[s]),
                         delta_lo=float(lo), delta_hi=float(hi), expected=e, agrees=agrees,
                         paired=paired, rounds=rounds, rounds_options_differ=differ, delta_lo_unpaired=float(ulo),
                         delta_hi_unpaired=float(uhi), n_boot_ok=int(len(diff))))
    return rows


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
