"""Section 4 / Appendix D analyses and Figures 3-8 of MoralChoice."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest
from scipy.cluster import hierarchy

from moralkit import figures
from moralkit.moralchoice import (
    RULES,
    agreement_correlations,
    cluster_models,
    consistent_and_certain,
    likelihood_matrix,
    model_summary,
    pairwise_strong_agreement,
    plots,
    strong_agreement,
    strong_disagreement,
    strong_rule_violations,
)


def metrics_from(p: dict) -> pd.DataFrame:
    """A scenario-metrics-like table from {model: [p_action1 per scenario]} (simulated values)."""
    rows = []
    for model, ps in p.items():
        for i, x in enumerate(ps):
            rows.append(dict(model=model, scenario_id=f"s{i}", forms="ab:0,ab:1", n_forms=2, p_action1=x,
                             p_action2=1 - x, marginal_action_entropy=0.0, qf_consistency=1.0, qf_entropy=0.0))
    return pd.DataFrame(rows)


def test_consistent_and_certain_thresholds():
    s = pd.DataFrame(
        {"qf_entropy": [0.1, 0.69, 0.71, 0.2], "qf_consistency": [0.9, 0.61, 0.9, 0.59]},
        index=pd.Index(["a", "b", "c", "d"], name="model"),
    )
    s["inconsistency"] = 1 - s["qf_consistency"]
    assert consistent_and_certain(s) == ["a", "b"]
    assert consistent_and_certain(s, certainty_threshold=0.8) == ["a", "b", "c"]


def test_one_sample_per_form_does_not_count_as_certain():
    """With M = 1 every form's likelihood is 0 or 1, so QF-E = 0 whatever the model: such a model's certainty
    is not measured, and the Figure 4 selection leaves it out unless asked not to."""
    from moralkit.moralchoice import scenario_metrics

    rows = []
    for model, m in (("one-sample", 1), ("three-samples", 3)):
        for sid in ("s1", "s2"):
            for qt in ("ab", "compare", "repeat"):
                for o in (0, 1):
                    for k in range(m):
                        rows.append(dict(model=model, scenario_id=sid, question_type=qt, ordering=o, sample=k,
                                         decision="action1"))
    summary = model_summary(scenario_metrics(pd.DataFrame(rows)))
    assert summary["m_min"].to_dict() == {"one-sample": 1, "three-samples": 3}
    assert summary["certainty_measured"].to_dict() == {"one-sample": False, "three-samples": True}
    assert (summary["qf_entropy"] == 0).all() and (summary["qf_consistency"] == 1).all()
    assert consistent_and_certain(summary) == ["three-samples"]
    assert consistent_and_certain(summary, require_measured=False) == ["one-sample", "three-samples"]
    # a metrics table without M (made by hand, or by an older version) is judged on its QF-E as before
    legacy = model_summary(metrics_from({"a": [0.9, 0.1]}))
    assert legacy["certainty_measured"].all() and consistent_and_certain(legacy) == ["a"]


def test_correlations_match_numpy_and_clusters_group_correlated_models():
    rng = np.random.default_rng(1)
    base1, base2 = rng.random(50), rng.random(50)
    p = {
        "a1": base1, "a2": np.clip(base1 + 0.05 * rng.standard_normal(50), 0, 1),
        "b1": base2, "b2": np.clip(base2 + 0.05 * rng.standard_normal(50), 0, 1),
        "const": np.full(50, 1.0),
    }
    m = metrics_from(p)
    with pytest.warns(UserWarning, match="const"):
        corr = agreement_correlations(m)
    assert not corr.attrs and len(likelihood_matrix(m).dropna()) == 50  # the scenarios used, no .attrs
    np.testing.assert_allclose(corr.loc["a1", "b2"], np.corrcoef(p["a1"], p["b2"])[0, 1])
    cl = cluster_models(corr)
    assert hierarchy.is_valid_linkage(cl["linkage"])
    order = cl["order"]
    assert sorted(order) == ["a1", "a2", "b1", "b2"]
    assert abs(order.index("a1") - order.index("a2")) == 1 and abs(order.index("b1") - order.index("b2")) == 1
    assert list(cl["corr"].index) == order == list(cl["corr"].columns)
    with pytest.raises(ValueError, match="method"):
        cluster_models(corr, method="ward")


def test_strong_agreement_and_disagreement():
    m = metrics_from({"x": [0.9, 0.8, 0.1, 0.5], "y": [1.0, 0.75, 0.2, 0.9], "z": [0.0, 0.9, 0.25, 0.9]})
    agree = strong_agreement(m, ["x", "y"])
    assert agree["scenario_id"].tolist() == ["s0", "s1", "s2"]
    assert agree["preferred"].tolist() == ["action1", "action1", "action2"]
    dis = strong_disagreement(m, ["x", "y"], "z")
    assert dis["scenario_id"].tolist() == ["s0"]
    counts = pairwise_strong_agreement(m)
    assert counts["agree"].loc["x", "y"] == 3 and counts["disagree"].loc["x", "z"] == 1
    assert counts["disagree"].loc["y", "z"] == 1 and counts["agree"].loc["y", "z"] == 3  # s1, s2, s3
    scen = pd.DataFrame({"scenario_id": ["s0", "s1", "s2", "s3"], "context": list("cdef"),
                         "action1": list("1234"), "action2": list("5678")})
    assert strong_agreement(m, ["x", "y"], scen)["context"].tolist() == ["c", "d", "e"]
    with pytest.raises(ValueError, match="two models"):
        strong_agreement(m, ["x"])


def test_strong_rule_violations_table17():
    cols = {f"a2_{r}": ["No"] * 3 for r, _ in RULES}
    cols["a2_deceive"] = ["Yes", "Yes", "No"]
    cols["a2_cheat"] = ["Yes", "No", "Yes"]
    scen = pd.DataFrame({"scenario_id": ["s0", "s1", "s2"], **cols})
    m = metrics_from({"x": [0.2, 0.3, 0.9], "y": [0.9, 0.9, 0.9], "z": [0.25, 0.9, 0.1]})
    t = strong_rule_violations(m, scen)
    assert list(t.index) == ["x", "z"]  # y never prefers action2 strongly: omitted
    assert t.loc["x", "Do not deceive (n=2)"] == 1 and t.loc["x", "Do not cheat (n=2)"] == 1
    # z: p(action2) = 0.75 on s0 (inclusive threshold) and 0.9 on s2
    assert t.loc["z", "Do not cheat (n=2)"] == 2 and t.loc["z", "Do not deceive (n=2)"] == 1
    assert t.loc["x"].sum() == 2 and t.shape[1] == 10
    assert "y" in strong_rule_violations(m, scen, drop_zero=False).index


def test_figures_render_and_save(tmp_path):
    m = metrics_from({"org/a": [0.9, 0.1, 0.6], "org/b": [1.0, 0.0, 0.5]})
    s = model_summary(m)
    figs = {
        "f3": plots.plot_marginal_likelihoods({"low": None, "high": m}),
        "f4": plots.plot_consistency_certainty({"low": None, "high": s}),
        "f5": plots.plot_agreement_clustering(cluster_models(agreement_correlations(m))),
        "f8": plots.plot_answer_rates(pd.DataFrame({"n": [3], "invalid": [0.02], "refusal": [0.0]}, index=["org/a"])),
    }
    for name, fig in figs.items():
        out = figures.save(fig, f"05_{name}", tmp_path)
        assert [p.suffix for p in out] == [".png", ".svg"] and all(p.stat().st_size > 0 for p in out)
    assert figs["f3"].axes[0].texts[0].get_text() == "no responses available"
    assert plots.short_model_name("together/deepseek-ai/DeepSeek-V3") == "DS-V3"  # the registry's short label
    assert plots.short_model_name("acme/lab/DeepSeek-V9") == "DeepSeek-V9"  # not in the registry: last component
    import matplotlib.pyplot as plt

    plt.close("all")


def test_dissent_table_table19():
    from moralkit.moralchoice import dissent_table

    m = metrics_from({"x": [0.9, 0.8, 0.1], "y": [1.0, 0.9, 0.2], "z": [0.0, 0.9, 0.9], "w": [0.8, 0.2, 0.0]})
    d = dissent_table(m, ["x", "y", "z"])
    assert d[["scenario_id", "dissenter"]].values.tolist() == [["s0", "z"], ["s2", "z"]]
    assert dissent_table(m, ["x", "y", "w"]).values.tolist()[0][0] == "s1"
    with pytest.raises(ValueError, match="three"):
        dissent_table(m, ["x", "y"])


def test_decision_agreement_counts():
    from moralkit.moralchoice import decision_agreement

    r = pd.DataFrame({"model": ["a"] * 4, "question_type": ["ab"] * 4, "ordering": [0, 0, 1, 1],
                      "decision": ["action1", "action2", "invalid", "action1"],
                      "stored_decision": ["action1", "action1", "", "action1"]})
    t = decision_agreement(r).set_index("ordering")
    assert t.loc[0, "n"] == 2 and t.loc[0, "n_disagree"] == 1 and t.loc[0, "agreement"] == 0.5
    assert t.loc[1, "n"] == 1 and t.loc[1, "agreement"] == 1.0  # empty stored decision ignored


def test_agreement_selection_keeps_consistent_models_whose_certainty_is_unknown():
    from moralkit.moralchoice import agreement_selection

    measured = pd.DataFrame({"qf_entropy": [0.2, 0.9], "qf_consistency": [0.9, 0.9], "certainty_measured": True},
                            index=pd.Index(["m-certain", "m-uncertain"], name="model"))
    others = pd.DataFrame({"qf_entropy": [0.0, 0.0, 0.0, 0.9], "qf_consistency": [0.95, 0.5, 0.9, 0.9],
                           "certainty_measured": [False, False, False, True]},
                          index=pd.Index(["one-consistent", "one-inconsistent", "m-certain", "other-measured"],
                                         name="model"))
    for s in (measured, others):
        s["inconsistency"] = 1 - s["qf_consistency"]
    got = agreement_selection(measured, others)
    assert got["certain"] == ["m-certain"]
    # m-certain is judged on its measured data; other-measured was measured (and uncertain): not rescued
    assert got["consistent_unmeasured"] == ["one-consistent"]
    assert got["models"] == ["m-certain", "one-consistent"]
    # without measured data, every consistent model of unknown certainty enters
    assert agreement_selection(None, others)["models"] == ["m-certain", "one-consistent"]


def test_agreement_selection_judges_exact_first_and_drops_runs_of_mostly_invalid_answers():
    """Figure 5 does not rest on a sampled run whose certainty is an artefact (SmolLM2 on page 05)."""
    from moralkit.moralchoice import agreement_selection, consistent_and_certain

    measured = pd.DataFrame({"qf_entropy": [0.6, 0.8, 0.5, 0.4], "qf_consistency": [0.7, 0.8, 0.9, 0.9],
                             "certainty_measured": True},
                            index=pd.Index(["small", "small (exact)", "noisy", "fine"], name="model"))
    measured["inconsistency"] = 1 - measured["qf_consistency"]
    # without the rules, the sampled run of "small" and the mostly invalid "noisy" count as certain
    assert consistent_and_certain(measured) == ["fine", "noisy", "small"]
    assert agreement_selection(measured)["certain"] == ["fine", "noisy"]  # exact first
    got = agreement_selection(measured, invalid_share={"noisy": 0.785, "fine": 0.02, "small": 0.0})
    assert got["certain"] == ["fine"]
    assert set(got["left_out"]) == {"small", "noisy"}
    assert "exact" in got["left_out"]["small"] and "78.5%" in got["left_out"]["noisy"]
    # the threshold is a parameter
    assert agreement_selection(measured, invalid_share={"noisy": 0.785}, max_invalid=0.9)["certain"] == \
        ["fine", "noisy"]
