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
