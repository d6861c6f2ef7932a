"""SciPy's trust-region reflective driver with bounds (``trf_bounds``), restated for the NLLS fit's case.

:func:`scipy.optimize.least_squares` (``method="trf"``, bounds, ``x_scale="jac"``, linear loss, exact
trust-region solver) spends most of a small problem's time in Python overhead around a few cheap array
operations: generic argument handling in every helper, ``scipy.linalg.svd``'s checks and workspace query
at every iteration, ``numpy.linalg.norm``'s dispatch. :func:`trf_bounds` below is SciPy 1.17's
``scipy.optimize._lsq.trf.trf_bounds`` specialised to that case: the same floating-point operations on
the same arrays in the same order (the same LAPACK ``gesdd`` call with the workspace SciPy would query,
``x.dot(x)`` and ``sqrt`` where ``norm`` computes them, ``abs(x).max()`` for the infinity norm, the same
masks for the Coleman-Li scaling vector), and SciPy's own ``solve_lsq_trust_region``, ``select_step``,
``update_tr_radius`` and ``check_termination``. The branches nearly every iteration takes are taken in
line: the Gauss-Newton step of ``solve_lsq_trust_region`` (restated), and, for a step that leaves the point
strictly inside the bounds, ``select_step``'s first branch (SciPy's ``evaluate_quadratic``) without
``make_strictly_feasible``, which returns a copy of such a point; otherwise SciPy's helpers run, and
compute everything from their arguments as before. Its iterates, and every value it returns, equal SciPy's
bit for bit; ``tests/psm/test_nlls_fast.py`` compares them with ``==`` against the public
``least_squares`` call, and :func:`least_squares_trf` (the entry point) runs SciPy's own driver when the
installed SciPy is not a version this restatement was checked against.

References
----------
Branch, Coleman & Li (1999), "A subspace, interior, and conjugate gradient method for large-scale
bound-constrained minimization problems", SIAM J. Sci. Comput. 21(1); SciPy (BSD-3-Clause),
``scipy/optimize/_lsq/trf.py`` and ``common.py``.
"""

from __future__ import annotations

import numpy as np
import scipy
from scipy.linalg import get_lapack_funcs
from scipy.linalg.lapack import _compute_lwork
from scipy.optimize import OptimizeResult
from scipy.optimize._lsq.common import (
    check_termination,
    evaluate_quadratic,
    find_active_constraints,
    in_bounds,
    make_strictly_feasible,
    solve_lsq_trust_region,
    update_tr_radius,
)
from scipy.optimize._lsq.least_squares import TERMINATION_MESSAGES
from scipy.optimize._lsq.trf import select_step
from scipy.optimize._lsq.trf import trf_bounds as scipy_trf_bounds

from ...errors import MoralkitError

__all__ = ["LEAN", "least_squares_trf", "trf_bounds"]

#: :func:`trf_bounds` restates SciPy 1.17's driver; on other SciPy versions SciPy's own driver runs
LEAN: bool = scipy.__version__.startswith("1.17.")

_GESDD: dict = {}
_EPS = np.finfo(float).eps  # common.EPS


def _gesdd(a):
    """``scipy.linalg.svd(a, full_matrices=False)`` (driver gesdd) for a finite float64 ``a``: U, s, Vt."""
    if not np.isfinite(a).all():  # scipy.linalg.svd's check_finite
        raise MoralkitError("array must not contain infs or NaNs")
    key = a.shape
    if key not in _GESDD:
        gesdd, gesdd_lwork = get_lapack_funcs(("gesdd", "gesdd_lwork"), (a,), ilp64="preferred")
        _GESDD[key] = (gesdd, _compute_lwork(gesdd_lwork, a.shape[0], a.shape[1], compute_uv=True,
                                             full_matrices=False))
    gesdd, lwork = _GESDD[key]
    u, s, v, info = gesdd(a, compute_uv=True, lwork=lwork, full_matrices=False, overwrite_a=False)
    if info > 0:
        from numpy.linalg import LinAlgError

        raise LinAlgError("SVD did not converge")
    if info < 0:
        raise MoralkitError(f"illegal value in {-info}th argument of internal gesdd")
    return u, s, v


def _norm(x):
    """``numpy.linalg.norm(x)`` of a float vector, as it computes it (a NumPy float64)."""
    return np.sqrt(x.dot(x))


def least_squares_trf(fun, jac, x0, lb, ub, tol, max_nfev):
    """``least_squares(fun, x0, jac=jac, bounds=(lb, ub), method="trf", x_scale="jac", ftol=tol, xtol=tol,
    gtol=tol, max_nfev=max_nfev)`` without its per-call wrapping; the same result, bit for bit.

    ``least_squares`` checks its arguments, wraps ``fun`` and ``jac`` in a memoising ``VectorFunction``
    (which compares and copies ``x`` and copies every result) and calls the driver. Here the start point
    is prepared as it does (``astype(float)``, ``make_strictly_feasible``) and the driver is called directly:
    :func:`trf_bounds` on SciPy 1.17, SciPy's own ``trf_bounds`` on other versions. ``fun`` and ``jac`` must
    return fresh float64 arrays (as the wrapper's copies are) and be deterministic, so that the wrapper's
    memo never changes a value. A start outside the bounds (NaN) or residuals that are not finite there
    raise a :class:`~moralkit.errors.MoralkitError` (a ``ValueError``, as ``least_squares`` raises).
    """
    x0 = np.atleast_1d(x0).astype(float)
    if not in_bounds(x0, lb, ub):
        raise MoralkitError("Initial guess is outside of provided bounds")
    x0 = make_strictly_feasible(x0, lb, ub)
    f0 = fun(x0)
    J0 = jac(x0)
    if not np.all(np.isfinite(f0)):
        raise MoralkitError("Residuals are not finite in the initial point.")
    if LEAN:
        res = trf_bounds(fun, jac, x0, f0, J0, lb, ub, tol, tol, tol, max_nfev)
    else:
        res = scipy_trf_bounds(fun, jac, x0, f0, J0, lb, ub, tol, tol, tol, max_nfev, "jac", None, "exact", {}, 0)
    res.message = TERMINATION_MESSAGES[res.status]
    res.success = res.status > 0
    return res


def _cl_scaling(x, g, lb, ub, lb_finite, ub_finite):
    """``common.CL_scaling_vector``: the Coleman-Li scaling vector ``v`` and its derivative ``dv``.

    SciPy's masked assignments, written as masked ufunc calls: ``v`` is ``ub - x`` where ``g < 0`` and ``ub``
    is finite, ``x - lb`` where ``g > 0`` and ``lb`` is finite, 1 elsewhere; ``dv`` is -1, 1 and 0 there.
    """
    upper = (g < 0) & ub_finite
    lower = (g > 0) & lb_finite
    v = np.ones_like(x)
    np.subtract(ub, x, out=v, where=upper)
    np.subtract(x, lb, out=v, where=lower)
    dv = np.subtract(lower, upper, dtype=float)  # 1.0 - 0.0, 0.0 - 1.0 and 0.0 - 0.0 (+0.0), as SciPy's
    return v, dv


def _jac_scale(J, scale_inv_old=None):
    """``common.compute_jac_scale`` of a dense ``J``: (scale, scale_inv)."""
    scale_inv = np.sum(J**2, axis=0)**0.5
    if scale_inv_old is None:
        scale_inv[scale_inv == 0] = 1
    else:
        scale_inv = np.maximum(scale_inv, scale_inv_old)
    return 1 / scale_inv, scale_inv


def _hat_system(v, dv, g, f, J, scale, scale_inv, f_augmented, J_augmented, J_diagonal):
    """The trust-region subproblem in "hat" variables (``trf_bounds``' loop body before its step search):
    d, diag_h, g_h, J_h and the SVD of the augmented Jacobian (s, V, U' f).

    ``J_augmented``'s last ``n`` rows must be zero off their diagonal, and ``J_diagonal`` a view of that
    diagonal: SciPy writes ``np.diag(diag_h**0.5)`` there at every iteration, which changes only the diagonal.
    """
    m = J.shape[0]
    np.multiply(v, scale_inv, out=v, where=dv != 0)  # v[dv != 0] *= scale_inv[dv != 0]
    d = v**0.5 * scale
    diag_h = g * dv * scale
    g_h = d * g
    f_augmented[:m] = f
    J_h = J_augmented[:m]  # a view, as in SciPy
    np.multiply(J, d, out=J_h)  # J_augmented[:m] = J * d
    J_diagonal[:] = diag_h**0.5
    U, s, V = _gesdd(J_augmented)
    return d, diag_h, g_h, J_h, s, V.T, U.T.dot(f_augmented)


def _gauss_newton_step(n, m, uf, s, V, Delta):
    """``common.solve_lsq_trust_region``'s first branch: the Gauss-Newton step ``-V (U' f / s)`` when the
    Jacobian has full rank and the step lies in the trust region, else None (SciPy's function then solves
    the subproblem from the start: it computes nothing this one keeps)."""
    if m >= n and s[-1] > _EPS * m * s[0]:
        p = -V.dot(uf / s)
        if _norm(p) <= Delta:
            return p
    return None


def trf_bounds(fun, jac, x0, f0, J0, lb, ub, ftol, xtol, gtol, max_nfev):
    """``scipy.optimize._lsq.trf.trf_bounds`` with ``x_scale="jac"``, no loss function, ``tr_solver="exact"``,
    no callback and ``verbose=0``; ``J0`` a C-contiguous float64 ndarray; same arguments otherwise."""
    x, f, J = x0.copy(), f0, J0
    f_true = f.copy()
    nfev = njev = 1
    m, n = J.shape
    finite = (np.isfinite(lb), np.isfinite(ub))
    cost = 0.5 * np.dot(f, f)
    g = J.T.dot(f)  # common.compute_grad
    scale, scale_inv = _jac_scale(J)
    v, dv = _cl_scaling(x, g, lb, ub, *finite)
    v[dv != 0] *= scale_inv[dv != 0]
    Delta = _norm(x0 * scale_inv / v**0.5)
    if Delta == 0:
        Delta = 1.0
    f_augmented = np.zeros(m + n)
    J_augmented = np.zeros((m + n, n))
    J_diagonal = J_augmented[m:].reshape(-1)[::n + 1]  # a view of the last n rows' diagonal
    alpha = 0.0
    termination_status = None
    while True:
        v, dv = _cl_scaling(x, g, lb, ub, *finite)
        g_norm = np.abs(g * v).max()  # norm(g * v, ord=np.inf)
        if g_norm < gtol:
            termination_status = 1
        if termination_status is not None or nfev == max_nfev:
            break
        d, diag_h, g_h, J_h, s, V, uf = _hat_system(v, dv, g, f, J, scale, scale_inv, f_augmented, J_augmented,
                                                    J_diagonal)
        theta = max(0.995, 1 - g_norm)
        actual_reduction = -1
        while actual_reduction <= 0 and nfev < max_nfev:
            p_h = _gauss_newton_step(n, m, uf, s, V, Delta)
            if p_h is None:
                p_h, alpha, n_iter = solve_lsq_trust_region(n, m, uf, s, V, Delta, initial_alpha=alpha)
            else:
                alpha = 0.0
            p = d * p_h
            x_new = x + p
            if ((x_new > lb) & (x_new < ub)).all():
                # strictly inside the bounds: select_step's first branch (x + p in bounds), and
                # make_strictly_feasible(x + p, lb, ub, rstep=0) would return a copy of x + p
                step, step_h = p, p_h
                predicted_reduction = -evaluate_quadratic(J_h, g_h, p_h, diag=diag_h)
            else:
                step, step_h, predicted_reduction = select_step(x, J_h, diag_h, g_h, p, p_h, d, Delta, lb, ub,
                                                                theta)
                x_new = make_strictly_feasible(x + step, lb, ub, rstep=0)
            f_new = fun(x_new)
            nfev += 1
            step_h_norm = _norm(step_h)
            if not np.isfinite(f_new).all():
                Delta = 0.25 * step_h_norm
                continue
            cost_new = 0.5 * np.dot(f_new, f_new)
            actual_reduction = cost - cost_new
            Delta_new, ratio = update_tr_radius(Delta, actual_reduction, predicted_reduction, step_h_norm,
                                                step_h_norm > 0.95 * Delta)
            termination_status = check_termination(actual_reduction, cost, _norm(step), _norm(x), ratio, ftol, xtol)
            if termination_status is not None:
                break
            alpha *= Delta / Delta_new
            Delta = Delta_new
        if actual_reduction > 0:
            x, f, cost = x_new, f_new, cost_new
            f_true = f.copy()
            J = jac(x)
            njev += 1
            g = J.T.dot(f)
            scale, scale_inv = _jac_scale(J, scale_inv)
    if termination_status is None:
        termination_status = 0
    active_mask = find_active_constraints(x, lb, ub, rtol=xtol)
    return OptimizeResult(x=x, cost=cost, fun=f_true, jac=J, grad=g, optimality=g_norm, active_mask=active_mask,
                          nfev=nfev, njev=njev, status=termination_status)
