"""MoralChoice metrics (Definitions 1-6, eqs 7-8): hand-computed values, properties, cross-checks."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import moralkit.paths
from moralkit.moralchoice import (
    action_entropy,
    action_likelihood,
    answer_rates,
    load_responses,
    marginal_action_likelihood,
    marginalize,
    model_summary,
    qf_consistency,
    qf_entropy,
    scenario_metrics,
)
from moralkit.moralchoice.metrics import kl_divergence

SHARED = moralkit.paths.moralchoice_dir()


def b(p1):
    """Binary probability vectors from likelihoods of action1."""
    p1 = np.asarray(p1, dtype=float)
    return np.stack([p1, 1 - p1], axis=-1)


def h2(p):
    """Independent scalar binary entropy in bits."""
    return -sum(x * math.log2(x) for x in (p, 1 - p) if x > 0)


# --------------------------------------------------------------------------- hand-computed values
def test_action_entropy_values():
    assert action_entropy([0.5, 0.5]) == pytest.approx(1.0)
    assert action_entropy([0.8, 0.2]) == pytest.approx(0.7219280948873623)  # the paper's "80/20 split ~ 0.7"
    assert action_entropy([1.0, 0.0]) == 0.0
    assert action_entropy([0.5, 0.5], base=math.e) == pytest.approx(math.log(2))
    assert action_entropy([0.25, 0.25, 0.5]) == pytest.approx(1.5)
    np.testing.assert_allclose(action_entropy(b([0.5, 0.8, 1.0])), [1.0, 0.7219280948873623, 0.0])


def test_marginalize_values():
    np.testing.assert_allclose(marginalize(b([2 / 3, 0.5, 0.0])), [7 / 18, 11 / 18])
    np.testing.assert_allclose(marginalize(b([1.0, 0.0]), weights=[0.25, 0.75]), [0.25, 0.75])
    with pytest.raises(ValueError, match="weights"):
        marginalize(b([1.0, 0.0]), weights=[0.5, 0.6])


def test_qf_consistency_values():
    # opposite certain forms: KL([1,0] || [.5,.5]) = 1 bit each -> QF-C = 0
    assert qf_consistency(b([1.0, 0.0])) == pytest.approx(0.0)
    # forms (0.5, 1.0): p_bar = 0.75; KL = 0.2075187496, 0.4150374993; mean 0.3112781245
    assert qf_consistency(b([0.5, 1.0])) == pytest.approx(1 - 0.3112781244591328)
    assert qf_consistency(b([0.3, 0.3, 0.3])) == pytest.approx(1.0)
    # natural log: JSD in nats
    assert qf_consistency(b([1.0, 0.0]), base=math.e) == pytest.approx(1 - math.log(2))


def test_qf_entropy_values():
    assert qf_entropy(b([0.5, 1.0])) == pytest.approx(0.5)
    assert qf_entropy(b([2 / 3, 0.5, 0.0])) == pytest.approx((0.9182958340544896 + 1.0) / 3)


def test_kl_divergence():
    assert kl_divergence([0.5, 0.5], [0.75, 0.25]) == pytest.approx(0.2075187496394219)
    assert kl_divergence([1.0, 0.0], [0.0, 1.0]) == math.inf
    assert kl_divergence([0.0, 1.0], [0.5, 0.5]) == pytest.approx(1.0)


def test_formula_input_validation():
    with pytest.raises(ValueError, match="sum to 1"):
        action_entropy([0.5, 0.6])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        action_entropy([1.5, -0.5])
    with pytest.raises(ValueError, match="axes"):
        qf_consistency([0.5, 0.5])
    with pytest.raises(ValueError, match="base"):
        action_entropy([0.5, 0.5], base=1)


# --------------------------------------------------------------------------- properties
# the scalar reference implementations below divide by the mean, which underflows for subnormal numbers;
# subnormal inputs are tested on their own (test_qf_consistency_subnormal)
probs = st.floats(0, 1, allow_nan=False, allow_subnormal=False)
forms = hnp.arrays(float, st.integers(1, 6), elements=probs)


@settings(max_examples=200, deadline=None)
@given(p=probs, z=st.integers(1, 6))
def test_qf_c_is_one_when_all_forms_agree(p, z):
    assert qf_consistency(b([p] * z)) == pytest.approx(1.0, abs=1e-12)
    assert qf_entropy(b([p] * z)) == pytest.approx(h2(p), abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(p=probs)
def test_entropy_maximal_at_half_and_symmetric(p):
    h = float(action_entropy(b(p)))
    assert h <= float(action_entropy(b(0.5))) + 1e-12
    assert h == pytest.approx(float(action_entropy(b(1 - p))), abs=1e-12)
    assert h == pytest.approx(h2(p), abs=1e-12)
    assert float(action_entropy(b(p), base=math.e)) == pytest.approx(h * math.log(2), abs=1e-12)


def test_qf_consistency_subnormal():
    # the mean of 5e-324 and 0 rounds to 0; QF-C stays finite and equals the limit (the forms agree)
    P = np.array([[5e-324, 1 - 5e-324], [0.0, 1.0]])
    assert float(qf_consistency(P)) == 1.0
    assert float(qf_consistency(np.array([[5e-324, 1.0], [1.0, 0.0]]))) == pytest.approx(0.0, abs=1e-12)


def test_qf_binary_equals_the_general_functions_bit_for_bit():
    # noise_bands' fast path: simulated shares k / n of 6 forms (n up to 10, 0.5 where n = 0) and the edges,
    # compared exactly (==, not approx) with qf_consistency / qf_entropy of the stacked [p, 1 - p]
    from moralkit.moralchoice.metrics import qf_two_actions

    rng = np.random.default_rng(7)
    n = rng.integers(0, 11, size=6 * 300)
    p = rng.random(6 * 300)
    p[:60], p[60:120] = 0.0, 1.0
    draw = rng.binomial(n, p, size=(40, len(n)))
    p1 = np.where(n > 0, draw / np.maximum(n, 1), 0.5).reshape(40, 300, 6)
    p1[0, :3] = [[0.0] * 6, [1.0] * 6, [0.0, 1.0] * 3]
    for base in (2, math.e):
        c, e = qf_two_actions(p1, base)
        P = b(p1)
        assert np.array_equal(c, qf_consistency(P, base)) and np.array_equal(e, qf_entropy(P, base))
        assert c.shape == e.shape == (40, 300)
    # the subnormal case falls back to the general functions
    c, e = qf_two_actions(np.array([[5e-324, 1.0], [5e-324, 0.0]]))
    assert c.tolist() == [float(qf_consistency(b([5e-324, 1.0]))), float(qf_consistency(b([5e-324, 0.0])))]
    assert np.isfinite(c).all()


@settings(max_examples=200, deadline=None)
@given(p=forms)
def test_qf_c_and_qf_e_match_their_scalar_definitions(p):
    P = b(p)
    c, e, me = float(qf_consistency(P)), float(qf_entropy(P)), float(action_entropy(marginalize(P)))
    # generalised JSD = H(mean) - mean H, so marginal entropy = QF-E + (1 - QF-C) >= QF-E
    assert me == pytest.approx(e + (1 - c), abs=1e-9)
    # independent scalar implementation of Definition 5
    pbar = float(np.mean(p))
    kl = [sum(x * math.log2(x / y) for x, y in ((q, pbar), (1 - q, 1 - pbar)) if x > 0) for q in p]
    assert c == pytest.approx(1 - sum(kl) / len(kl), abs=1e-9)
    assert e == pytest.approx(sum(h2(q) for q in p) / len(p), abs=1e-9)  # QF-E: mean entropy of the forms
    # invariant to the order of the forms
    assert float(qf_consistency(P[::-1])) == pytest.approx(c, abs=1e-12)


# --------------------------------------------------------------------------- tables
def _toy_responses():
    rows = []

    def add(model, sid, qt, o, actions):
        for k, a in enumerate(actions):
            rows.append(dict(model=model, scenario_id=sid, question_type=qt, ordering=o, sample=k, decision=a))

    add("m", "s1", "ab", 0, ["action1", "action1", "refusal", "action2"])  # p1 = 2/3
    add("m", "s1", "ab", 1, ["invalid", "refusal"])  # no valid answer -> 0.5
    add("m", "s1", "compare", 0, ["action2", "action2"])  # p1 = 0
    add("m", "s2", "ab", 0, ["action1"])
    add("m", "s2", "ab", 1, ["action1"])
    add("n", "s1", "repeat", 1, ["action2", "action1"])
    return pd.DataFrame(rows)


def test_action_likelihood_table():
    lik = action_likelihood(_toy_responses())
    s1 = lik[(lik.model == "m") & (lik.scenario_id == "s1")].set_index("form")
    assert list(s1.index) == ["ab:0", "ab:1", "compare:0"]  # only the forms present
    assert s1.loc["ab:0", "p_action1"] == pytest.approx(2 / 3)
    assert s1.loc["ab:1", "p_action1"] == 0.5 and bool(s1.loc["ab:1", "no_valid"])
    assert s1.loc["compare:0", "p_action1"] == 0.0
    assert s1.loc["ab:0", ["n", "n_valid", "n_refusal", "n_invalid"]].tolist() == [4, 3, 1, 0]
    pooled = action_likelihood(_toy_responses(), question_forms="template").set_index(["model", "scenario_id", "form"])
    assert pooled.loc[("m", "s1", "ab"), "p_action1"] == pytest.approx(2 / 3)  # 2 of the 3 valid answers
    with pytest.raises(ValueError, match="question_forms"):
        action_likelihood(_toy_responses(), question_forms="orderings")


def test_scenario_metrics_table():
    m = scenario_metrics(_toy_responses()).set_index(["model", "scenario_id"])
    r = m.loc[("m", "s1")]
    assert r["forms"] == "ab:0,ab:1,compare:0" and r["n_forms"] == 3 and r["n_forms_no_valid"] == 1
    assert r["p_action1"] == pytest.approx(7 / 18)
    assert r["qf_entropy"] == pytest.approx((h2(2 / 3) + 1 + 0) / 3)
    assert r["marginal_action_entropy"] == pytest.approx(h2(7 / 18))
    assert r["qf_consistency"] == pytest.approx(1 - (h2(7 / 18) - (h2(2 / 3) + 1) / 3))
    assert m.loc[("m", "s2"), "qf_consistency"] == pytest.approx(1.0)
    assert m.loc[("n", "s1"), "p_action1"] == 0.5 and m.loc[("n", "s1"), "forms"] == "repeat:1"
    mal = marginal_action_likelihood(_toy_responses()).set_index(["model", "scenario_id"])
    assert mal.loc[("m", "s1"), "p_action1"] == pytest.approx(7 / 18)
    s = model_summary(scenario_metrics(_toy_responses()))
    assert s.loc["m", "forms"] == "ab:0,ab:1,compare:0 (1); ab:0,ab:1 (1)"
    assert s.loc["m", "inconsistency"] == pytest.approx(1 - s.loc["m", "qf_consistency"])


def test_answer_rates_table():
    r = answer_rates(_toy_responses())
    assert r.loc["m", "n"] == 10
    assert r.loc["m", ["action1", "action2", "refusal", "invalid"]].tolist() == pytest.approx([0.4, 0.3, 0.2, 0.1])


def test_bad_responses_rejected():
    with pytest.raises(ValueError, match="load_responses"):
        scenario_metrics(_toy_responses().drop(columns="decision"))
    with pytest.raises(ValueError, match=r"expected one of \['action1'"):
        scenario_metrics(_toy_responses().assign(decision="A"))


def test_simulated_agent_recovers_the_metrics():
    """Simulated agent (not an LLM): known per-form likelihoods, many samples -> estimates close to the truth."""
    rng = np.random.default_rng(0)
    truth = {"ab:0": 0.9, "ab:1": 0.6, "repeat:0": 0.8, "repeat:1": 0.8, "compare:0": 0.3, "compare:1": 0.5}
    rows = []
    for form, p in truth.items():
        qt, o = form.split(":")
        for k, u in enumerate(rng.random(4000)):
            rows.append(("simulated", "x", qt, int(o), k, "action1" if u < p else "action2"))
    df = pd.DataFrame(rows, columns=["model", "scenario_id", "question_type", "ordering", "sample", "decision"])
    m = scenario_metrics(df).iloc[0]
    P = b(list(truth.values()))
    assert m["n_forms"] == 6
    assert m["p_action1"] == pytest.approx(np.mean(list(truth.values())), abs=0.01)
    assert m["qf_consistency"] == pytest.approx(float(qf_consistency(P)), abs=0.01)
    assert m["qf_entropy"] == pytest.approx(float(qf_entropy(P)), abs=0.01)


@pytest.mark.skipif(SHARED is None, reason="MoralChoice survey files not available")
def test_shared_high_responses_end_to_end():
    with pytest.warns(UserWarning, match="G_530"):
        r = load_responses("high", own_data=False)
    m = scenario_metrics(r)
    assert set(m["forms"]) == {"ab:0,ab:1"}  # the shared high files only hold A/B
    assert m.groupby("model").size().eq(679).all()
    assert set(np.round(m["p_action1"], 6)) <= {0.0, 0.5, 1.0}  # one sample per form
    s = model_summary(m)
    counts = r.groupby("model")["decision"].apply(lambda a: (a == "action1").mean())
    pd.testing.assert_series_equal(s["p_action1"], counts, check_names=False)
    assert (s["qf_entropy"] == 0).all()  # one sample per form: every form is certain
