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


@pytest.fixture(scope="module")
def high():
    return mc.load_scenarios("high")


def test_a_shift_of_action1_is_not_called_towards_the_rules(low):
    """Issue 28: at low ambiguity the rules favour action 1 almost everywhere, so a persona that raises
    p(action 1) whatever the rules looks "towards its rules"; the placebos say it is not specific."""
    m = _metrics(low, 0.0, persona="care")
    m.loc[m["model"] == "sim-m+persona-care", "p_action1"] += 0.05
    eff = st.likelihood_effects(m, "sim-m", low, n_boot=300, n_perm=999,
                                placebos=["utilitarian", "deontological", "care"]).iloc[0]
    assert eff["p_directed"] < 0.01 and eff["share_plus"] > 0.95
    assert eff["p_specific"] > 0.2 and eff["placebo_p_min"] < 0.01
    assert eff["placebos"] == "utilitarian, deontological"
    assert eff["verdict"] == "a shift, not specific to its rules"


def test_a_rule_specific_shift_beats_the_placebos(high):
    """A persona that moves p(action 1) along its own rules' signs (mixed at high ambiguity) beats random
    sign assignments and the other personas' rules."""
    m = _metrics(high, 0.05, persona="deontological", n=400)
    eff = st.likelihood_effects(m, "sim-m", high, n_boot=300, n_perm=999, placebos=["utilitarian", "care"]).iloc[0]
    assert 0.2 < eff["share_plus"] < 1
    assert eff["p_directed"] < 0.01 and eff["p_specific"] < 0.01 and eff["p_beats_placebos"] < 0.01
    assert eff["verdict"] == "towards its rules"
    pl = st.placebo_effects(m, "sim-m", high, n_perm=999)
    own = pl[pl["own"]].iloc[0]
    assert own["rules"] == "deontological" and own["effect"] == pytest.approx(eff["directed_effect"])
    assert (pl.loc[~pl["own"], "effect"] < own["effect"]).all()
    # by default every other rule set of PERSONA_RULES is a placebo
    assert st.placebo_rules("care") == ["utilitarian", "deontological", "virtue"]
    with pytest.raises(DataError, match="unknown placebo"):
        st.placebo_rules("care", ["nihilist"])


def test_paired_bootstrap_pairs_only_identical_option_sets():
    from moralkit.psm import nlls
    from moralkit.psm.simulate import QuadraticAgent, simulate_quadratic

    a = np.array([0.3, 0.2, 0.2, 0.15, 0.15])
    b0 = np.array([2.0, 2.5, 2.0, 2.5, 2.0])
    q0 = np.array([2, 3, 2, 3, 2])
    base = simulate_quadratic(QuadraticAgent(a, b0), noise=0.5, seed=1, model="sim-m", q0=q0)
    # a persona that answers like its model except in a third of the rounds (as the LLM personas do):
    # their answers share each round's luck, which only a paired bootstrap cancels
    other = simulate_quadratic(QuadraticAgent(a, b0 + [0.6, 0, 0, 0, 0]), noise=0.5, seed=2, q0=q0)
    swap = np.random.default_rng(3).random(base.n_rounds) < 1 / 3
    persona = base.with_choices(np.where(swap, other.chosen, base.chosen))
    persona.model = "sim-m+persona-utilitarian"
    s1 = simulate_quadratic(QuadraticAgent(a, b0), noise=0.5, seed=4, model="sim-m-s1", q0=np.array([4, 1, 4, 1, 4]))
    data = {"sim-m": base, "sim-m+persona-utilitarian": persona, "sim-m-s1": s1}
    assert st.option_sets_differ(base, persona) == 0
    differ = st.option_sets_differ(base, s1)
    assert differ > 0
    eff = st.psm_paired_effects(data, "sim-m", n_boot=40, seed=0)
    by = eff.groupby("respondent")
    assert by["paired"].first().to_dict() == {"sim-m+persona-utilitarian": True, "sim-m-s1": False}
    assert by["rounds_options_differ"].first()["sim-m-s1"] == differ
    per = eff[eff["paired"]]
    # the same rounds for both: the difference's interval is narrower than independent resamples give
    assert ((per["delta_hi"] - per["delta_lo"]) < (per["delta_hi_unpaired"] - per["delta_lo_unpaired"])).all()
    s1_rows = eff[~eff["paired"]]
    assert np.allclose(s1_rows["delta_lo"], s1_rows["delta_lo_unpaired"]) and (s1_rows["n_boot_ok"] > 30).all()
    # the point estimate is the difference of the two full fits
    fb, fp = nlls.fit_utility(base), nlls.fit_utility(persona)
    assert np.allclose(per["delta"], fp.b - fb.b, atol=1e-6)
    with pytest.raises(DataError, match="baseline"):
        st.psm_paired_effects(data, "nope")


def test_refit_rounds_reproduces_the_fit_on_all_rounds():
    from moralkit.psm import nlls
    from moralkit.psm.simulate import QuadraticAgent, simulate_quadratic

    ds = simulate_quadratic(QuadraticAgent(np.full(5, 0.2), [2.0, 2.5, 3.0, 2.5, 2.0]), noise=0.5, seed=4, model="sim-x")
    fit = nlls.fit_utility(ds)
    all_rounds = ds.round_index[ds.chosen > 0]
    out = nlls.refit_rounds(ds, fit, [all_rounds, all_rounds[:80]])
    assert out.shape == (2, 10) and np.allclose(out[0, 5:], fit.b, atol=1e-5)
    assert not np.allclose(out[1, 5:], fit.b, atol=1e-3)
    with pytest.raises(ValueError, match="not answered rounds"):
        nlls.refit_rounds(ds, fit, [[999]])


def test_each_rule_set_is_signed_once_per_table(low, monkeypatch):
    """Issue 30: likelihood_effects and placebo_effects compute rule_direction once per rule set (a persona's own
    rules are the other personas' placebos), with the rows of computing it at every use."""
    m = pd.concat([_metrics(low, 0.05, persona=p, n=120) for p in ("care", "utilitarian")], ignore_index=True)
    m = m.drop_duplicates(["model", "scenario_id"])
    before = (st.likelihood_effects(m, "sim-m", low, n_boot=50, n_perm=50), st.placebo_effects(m, "sim-m", low, n_perm=50))
    calls = []
    real = st.rule_direction
    monkeypatch.setattr(st, "rule_direction", lambda sc, rules: calls.append(rules) or real(sc, rules))
    after = (st.likelihood_effects(m, "sim-m", low, n_boot=50, n_perm=50), st.placebo_effects(m, "sim-m", low, n_perm=50))
    for a, b in zip(before, after):
        pd.testing.assert_frame_equal(a, b)
    n_rules = len(st.PERSONA_RULES)
    assert len(calls) == n_rules + n_rules and sorted(calls[n_rules:]) == sorted(st.PERSONA_RULES)
