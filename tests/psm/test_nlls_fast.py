"""The NLLS fast path gives exactly the fits of the public ``scipy.optimize.least_squares`` call.

:meth:`moralkit.psm.nlls.fit._Problem.solve` calls SciPy's trust-region reflective driver without
``least_squares``' wrapping (:func:`moralkit.psm.nlls.fit._trf_bounds`); these tests compare every returned
value with ``==`` against the public call (``_Problem.solve_scipy``), on the committed PSM runs (bootstrap
resamples and random starts, as notebooks 03 and 07 solve them) and on simulated agents, in both forms.

References
----------
Seror (2025), Section 3.2, eq. (11).
"""

from __future__ import annotations

import numpy as np
import pytest

from moralkit.psm.dataset import load_psm
from moralkit.psm.design import make_design
from moralkit.psm.nlls import fit as F
from moralkit.psm.nlls.model import to_corner_linear
from moralkit.psm.simulate import random_quadratic_agent, simulate_quadratic

_FIELDS = ("x", "cost", "fun", "jac", "grad", "optimality", "active_mask", "nfev", "njev", "status", "message",
           "success")


def _same(r1, r2):
    for k in _FIELDS:
        assert np.array_equal(np.asarray(r1[k]), np.asarray(r2[k])), k


@pytest.fixture(scope="module")
def problems():
    """Bootstrap resamples of two committed PSM runs and of two simulated noisy agents, with their starts."""
    _, dss = load_psm(None)
    data = []
    for m in ("qwen2.5-coder-0.5b-instruct", "smollm2-135m-instruct"):
        v = dss[m].valid()
        data.append((v.corners, v.prices, to_corner_linear(v.choices, v.corners)))
    design = make_design(0)
    for i in range(2):
        ag = random_quadratic_agent(np.random.default_rng([2025, i]), b_range=(1.5, 3.5))
        v = simulate_quadratic(ag, design, noise=0.3, seed=i, model=f"sim-fast-{i}").valid()
        data.append((v.corners, v.prices, to_corner_linear(v.choices, v.corners)))
    rng = np.random.default_rng(7)
    out = []
    for corners, prices, y in data:
        T = len(y)
        for k in range(2):
            idx = np.arange(T) if k == 0 else np.sort(rng.integers(0, T, T))
            th0 = F._starts(2, rng)[k % 2]
            out.append((corners[idx].astype(float), prices[idx], y[idx], th0))
    return out


@pytest.mark.parametrize("form", ["exact", "paper"])
def test_fast_solve_equals_least_squares(problems, form):
    for corners, prices, y, th0 in (problems if form == "exact" else problems[::2]):
        prob = F._Problem(corners, prices, y, form, 12.0)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            _same(prob.solve(th0), prob.solve_scipy(th0))


def test_fast_solve_equals_least_squares_when_stopped_early_and_at_a_bound(problems):
    """max_nfev stops both at the same iterate; a start on the eta bound is moved inside the same way."""
    corners, prices, y, _ = problems[0]
    prob = F._Problem(corners, prices, y, "exact", 12.0)
    th = np.r_[np.full(4, F.ETA_BOUND), np.full(5, 2.5)]
    for kw in ({"max_nfev": 3}, {}):
        _same(prob.solve(th, **kw), prob.solve_scipy(th, **kw))


def test_fast_solve_rejects_a_nan_start_like_least_squares(problems):
    corners, prices, y, th0 = problems[0]
    prob = F._Problem(corners, prices, y, "exact", 12.0)
    bad = np.full(9, np.nan)
    with pytest.raises(ValueError, match="outside of provided bounds"):
        prob.solve_scipy(bad)
    with pytest.raises(ValueError, match="outside of provided bounds"):
        prob.solve(bad)


@pytest.mark.parametrize("form", ["exact", "paper"])
def test_residuals_and_jacobian_equal_the_numpy_expressions(problems, form):
    """resid and jac (compiled chain rule through the softmax) == the NumPy expressions they replace, at
    random parameters with weights over several orders of magnitude."""
    from moralkit.psm.nlls.model import _predict_corner_numpy, corner_signs

    rng = np.random.default_rng(3)
    for corners, prices, y, _ in problems[::2]:
        prob = F._Problem(corners, prices, y, form, 12.0)
        sign = corner_signs(corners)
        for _ in range(5):
            th = np.r_[rng.normal(0, 3, 4), rng.uniform(-1, 6, 5)]
            a, b = F._theta_to_ab(th)
            yhat, J = _predict_corner_numpy(a, b, sign, corners, prices, form, 12.0, jac=True)
            Jt = np.empty((len(y), 5, 9))
            Jt[:, :, :4] = J[:, :, :5] @ F._dsoftmax(a)
            Jt[:, :, 4:] = J[:, :, 5:]
            r = prob.resid(th)
            assert np.array_equal(r, (y - yhat).ravel())
            Jr = prob.jac(th)
            assert Jr.flags.c_contiguous and Jr.shape == (5 * len(y), 9)
            assert np.array_equal(Jr, -Jt.reshape(-1, 9))


def test_scipy_driver_fallback_equals_least_squares(problems, monkeypatch):
    """On a SciPy version the restatement was not checked against, SciPy's own trf_bounds runs: same values."""
    from moralkit.psm.nlls import _trf

    monkeypatch.setattr(_trf, "LEAN", False)
    for corners, prices, y, th0 in problems[:2]:
        prob = F._Problem(corners, prices, y, "exact", 12.0)
        _same(prob.solve(th0), prob.solve_scipy(th0))


def test_the_compiled_chain_rule_is_used_only_where_it_reproduces_numpy(problems, monkeypatch):
    """Where the compiled chain rule does not reproduce NumPy's matmul on the probe (another BLAS's order),
    the NumPy expression is used, so the fits are those of the NumPy expression on every machine."""
    from moralkit.psm import _nlls_kernels

    F._jacobian_chain.cache_clear()
    try:
        chosen = F._jacobian_chain()
        assert chosen in (_nlls_kernels.theta_jacobian, F._theta_jacobian_numpy)
        F._jacobian_chain.cache_clear()

        real = _nlls_kernels.theta_jacobian

        def skewed(a, J, out):  # a kernel whose accumulation order differs from NumPy's in the last bits
            real(a, J, out)
            out[0, 0] = np.nextafter(out[0, 0], np.inf)

        monkeypatch.setattr(_nlls_kernels, "theta_jacobian", skewed)
        assert F._jacobian_chain() is F._theta_jacobian_numpy
        corners, prices, y, th0 = problems[0]
        prob = F._Problem(corners, prices, y, "exact", 12.0)
        assert prob._theta_jacobian is F._theta_jacobian_numpy
        _same(prob.solve(th0), prob.solve_scipy(th0))
    finally:
        F._jacobian_chain.cache_clear()


def test_the_shortcuts_and_scipy_steps_both_run_on_the_compared_problems(problems, monkeypatch):
    """The equality tests above cover both ways of every step of ``trf_bounds``: the shortcuts (the
    Gauss-Newton step inside the trust region, a step to a point strictly inside the bounds) and SciPy's
    functions they fall back to (the trust-region subproblem, the step search with reflections)."""
    from moralkit.psm.nlls import _trf

    counts = dict.fromkeys(("gn", "solve", "inside", "select"), 0)

    def counting(name, fn, fallback=False):
        def wrapped(*args, **kwargs):
            out = fn(*args, **kwargs)
            counts[name] += 1 if fallback or out is not None else 0
            return out
        return wrapped

    monkeypatch.setattr(_trf, "_gauss_newton_step", counting("gn", _trf._gauss_newton_step))
    monkeypatch.setattr(_trf, "solve_lsq_trust_region", counting("solve", _trf.solve_lsq_trust_region, True))
    monkeypatch.setattr(_trf, "evaluate_quadratic", counting("inside", _trf.evaluate_quadratic))
    monkeypatch.setattr(_trf, "select_step", counting("select", _trf.select_step, True))
    th_bound = np.r_[np.full(4, F.ETA_BOUND), np.full(5, 2.5)]
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for i, (corners, prices, y, th0) in enumerate(problems):
            prob = F._Problem(corners, prices, y, "exact", 12.0)
            prob.solve(th0)
            if i == 0:  # from the eta bound, as test_fast_solve_equals_least_squares_when_stopped_early_... does
                prob.solve(th_bound)
    assert min(counts.values()) > 0, counts
