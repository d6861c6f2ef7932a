"""Tests of moralkit.psm.nlls: the quadratic utility (7), predicted answers (8)-(10), NLLS (11), Table 2, Figs 1-2.

All agents here are SIMULATED (moralkit.psm.simulate, labels "sim-..."), never LLM answers.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moralkit import figures
from moralkit.psm import nlls
from moralkit.psm.design import BUDGET, CORNERS, PRICES, make_design
from moralkit.psm.nlls import fit as nlls_fit
from moralkit.psm.simulate import QuadraticAgent, random_quadratic_agent, simulate_quadratic

ALL_CORNERS = np.repeat(CORNERS, 5, axis=0)  # the 160 (corner, price) pairs of the design
ALL_PRICES = np.tile(PRICES, (32, 1))


@pytest.fixture(scope="module")
def design():
    return make_design(0)


@pytest.fixture(scope="module")
def agents():
    """Simulated agents with ideal answers in the range the paper reports (Table 2: 2.2-3.1), a bit wider."""
    return [random_quadratic_agent(np.random.default_rng([2025, i]), b_range=(1.5, 3.5)) for i in range(6)]


@pytest.fixture(scope="module")
def sim(design, agents):
    """Noiseless simulated quadratic agents choosing the best of the 100 options (corner flip from q0)."""
    return [simulate_quadratic(ag, design, model=f"sim-nlls-{i}") for i, ag in enumerate(agents)]


# --------------------------------------------------------------------------- predicted answers


def _kkt_maximiser(a, b_o, p, budget=BUDGET):
    """Independent: solve the Lagrange conditions of max -1/2 sum a (y - b_o)^2 s.t. p.y = budget."""
    K = np.zeros((6, 6))
    K[:5, :5] = np.diag(a)
    K[:5, 5] = p
    K[5, :5] = p
    rhs = np.concatenate([a * b_o, [budget]])
    return np.linalg.solve(K, rhs)[:5]


def _paper_literal(a, b, o, p):
    """Eqs. (9)-(10) transcribed term by term, in corner coordinates."""
    b_o = [b[s] if o[s] == 0 else 5 - b[s] for s in range(5)]
    out = []
    for z in range(5):
        alpha = 1 - (a[z] / p[z] ** 2) / sum(a[s] / p[s] ** 2 for s in range(5))
        out.append(alpha * b_o[z] + (1 - alpha) * (12 - sum(p[s] * b_o[s] for s in range(5))) / p[z])
    return np.array(out)


def test_exact_form_is_the_lagrange_maximiser():
    rng = np.random.default_rng(0)
    for _ in range(20):
        a = rng.dirichlet(np.ones(5))
        b = rng.uniform(-1, 6, 5)
        k = rng.integers(160)
        o, p = ALL_CORNERS[k], ALL_PRICES[k]
        b_o = np.where(o == 0, b, 5 - b)
        y = nlls.predict_answers(a, b, o, p, form="exact", coords="corner")[0]
        np.testing.assert_allclose(y, _kkt_maximiser(a, b_o, p), atol=1e-12)
        assert abs(p @ y - BUDGET) < 1e-12
        # raw coordinates: the same point mapped back (y = q where o=0, 5-q where o=5)
        q = nlls.predict_answers(a, b, o, p, form="exact")[0]
        np.testing.assert_allclose(np.where(o == 0, q, 5 - q), y, atol=1e-12)


def test_paper_form_is_eqs_9_10_as_printed():
    rng = np.random.default_rng(1)
    a = rng.dirichlet(np.ones(5))
    b = rng.uniform(0, 5, 5)
    got = nlls.predict_answers(a, b, ALL_CORNERS, ALL_PRICES, form="paper", coords="corner")
    want = np.array([_paper_literal(a, b, o, p) for o, p in zip(ALL_CORNERS, ALL_PRICES)])
    np.testing.assert_allclose(got, want, atol=1e-12)


def test_forms_do_not_coincide_at_equal_weights():
    """The issue claims the two forms coincide when all a_s are equal: as printed, they do not.

    With a = 1/5 and b = 2.5 on every round of the design, the printed eqs. (9)-(10) differ from the
    maximiser of (7)-(8) by 0.84 on average (up to 0.92), and the printed prediction is off the budget
    (p . y = 9.35, not 12). The printed formula becomes the maximiser with alpha_z = 1 - (p_z^2/a_z) /
    sum_s p_s^2/a_s and (12 - sum_{s != z} p_s b_s) / p_z; that corrected expression is checked too.
    """
    a = np.full(5, 0.2)
    b = np.full(5, 2.5)
    ye = nlls.predict_answers(a, b, ALL_CORNERS, ALL_PRICES, form="exact", coords="corner")
    yp = nlls.predict_answers(a, b, ALL_CORNERS, ALL_PRICES, form="paper", coords="corner")
    diff = np.abs(ye - yp)
    # by hand, prices (2,1,1,1,1), b_o = 2.5, 12 - p.b_o = -3: exact y_2 = 2.5 - 3/8 = 2.125; printed
    # w_2 = 1/(1/4 + 4) = 1/4.25, y_2 = 2.5 (1 - w_2) - 3 w_2 = 1.2059: a gap of 0.9191
    assert diff.max() == pytest.approx(0.9191176470588236, abs=1e-12)
    assert diff.mean() == pytest.approx(0.8382352941176471, abs=1e-12)
    np.testing.assert_allclose((ALL_PRICES * ye).sum(1), BUDGET, atol=1e-12)
    np.testing.assert_allclose((ALL_PRICES * yp).sum(1), 9.352941176470587, atol=1e-12)
    # other ideal points, equal weights: still different
    rng = np.random.default_rng(2)
    for _ in range(5):
        b = rng.uniform(0, 5, 5)
        ye = nlls.predict_answers(a, b, ALL_CORNERS, ALL_PRICES, form="exact", coords="corner")
        yp = nlls.predict_answers(a, b, ALL_CORNERS, ALL_PRICES, form="paper", coords="corner")
        assert np.abs(ye - yp).max() > 0.3
        # the corrected paper-style expression equals the exact maximiser (any weights)
        aa = rng.dirichlet(np.ones(5))
        for o, p, y in zip(ALL_CORNERS[:40], ALL_PRICES[:40],
                           nlls.predict_answers(aa, b, ALL_CORNERS[:40], ALL_PRICES[:40], "exact", "corner")):
            b_o = np.where(o == 0, b, 5 - b)
            one_minus_alpha = (p ** 2 / aa) / np.sum(p ** 2 / aa)
            fixed = (1 - one_minus_alpha) * b_o + one_minus_alpha * (12 - (p @ b_o - p * b_o)) / p
            np.testing.assert_allclose(fixed, y, atol=1e-12)


def test_residuals_same_in_raw_and_corner_coordinates(sim):
    """Eq. (11) is written in corner coordinates; |q - o| is an isometry per coordinate, so SS agree."""
    ds = sim[0]
    a, b = np.full(5, 0.2), np.array([2.0, 2.5, 3.0, 2.2, 2.8])
    for form in nlls.FORMS:
        yhat = nlls.predict_answers(a, b, ds.corners, ds.prices, form, coords="corner")
        qhat = nlls.predict_answers(a, b, ds.corners, ds.prices, form, coords="raw")
        r_corner = np.abs(ds.choices - ds.corners) - yhat
        r_raw = ds.choices - qhat
        np.testing.assert_allclose(np.abs(r_raw), np.abs(r_corner), atol=1e-12)
        np.testing.assert_allclose(r_raw, np.where(ds.corners == 0, 1, -1) * r_corner, atol=1e-12)
        assert (r_raw ** 2).sum() == pytest.approx((r_corner ** 2).sum(), rel=1e-12)


ab = st.tuples(
    st.lists(st.floats(0.02, 1.0), min_size=5, max_size=5),
    st.lists(st.floats(-1.0, 6.0), min_size=5, max_size=5),
    st.integers(0, 159),
    st.floats(0.1, 10.0),
)


@settings(max_examples=60, deadline=None)
@given(ab, st.sampled_from(nlls.FORMS))
def test_prediction_invariants(args, form):
    a, b, k, scale = np.array(args[0]), np.array(args[1]), args[2], args[3]
    o, p = ALL_CORNERS[k], ALL_PRICES[k]
    q = nlls.predict_answers(a, b, o, p, form)[0]
    # only the ratios of the weights matter
    np.testing.assert_allclose(nlls.predict_answers(scale * a, b, o, p, form)[0], q, atol=1e-9)
    # reflecting the ideal point and the corner reflects the raw prediction
    np.testing.assert_allclose(nlls.predict_answers(a, 5 - b, 5 - o, p, form)[0], 5 - q, atol=1e-9)
    if form == "exact":
        y = np.where(o == 0, q, 5 - q)
        assert abs(p @ y - BUDGET) < 1e-9
        # no point of the budget line has a higher utility
        rng = np.random.default_rng(k)
        d = rng.normal(size=(20, 5))
        d -= np.outer(d @ p / (p @ p), p)
        u = lambda qq: -0.5 * (a * (qq - b) ** 2).sum(-1)  # noqa: E731
        others = np.where(o == 0, y + d, 5 - (y + d))
        assert (u(others) <= u(q) + 1e-9).all()


@pytest.mark.parametrize("form", nlls.FORMS)
def test_jacobian_matches_finite_differences(sim, form):
    ds = sim[1]
    prob = nlls_fit._Problem(ds.corners, ds.prices, np.abs(ds.choices - ds.corners), form)
    rng = np.random.default_rng(3)
    for _ in range(3):
        th = np.concatenate([rng.normal(0, 0.7, 4), rng.uniform(0, 5, 5)])
        J = prob.jac(th)
        h = 1e-6
        Jn = np.column_stack([(prob.resid(th + h * e) - prob.resid(th - h * e)) / (2 * h) for e in np.eye(9)])
        np.testing.assert_allclose(J, Jn, atol=1e-6)


def test_predict_answers_bad_input():
    with pytest.raises(ValueError, match="form"):
        nlls.predict_answers(np.full(5, .2), np.full(5, 2.5), CORNERS[0], PRICES[0], form="lagrange")
    with pytest.raises(ValueError, match="positive"):
        nlls.predict_answers([0.5, 0.5, 0, 0, 0], np.full(5, 2.5), CORNERS[0], PRICES[0])
    with pytest.raises(ValueError, match="0 or 5"):
        nlls.predict_answers(np.full(5, .2), np.full(5, 2.5), [0, 1, 0, 0, 0], PRICES[0])
    with pytest.raises(ValueError, match="5 entries"):
        nlls.predict_answers(np.full(4, .25), np.full(5, 2.5), CORNERS[0], PRICES[0])


# --------------------------------------------------------------------------- recovery (simulated agents)


@pytest.mark.parametrize("form", nlls.FORMS)
def test_recovery_continuous_matching_form(design, agents, form):
    """Simulated agents answering exactly the form's prediction (exact: on the continuous budget line)."""
    for i, ag in enumerate(agents[:3]):
        corners = np.stack([r.corner(ag.best_answer()) for r in design])
        prices = np.stack([r.prices for r in design])
        q = nlls.predict_answers(ag.a, ag.b, corners, prices, form)
        # the printed form's predictions are off the budget line by construction: no budget check there
        fit = nlls.fit_answers(corners, prices, q, form=form, n_starts=3, model=f"sim-cont-{i}",
                               check_budget=(form == "exact"))
        assert fit.converged and fit.n_agree >= 1
        assert np.abs(fit.a - ag.a).max() < 1e-4, (fit.a, ag.a)
        assert np.abs(fit.b - ag.b).max() < 1e-4, (fit.b, ag.b)
        assert fit.ssr < 1e-12


def test_recovery_integer_choices_exact_form(sim, agents):
    """Best of the 100 integer options per round (corner flip from the agent's q0): b within 0.15 on average."""
    maes, amaes = [], []
    for ds, ag in zip(sim, agents):
        fit = nlls.fit_utility(ds, form="exact", n_starts=3)
        assert fit.converged
        maes.append(np.abs(fit.b - ag.b).mean())
        amaes.append(np.abs(fit.a - ag.a).mean())
    # measured: mean 0.039 (max 0.064) over these 6 agents; a within 0.01 on average
    assert np.mean(maes) < 0.15, maes
    assert max(maes) < 0.15, maes
    assert np.mean(amaes) < 0.05, amaes


def test_recovery_integer_choices_paper_form():
    """Agents choosing the option nearest to the printed prediction (9)-(10): the paper form recovers b."""
    d = make_design(1)
    maes = []
    for i in range(4):
        ag = random_quadratic_agent(np.random.default_rng([99, i]), b_range=(1.5, 3.5))
        ds = simulate_quadratic(ag, d, model=f"sim-paper-{i}")
        y = nlls.predict_answers(ag.a, ag.b, ds.corners, ds.prices, "paper", coords="corner")
        yo = np.abs(ds.options - ds.corners[:, None, :])
        ds = ds.with_choices(np.argmin(((yo - y[:, None, :]) ** 2).sum(-1), 1) + 1)
        fit = nlls.fit_utility(ds, form="paper", n_starts=3)
        maes.append(np.abs(fit.b - ag.b).mean())
    assert np.mean(maes) < 0.15, maes


# --------------------------------------------------------------------------- estimation details


def test_fit_result_fields_and_convergence_report(sim):
    fit = nlls.fit_utility(sim[2], form="exact", n_starts=4, seed=3)
    assert fit.model == "sim-nlls-2" and fit.form == "exact"
    assert fit.n_obs == 160 and fit.n_excluded == 0 and fit.n_starts == 4
    assert 1 <= fit.n_agree <= 4 and fit.status > 0 and fit.converged and fit.regular
    assert np.isfinite(fit.se_a).all() and np.isfinite(fit.se_b).all() and (fit.se_b > 0).all()
    assert fit.ssr == pytest.approx(
        ((np.abs(sim[2].choices - sim[2].corners)
          - nlls.predict_answers(fit.a, fit.b, sim[2].corners, sim[2].prices, "exact", "corner")) ** 2).sum())
    rep = fit.convergence()
    assert {"status", "ssr", "n_agree", "optimality", "converged"} <= set(rep)
    df = fit.to_frame()
    assert len(df) == 10 and df["estimate"].notna().all()
    np.testing.assert_array_equal(fit.q0, sim[2].q0)


def test_nlls_optimum_agrees_with_an_independent_constrained_minimiser():
    """SLSQP on (a, b) directly (a >= 0, sum a = 1), predictions from the batched KKT system: same optimum."""
    from scipy.optimize import minimize

    ag = QuadraticAgent(a=[0.3, 0.15, 0.2, 0.15, 0.2], b=[2.8, 2.1, 2.6, 3.2, 2.3])
    ds = simulate_quadratic(ag, make_design(3), noise=0.2, seed=8, model="sim-slsqp")
    fit = nlls.fit_utility(ds, n_starts=3)
    y = np.abs(ds.choices - ds.corners).astype(float)
    sgn = np.where(ds.corners == 0, 1.0, -1.0)
    T = len(y)
    K = np.zeros((T, 6, 6))
    K[:, :5, 5] = ds.prices
    K[:, 5, :5] = ds.prices

    def ssr(x):
        a, b = x[:5], x[5:]
        b_o = ds.corners + sgn * b
        K[:, np.arange(5), np.arange(5)] = a
        rhs = np.concatenate([a * b_o, np.full((T, 1), float(BUDGET))], axis=1)
        yhat = np.linalg.solve(K, rhs[..., None])[:, :5, 0]
        return ((y - yhat) ** 2).sum()

    x0 = np.concatenate([np.full(5, 0.2), np.full(5, 2.5)])
    res = minimize(ssr, x0, method="SLSQP", bounds=[(1e-4, 1)] * 5 + [(None, None)] * 5,
                   constraints=[{"type": "eq", "fun": lambda x: x[:5].sum() - 1}],
                   options={"ftol": 1e-14, "maxiter": 500})
    assert res.success
    assert fit.ssr <= res.fun + 1e-6
    assert fit.ssr == pytest.approx(ssr(np.concatenate([fit.a, fit.b])), rel=1e-10)
    np.testing.assert_allclose(res.x[:5], fit.a, atol=2e-3)
    np.testing.assert_allclose(res.x[5:], fit.b, atol=2e-3)


def test_fit_is_seeded_and_does_not_depend_on_other_models(sim):
    alone = nlls.fit_utility(sim[3], n_starts=3, seed=5)
    group = nlls.fit_models({ds.model: ds for ds in sim[2:4]}, n_starts=3, seed=5)
    np.testing.assert_array_equal(alone.a, group[sim[3].model].a)
    np.testing.assert_array_equal(alone.b, group[sim[3].model].b)


def test_delta_method_se_matches_manual_sandwich(sim):
    """statsmodels' clustered covariance vs a hand-written sandwich (and the classical s^2 (J'J)^-1)."""
    ds = sim[4]
    for cov_type in ("cluster", "nonrobust"):
        fit = nlls.fit_utility(ds, n_starts=2, cov_type=cov_type)
        prob = nlls_fit._Problem(ds.corners, ds.prices, np.abs(ds.choices - ds.corners), "exact")
        th = nlls_fit._ab_to_theta(fit.a, fit.b)
        J, r = prob.jac(th), prob.resid(th)
        n, k, G = len(r), 9, ds.n_obs
        bread = np.linalg.inv(J.T @ J)
        if cov_type == "cluster":
            meat = sum(np.outer(J[5 * g:5 * g + 5].T @ r[5 * g:5 * g + 5], J[5 * g:5 * g + 5].T @ r[5 * g:5 * g + 5])
                       for g in range(G))
            V = bread @ meat @ bread * (G / (G - 1)) * ((n - 1) / (n - k))
        else:
            V = bread * (r @ r) / (n - k)
        D = np.zeros((10, 9))
        D[:5, :4] = np.diag(fit.a)[:, 1:] - np.outer(fit.a, fit.a[1:])
        D[5:, 4:] = np.eye(5)
        se = np.sqrt(np.diag(D @ V @ D.T))
        np.testing.assert_allclose(fit.se_a, se[:5], rtol=1e-5)
        np.testing.assert_allclose(fit.se_b, se[5:], rtol=1e-5)
        # sum a = 1: the delta-method variance of the sum is zero
        assert abs(np.ones(5) @ fit.cov[:5, :5] @ np.ones(5)) < 1e-12


def test_bootstrap_is_seeded_and_worker_independent():
    ag = QuadraticAgent(a=[0.15, 0.25, 0.2, 0.2, 0.2], b=[2.6, 2.2, 3.0, 2.4, 2.8])
    ds = simulate_quadratic(ag, make_design(2), noise=0.3, seed=4, model="sim-noisy")
    f1 = nlls.fit_utility(ds, n_starts=2, n_boot=12, seed=1, n_jobs=1)
    f2 = nlls.fit_utility(ds, n_starts=2, n_boot=12, seed=1, n_jobs=2)
    np.testing.assert_array_equal(f1.boot_b, f2.boot_b)
    np.testing.assert_array_equal(f1.ci_a, f2.ci_a)
    assert f1.n_boot == 12 and f1.n_boot_failed == 0
    f3 = nlls.fit_utility(ds, n_starts=2, n_boot=12, seed=2)
    assert not np.array_equal(f1.boot_b, f3.boot_b)
    assert (f1.ci_b[:, 0] <= f1.ci_b[:, 1]).all()
    # bootstrap and delta-method SEs agree in order of magnitude (noisy agent, 160 rounds)
    ratio = f1.boot_se_b / f1.se_b
    assert (ratio > 0.4).all() and (ratio < 2.5).all(), ratio


# --------------------------------------------------------------------------- bad input


def test_missing_rounds_are_excluded(sim):
    ds = sim[5]
    chosen = ds.chosen.copy()
    chosen[::7] = 0  # unanswered
    gappy = ds.with_choices(chosen)
    fit = nlls.fit_utility(gappy, n_starts=2)
    ref = nlls.fit_utility(ds.subset(chosen > 0), n_starts=2)
    assert fit.n_excluded == (chosen == 0).sum() and fit.n_obs == (chosen > 0).sum()
    np.testing.assert_allclose(fit.b, ref.b, atol=1e-10)


def test_answers_off_the_budget_raise(sim):
    ds = sim[0]
    q = ds.choices.astype(float)
    q[4, 0] = 5 - q[4, 0] if q[4, 0] != 2.5 else 0
    with pytest.raises(ValueError, match="round 5 is off the budget"):
        nlls.fit_answers(ds.corners, ds.prices, q)
    # a dataset whose corners were altered after validation (wrong coordinates): same error
    bad = ds.subset(np.arange(ds.n_rounds))
    bad.corners = 5 - bad.corners
    with pytest.raises(ValueError, match="off the budget"):
        nlls.fit_utility(bad)
    with pytest.raises(ValueError, match="NaN"):
        nlls.fit_answers(ds.corners[:5], ds.prices[:5], np.full((5, 5), np.nan))


def test_too_few_or_unidentifying_rounds_raise(sim):
    ds = sim[0]
    from moralkit.errors import IdentificationError

    with pytest.raises(IdentificationError, match="at least 3 rounds"):
        nlls.fit_utility(ds.subset([0, 1]))
    chosen = np.zeros(ds.n_rounds, dtype=int)
    chosen[:2] = ds.chosen[:2]
    with pytest.raises(ValueError, match="at least 3 rounds"):
        nlls.fit_utility(ds.with_choices(chosen))
    # many rounds, all with the same corner and prices: not identified
    same = ds.subset(np.zeros(12, dtype=int))
    with pytest.raises(IdentificationError, match="do not identify"):
        nlls.fit_utility(same)
    with pytest.raises(ValueError, match="PSMDataset"):
        nlls.fit_utility({"x": ds})
    with pytest.raises(ValueError, match="n_starts"):
        nlls.fit_utility(ds, n_starts=0)


def test_boundary_solution_is_flagged_not_hidden(design):
    """A random chooser on 30 rounds: the exact-form optimum pushes weights to 0 (logits at ETA_BOUND)."""
    from moralkit.psm.simulate import simulate_random

    ds = simulate_random(design, seed=1, model="sim-random").subset(np.arange(0, 150, 5))
    with pytest.warns(RuntimeWarning, match="boundary solution"):
        fit = nlls.fit_utility(ds, form="exact", n_starts=3)
    assert not fit.regular and fit.converged
    assert np.isnan(fit.se_a).all() and np.isnan(fit.se_b).all()
    assert np.isfinite(fit.a).all() and np.isfinite(fit.b).all() and fit.a.sum() == pytest.approx(1)
    assert fit.convergence()["regular"] is False
    with pytest.warns(UserWarning, match="not finite for"):
        nlls.table2({ds.model: fit}, uncertainty="se")
    # a regular fit of the same kind of data has finite SEs
    full = nlls.fit_utility(simulate_random(design, seed=1, model="sim-random"), form="exact", n_starts=2)
    assert full.regular and np.isfinite(full.se_b).all()


def test_fit_models_leaves_out_unfittable_models_with_a_warning(sim):
    tiny = sim[0].subset([0, 1])
    tiny.model = "sim-tiny"
    with pytest.raises(ValueError, match="sim-tiny"):
        nlls.fit_models([tiny, sim[1]], n_starts=1)
    with pytest.warns(UserWarning, match="sim-tiny left out"):
        out = nlls.fit_models([tiny, sim[1]], n_starts=1, errors="warn")
    assert list(out) == [sim[1].model]
    with pytest.raises(ValueError, match="not in the data"):
        nlls.fit_models([sim[1]], models=["nope"])


# --------------------------------------------------------------------------- tables and figures


@pytest.fixture(scope="module")
def fits(sim):
    return nlls.fit_models(sim[:3], n_starts=2, n_boot=6, seed=0)


def test_table2_layout_and_values(fits):
    pa, pb = nlls.table2(fits)
    cols_b = ["b_1 (Truth)", "b_2 (Machine)", "b_3 (Consent)", "b_4 (Risk)", "b_5 (Autonomy)"]
    cols_a = [c.replace("b_", "a_") for c in cols_b]
    assert list(pa.columns[:5]) == cols_b and list(pb.columns[:5]) == cols_a
    assert pa.index.name == "Model" and list(pa.index) == list(fits)
    for m, f in fits.items():
        np.testing.assert_array_equal(pa.loc[m, cols_b].to_numpy(float), f.b)
        np.testing.assert_array_equal(pb.loc[m, cols_a].to_numpy(float), f.a)
    np.testing.assert_allclose(pb[cols_a].sum(axis=1), 1.0)
    assert pa[cols_b].notna().all().all()
    se_a, _ = nlls.table2(fits, uncertainty="se")
    assert "s.e. b_1" in se_a.columns and se_a["s.e. b_1"].notna().all()
    ci_a, ci_b = nlls.table2(fits, uncertainty="ci")
    assert (ci_a["b_1 low"] <= ci_a["b_1 high"]).all() and "a_5 high" in ci_b.columns


def test_table2_bad_input(fits, sim):
    with pytest.raises(ValueError, match="no fitted model"):
        nlls.table2({})
    nob = {"x": nlls.fit_utility(sim[0], n_starts=1)}
    with pytest.raises(ValueError, match="n_boot"):
        nlls.table2(nob, uncertainty="ci")
    with pytest.raises(ValueError, match="uncertainty"):
        nlls.table2(fits, uncertainty="sd")


def test_table2_marks_models_passing_the_rationality_test(fits):
    t1 = pd.DataFrame(dict(provider="simulated", model=list(fits), ccei=[0.5, 0.4, 0.3], ccei_exact="",
                           alpha=[0.01, 0.05, 0.2], stars=["***", "**", ""], label=["0.500***", "0.400**", "0.300"],
                           n_obs=160))
    pa, _ = nlls.table2(fits, table1=t1)
    assert pa["passes"].tolist() == [True, True, False]
    assert pa["CCEI"].tolist() == ["0.500***", "0.400**", "0.300"]


def test_compare_forms(sim):
    ex = nlls.fit_models(sim[:2], form="exact", n_starts=2)
    pa = nlls.fit_models(sim[:2], form="paper", n_starts=2)
    cmp = nlls.compare_forms(ex, pa)
    assert len(cmp) == 20 and set(cmp["parameter"]) == {f"{n}_{s}" for n in "ab" for s in range(1, 6)}
    np.testing.assert_allclose(cmp["difference"], cmp["paper"] - cmp["exact"])
    # simulated utility maximisers: the exact form fits better than the printed one
    assert (cmp["ssr_exact"] < cmp["ssr_paper"]).all()
    with pytest.raises(ValueError, match="form='exact' fits first"):
        nlls.compare_forms(pa, ex)


def test_figures(fits, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig1 = nlls.plot_parameters(fits)
    assert len(fig1.axes) == 2
    for ax in fig1.axes:
        assert len(ax.get_lines()) >= len(fits)
        assert [t.get_text() for t in ax.get_xticklabels()] == ["Truth", "Machine", "Consent", "Risk", "Autonomy"]
    # panel (b) plots the b estimates of the first model at x = 0..4 (+ offset)
    ys = [ln.get_ydata() for ln in fig1.axes[1].get_lines() if len(ln.get_ydata()) == 5]
    assert any(np.allclose(y, fits[list(fits)[0]].b) for y in ys)
    ax2 = nlls.plot_q0_minus_b(fits, interval="se")
    fig2 = ax2.figure
    bars = ax2.patches
    assert len(bars) == 5 * len(fits)
    f0 = fits[list(fits)[0]]
    np.testing.assert_allclose(sorted(b.get_height() for b in bars[:5]), sorted(f0.q0 - f0.b))
    _, ax_given = plt.subplots()
    assert nlls.plot_q0_minus_b(fits, interval="se", ax=ax_given) is ax_given  # a single panel draws on ax
    assert len(ax_given.patches) == 5 * len(fits)
    paths = figures.save(fig2, "03_test", directory=tmp_path)
    assert [p.suffix for p in paths] == [".png", ".svg"] and all(p.stat().st_size > 0 for p in paths)
    plt.close("all")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nlls.plot_parameters(fits, interval=None)
    plt.close("all")


def test_convergence_table_and_notes_of_notebook_03():
    """Notebook 03's convergence cell as package functions: one row per fit, the warnings only when due."""
    import pandas as pd

    from moralkit.psm import nlls

    class Fit:
        def __init__(self, model, converged, regular):
            self.row = {"model": model, "converged": converged, "regular": regular,
                        **{c: 0 for c in nlls.CONVERGENCE_COLUMNS if c not in ("converged", "regular")}}

        def convergence(self):
            return self.row

    conv = nlls.convergence_table({"b": Fit("b", True, False), "a": Fit("a", False, True), "c": Fit("c", True, True)})
    assert conv.index.tolist() == ["b", "a", "c"] and set(nlls.CONVERGENCE_COLUMNS) <= set(conv.columns)
    assert nlls.convergence_notes(conv) == [
        "NOT converged (read with care): ['a']",
        "boundary or flat optimum, delta-method s.e. undefined (see the bootstrap intervals): ['b']"]
    assert nlls.convergence_notes(conv.loc[["c"]]) == []
    assert isinstance(conv, pd.DataFrame)


@pytest.mark.parametrize("form", ["exact", "paper"])
def test_compiled_prediction_is_bit_identical_to_the_numpy_expressions(form):
    """The compiled kernels of predict_corner (moralkit.psm._nlls_kernels) do the NumPy expressions'
    operations in the same order: predictions and Jacobians equal bit for bit (signs of zeros included),
    so fits and their bootstrap replicates do not change."""
    from moralkit.psm.nlls.model import _predict_corner_numpy, corner_signs, predict_corner

    rng = np.random.default_rng(7)
    for T in (1, 3, 37, 160):
        corners = rng.choice([0, 5], size=(T, 5))
        sign, cf = corner_signs(corners), corners.astype(float)
        prices = rng.choice(PRICES.ravel(), size=(T, 5)) * rng.uniform(0.5, 2.0)
        for _ in range(20):
            z = np.concatenate([[0.0], rng.normal(0, 4, 4)])
            a = np.exp(z - z.max())
            a /= a.sum()
            b = rng.normal(2.5, 3.0, 5)
            for jac in (False, True):
                got = predict_corner(a, b, sign, cf, prices, form, BUDGET, jac=jac)
                ref = _predict_corner_numpy(a, b, sign, cf, prices, form, BUDGET, jac=jac)
                for g, r in zip(got if jac else [got], ref if jac else [ref]):
                    assert g.shape == r.shape
                    assert np.array_equal(g, r) and np.array_equal(np.signbit(g), np.signbit(r))
