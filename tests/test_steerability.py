"""Steerability (moralkit.studies.steerability) on simulated respondents with known persona effects.

Every respondent here is simulated (labels start with ``sim-``); nothing is presented as LLM output.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from moralkit import moralchoice as mc
from moralkit.errors import DataError
from moralkit.studies import steerability as st


@pytest.fixture(scope="module")
def low():
    return mc.load_scenarios("low")


def _metrics(low, shift, persona="utilitarian", n=300, seed=0):
    rng = np.random.default_rng(seed)
    sc = low.head(n)
    base = rng.uniform(0.2, 0.8, size=len(sc))
    s = st.rule_direction(sc, persona).to_numpy()
    per = np.clip(base + shift * s, 0, 1)
    return pd.DataFrame({
        "model": ["sim-m"] * len(sc) + [f"sim-m+persona-{persona}"] * len(sc),
        "scenario_id": list(sc["scenario_id"]) * 2,
        "p_action1": np.concatenate([base, per]),
        "estimator": "token_probability",
    })


def test_rule_direction_counts_violations(low):
    d = st.rule_direction(low, "deontological")
    assert set(d.unique()) <= {-1, 0, 1} and len(d) == len(low)
    # low ambiguity: action1 is the commonsense action and violates (almost) no rule
    assert (d == 1).mean() > 0.8
    with pytest.raises(DataError, match="unknown persona"):
        st.rule_direction(low, "nihilist")
    with pytest.raises(DataError, match="rule columns"):
        st.rule_direction(low[["scenario_id"]], ("pain",))


def test_directed_effect_recovers_a_known_shift(low):
    eff = st.likelihood_effects(_metrics(low, 0.1), "sim-m", low, n_boot=500, n_perm=999).iloc[0]
    assert eff["n_scenarios"] == 300 and eff["n_signed"] > 50
    assert abs(eff["directed_effect"] - 0.1) < 0.02
    assert eff["directed_lo"] > 0 and eff["p_directed"] < 0.01
    assert eff["estimator"] == "token_probability"


def test_no_shift_is_not_significant(low):
    eff = st.likelihood_effects(_metrics(low, 0.0), "sim-m", low, n_boot=500, n_perm=999).iloc[0]
    assert eff["directed_effect"] == 0 and eff["mean_delta"] == 0
    assert eff["p_directed"] > 0.5 and eff["delta_lo"] <= 0 <= eff["delta_hi"]


def test_opposite_shift_has_large_p(low):
    eff = st.likelihood_effects(_metrics(low, -0.1), "sim-m", low, n_boot=200, n_perm=999).iloc[0]
    assert eff["directed_effect"] < 0 and eff["directed_hi"] < 0 and eff["p_directed"] > 0.99


def test_likelihood_effects_errors(low):
    m = _metrics(low, 0.1)
    with pytest.raises(DataError, match="baseline"):
        st.likelihood_effects(m, "nope", low)
    with pytest.raises(DataError, match="respondent"):
        st.likelihood_effects(m, "sim-m", low, respondents=["nope"])


def test_psm_effects_on_simulated_agents():
    from moralkit.psm import nlls
    from moralkit.psm.design import DIMENSIONS
    from moralkit.psm.simulate import QuadraticAgent, simulate_quadratic

    b0 = np.array([2.0, 2.5, 2.0, 2.5, 2.0])
    a = np.full(5, 0.2)
    data = {"sim-m": simulate_quadratic(QuadraticAgent(a, b0), noise=0.0, seed=1, model="sim-m"),
            "sim-m+persona-utilitarian": simulate_quadratic(QuadraticAgent(a, b0 + 1.0), noise=0.0, seed=2,
                                                            model="sim-m+persona-utilitarian")}
    fits = nlls.fit_models(data, n_boot=30, seed=0)
    eff = st.psm_effects(fits, "sim-m")
    assert list(eff["dimension"]) == list(DIMENSIONS)
    assert np.allclose(eff["delta"], 1.0, atol=0.25)
    assert eff["agrees"].all() and (eff["expected"] == 1).all()
    with pytest.raises(DataError, match="bootstrap"):
        st.psm_effects(nlls.fit_models(data, n_boot=0, seed=0), "sim-m")


def test_psm_effects_summary_counts_sides():
    eff = pd.DataFrame({
        "respondent": ["m+persona-utilitarian"] * 3 + ["m-s1"] * 2,
        "persona": ["utilitarian"] * 3 + [None] * 2,
        "delta": [0.6, -0.5, 0.05, 0.1, -0.3],
        "delta_lo": [0.1, -0.9, -0.3, -0.2, -0.6],
        "delta_hi": [1.1, -0.1, 0.4, 0.4, 0.0001],
        "expected": [1, 1, 1, 0, 0],
    })
    out = st.psm_effects_summary(eff).set_index("respondent")
    u = out.loc["m+persona-utilitarian"]
    assert (u.statements, u.interval_excludes_0, u.with_expectation, u.expected_side, u.opposite_side) == (3, 2, 3, 1, 1)
    assert u.max_abs_delta == pytest.approx(0.6) and u.mean_abs_delta == pytest.approx((0.6 + 0.5 + 0.05) / 3)
    s = out.loc["m-s1"]
    assert (s.interval_excludes_0, s.with_expectation, s.expected_side, s.opposite_side) == (0, 0, 0, 0)
    with pytest.raises(DataError, match="psm_effects"):
        st.psm_effects_summary(eff.drop(columns="delta_lo"))


def test_psm_effects_summary_on_simulated_shift():
    from moralkit.psm import nlls
    from moralkit.psm.simulate import QuadraticAgent, simulate_quadratic

    b0 = np.array([2.0, 2.5, 2.0, 2.5, 2.0])
    a = np.full(5, 0.2)
    data = {"sim-m": simulate_quadratic(QuadraticAgent(a, b0), noise=0.0, seed=1, model="sim-m"),
            "sim-m+persona-deontological": simulate_quadratic(QuadraticAgent(a, b0 + 1.0), noise=0.0, seed=2,
                                                              model="sim-m+persona-deontological")}
    eff = st.psm_effects(nlls.fit_models(data, n_boot=30, seed=0), "sim-m")
    row = st.psm_effects_summary(eff).iloc[0]
    # b moved up by 1 on every statement; the deontologist was expected to move down on all five
    assert (row.interval_excludes_0, row.expected_side, row.opposite_side) == (5, 0, 5)


def test_a_respondents_interval_does_not_depend_on_the_others(low):
    """Adding or changing one persona-respondent leaves every other row's intervals and p-value unchanged."""
    m = _metrics(low, 0.02, "utilitarian")
    other = _metrics(low, 0.05, "care")  # the same baseline (same seed), another persona
    other = other[other["model"] != "sim-m"]
    alone = st.likelihood_effects(m, "sim-m", low, n_boot=300, n_perm=300, seed=0)
    both = st.likelihood_effects(pd.concat([m, other], ignore_index=True), "sim-m", low, n_boot=300, n_perm=300,
                                 seed=0)
    assert len(both) == 2
    row = both[both["respondent"] == alone["respondent"].iloc[0]].reset_index(drop=True)
    pd.testing.assert_frame_equal(row, alone)
