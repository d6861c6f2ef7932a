"""Parametric utility estimation: NLLS fit of the single-peaked quadratic utility (Table 2, Figures 1-2).

Every model ``m`` is described by the utility of eq. (7),

    u(q) = -1/2 sum_s a_s (q_s - b_s)^2,   a_s > 0,  sum_s a_s = 1,  b_s real,

and is assumed to answer round ``r`` by maximising ``u`` on the budget line
``p^r . q_{o^r} = 12`` of eq. (8), in the round's corner coordinates.

Coordinates
-----------
Round ``r`` has an (effective) corner ``o`` in ``{0, 5}^5``. Its corner
coordinates are the *linear* map ``y_s = q_s`` where ``o_s = 0`` and
``y_s = 5 - q_s`` where ``o_s = 5`` (for answers in ``0..5`` this is the
paper's ``q_o = |q - o|``; the linear form also maps real-valued predictions
outside ``[0, 5]`` consistently). The utility keeps its form in those
coordinates with the ideal point shifted the same way, ``b_o = b`` where
``o_s = 0`` and ``5 - b`` where ``o_s = 5``, because ``(q_s - b_s)^2 =
(y_s - b_{o,s})^2``. Predictions are computed in corner coordinates and mapped
back with the same map (:func:`predict_answers`, ``coords="raw"``).

The residuals of eq. (11) are taken in corner coordinates,
``q_{z,o^r} - \\hat q_{z,o^r}``, as printed. Per coordinate the map is
``y = o + sign * q`` with ``sign = +-1``, an isometry, so the raw residual is
``+-`` the corner residual and the sum of squares (the NLLS objective) is the
same in either system (checked in ``tests/test_nlls.py``).

Two forms of the predicted answer
---------------------------------
``form="exact"``
    The maximiser of (7) under (8) (Lagrange), in corner coordinates:
    ``y_z = b_{o,z} + (12 - p . b_o) (p_z / a_z) / sum_s p_s^2 / a_s``.
    It lies on the budget line. (Like eq. (8), it ignores the bounds
    ``0 <= y <= 5``.)
``form="paper"``
    Eqs. (9)-(10) exactly as printed:
    ``y_z = alpha_z b_{o,z} + (1 - alpha_z) (12 - p . b_o) / p_z`` with
    ``alpha_z = 1 - (a_z / p_z^2) / sum_s a_s / p_s^2``.
    This is *not* the maximiser of (7)-(8): in general ``p . y != 12``, and the
    two forms differ even when all ``a_s`` are equal (with equal weights the
    exact form gives ``y_z = b_{o,z} + (12 - p . b_o) p_z / sum_s p_s^2``, the
    printed one ``y_z = b_{o,z} + w_z ((12 - p . b_o)/p_z - b_{o,z})`` with
    ``w_z = p_z^{-2} / sum_s p_s^{-2}``). The printed expression becomes the
    maximiser with ``1 - alpha_z = (p_z^2 / a_z) / sum_s p_s^2 / a_s`` and
    ``(12 - sum_{s != z} p_s b_{o,s}) / p_z`` in place of
    ``(12 - sum_s p_s b_{o,s}) / p_z`` (checked in the tests).
    :func:`compare_forms` reports how much the estimates differ.

Estimation
----------
Eq. (11) is solved with :func:`scipy.optimize.least_squares` (trust-region
reflective, analytic Jacobian) over 9 free parameters: four logits ``eta``
with ``a = softmax(0, eta_1..eta_4)`` (so ``a_s > 0`` and ``sum a_s = 1`` by
construction, never by clipping; the weights only matter up to scale in both
forms) and the five ``b_s``. Several starts (the first at equal weights and
``b = 2.5``, the others seeded random draws) are run and the best kept; the
result reports the solver status, the cost and how many starts reached the same
optimum.

Uncertainty
-----------
* Delta-method standard errors (always): the NLLS covariance of the free
  parameters is the covariance of the Gauss-Newton regression of the residuals
  on the Jacobian at the optimum, computed by :mod:`statsmodels` OLS with
  ``cov_type="cluster"`` (clustered by round: the 5 residuals of a round are
  correlated, and in the exact form sum to zero against ``p``), with
  statsmodels' small-sample correction; ``cov_type="nonrobust"`` gives the
  classical ``s^2 (J'J)^{-1}``. Weights' SEs follow by the delta method
  through the softmax.
* Bootstrap over rounds (``n_boot > 0``): rounds are resampled with
  replacement, each replicate refitted from the point estimate; percentile
  confidence intervals and bootstrap SEs. Replicate ``i`` uses the generator
  ``SeedSequence([seed, key(model), 1]).spawn(n_boot)[i]``, so results are
  identical for any ``n_jobs`` (joblib) and whatever other models are fitted.

Bad input
---------
Rounds without an answer are excluded (counted in ``n_excluded``); answers off
the budget line raise ``ValueError``; fewer than :data:`MIN_ROUNDS` answered
rounds, or rounds that do not identify the 9 parameters (rank-deficient
Jacobian), raise ``ValueError``. Tables never contain silent NaNs.

References
----------
Seror, A. (2025). *The Moral Mind(s) of Large Language Models*, Section 2.2
(notation, corner coordinates), Section 3.2 (eqs. (7)-(11)), Table 2 and
Figures 1-2.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from ..errors import IdentificationError, MoralkitError
from ..figures import save_figure  # noqa: F401  (re-exported)
from .dataset import PSMDataset, model_key
from .design import BUDGET, DIMENSIONS

__all__ = [
    "FORMS",
    "MIN_ROUNDS",
    "ETA_BOUND",
    "UtilityFit",
    "predict_answers",
    "fit_answers",
    "fit_utility",
    "fit_models",
    "table2",
    "compare_forms",
    "plot_parameters",
    "plot_q0_minus_b",
    "save_figure",
]

#: The two forms of the predicted answer.
FORMS: tuple[str, ...] = ("exact", "paper")

#: Fewest answered rounds accepted: 9 parameters, and a round of the exact form
#: carries 4 independent equations (its residual is orthogonal to p), so 3 rounds
#: are the minimum; identification is then checked on the Jacobian's rank.
MIN_ROUNDS: int = 3

_N_PAR = 9
_RANK_RTOL = 1e-9

#: Bound on the free logits ``eta`` (weights ratios up to ``exp(2 * ETA_BOUND)``): keeps ``1 / a_s``
#: finite when the best fit pushes a weight towards 0; an estimate at the bound is a boundary solution
#: (reported in ``UtilityFit.regular``).
ETA_BOUND: float = 20.0


# --------------------------------------------------------------------------- coordinates


def _check_form(form) -> str:
    if form not in FORMS:
        raise MoralkitError(f"form must be one of {FORMS} ('exact': maximiser of eqs. (7)-(8); "
                            f"'paper': eqs. (9)-(10) as printed), got {form!r}")
    return form


def _sign(corners) -> np.ndarray:
    """+1 where the corner coordinate is 0, -1 where it is 5 (shape of ``corners``)."""
    c = np.asarray(corners)
    if not np.isin(c, (0, 5)).all():
        raise MoralkitError("corners must have entries 0 or 5 (vertices of {0..5}^5)")
    return np.where(c == 0, 1.0, -1.0)


def _to_corner(q, corners) -> np.ndarray:
    """Linear corner map: ``y = q`` where ``o = 0``, ``5 - q`` where ``o = 5`` (real-valued)."""
    c = np.asarray(corners, dtype=float)
    return c + _sign(corners) * np.asarray(q, dtype=float)


def _from_corner(y, corners) -> np.ndarray:
    """Inverse of :func:`_to_corner` (the map is its own inverse)."""
    return _to_corner(y, corners)


def _check_ab(a, b):
    a = np.asarray(a, dtype=float).reshape(-1)
    b = np.asarray(b, dtype=float).reshape(-1)
    if a.shape != (5,) or b.shape != (5,):
        raise MoralkitError(f"a and b must have 5 entries (one per statement), got shapes {a.shape} and {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise MoralkitError("a and b must be finite")
    if (a <= 0).any():
        raise MoralkitError(f"every weight a_s must be positive (eq. (7)), got {a}")
    return a, b


def _check_rounds(corners, prices):
    corners = np.asarray(corners)
    prices = np.asarray(prices, dtype=float)
    if corners.ndim == 1:
        corners = corners[None]
    if prices.ndim == 1:
        prices = np.broadcast_to(prices, corners.shape)
    if corners.ndim != 2 or corners.shape[1] != 5 or prices.shape != corners.shape:
        raise MoralkitError(f"corners and prices must have shape (T, 5), got {corners.shape} and {prices.shape}")
    if not (np.isfinite(prices).all() and (prices > 0).all()):
        raise MoralkitError("prices must be positive and finite")
    return corners, prices


# --------------------------------------------------------------------------- predictions


def _predict_corner(a, b, sign, corners, prices, form, budget=BUDGET, jac=False):
    """Predicted answers in corner coordinates (T, 5) and, optionally, d yhat / d(a, b) (T, 5, 10).

    ``sign`` and ``corners`` are float arrays (T, 5); ``b_o = corners + sign * b``.
    """
    p = prices
    bo = corners + sign * b  # (T, 5): b in corner coordinates
    c = budget - (p * bo).sum(1)  # (T,): 12 - p . b_o
    if form == "exact":
        w = 1.0 / a  # (5,)
        S = (p * p * w).sum(1)  # (T,)
        k = p * w / S[:, None]  # (T, 5): p_z w_z / S
        y = bo + c[:, None] * k
        if not jac:
            return y
        T = len(p)
        J = np.empty((T, 5, 10))
        # d y_z / d a_k = -w_k^2 [c p_z delta_zk / S - c p_z w_z p_k^2 / S^2]
        dyw = c[:, None, None] * (np.eye(5)[None] * (p / S[:, None])[:, :, None]
                                  - k[:, :, None] * (p * p / S[:, None])[:, None, :])
        J[:, :, :5] = dyw * (-(w * w))[None, None, :]
        # d y_z / d b_k = sign_k delta_zk - k_z p_k sign_k
        J[:, :, 5:] = np.eye(5)[None] * sign[:, None, :] - k[:, :, None] * (p * sign)[:, None, :]
        return y, J
    # form == "paper": eqs. (9)-(10) as printed
    g = a / (p * p)  # (T, 5): a_z / p_z^2
    G = g.sum(1)
    beta = g / G[:, None]  # 1 - alpha_z
    target = c[:, None] / p  # (12 - p . b_o) / p_z
    y = (1.0 - beta) * bo + beta * target
    if not jac:
        return y
    T = len(p)
    J = np.empty((T, 5, 10))
    # d beta_z / d a_k = delta_zk / (p_z^2 G) - g_z / (p_k^2 G^2)
    dbeta = (np.eye(5)[None] / (p * p * G[:, None])[:, :, None]
             - g[:, :, None] / ((p * p)[:, None, :] * (G * G)[:, None, None]))
    J[:, :, :5] = dbeta * (target - bo)[:, :, None]
    # d y_z / d b_k = (1 - beta_z) sign_z delta_zk - beta_z p_k sign_k / p_z
    J[:, :, 5:] = (np.eye(5)[None] * ((1.0 - beta) * sign)[:, :, None]
                   - (beta / p)[:, :, None] * (p * sign)[:, None, :])
    return y, J


def predict_answers(a, b, corners, prices, form: str = "exact", coords: str = "raw",
                    budget: float = BUDGET) -> np.ndarray:
    """Predicted answer of the quadratic utility in each round (eqs. (8)-(10)).

    Parameters
    ----------
    a : array_like (5,)
        Positive weights (only their ratios matter; need not sum to 1).
    b : array_like (5,)
        Ideal answers in raw (0..5 scale) coordinates.
    corners : array_like (T, 5) or (5,)
        Effective corner of each round (entries 0 or 5).
    prices : array_like (T, 5) or (5,)
        Price vector of each round.
    form : {"exact", "paper"}
        ``"exact"``: the maximiser of (7) under (8);
        ``"paper"``: eqs. (9)-(10) as printed (see the module docstring).
    coords : {"raw", "corner"}
        Return raw answers (mapped back from the corner coordinates, the
        default) or corner coordinates ``q_{o^r}``.
    budget : float, default 12

    Returns
    -------
    ndarray (T, 5)
        Real-valued predictions (not rounded; the bounds 0..5 are not imposed,
        as in eq. (8)).

    References
    ----------
    Seror (2025), Section 3.2, eqs. (7)-(10); Section 2.2 (corner coordinates).
    """
    form = _check_form(form)
    if coords not in ("raw", "corner"):
        raise MoralkitError(f"coords must be 'raw' or 'corner', got {coords!r}")
    a, b = _check_ab(a, b)
    corners, prices = _check_rounds(corners, prices)
    sign = _sign(corners)
    y = _predict_corner(a, b, sign, corners.astype(float), prices, form, budget)
    return y if coords == "corner" else _from_corner(y, corners)


# --------------------------------------------------------------------------- parametrisation


def _softmax_a(eta):
    z = np.concatenate([[0.0], eta])
    z = z - z.max()
    e = np.exp(z)
    return e / e.sum()


def _dsoftmax(a):
    """d a / d eta (5, 4): columns for the free logits eta_1..eta_4 (a_1's logit is fixed at 0)."""
    return (np.diag(a) - np.outer(a, a))[:, 1:]


def _theta_to_ab(theta):
    return _softmax_a(theta[:4]), np.asarray(theta[4:], dtype=float)


def _ab_to_theta(a, b):
    a = np.asarray(a, dtype=float)
    return np.concatenate([np.log(a[1:] / a[0]), np.asarray(b, dtype=float)])


class _Problem:
    """Residuals of eq. (11) in corner coordinates and their Jacobian in theta = (eta, b)."""

    def __init__(self, corners, prices, y_obs, form, budget=BUDGET):
        self.sign = _sign(corners)
        self.corners = np.asarray(corners, dtype=float)
        self.prices = np.asarray(prices, dtype=float)
        self.y = np.asarray(y_obs, dtype=float)
        self.form = form
        self.budget = float(budget)

    def resid(self, theta):
        a, b = _theta_to_ab(theta)
        yhat = _predict_corner(a, b, self.sign, self.corners, self.prices, self.form, self.budget)
        return (self.y - yhat).ravel()

    def jac(self, theta):
        a, b = _theta_to_ab(theta)
        _, J = _predict_corner(a, b, self.sign, self.corners, self.prices, self.form, self.budget, jac=True)
        Jt = np.empty((J.shape[0], 5, _N_PAR))
        Jt[:, :, :4] = J[:, :, :5] @ _dsoftmax(a)
        Jt[:, :, 4:] = J[:, :, 5:]
        return -Jt.reshape(-1, _N_PAR)

    def solve(self, theta0, max_nfev=None):
        lb = np.r_[np.full(4, -ETA_BOUND), np.full(5, -np.inf)]
        ub = np.r_[np.full(4, ETA_BOUND), np.full(5, np.inf)]
        theta0 = np.clip(theta0, lb + 1e-9, ub - 1e-9)
        return least_squares(self.resid, theta0, jac=self.jac, bounds=(lb, ub), method="trf", x_scale="jac",
                             ftol=1e-12, xtol=1e-12, gtol=1e-12, max_nfev=max_nfev or 200 * _N_PAR)


def _rank(J) -> int:
    s = np.linalg.svd(J, compute_uv=False)
    return int((s > _RANK_RTOL * s[0]).sum()) if s.size and s[0] > 0 else 0


# --------------------------------------------------------------------------- result


@dataclass
class UtilityFit:
    """NLLS estimate of the quadratic utility (7) for one model.

    Attributes
    ----------
    model : str
    form : {"exact", "paper"}
    a : ndarray (5,)
        Weights, ``a_s > 0``, ``sum a_s = 1`` (Table 2 (b)).
    b : ndarray (5,)
        Ideal answers on the 0..5 scale (Table 2 (a)).
    se_a, se_b : ndarray (5,)
        Delta-method standard errors (``cov_type``; see the module docstring).
    cov : ndarray (10, 10)
        Covariance of ``(a, b)`` (delta method; singular along ``sum a = 1``).
    ci_a, ci_b : ndarray (5, 2) or None
        Bootstrap percentile intervals at ``level`` (``None`` without bootstrap).
    boot_se_a, boot_se_b : ndarray (5,) or None
        Bootstrap standard deviations.
    boot_a, boot_b : ndarray (n_ok, 5) or None
        The successful bootstrap replicates.
    n_boot, n_boot_failed : int
    level : float
    ssr : float
        Residual sum of squares of eq. (11) (``2 * cost``).
    n_obs, n_excluded : int
        Rounds used; rounds left out because unanswered.
    n_starts, n_agree : int
        Starts run; starts reaching the best cost (relative 1e-6) and the same
        estimates (1e-4).
    status : int
        ``least_squares`` status of the best start (> 0: a tolerance was met).
    message : str
    optimality : float
        First-order optimality (max |gradient|) at the estimate.
    converged : bool
        ``status > 0``.
    regular : bool
        The Jacobian at the estimate has full rank 9 and no weight logit is at
        :data:`ETA_BOUND`. When False (a weight pushed to 0, or a flat
        direction), the delta-method SEs are NaN (a warning says so) and the
        estimate is a boundary solution: read the bootstrap intervals.
    cov_type : str
    q0 : ndarray (5,) or None
        The model's unconstrained answer (round 0), for Figure 2.
    seed : int
    """

    model: str
    form: str
    a: np.ndarray
    b: np.ndarray
    se_a: np.ndarray
    se_b: np.ndarray
    cov: np.ndarray = field(repr=False)
    ssr: float
    n_obs: int
    n_excluded: int
    n_starts: int
    n_agree: int
    status: int
    message: str
    optimality: float
    converged: bool
    regular: bool
    cov_type: str
    seed: int
    q0: np.ndarray | None = None
    ci_a: np.ndarray | None = None
    ci_b: np.ndarray | None = None
    boot_se_a: np.ndarray | None = None
    boot_se_b: np.ndarray | None = None
    boot_a: np.ndarray | None = field(default=None, repr=False)
    boot_b: np.ndarray | None = field(default=None, repr=False)
    n_boot: int = 0
    n_boot_failed: int = 0
    level: float = 0.95

    @property
    def rmse(self) -> float:
        """Root mean squared residual per answer (``sqrt(ssr / (5 n_obs))``)."""
        return float(np.sqrt(self.ssr / (5 * self.n_obs)))

    def to_frame(self) -> pd.DataFrame:
        """One row per parameter: estimate, delta-method s.e., bootstrap s.e. and interval."""
        rows = []
        for name, est, se, bse, ci in (("a", self.a, self.se_a, self.boot_se_a, self.ci_a),
                                       ("b", self.b, self.se_b, self.boot_se_b, self.ci_b)):
            for s in range(5):
                rows.append(dict(model=self.model, form=self.form, parameter=f"{name}_{s + 1}",
                                 dimension=DIMENSIONS[s], estimate=est[s], se=se[s],
                                 boot_se=np.nan if bse is None else bse[s],
                                 ci_low=np.nan if ci is None else ci[s, 0],
                                 ci_high=np.nan if ci is None else ci[s, 1]))
        return pd.DataFrame(rows)

    def convergence(self) -> dict:
        """Convergence report: status, message, cost, optimality, starts agreeing."""
        return dict(model=self.model, form=self.form, converged=self.converged, regular=self.regular,
                    status=self.status,
                    message=self.message, ssr=self.ssr, rmse=self.rmse, optimality=self.optimality,
                    n_starts=self.n_starts, n_agree=self.n_agree, n_obs=self.n_obs,
                    n_excluded=self.n_excluded, n_boot=self.n_boot, n_boot_failed=self.n_boot_failed)


# --------------------------------------------------------------------------- fitting


def _check_budget(y, prices, budget, tol, round_index):
    cost = (np.asarray(prices, dtype=float) * y).sum(1)
    bad = np.flatnonzero(np.abs(cost - budget) > tol)
    if len(bad):
        t = bad[0]
        raise MoralkitError(
            f"the answer of round {round_index[t]} is off the budget: p . q_o = {cost[t]:.6g}, expected "
            f"{budget:g} (eq. (1)); {len(bad)} round(s) affected. Pass the answers actually chosen from the "
            "round's alternatives, with the round's effective corner (after the flip rule), or set "
            "check_budget=False for predictions that are off the budget by construction (form='paper')")


def _covariance(prob: _Problem, theta, cov_type, n_rounds):
    """Delta-method covariance of (a, b) (10 x 10) from the Gauss-Newton regression (statsmodels)."""
    from statsmodels.regression.linear_model import OLS

    r = prob.resid(theta)
    X = -prob.jac(theta)  # d yhat / d theta
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rank deficiency is detected and reported by the caller
        if cov_type == "cluster":
            groups = np.repeat(np.arange(n_rounds), 5)
            ols = OLS(r, X).fit(cov_type="cluster", cov_kwds={"groups": groups})
        else:
            ols = OLS(r, X).fit(cov_type=cov_type)
    V = np.asarray(ols.cov_params())
    a, _ = _theta_to_ab(theta)
    D = np.zeros((10, _N_PAR))
    D[:5, :4] = _dsoftmax(a)
    D[5:, 4:] = np.eye(5)
    return D @ V @ D.T


def _starts(n_starts, rng):
    out = [np.concatenate([np.zeros(4), np.full(5, 2.5)])]
    for _ in range(n_starts - 1):
        out.append(np.concatenate([rng.normal(0.0, 1.0, 4), rng.uniform(0.0, 5.0, 5)]))
    return out


def _boot_chunk(prob_args, theta_hat, idx_list):
    corners, prices, y, form, budget = prob_args
    out = []
    for idx in idx_list:
        prob = _Problem(corners[idx], prices[idx], y[idx], form, budget)
        try:
            res = prob.solve(theta_hat)
        except (ValueError, np.linalg.LinAlgError, FloatingPointError):
            out.append(None)
            continue
        if res.status <= 0 or not np.isfinite(res.x).all():
            out.append(None)
            continue
        a, b = _theta_to_ab(res.x)
        out.append(np.concatenate([a, b]))
    return out


def _bootstrap(prob_args, theta_hat, n_boot, seed, model, n_jobs):
    from joblib import Parallel, delayed

    T = len(prob_args[0])
    children = np.random.SeedSequence([int(seed), model_key(model), 1]).spawn(int(n_boot))
    idx = [np.sort(np.random.default_rng(c).integers(0, T, size=T)) for c in children]
    n_chunks = max(1, min(len(idx), 4 * (abs(n_jobs) if n_jobs not in (None, 0) else 1)))
    chunks = [list(range(i, len(idx), n_chunks)) for i in range(n_chunks)]
    if n_jobs in (None, 1):
        parts = [_boot_chunk(prob_args, theta_hat, [idx[i] for i in ch]) for ch in chunks]
    else:
        parts = Parallel(n_jobs=n_jobs)(delayed(_boot_chunk)(prob_args, theta_hat, [idx[i] for i in ch])
                                        for ch in chunks)
    reps = [None] * len(idx)
    for ch, part in zip(chunks, parts):
        for i, v in zip(ch, part):
            reps[i] = v
    return reps


def fit_answers(corners, prices, answers, *, form: str = "exact", n_starts: int = 5, seed: int = 0,
                n_boot: int = 0, level: float = 0.95, cov_type: str = "cluster", n_jobs: int = 1,
                model: str = "", q0=None, check_budget: bool = True, budget: float = BUDGET,
                round_index=None, n_excluded: int = 0) -> UtilityFit:
    """NLLS estimate of (a, b) from answered rounds given as arrays (eq. (11)).

    The array-level entry point behind :func:`fit_utility`; it also accepts
    real-valued answers (e.g. simulated agents choosing on the continuous
    budget line).

    Parameters
    ----------
    corners : array_like (T, 5)
        Effective corner of each answered round (0 or 5 entries).
    prices : array_like (T, 5)
    answers : array_like (T, 5)
        Answers in raw coordinates (0..5 scale; real values allowed).
    form : {"exact", "paper"}, default "exact"
        Predicted answer of eq. (11) (see :func:`predict_answers`).
    n_starts : int, default 5
        Starting points: equal weights with ``b = 2.5``, then seeded random ones.
    seed : int, default 0
        Seeds the random starts and the bootstrap (with the model label).
    n_boot : int, default 0
        Bootstrap replicates over rounds (0: delta-method SEs only).
    level : float, default 0.95
        Level of the bootstrap percentile intervals.
    cov_type : {"cluster", "nonrobust", "HC0", "HC1", "HC2", "HC3"}, default "cluster"
        statsmodels covariance of the delta-method SEs ("cluster": by round).
    n_jobs : int, default 1
        joblib workers for the bootstrap (results do not depend on it).
    model : str
        Label (seeds the starts and bootstrap with ``seed``).
    q0 : array_like (5,), optional
        Unconstrained answer, kept for Figure 2.
    check_budget : bool, default True
        Raise ``ValueError`` when an answer is off its budget line
        (``|p . q_o - 12| > 1e-6``).
    budget : float, default 12
    round_index : array_like (T,), optional
        Round labels used in error messages.
    n_excluded : int
        Rounds the caller left out (recorded in the result).

    Returns
    -------
    UtilityFit

    Raises
    ------
    ValueError
        Bad shapes or values, answers off the budget, fewer than
        :data:`MIN_ROUNDS` rounds, or rounds that do not identify the 9
        parameters.

    References
    ----------
    Seror (2025), Section 3.2, eqs. (7)-(11).
    """
    form = _check_form(form)
    if not isinstance(n_starts, (int, np.integer)) or n_starts < 1:
        raise MoralkitError(f"n_starts must be a positive integer, got {n_starts!r}")
    if not isinstance(n_boot, (int, np.integer)) or n_boot < 0:
        raise MoralkitError(f"n_boot must be a non-negative integer, got {n_boot!r}")
    if not 0 < level < 1:
        raise MoralkitError(f"level must be in (0, 1), got {level!r}")
    if cov_type not in ("cluster", "nonrobust", "HC0", "HC1", "HC2", "HC3"):
        raise MoralkitError(f"cov_type must be 'cluster', 'nonrobust' or 'HC0'..'HC3', got {cov_type!r}")
    corners, prices = _check_rounds(corners, prices)
    answers = np.asarray(answers, dtype=float)
    if answers.ndim == 1:
        answers = answers[None]
    T = len(corners)
    if answers.shape != (T, 5):
        raise MoralkitError(f"answers must have shape ({T}, 5) like corners, got {answers.shape}")
    if not np.isfinite(answers).all():
        raise MoralkitError("answers contain NaN or infinite values; leave unanswered rounds out "
                            "(PSMDataset.valid() does it)")
    round_index = np.arange(1, T + 1) if round_index is None else np.asarray(round_index)
    label = f"{model}: " if model else ""
    if T < MIN_ROUNDS:
        raise IdentificationError(f"{label}{T} answered round(s) cannot identify the 9 parameters of eq. (7) "
                                  f"(4 weights up to scale, 5 ideal answers): at least {MIN_ROUNDS} rounds are "
                                  "needed, and in practice many more (the paper uses up to 160); collect more answers "
                                  "or drop the model")
    y = _to_corner(answers, corners)
    if check_budget:
        _check_budget(y, prices, budget, 1e-6, round_index)
    prob = _Problem(corners, prices, y, form, budget)

    # structural identification: the Jacobian at generic parameters must have full rank
    rng_id = np.random.default_rng(12345)
    generic = [np.concatenate([rng_id.normal(0, 0.3, 4), rng_id.uniform(1.0, 4.0, 5)]) for _ in range(2)]
    if max(_rank(prob.jac(th)) for th in generic) < _N_PAR:
        raise IdentificationError(f"{label}these {T} rounds do not identify the 9 parameters of eq. (7) under "
                                  f"form={form!r} (rank-deficient Jacobian): use rounds with several corners and "
                                  "price vectors (the full design has 32 x 5)")

    rng = np.random.default_rng(np.random.SeedSequence([int(seed), model_key(model), 0]))
    fits = []
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for th0 in _starts(int(n_starts), rng):
            try:
                res = prob.solve(th0)
            except (ValueError, np.linalg.LinAlgError):
                continue
            if np.isfinite(res.cost) and np.isfinite(res.x).all():
                fits.append(res)
    if not fits:
        raise MoralkitError(f"{label}the NLLS solver failed from every start (form={form!r})")
    best = min(fits, key=lambda r: r.cost)
    a, b = _theta_to_ab(best.x)
    tol_cost = 1e-6 * max(best.cost, 1e-12) + 1e-12
    n_agree = 0
    for r in fits:
        ar, br = _theta_to_ab(r.x)
        if r.cost <= best.cost + tol_cost and np.abs(ar - a).max() < 1e-4 and np.abs(br - b).max() < 1e-4:
            n_agree += 1

    at_bound = bool((np.abs(best.x[:4]) >= ETA_BOUND - 1e-6).any())
    regular = (not at_bound) and _rank(prob.jac(best.x)) == _N_PAR
    cov = _covariance(prob, best.x, cov_type, T)
    if not regular:
        cov = np.full((10, 10), np.nan)
        why = ("a weight is pushed to 0 (boundary solution)" if at_bound
               else "the Jacobian at the estimate is rank-deficient (a flat direction)")
        warnings.warn(f"{label}{why}: the delta-method standard errors are undefined (NaN) and the estimate "
                      "is not a regular interior optimum; read the bootstrap intervals (n_boot > 0)",
                      RuntimeWarning, stacklevel=2)
    se = np.sqrt(np.clip(np.diag(cov), 0.0, None))

    out = UtilityFit(model=str(model), form=form, a=a, b=b, se_a=se[:5], se_b=se[5:], cov=cov,
                     ssr=float(2 * best.cost), n_obs=T, n_excluded=int(n_excluded), n_starts=int(n_starts),
                     n_agree=n_agree, status=int(best.status), message=str(best.message),
                     optimality=float(best.optimality), converged=bool(best.status > 0), regular=regular,
                     cov_type=cov_type,
                     seed=int(seed), q0=None if q0 is None else np.asarray(q0, dtype=float), level=float(level))
    if n_boot:
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            reps = _bootstrap((corners.astype(float), prices, y, form, budget), best.x, n_boot, seed, model,
                              n_jobs)
        ok = np.array([r for r in reps if r is not None]).reshape(-1, 10)
        out.n_boot = int(n_boot)
        out.n_boot_failed = int(n_boot - len(ok))
        if len(ok) < 2:
            raise MoralkitError(f"{label}the bootstrap failed in {out.n_boot_failed} of {n_boot} replicates")
        if out.n_boot_failed > 0.1 * n_boot:
            warnings.warn(f"{label}{out.n_boot_failed} of {n_boot} bootstrap replicates did not converge "
                          "and were left out", RuntimeWarning, stacklevel=2)
        q = [(1 - level) / 2, (1 + level) / 2]
        out.boot_a, out.boot_b = ok[:, :5], ok[:, 5:]
        out.ci_a = np.quantile(out.boot_a, q, axis=0).T
        out.ci_b = np.quantile(out.boot_b, q, axis=0).T
        out.boot_se_a = out.boot_a.std(axis=0, ddof=1)
        out.boot_se_b = out.boot_b.std(axis=0, ddof=1)
    return out


def fit_utility(dataset: PSMDataset, form: str = "exact", n_starts: int = 5, seed: int = 0, n_boot: int = 0,
                level: float = 0.95, cov_type: str = "cluster", n_jobs: int = 1) -> UtilityFit:
    """Fit the quadratic utility (7) to one model's PSM answers by NLLS (eq. (11)).

    Rounds without a valid answer are excluded (their number is recorded in
    ``n_excluded``); every other round contributes the five residuals of its
    chosen answer in the round's corner coordinates.

    Parameters
    ----------
    dataset : PSMDataset
    form : {"exact", "paper"}, default "exact"
        ``"exact"``: the maximiser of (7) under (8); ``"paper"``: eqs. (9)-(10)
        as printed (see the module docstring).
    n_starts, seed, n_boot, level, cov_type, n_jobs
        See :func:`fit_answers`.

    Returns
    -------
    UtilityFit

    Examples
    --------
    >>> from moralkit.psm.simulate import QuadraticAgent, simulate_quadratic
    >>> ds = simulate_quadratic(QuadraticAgent(a=[.2, .2, .2, .2, .2], b=[2.5, 3, 2, 2.5, 3]))
    >>> fit = fit_utility(ds)                                   # doctest: +SKIP
    >>> fit.b.round(2), fit.converged                           # doctest: +SKIP

    References
    ----------
    Seror (2025), Section 3.2, eqs. (7)-(11), Table 2.
    """
    if not isinstance(dataset, PSMDataset):
        raise MoralkitError(f"expected a moralkit.psm.dataset.PSMDataset, got {type(dataset).__name__}")
    v = dataset.valid()
    return fit_answers(v.corners, v.prices, v.choices, form=form, n_starts=n_starts, seed=seed, n_boot=n_boot,
                       level=level, cov_type=cov_type, n_jobs=n_jobs, model=dataset.model, q0=dataset.q0,
                       check_budget=True, round_index=v.round_index,
                       n_excluded=dataset.n_rounds - dataset.n_obs)


def fit_models(datasets, form: str = "exact", n_starts: int = 5, seed: int = 0, n_boot: int = 0,
               level: float = 0.95, cov_type: str = "cluster", n_jobs: int = 1, models=None,
               errors: str = "raise", progress: bool = False) -> dict[str, UtilityFit]:
    """Fit :func:`fit_utility` to several models.

    Parameters
    ----------
    datasets : dict {model: PSMDataset} or iterable of PSMDataset
    form, n_starts, seed, n_boot, level, cov_type, n_jobs
        As in :func:`fit_answers`. Each model's starts and bootstrap are
        seeded by ``seed`` and its label, so its result does not depend on the
        other models.
    models : list of str, optional
        Only these models (e.g. those passing the rationality test at 5 %).
    errors : {"raise", "warn"}, default "raise"
        ``"warn"``: a model that cannot be fitted (too few rounds, not
        identified) is left out with a warning naming it and the reason.
    progress : bool
        Show a tqdm progress bar.

    Returns
    -------
    dict {model: UtilityFit}

    References
    ----------
    Seror (2025), Section 3.2, Table 2.
    """
    if errors not in ("raise", "warn"):
        raise MoralkitError(f"errors must be 'raise' or 'warn', got {errors!r}")
    if isinstance(datasets, PSMDataset):
        datasets = [datasets]
    dd = dict(datasets) if isinstance(datasets, dict) else {ds.model: ds for ds in datasets}
    if models is not None:
        missing = [m for m in models if m not in dd]
        if missing:
            raise MoralkitError(f"models not in the data: {missing}")
        dd = {m: dd[m] for m in models}
    items = list(dd.items())
    if progress:
        from tqdm.auto import tqdm

        items = tqdm(items, desc=f"NLLS ({form})")
    out = {}
    for m, ds in items:
        try:
            out[m] = fit_utility(ds, form=form, n_starts=n_starts, seed=seed, n_boot=n_boot, level=level,
                                 cov_type=cov_type, n_jobs=n_jobs)
        except ValueError as ex:
            if errors == "raise":
                raise
            warnings.warn(f"{m} left out of the NLLS fits: {ex}", stacklevel=2)
    return out


# --------------------------------------------------------------------------- tables


def _as_fits(results) -> list[UtilityFit]:
    if isinstance(results, UtilityFit):
        return [results]
    fits = list(results.values()) if isinstance(results, dict) else list(results)
    if not fits:
        raise MoralkitError("no fitted model: nothing to tabulate (fit_models returned no result)")
    if not all(isinstance(f, UtilityFit) for f in fits):
        raise MoralkitError("expected UtilityFit results (from fit_utility or fit_models)")
    return fits


def table2(results, uncertainty: str | None = None, table1: pd.DataFrame | None = None,
           level: float = 0.05) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Table 2: panel (a) the ideal answers b, panel (b) the weights a, one row per model.

    Parameters
    ----------
    results : dict {model: UtilityFit} or iterable of UtilityFit
    uncertainty : {None, "se", "ci"}
        Add delta-method standard errors (``"s.e. b_1"``...) or bootstrap
        interval bounds (``"b_1 low"``, ``"b_1 high"``...) after the estimates.
    table1 : DataFrame, optional
        Table 1 from :func:`moralkit.psm.rationality.table1`: adds the columns
        ``CCEI`` (label with stars) and ``passes`` (H0 rejected at ``level``).
    level : float, default 0.05

    Returns
    -------
    (panel_a, panel_b) : DataFrames indexed by ``Model``, columns
        ``b_1 (Truth)`` ... ``b_5 (Autonomy)`` and ``a_1 (Truth)`` ...
        ``a_5 (Autonomy)`` as in the paper, then ``form``, ``n_obs``, ``ssr``
        and ``converged``.

    Raises
    ------
    ValueError
        No results, non-finite estimates, or ``uncertainty="ci"`` for a fit
        without bootstrap.

    References
    ----------
    Seror (2025), Section 3.2, Table 2.
    """
    if uncertainty not in (None, "se", "ci"):
        raise MoralkitError(f"uncertainty must be None, 'se' or 'ci', got {uncertainty!r}")
    fits = _as_fits(results)
    bad = [f.model for f in fits if not (np.isfinite(f.a).all() and np.isfinite(f.b).all())]
    if bad:
        raise MoralkitError(f"non-finite estimates for {bad}; refit them")
    if uncertainty == "ci":
        nob = [f.model for f in fits if f.ci_a is None]
        if nob:
            raise MoralkitError(f"no bootstrap intervals for {nob}: fit with n_boot > 0 or use uncertainty='se'")
    if uncertainty == "se":
        nan = [f.model for f in fits if not (np.isfinite(f.se_a).all() and np.isfinite(f.se_b).all())]
        if nan:
            warnings.warn(f"delta-method standard errors are not finite for {nan} (shown as NaN)", stacklevel=2)
    passes = {}
    if table1 is not None:
        from .rationality import RandomChoiceResult

        res1 = table1.attrs.get("results", {})
        for _, row in table1.iterrows():
            r = res1.get(row["model"])
            ok = r.rejects(level) if isinstance(r, RandomChoiceResult) else bool(row["alpha"] <= level)
            passes[row["model"]] = (row["label"], ok)

    panels = []
    for name, est_of, se_of, ci_of in (("b", lambda f: f.b, lambda f: f.se_b, lambda f: f.ci_b),
                                       ("a", lambda f: f.a, lambda f: f.se_a, lambda f: f.ci_a)):
        rows = []
        for f in fits:
            row = {"Model": f.model}
            for s, dim in enumerate(DIMENSIONS):
                row[f"{name}_{s + 1} ({dim})"] = float(est_of(f)[s])
            if uncertainty == "se":
                for s in range(5):
                    row[f"s.e. {name}_{s + 1}"] = float(se_of(f)[s])
            elif uncertainty == "ci":
                for s in range(5):
                    row[f"{name}_{s + 1} low"] = float(ci_of(f)[s, 0])
                    row[f"{name}_{s + 1} high"] = float(ci_of(f)[s, 1])
            row.update(form=f.form, n_obs=f.n_obs, ssr=f.ssr, converged=f.converged)
            if table1 is not None:
                lab, ok = passes.get(f.model, ("", False))
                row.update(CCEI=lab, passes=ok)
            rows.append(row)
        panels.append(pd.DataFrame(rows).set_index("Model"))
    return panels[0], panels[1]


def compare_forms(exact, paper) -> pd.DataFrame:
    """Estimates under the exact and the printed (paper) predicted answer, side by side.

    Parameters
    ----------
    exact, paper : dict {model: UtilityFit}
        Fits of the same models with ``form="exact"`` and ``form="paper"``.

    Returns
    -------
    DataFrame
        One row per (model, parameter): ``exact``, ``paper``, ``difference``
        (paper - exact), and each fit's residual sum of squares.

    References
    ----------
    Seror (2025), Section 3.2, eqs. (8)-(10).
    """
    ex, pa = {f.model: f for f in _as_fits(exact)}, {f.model: f for f in _as_fits(paper)}
    if any(f.form != "exact" for f in ex.values()) or any(f.form != "paper" for f in pa.values()):
        raise MoralkitError("compare_forms(exact, paper): pass the form='exact' fits first, then the form='paper' fits")
    rows = []
    for m in ex:
        if m not in pa:
            continue
        for name in ("a", "b"):
            for s, dim in enumerate(DIMENSIONS):
                e_, p_ = float(getattr(ex[m], name)[s]), float(getattr(pa[m], name)[s])
                rows.append(dict(model=m, parameter=f"{name}_{s + 1}", dimension=dim, exact=e_, paper=p_,
                                 difference=p_ - e_, ssr_exact=ex[m].ssr, ssr_paper=pa[m].ssr))
    if not rows:
        raise MoralkitError("no model was fitted under both forms")
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- figures


def _intervals(f: UtilityFit, name: str, interval: str):
    est = getattr(f, name)
    if interval == "ci" and getattr(f, f"ci_{name}") is not None:
        ci = getattr(f, f"ci_{name}")
        return np.vstack([est - ci[:, 0], ci[:, 1] - est]).clip(min=0)
    if interval in ("ci", "se"):
        from scipy.stats import norm

        z = norm.ppf(0.5 + f.level / 2)
        se = getattr(f, f"se_{name}")
        if not np.isfinite(se).all():
            return None  # boundary solution without bootstrap: no interval (said in the legend)
        return np.vstack([z * se, z * se])
    return None


def plot_parameters(results, interval: str = "ci", figsize=None):
    """Figure 1: the weights a (panel a) and ideal answers b (panel b) across the five dimensions.

    One line per model, with error bars: bootstrap percentile intervals when
    available (``interval="ci"``), else normal intervals from the delta-method
    standard errors at the fit's ``level``; ``interval=None`` draws none.

    Returns
    -------
    matplotlib.figure.Figure

    References
    ----------
    Seror (2025), Figure 1 and Table 2.
    """
    import matplotlib.pyplot as plt

    if interval not in (None, "ci", "se"):
        raise MoralkitError(f"interval must be None, 'ci' or 'se', got {interval!r}")
    fits = _as_fits(results)
    fig, axes = plt.subplots(1, 2, figsize=figsize or (11, 4.2))
    x = np.arange(5)
    n = len(fits)
    offs = (np.arange(n) - (n - 1) / 2) * min(0.06, 0.4 / max(n, 1))
    for ax, name, title in ((axes[0], "a", "(a) weights $a_s$ (normalised: $\\Sigma_s\\, a_s = 1$)"),
                            (axes[1], "b", "(b) ideal answers $b_s$")):
        for i, f in enumerate(fits):
            err = _intervals(f, name, interval) if interval else None
            lab = f.model + (" (no interval: boundary optimum)" if interval and err is None else "")
            ax.errorbar(x + offs[i], getattr(f, name), yerr=err, marker="o", ms=4, lw=1.5, capsize=3,
                        label=lab)
        ax.set_xticks(x, DIMENSIONS)
        ax.set_title(title)
        ax.grid(alpha=0.3)
    axes[0].axhline(0.2, color="0.5", ls=":", lw=1)
    axes[1].axhline(2.5, color="0.5", ls=":", lw=1)
    axes[0].set_ylabel("$a_s$")
    axes[1].set_ylabel("$b_s$ (0-5 scale)")
    lev = f"{100 * fits[0].level:g} %"
    n_ci = sum(f.ci_a is not None for f in fits)
    if interval is None:
        what = "no intervals"
    elif interval == "se" or n_ci == 0:
        what = f"{lev} delta-method intervals"
    elif n_ci == len(fits):
        what = f"{lev} bootstrap percentile intervals"
    else:
        what = f"{lev} bootstrap percentile intervals (delta-method for models without bootstrap)"

    fig.suptitle(f"Utility parameters, eq. (7), NLLS form={fits[0].form!r}; {what}", fontsize=10)
    axes[1].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    fig.tight_layout()
    return fig


def plot_q0_minus_b(results, interval: str = "ci", figsize=None):
    """Figure 2: unconstrained answer minus ideal answer, ``q0_s - b_s``, per dimension and model.

    Grouped bars (one per model) for each dimension; error bars from the
    uncertainty of ``b`` (``q0`` is observed). Models without a valid round-0
    answer are left out (named in the title).

    Returns
    -------
    matplotlib.figure.Figure

    References
    ----------
    Seror (2025), Figure 2.
    """
    import matplotlib.pyplot as plt

    if interval not in (None, "ci", "se"):
        raise MoralkitError(f"interval must be None, 'ci' or 'se', got {interval!r}")
    fits = _as_fits(results)
    have = [f for f in fits if f.q0 is not None]
    skipped = [f.model for f in fits if f.q0 is None]
    fig, ax = plt.subplots(figsize=figsize or (10, 4.2))
    x = np.arange(5)
    n = max(len(have), 1)
    width = 0.8 / n
    for i, f in enumerate(have):
        d = f.q0 - f.b
        err = _intervals(f, "b", interval) if interval else None
        if err is not None:
            err = err[::-1]  # q0 - b: the upper error of b is the lower error of the difference
        lab = f.model + (" (no interval: boundary optimum)" if interval and err is None else "")
        ax.bar(x - 0.4 + width * (i + 0.5), d, width, yerr=err, capsize=2, label=lab,
               error_kw=dict(lw=0.8))
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(x, DIMENSIONS)
    ax.set_ylabel("$q^0_s - b_s$")
    title = "Unconstrained answer minus ideal answer (Figure 2)"
    if skipped:
        title += f"; no round-0 answer: {', '.join(skipped)}"
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    if have:
        ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    fig.tight_layout()
    return fig


