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
           "bias_lines", "figure5_metrics", "selection_lines", "table17_lines"]

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
