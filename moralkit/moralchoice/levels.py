"""Per-ambiguity-level steps of notebook 05: load every level's answers, subsample, stack two estimators,
and the sentences the page prints about them.

Each function takes and returns dicts keyed by ambiguity level (``"low"``, ``"high"``,
``"controversial"``), the shape notebook 05 and :mod:`moralkit.studies.findings` keep their tables in.

References
----------
Scherrer et al. (2023), Sections 3.2-3.3 (the survey, M samples per form), Section 4.2 (Figure 4).
"""

from __future__ import annotations

import warnings

import pandas as pd

from ..checks import check_int

__all__ = ["QUICK_SCENARIOS", "subsample", "load_levels", "stack", "coverage_table", "left_out_lines",
           "bias_lines", "figure5_metrics", "selection_lines", "table17_lines", "paper_m_lines", "grey_region_lines",
           "estimator_agreement", "AGREEMENT_HEADERS", "agreement_view", "empty_table_note", "agreement_table_view",
           "no_published_note", "load_all_scenarios", "survey_table", "rule_table", "metrics_by_level",
           "SUMMARY_HEADERS", "summary_view", "scenario_metrics_view", "load_exact", "exact_metrics",
           "metrics_of_scenarios", "fill_scenarios", "numbered_view", "mapping_agreement", "samples_per_form_table",
           "at_paper_m", "correlations_with_notes", "load_published_levels"]

#: Scenarios per level kept in quick mode.
QUICK_SCENARIOS = 150


def subsample(table: pd.DataFrame, scenarios: pd.DataFrame, *, n: int = QUICK_SCENARIOS, seed: int = 0):
    """The rows of ``table`` whose scenario is among ``n`` scenarios of ``scenarios`` drawn with ``seed``."""
    n = check_int(n, "n", minimum=1)
    keep = scenarios["scenario_id"].sample(n=min(n, len(scenarios)), random_state=seed)
    return table[table["scenario_id"].isin(keep)]


def load_levels(source, own_data, scenarios: dict, *, quick: bool = False, seed: int = 0):
    """Every level's mapped answers (:func:`moralkit.moralchoice.load_responses`), whole and as analysed.

    Parameters
    ----------
    source : survey source (:func:`moralkit.moralchoice.survey_source`)
    own_data : path or False
        The project's own runs (:func:`moralkit.runs.own_runs`).
    scenarios : dict {level: DataFrame}
        The scenario tables, for the quick subsample.
    quick : bool
        Keep :data:`QUICK_SCENARIOS` scenarios per level (seeded by ``seed``).

    Returns
    -------
    responses : dict
        The answers analysed (a subsample in quick mode).
    responses_all : dict
        Every answer (the scenarios the paper prints are read from them in quick mode too).
    lines : list of str
        One line per level: answers, models and the warnings of the reader.
    """
    from .data import AMBIGUITIES
    from .responses import load_responses

    responses, responses_all, lines = {}, {}, []
    for a in AMBIGUITIES:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            r = load_responses(a, source, own_data=own_data)
        responses_all[a] = r
        if quick and len(r):
            r = subsample(r, scenarios[a], seed=seed)
        responses[a] = r
        lines.append(" ".join([f"{a}: {len(r)} answers from {r['model'].nunique()} models",
                               *(f"({w.message})" for w in caught)]))
    return responses, responses_all, lines


def stack(*by_level: dict, levels=("low", "high")) -> dict:
    """Per level, the tables of every dict stacked (rows of the first dict first); levels with none left out.

    ``None`` and empty tables are skipped, so a level answered by one estimator only keeps that one.
    """
    out = {}
    for a in levels:
        parts = [d[a] for d in by_level if d.get(a) is not None and len(d[a])]
        if parts:
            out[a] = pd.concat(parts, ignore_index=True)
    return out


def coverage_table(exact: dict, scenarios: dict) -> pd.DataFrame:
    """Per level and respondent: the mean probability mass of the canonical answers by template, the
    scenarios covered, of how many, and the forms (rows) of the likelihood table."""
    return pd.concat({a: x.groupby(["model", "question_type"])["covered"].mean().unstack()
                      .assign(scenarios=x.groupby("model")["scenario_id"].nunique(), of=len(scenarios[a]),
                              forms=x.groupby("model").size())
                      for a, x in exact.items()}, names=["set", "model"])


def left_out_lines(summaries: dict, fig4_summaries: dict, short=str) -> list[str]:
    """The respondents of each level that Figure 4 leaves out (fewer than the paper's M answers per form)."""
    from .data import PAPER_SAMPLES

    lines = []
    for a in ("low", "high"):
        if a not in summaries:
            continue
        left = sorted(set(summaries[a].index) - set(fig4_summaries[a].index if a in fig4_summaries else []))
        if left:
            lines.append(f"{a} ambiguity, not in Figure 4 (fewer than M = {PAPER_SAMPLES[a]} answers per form): "
                         + ", ".join(short(m) for m in left))
    return lines


def bias_lines(comparisons: dict, short=str) -> list[str]:
    """One markdown line per respondent compared at M >= 2: the QF-E of both estimators, the sampled QF-E
    expected from sampling alone, its bias, and on which side of Figure 4's certainty threshold each lies.

    Parameters
    ----------
    comparisons : dict {(level, M): DataFrame}
        :func:`moralkit.moralchoice.comparison.compare_at_paper_m` tables split by M.
    """
    from .analysis import CERTAINTY_THRESHOLD

    out = []
    for (a, m), cmp in comparisons.items():
        if m < 2:
            continue
        for _, row in cmp.iterrows():
            out.append(
                f"- {a} ambiguity, {short(row['model'])}, M = {m}: QF-E exact {row['qfe_exact']:.2f}, sampled "
                f"{row['qfe_sampled']:.2f}, expected from sampling alone {row['qfe_sampled_sim']:.2f} "
                f"(bias {row['qfe_sampled_sim'] - row['qfe_exact']:+.2f}); on the sampled answers the model is "
                + ("inside" if row["qfe_sampled"] < CERTAINTY_THRESHOLD else "outside")
                + " the certain region, on its exact likelihoods "
                + ("inside." if row["qfe_exact"] < CERTAINTY_THRESHOLD else "outside."))
    return out


def figure5_metrics(fig4_metrics: dict, metrics: dict, pick: dict):
    """The high-ambiguity metrics of Figure 5's models: the consistent and certain ones on the metrics of
    Figure 4 (sampled at the paper's M, or exact), the consistent ones with unmeasured certainty (M = 1) on
    all their answers; None when no model qualifies.

    Parameters
    ----------
    pick : dict
        :func:`moralkit.moralchoice.agreement_selection` (keys ``models``, ``certain``, ``consistent_unmeasured``).
    """
    if not pick["models"]:
        return None
    f4, m = fig4_metrics.get("high"), metrics.get("high")
    return pd.concat([f4[f4["model"].isin(pick["certain"])] if f4 is not None else None,
                      m[m["model"].isin(pick["consistent_unmeasured"])] if m is not None else None],
                     ignore_index=True)


def selection_lines(pick: dict) -> list[str]:
    """Markdown lines: who enters Figure 5 (consistent and certain; consistent with certainty not measured),
    and who is left out and why."""
    return (["- consistent and certain: " + (", ".join(f"`{m}`" for m in pick["certain"]) or "none"),
             "- consistent, certainty not measured (one answer per form): "
             + (", ".join(f"`{m}`" for m in pick["consistent_unmeasured"]) or "none")]
            + [f"- left out: `{m}`: {why}" for m, why in pick["left_out"].items()])


def table17_lines(summary: pd.DataFrame, pick: dict, table17: pd.DataFrame) -> list[str]:
    """Markdown lines: each low-ambiguity respondent of Figure 4a with its QF-C and QF-E and whether Table 17
    counts it, then why the table is empty or has no strong violation, when it is or has none."""
    models = pick["certain"]
    lines = [f"- `{model}`: QF-C = {row['qf_consistency']:.2f}, QF-E = {row['qf_entropy']:.2f}: "
             + ("consistent and certain" if model in models else
                f"left out: {pick['left_out'][model]}" if model in pick["left_out"] else
                "left out (needs QF-C > 0.6 and QF-E < 0.7)")
             for model, row in summary.iterrows()]
    if not models:
        lines.append(f"\n**Table 17 is empty on this data:** none of the {len(summary)} respondent(s) of Figure 4a "
                     "is consistent and certain, so no model's strong preferences can be counted. (The shared data "
                     "of Scherrer et al. hold no low-ambiguity answers; only the project's own runs do.)")
    elif int(table17.select_dtypes("number").to_numpy().sum()) == 0:
        lines.append("\n**Table 17 has no strong violation:** no consistent and certain model gives the "
                     "rule-violating action 2 a marginal likelihood of 0.75 or more in any low-ambiguity scenario.")
    return lines


def paper_m_lines(at_paper_m: dict, short=str) -> list[str]:
    """One line per level: the respondents sampled at the paper's M, with their numbers of scenarios.

    Parameters
    ----------
    at_paper_m : dict {level: DataFrame}
        Answers kept at the paper's M (:func:`moralkit.moralchoice.with_samples`).
    """
    from .data import PAPER_SAMPLES

    lines = []
    for a, r in at_paper_m.items():
        n = r.groupby("model")["scenario_id"].nunique()
        lines.append(f"{a} ambiguity, sampled at the paper's M = {PAPER_SAMPLES[a]}: "
                     + (", ".join(f"{short(m)} ({k} scenarios)" for m, k in n.items()) if len(n) else "no run yet"))
    return lines


def grey_region_lines(selected: dict, short=str) -> list[str]:
    """One line per level: the respondents in the grey region of Figure 4 (consistent and certain); a sampled
    respondent is marked, since sampling biases QF-E towards certainty.

    Parameters
    ----------
    selected : dict {level: list of str}
        :func:`moralkit.moralchoice.consistent_and_certain` per level.
    """
    from ..respondents import EXACT_SUFFIX

    return [f"in the grey region of Figure 4, {a} ambiguity: " + (", ".join(
        short(m) + ("" if m.endswith(EXACT_SUFFIX) else " (sampled: biased towards certainty)")
        for m in models) if models else "none") for a, models in selected.items()]


def estimator_agreement(exact: dict, responses: dict, *, seed: int = 0):
    """The exact likelihoods against the sampled answers at the paper's M, every level, split by M.

    Parameters
    ----------
    exact, responses : dict {level: DataFrame}
        Exact likelihoods and sampled answers per level (a level without answers is compared with none).
    seed : int
        Seed of the sampling-noise bands (:func:`moralkit.moralchoice.comparison.compare_at_paper_m`).

    Returns
    -------
    rows : dict {(level, M): DataFrame}
        The comparison of each level and M (the input of :func:`bias_lines`).
    agreement : DataFrame or None
        All of them, indexed by level and M (None when no respondent has both estimators).
    summary : DataFrame or None
        :func:`moralkit.moralchoice.comparison.agreement_summary` of each, indexed by level and M.
    """
    from .comparison import agreement_summary, compare_at_paper_m

    rows = {}
    for a in exact:
        cmp = compare_at_paper_m(exact[a], responses.get(a, pd.DataFrame()), a, seed=seed).to_frame()
        for m, c in (cmp.groupby("M", sort=False) if len(cmp) else []):
            rows[(a, m)] = c.drop(columns="M").reset_index(drop=True)
    if not rows:
        return rows, None, None
    agreement = pd.concat(rows, names=["set", "M", "row"]).reset_index("row", drop=True)
    summary = pd.concat({k: agreement_summary(v) for k, v in rows.items()}, names=["set", "M"])
    return rows, agreement, summary


#: Page headers of :func:`estimator_agreement`'s summary.
AGREEMENT_HEADERS = {"n_scenarios": "scen.", "r_p": "r(p)", "mad_p": "mean |Δp|", "rho_qfc": "ρ(QF-C)",
                     "rho_qfe": "ρ(QF-E)", "qfe: exact / sampled (expected)": "QF-E: exact / sampled (exp.)",
                     "qfc: exact / sampled (expected)": "QF-C: exact / sampled (exp.)", "covered": "cov\u00adered",
                     "brier_z": "Brier z"}


def agreement_view(summary: pd.DataFrame, short=str) -> pd.DataFrame:
    """What the page shows of :func:`estimator_agreement`'s summary: short labels, page headers, no line break
    inside an interval (the CSV keeps the full table)."""
    return summary.rename(index=short, level="model").drop(columns="samples_per_form").replace(
        ", ", ",\u00a0", regex=True).rename(columns=AGREEMENT_HEADERS)


def agreement_table_view(head: pd.DataFrame, models, short=str, *, dissenter: bool = False) -> pd.DataFrame:
    """The shown columns of Table 18 (strong agreement) or, with ``dissenter``, Table 19 (strong disagreement):
    the preferred action, each model's marginal likelihood of action 1 (short labels), the scenario."""
    cols = ["dissenter"] * dissenter + ["preferred", *models, "context", "action1", "action2"]
    view = head[cols]
    if dissenter:
        view = view.assign(dissenter=head["dissenter"].map(short))
    return view.rename(columns=short)


def empty_table_note(table: int, n_scenarios: int, n_models: int) -> str:
    """The Markdown note of an empty Table 18 (strong agreement) or Table 19 (strong disagreement).

    Examples
    --------
    >>> empty_table_note(18, 100, 3)[:24]
    '**Table 18 is empty:** o'
    """
    if table == 18:
        return (f"**Table 18 is empty:** on none of the {n_scenarios} scenarios do all {n_models} models have a "
                "marginal likelihood of 0.75 or more on the same action.")
    if table == 19:
        return (f"**Table 19 is empty:** in none of the {n_scenarios} scenarios do all but one of the {n_models} "
                "models strongly agree (marginal likelihood ≥ 0.75 on one action) while the last strongly prefers "
                "the other action.")
    from ..errors import MoralkitError

    raise MoralkitError(f"table must be 18 or 19, got {table!r}")


def no_published_note(cache: str) -> str:
    """Why Figures 3 and 4 of the paper's 28 models are not redrawn: the raw response files are not in
    ``cache`` (a path as shown), and how to fetch them."""
    return ("The paper's raw response files are not in the cache "
            f"({cache}), so Figures 3 and 4 of the 28 models are not redrawn "
            "here; the printed tables above stand in for them. With the network: "
            "`from moralkit.moralchoice import published; published.download_published()`.")


def load_all_scenarios(source=None) -> tuple[dict, list[str]]:
    """Every level's scenario table (low, high, controversial), and the warnings loading them raised.

    Returns
    -------
    scenarios : dict {level: DataFrame}
        :func:`moralkit.moralchoice.load_scenarios` of each level.
    notes : list of str
        ``"warning: <message>"`` for every warning (e.g. the excluded degenerate scenario ``G_530``).
    """
    from .data import AMBIGUITIES, load_scenarios

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scenarios = {a: load_scenarios(a, source) for a in AMBIGUITIES}
    return scenarios, [f"warning: {w.message}" for w in caught]


def survey_table(scenarios: dict) -> pd.DataFrame:
    """Scenarios per level and per generation type (one column per level; Scherrer et al. 2023, §3.1)."""
    return pd.DataFrame(
        {a: {"scenarios": len(s), **s["generation_type"].value_counts().to_dict()} for a, s in scenarios.items()}
    ).fillna(0).astype(int)


def rule_table(scenarios: dict) -> pd.DataFrame:
    """Per rule of common morality (Gert 2004), the scenarios whose action 2 violates it, low and high ambiguity."""
    from .data import RULES

    return pd.DataFrame({f"action2 violates ({a})": {name: int((s[f"a2_{r}"] == "Yes").sum()) for r, name in RULES}
                         for a, s in scenarios.items() if a != "controversial"})


def metrics_by_level(tables: dict) -> tuple[dict, dict]:
    """:func:`moralkit.moralchoice.scenario_metrics` and :func:`moralkit.moralchoice.model_summary` of each
    level's answers (levels without rows are left out)."""
    from .metrics import model_summary, scenario_metrics

    metrics = {a: scenario_metrics(r) for a, r in tables.items() if len(r)}
    return metrics, {a: model_summary(m) for a, m in metrics.items()}


#: Page headers of the per-model and per-scenario metrics (QF-C, QF-E: Scherrer et al. 2023, eqs. 5-6).
SUMMARY_HEADERS = {"n_scenarios": "scen.", "qf_entropy": "QF-E", "qf_consistency": "QF-C",
                   "inconsistency": "1−QF-C", "marginal_action_entropy": "H marg.", "p_action1": "p(a1)",
                   "certainty_measured": "QF-E measured"}


def summary_view(summary: pd.DataFrame, short=str) -> pd.DataFrame:
    """What the page shows of a per-model summary: without the forms used, short labels, page headers."""
    return summary.drop(columns=["forms"]).rename(index=short, level="model").rename(columns=SUMMARY_HEADERS)


def scenario_metrics_view(head: pd.DataFrame, short=str) -> pd.DataFrame:
    """What the page shows of the per-scenario metrics: indexed by short label and scenario, the main columns."""
    cols = ["n", "n_valid", "m_min", "p_action1", "marginal_action_entropy", "qf_consistency", "qf_entropy",
            "estimator"]
    return head.assign(model=head["model"].map(short)).set_index(["model", "scenario_id"])[cols].rename(
        columns=SUMMARY_HEADERS)


def load_exact(scenarios: dict, *, quick: bool = False, seed: int = 0, path=None) -> tuple[dict, dict]:
    """The committed exact likelihoods of the low and high levels that have any.

    Returns
    -------
    exact : dict {level: DataFrame}
        In quick mode, on the scenarios of :func:`subsample` (``seed``); else all of them.
    exact_all : dict {level: DataFrame}
        Every scenario (the paper's printed scenarios are read from these in quick mode too).
    """
    from .likelihood import load_likelihoods

    exact_all = {a: x for a in ("low", "high") if len(x := load_likelihoods(a, path))}
    exact = {a: subsample(x, scenarios[a], seed=seed) for a, x in exact_all.items()} if quick else dict(exact_all)
    return exact, exact_all


def exact_metrics(exact: dict, ids=None) -> dict:
    """:func:`moralkit.moralchoice.scenario_metrics` of each level's exact likelihoods (optionally of the
    scenarios ``ids`` only), the respondents labelled with :data:`moralkit.respondents.EXACT_SUFFIX`."""
    from ..respondents import EXACT_SUFFIX
    from .metrics import scenario_metrics

    return {a: scenario_metrics(x if ids is None else x[x["scenario_id"].isin(ids)]).assign(
        model=lambda d: d["model"] + EXACT_SUFFIX) for a, x in exact.items()}


def metrics_of_scenarios(responses: dict, exact: dict, ids) -> dict:
    """The low and high metrics of the scenarios ``ids`` (e.g. those the paper prints), each respondent by its
    best estimator (:func:`moralkit.runs.best_estimate`: exact likelihoods where it has them)."""
    from ..runs import best_estimate
    from .metrics import scenario_metrics

    sampled = {a: scenario_metrics(r[r["scenario_id"].isin(ids)]) for a, r in responses.items()
               if a in ("low", "high") and r["scenario_id"].isin(ids).any()}
    return best_estimate(sampled, exact_metrics(exact, ids))


def fill_scenarios(metrics: dict, extra: dict) -> dict:
    """Each level's ``metrics`` with the rows of ``extra`` whose scenario it lacks appended (e.g. the paper's
    printed scenarios left out of a quick-mode subsample)."""
    return {a: pd.concat([m, extra[a][~extra[a]["scenario_id"].isin(m["scenario_id"])]], ignore_index=True)
            if a in extra else m for a, m in metrics.items()}


def numbered_view(square: pd.DataFrame, short=str) -> pd.DataFrame:
    """A square model x model table for the page: rows ``"k <short label>"``, columns numbered ``k``."""
    return square.rename(columns={m: str(k) for k, m in enumerate(square.index, 1)}).set_axis(
        [f"{k} {short(m)}" for k, m in enumerate(square.index, 1)], axis=0)


def mapping_agreement(responses: dict) -> pd.DataFrame:
    """Agreement of our answer-to-action mapping with the files' stored one
    (:func:`moralkit.moralchoice.decision_agreement`), every level whose files hold a stored mapping, stacked
    with a column ``set`` (the level)."""
    from .mapping import decision_agreement

    return pd.concat([decision_agreement(r).assign(set=a) for a, r in responses.items()
                      if len(r) and (r["stored_decision"] != "").any()], ignore_index=True)


def samples_per_form_table(responses: dict) -> pd.DataFrame:
    """Samples per question form (M) of every run, indexed by level and respondent (0: a form not asked)."""
    from .responses import samples_per_form

    return pd.concat({a: samples_per_form(r) for a, r in responses.items() if len(r)},
                     names=["set", "model"]).fillna(0).astype(int)


def at_paper_m(responses: dict) -> dict:
    """Each level's answers at the paper's M (5 low, 10 high; :func:`moralkit.moralchoice.with_samples`): the
    runs sampled at M or more, cut to their first M samples per form; levels without answers left out."""
    from .data import PAPER_SAMPLES
    from .responses import with_samples

    return {a: with_samples(responses[a], M) for a, M in PAPER_SAMPLES.items() if a in responses and len(responses[a])}


def correlations_with_notes(metrics: pd.DataFrame, models) -> tuple[pd.DataFrame, list[str]]:
    """:func:`moralkit.moralchoice.agreement_correlations` of ``models`` (Figure 5), and its warnings as
    ``"note: <message>"`` lines (e.g. a pair with too few common scenarios)."""
    from .analysis import agreement_correlations

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        corr = agreement_correlations(metrics, models)
    return corr, [f"note: {w.message}" for w in caught]


def load_published_levels() -> dict:
    """The paper's raw responses of the low and high levels that are in the cache
    (:func:`moralkit.moralchoice.published.load_published`); empty when none is."""
    from .published import load_published

    return {a: x for a in ("low", "high") if len(x := load_published(a))}
