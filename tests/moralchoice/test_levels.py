"""moralkit.moralchoice.levels: notebook 05's per-level loops as functions (SIMULATED tables only)."""

import pandas as pd
import pytest

from moralkit.moralchoice import levels


def _scen(n):
    return pd.DataFrame({"scenario_id": [f"S{i:03d}" for i in range(n)]})


def test_subsample_keeps_the_seeded_scenarios_and_all_their_rows():
    sc = _scen(300)
    t = pd.DataFrame({"scenario_id": list(sc["scenario_id"]) * 2, "x": range(600)})
    a = levels.subsample(t, sc, seed=1)
    assert a["scenario_id"].nunique() == levels.QUICK_SCENARIOS and len(a) == 2 * levels.QUICK_SCENARIOS
    assert a.equals(levels.subsample(t, sc, seed=1)) and not a.equals(levels.subsample(t, sc, seed=2))
    assert len(levels.subsample(t, _scen(10), seed=0)) == 20  # fewer scenarios than n: all of them
    with pytest.raises(ValueError, match="n must be an integer >= 1"):
        levels.subsample(t, sc, n=0)


def test_stack_puts_the_first_estimator_first_and_skips_missing_levels():
    s = {"low": pd.DataFrame({"model": ["a"]}), "high": pd.DataFrame({"model": []})}
    e = {"low": pd.DataFrame({"model": ["a (exact)"]}), "controversial": pd.DataFrame({"model": ["c"]})}
    out = levels.stack(s, e)
    assert list(out) == ["low"] and out["low"]["model"].tolist() == ["a", "a (exact)"]
    assert levels.stack({}, {}) == {}


def test_coverage_table_counts_scenarios_forms_and_mass():
    x = pd.DataFrame({"model": ["m"] * 4, "scenario_id": ["S1", "S1", "S2", "S2"],
                      "question_type": ["ab", "compare", "ab", "compare"], "covered": [0.9, 0.5, 0.7, 0.3]})
    t = levels.coverage_table({"low": x}, {"low": _scen(5)})
    row = t.loc[("low", "m")]
    assert row["ab"] == pytest.approx(0.8) and row["compare"] == pytest.approx(0.4)
    assert (row["scenarios"], row["of"], row["forms"]) == (2, 5, 4)


def test_left_out_and_bias_lines_say_who_and_which_side():
    summ = {"low": pd.DataFrame(index=["a", "b"]), "high": pd.DataFrame(index=["c"])}
    assert levels.left_out_lines(summ, {"low": pd.DataFrame(index=["a"])}) == [
        "low ambiguity, not in Figure 4 (fewer than M = 5 answers per form): b",
        "high ambiguity, not in Figure 4 (fewer than M = 10 answers per form): c"]
    cmp = pd.DataFrame({"model": ["m"], "qfe_exact": [0.9], "qfe_sampled": [0.5], "qfe_sampled_sim": [0.55]})
    lines = levels.bias_lines({("low", 5): cmp, ("high", 1): cmp}, short=str.upper)
    assert lines == ["- low ambiguity, M, M = 5: QF-E exact 0.90, sampled 0.50, expected from sampling alone 0.55 "
                     "(bias -0.35); on the sampled answers the model is inside the certain region, on its exact "
                     "likelihoods outside."]


def test_figure5_metrics_and_the_selection_lines():
    pick = {"models": ["a", "b"], "certain": ["a"], "consistent_unmeasured": ["b"], "left_out": {"c": "mostly invalid"}}
    f4 = {"high": pd.DataFrame({"model": ["a", "b", "c"], "x": [1, 2, 3]})}
    allm = {"high": pd.DataFrame({"model": ["a", "b", "c"], "x": [4, 5, 6]})}
    out = levels.figure5_metrics(f4, allm, pick)
    assert out[["model", "x"]].values.tolist() == [["a", 1], ["b", 5]]  # certain: Figure 4's rows; M = 1: all
    assert levels.figure5_metrics(f4, allm, dict(pick, models=[])) is None
    assert levels.selection_lines(pick) == ["- consistent and certain: `a`",
                                            "- consistent, certainty not measured (one answer per form): `b`",
                                            "- left out: `c`: mostly invalid"]


def test_table17_lines_say_why_the_table_is_empty():
    s = pd.DataFrame({"qf_consistency": [0.9, 0.3], "qf_entropy": [0.2, 0.9]}, index=["a", "b"])
    none = levels.table17_lines(s, {"certain": [], "left_out": {}}, pd.DataFrame({"r": [0]}))
    assert none[0] == "- `a`: QF-C = 0.90, QF-E = 0.20: left out (needs QF-C > 0.6 and QF-E < 0.7)"
    assert "Table 17 is empty on this data" in none[-1]
    zero = levels.table17_lines(s, {"certain": ["a"], "left_out": {"b": "inconsistent"}}, pd.DataFrame({"r": [0]}))
    assert zero[:2] == ["- `a`: QF-C = 0.90, QF-E = 0.20: consistent and certain",
                        "- `b`: QF-C = 0.30, QF-E = 0.90: left out: inconsistent"]
    assert "no strong violation" in zero[-1]
    assert len(levels.table17_lines(s, {"certain": ["a"], "left_out": {}}, pd.DataFrame({"r": [2]}))) == 2


def test_the_summary_rows_of_figure5_and_table19():
    from moralkit.moralchoice import beside

    corr = pd.DataFrame([[1.0, 0.4], [0.4, 1.0]], index=["a", "b"], columns=["a", "b"])
    rows = beside.figure5_rows({"corr": corr}, pd.Series({"a": 2, "b": 0}), "2 consistent and certain")
    assert rows[0]["this run"] == "0.40 to 0.40 among a, b (2 consistent and certain)"
    assert rows[1]["this run"] == "a 2, b 0" and beside.figure5_rows(None, None, "t") == []


# ---- notebook 05's loops moved into levels (issue 29, item 5); SIMULATED tables only
def test_paper_m_lines_name_each_respondent_with_its_scenarios():
    r = pd.DataFrame({"model": ["a", "a", "b"], "scenario_id": ["S1", "S2", "S1"]})
    lines = levels.paper_m_lines({"low": r, "high": r.iloc[:0]}, short=str.upper)
    assert lines == ["low ambiguity, sampled at the paper's M = 5: A (2 scenarios), B (1 scenarios)",
                     "high ambiguity, sampled at the paper's M = 10: no run yet"]


def test_grey_region_lines_mark_sampled_respondents():
    from moralkit.respondents import EXACT_SUFFIX

    lines = levels.grey_region_lines({"low": ["m" + EXACT_SUFFIX, "s"], "high": []})
    assert lines == [f"in the grey region of Figure 4, low ambiguity: m{EXACT_SUFFIX}, s (sampled: biased towards "
                     "certainty)", "in the grey region of Figure 4, high ambiguity: none"]


def test_estimator_agreement_splits_each_level_by_m(monkeypatch):
    import moralkit.moralchoice.comparison as comparison

    class Cmp:
        def __init__(self, frame):
            self.frame = frame

        def to_frame(self):
            return self.frame

    frames = {"low": pd.DataFrame({"model": ["a", "b", "a"], "M": [5, 5, 1], "r_p": [0.1, 0.2, 0.3]}),
              "high": pd.DataFrame({"model": [], "M": [], "r_p": []})}
    seen = []

    def fake_compare(exact, responses, level, *, seed):
        seen.append((level, seed, len(responses)))
        return Cmp(frames[level])

    monkeypatch.setattr(comparison, "compare_at_paper_m", fake_compare)
    monkeypatch.setattr(comparison, "agreement_summary", lambda c: c.set_index("model"))
    rows, agreement, summary = levels.estimator_agreement({"low": 1, "high": 2}, {"low": pd.DataFrame({"x": [1]})},
                                                          seed=7)
    assert seen == [("low", 7, 1), ("high", 7, 0)]  # a level without answers is compared with none
    assert list(rows) == [("low", 5), ("low", 1)] and rows[("low", 5)]["model"].tolist() == ["a", "b"]
    assert "M" not in rows[("low", 5)].columns
    assert agreement.index.names == ["set", "M"] and len(agreement) == 3
    assert summary.index.names == ["set", "M", "model"] and summary.loc[("low", 1, "a"), "r_p"] == 0.3
    frames["low"] = frames["high"]
    assert levels.estimator_agreement({"low": 1}, {}) == ({}, None, None)


def test_agreement_views_and_notes():
    summary = pd.DataFrame({"r_p": ["0.5 [0.1, 0.9]"], "samples_per_form": [5], "covered": [0.9]},
                           index=pd.MultiIndex.from_tuples([("low", 5, "m")], names=["set", "M", "model"]))
    v = levels.agreement_view(summary, short=str.upper)
    assert list(v.columns) == ["r(p)", "cov\u00adered"] and v.iloc[0, 0] == "0.5 [0.1,\u00a00.9]"
    assert v.index[0] == ("low", 5, "M")
    head = pd.DataFrame({"dissenter": ["m1"], "preferred": ["action1"], "m1": [0.1], "m2": [0.9], "context": ["c"],
                         "action1": ["x"], "action2": ["y"], "extra": [0]})
    short = {"m1": "M1", "m2": "M2"}.get  # unknown names pass unchanged, as respondents.short_label

    def short_label(m):
        return short(m, m)

    t18 = levels.agreement_table_view(head, ["m1", "m2"], short=short_label)
    assert list(t18.columns) == ["preferred", "M1", "M2", "context", "action1", "action2"]
    t19 = levels.agreement_table_view(head, ["m1", "m2"], short=short_label, dissenter=True)
    assert list(t19.columns)[:2] == ["dissenter", "preferred"] and t19["dissenter"].tolist() == ["M1"]
    assert "on none of the 12 scenarios do all 3 models" in levels.empty_table_note(18, 12, 3)
    assert "all but one of the 4 models" in levels.empty_table_note(19, 12, 4)
    with pytest.raises(ValueError, match="table must be 18 or 19"):
        levels.empty_table_note(17, 1, 1)
    assert "(cache/dir)" in levels.no_published_note("cache/dir")


def _answers(model="m", level_rows=None):
    rows = []
    for sid in ("s1", "s2"):
        for qt, o in (("ab", 0), ("ab", 1), ("compare", 0)):
            for k in range(2):
                rows.append(dict(model=model, scenario_id=sid, question_type=qt, ordering=o, sample=k,
                                 decision="action1" if k == 0 or sid == "s1" else "action2",
                                 stored_decision="action1"))
    return pd.DataFrame(rows)


def test_survey_and_rule_tables_count_per_level():
    from moralkit.moralchoice.data import RULES

    sc = pd.DataFrame({"generation_type": ["gen", "gen", "hand"], **{f"a2_{r}": ["Yes", "No", "Yes"] for r, _ in RULES}})
    survey = levels.survey_table({"low": sc, "controversial": sc.iloc[:1]})
    assert survey.loc["scenarios"].tolist() == [3, 1] and survey.loc["hand"].tolist() == [1, 0]
    rules = levels.rule_table({"low": sc, "controversial": sc})
    assert list(rules.columns) == ["action2 violates (low)"] and set(rules.iloc[:, 0]) == {2}
    assert list(rules.index) == [name for _, name in RULES]


def test_load_all_scenarios_reports_the_degenerate_scenario():
    scenarios, notes = levels.load_all_scenarios()
    assert list(scenarios) == ["low", "high", "controversial"]
    assert any(n.startswith("warning: ") and "G_530" in n for n in notes)
    assert "G_530" not in set(scenarios["high"]["scenario_id"])


def test_metrics_views_and_per_level_tables():
    from moralkit.moralchoice import model_summary, scenario_metrics

    r = _answers()
    metrics, summaries = levels.metrics_by_level({"low": r, "high": r.iloc[:0]})
    assert list(metrics) == ["low"] and metrics["low"].equals(scenario_metrics(r))
    assert summaries["low"].equals(model_summary(metrics["low"]))
    view = levels.summary_view(pd.concat(summaries, names=["set", "model"]), short=str.upper)
    assert "forms" not in view.columns and "QF-C" in view.columns and view.index[0] == ("low", "M")
    sv = levels.scenario_metrics_view(metrics["low"], short=str.upper)
    assert sv.index.names == ["model", "scenario_id"] and sv.index[0] == ("M", "s1") and "QF-E" in sv.columns
    m = levels.samples_per_form_table({"low": r, "high": r.iloc[:0]})
    assert m.index.names == ["set", "model"] and (m.to_numpy() == 2).all()
    kept = levels.at_paper_m({"low": pd.concat([r.assign(sample=r["sample"] + 2 * i) for i in range(3)])})
    assert kept["low"].groupby(["scenario_id", "question_type", "ordering"]).size().eq(5).all()
    agree = levels.mapping_agreement({"low": r, "high": r.assign(stored_decision="")})
    assert set(agree["set"]) == {"low"} and agree["n_disagree"].sum() == 3  # s2's second samples


def test_exact_likelihoods_by_level_and_of_some_scenarios():
    scenarios, _ = levels.load_all_scenarios()
    quick, exact_all = levels.load_exact(scenarios, quick=True, seed=0)  # one read: both the subsample and all
    assert set(quick) <= {"low", "high"} and quick.keys() == exact_all.keys() and quick
    a = next(iter(quick))
    assert quick[a]["scenario_id"].nunique() <= levels.QUICK_SCENARIOS < exact_all[a]["scenario_id"].nunique()
    ids = {s for x in exact_all.values() for s in sorted(x["scenario_id"].unique())[:3]}  # 3 of every level
    em = levels.exact_metrics(exact_all, ids)
    assert set(em[a]["scenario_id"]) == ids & set(exact_all[a]["scenario_id"])
    assert em[a]["model"].str.endswith(" (exact)").all()
    best = levels.metrics_of_scenarios({}, exact_all, ids)
    assert set(best[a]["scenario_id"]) == set(em[a]["scenario_id"])


def test_fill_scenarios_numbered_view_and_notes(monkeypatch):
    import warnings

    import moralkit.moralchoice.analysis as analysis
    import moralkit.moralchoice.published as published

    m = pd.DataFrame({"model": ["a"], "scenario_id": ["s1"]})
    extra = pd.DataFrame({"model": ["a", "a"], "scenario_id": ["s1", "s2"]})
    filled = levels.fill_scenarios({"low": m, "high": m}, {"low": extra})
    assert filled["low"]["scenario_id"].tolist() == ["s1", "s2"] and filled["high"] is m
    sq = pd.DataFrame([[1, 2], [3, 4]], index=["x", "y"], columns=["x", "y"])
    nv = levels.numbered_view(sq, short=str.upper)
    assert list(nv.index) == ["1 X", "2 Y"] and list(nv.columns) == ["1", "2"]

    def corr(metrics, models):
        warnings.warn("only 2 common scenarios")
        return "C"

    monkeypatch.setattr(analysis, "agreement_correlations", corr)
    assert levels.correlations_with_notes(None, ["a"]) == ("C", ["note: only 2 common scenarios"])
    monkeypatch.setattr(published, "load_published", lambda a: extra if a == "high" else extra.iloc[:0])
    assert list(levels.load_published_levels()) == ["high"]


def test_prompt_examples_print_the_six_forms_and_the_header():
    from moralkit.moralchoice import load_templates
    from moralkit.moralchoice.prompts import build_prompt, prompt_examples

    sc = {"context": "You see a wallet.", "action1": "I return it.", "action2": "I keep it."}
    t = load_templates()
    lines = prompt_examples(sc, t)
    assert len(lines) == 7 and lines[0] == f"--- ab, ordering 0\n{build_prompt(sc, 'ab', 0, t)[1]}\n"
    assert [x.split("\n")[0] for x in lines[:6]] == [f"--- {q}, ordering {o}" for q in ("ab", "repeat", "compare")
                                                      for o in (0, 1)]
    assert lines[-1] == "--- system header of the A/B form:\n" + t.questions["ab"].question_header
