"""The NLLS estimator of eq. (11): parametrisation, fits, standard errors and the bootstrap.

Entry points: :func:`fit_utility` (one model), :func:`fit_models` (several),
:func:`fit_answers` (arrays); results are :class:`UtilityFit`. See
:mod:`moralkit.psm.nlls` for the estimation and the uncertainty.

References
----------
Seror (2025), Section 3.2 (eq. (11)).
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
from scipy.optimize import least_squares

from ...checks import check_choice, check_int
from ...errors import IdentificationError, MoralkitError
from ..dataset import PSMDataset, model_key
from ..design import BUDGET
from ._trf import least_squares_trf
from .model import (
    check_form,
    check_rounds,
    corner_signs,
    to_corner_linear,
)
from .result import UtilityFit

__all__ = ["MIN_ROUNDS", "ETA_BOUND", "fit_answers", "fit_utility", "fit_models", "refit_rounds"]

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


def _theta_jacobian_numpy(a, J, out):
    """``out[:] = -[J[:, :, :5] @ d a / d eta, J[:, :, 5:]]`` in NumPy: what the compiled
    :func:`moralkit.psm._nlls_kernels.theta_jacobian` restates, used where that kernel does not reproduce it."""
    Jt = np.empty((J.shape[0], 5, _N_PAR))
    Jt[:, :, :4] = J[:, :, :5] @ _dsoftmax(a)
    Jt[:, :, 4:] = J[:, :, 5:]
    np.negative(Jt.reshape(-1, _N_PAR), out=out)


@functools.lru_cache(maxsize=1)
def _jacobian_chain():
    """The chain rule through the softmax this process uses: the compiled kernel when it reproduces NumPy's
    ``matmul`` bit for bit on a probe, else the NumPy expression.

    The kernel accumulates in the order of OpenBLAS's x86-64 kernels (see its docstring); a BLAS that adds up
    in another order (another CPU, another library) would make the fits differ in their last bits from those
    of the NumPy expression, so there the NumPy expression is used and the fits are what they always were.
    """
    from .._nlls_kernels import theta_jacobian

    rng = np.random.default_rng(20261126)
    a = rng.dirichlet(np.full(5, 0.3))
    J = rng.normal(0.0, 1.0, (64, 5, 10)) * 10.0 ** rng.integers(-6, 7, (64, 5, 10))
    fast, slow = np.empty((320, _N_PAR)), np.empty((320, _N_PAR))
    theta_jacobian(a, J, fast)
    _theta_jacobian_numpy(a, J, slow)
    return theta_jacobian if np.array_equal(fast, slow) else _theta_jacobian_numpy


class _Problem:
    """Residuals of eq. (11) in corner coordinates and their Jacobian in theta = (eta, b)."""

    def __init__(self, corners, prices, y_obs, form, budget=BUDGET):
        from .._nlls_kernels import exact_corner, paper_corner
        c64 = np.ascontiguousarray
        self.sign = c64(corner_signs(corners), dtype=np.float64)
        self.corners = c64(corners, dtype=np.float64)
        self.prices = c64(prices, dtype=np.float64)
        self.y = np.asarray(y_obs, dtype=float)
        self.form = form
        self.budget = float(budget)
        # predict_corner's kernel, called directly on the arrays above (converted once per problem)
        self._kernel = exact_corner if form == "exact" else paper_corner
        self._theta_jacobian = _jacobian_chain()
        self._no_jac = np.empty((0, 5, 10))
        self._ab_of = (None, None)  # the last theta and its (a, b): resid and jac are asked at the same theta

    def _ab(self, theta):
        key = np.asarray(theta, dtype=np.float64).tobytes()
        if self._ab_of[0] != key:
            a, b = _theta_to_ab(theta)
            self._ab_of = (key, (np.array(a, dtype=np.float64), np.array(b, dtype=np.float64)))  # copies
        return self._ab_of[1]

    def _predict(self, theta, jac):
        a, b = self._ab(theta)
        y = np.empty(self.prices.shape)
        J = np.empty((len(y), 5, 10)) if jac else self._no_jac
        self._kernel(a, b, self.sign, self.corners, self.prices, self.budget, y, J, jac)
        return a, y, J

    def resid(self, theta):
        _, yhat, _ = self._predict(theta, False)
        return (self.y - yhat).ravel()

    def jac(self, theta):
        a, _, J = self._predict(theta, True)
        out = np.empty((J.shape[0] * 5, _N_PAR))
        self._theta_jacobian(a, J, out)  # -(J[:, :, :5] @ _dsoftmax(a)) and -J[:, :, 5:], side by side
        return out

    def solve(self, theta0, max_nfev=None):
        """Eq. (11) from ``theta0`` by trust-region reflective with bounds: :meth:`solve_scipy`'s result, bit
        for bit, without ``least_squares``' per-call wrapping (:func:`moralkit.psm.nlls._trf.least_squares_trf`)."""
        theta0 = np.clip(theta0, _LB + 1e-9, _UB - 1e-9)
        return least_squares_trf(self.resid, self.jac, theta0, _LB, _UB, _TOL, max_nfev or 200 * _N_PAR)

    def solve_scipy(self, theta0, max_nfev=None):
        """:meth:`solve` through the public :func:`scipy.optimize.least_squares`: the reference the
        tests compare the fast path with (``==`` on every returned value)."""
        theta0 = np.clip(theta0, _LB + 1e-9, _UB - 1e-9)
        return least_squares(self.resid, theta0, jac=self.jac, bounds=(_LB, _UB), method="trf", x_scale="jac",
                             ftol=_TOL, xtol=_TOL, gtol=_TOL, max_nfev=max_nfev or 200 * _N_PAR)


_LB = np.r_[np.full(4, -ETA_BOUND), np.full(5, -np.inf)]
_UB = np.r_[np.full(4, ETA_BOUND), np.full(5, np.inf)]
_TOL = 1e-12


def _rank(J) -> int:
    s = np.linalg.svd(J, compute_uv=False)
    return int((s > _RANK_RTOL * s[0]).sum()) if s.size and s[0] > 0 else 0


# --------------------------------------------------------------------------- result


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
    form = _check_fit_args(form, n_starts, n_boot, level, cov_type)
    label = f"{model}: " if model else ""
    corners, prices, y = _checked_answers(corners, prices, answers, label, budget if check_budget else None,
                                          round_index)
    T = len(corners)
    prob = _Problem(corners, prices, y, form, budget)
    _check_identified(prob, T, form, label)
    best, n_agree = _multistart(prob, int(n_starts), np.random.default_rng(
        np.random.SeedSequence([int(seed), model_key(model), 0])), form, label)
    a, b = _theta_to_ab(best.x)
    cov, regular = _covariance_at(prob, best.x, cov_type, T, label)
    se = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    out = UtilityFit(model=str(model), form=form, a=a, b=b, se_a=se[:5], se_b=se[5:], cov=cov, ssr=float(2 * best.cost),
                     n_obs=T, n_excluded=int(n_excluded), n_starts=int(n_starts), n_agree=n_agree,
                     status=int(best.status), message=str(best.message), optimality=float(best.optimality),
                     converged=bool(best.status > 0), regular=regular, cov_type=cov_type, seed=int(seed),
                     q0=None if q0 is None else np.asarray(q0, dtype=float), level=float(level))
    if n_boot:
        _add_bootstrap(out, (corners.astype(float), prices, y, form, budget), best.x, int(n_boot), seed, model,
                       n_jobs, level, label)
    return out


def _check_fit_args(form, n_starts, n_boot, level, cov_type) -> str:
    """The checked ``form`` (see :func:`~moralkit.psm.nlls.model.check_form`), after checking the others."""
    form = check_form(form)
    check_int(n_starts, "n_starts", minimum=1)
    check_int(n_boot, "n_boot", minimum=0)
    if not 0 < level < 1:
        raise MoralkitError(f"level must be in (0, 1), got {level!r}")
    check_choice(cov_type, ("cluster", "nonrobust", "HC0", "HC1", "HC2", "HC3"), "cov_type")
    return form


def _checked_answers(corners, prices, answers, label: str, budget, round_index):
    """Phase 1: the rounds and the answers in corner coordinates (T, 5): finite, one row per round, at
    least MIN_ROUNDS, and on the budget line unless ``budget`` is None."""
    corners, prices = check_rounds(corners, prices)
    answers = np.asarray(answers, dtype=float)
    if answers.ndim == 1:
        answers = answers[None]
    T = len(corners)
    if answers.shape != (T, 5):
        raise MoralkitError(f"answers must have shape ({T}, 5) like corners, got {answers.shape}")
    if not np.isfinite(answers).all():
        raise MoralkitError("answers contain NaN or infinite values; leave unanswered rounds out "
                            "(PSMDataset.valid() does it)")
    if T < MIN_ROUNDS:
        raise IdentificationError(f"{label}{T} answered round(s) cannot identify the 9 parameters of eq. (7) "
                                  f"(4 weights up to scale, 5 ideal answers): at least {MIN_ROUNDS} rounds are "
                                  "needed, and in practice many more (the paper uses up to 160); collect more answers "
                                  "or drop the model")
    y = to_corner_linear(answers, corners)
    if budget is not None:
        _check_budget(y, prices, budget, 1e-6, np.arange(1, T + 1) if round_index is None else np.asarray(round_index))
    return corners, prices, y


def _check_identified(prob, T: int, form: str, label: str) -> None:
    """Phase 2: structural identification: the Jacobian at generic parameters must have full rank."""
    rng_id = np.random.default_rng(12345)
    generic = [np.concatenate([rng_id.normal(0, 0.3, 4), rng_id.uniform(1.0, 4.0, 5)]) for _ in range(2)]
    if max(_rank(prob.jac(th)) for th in generic) < _N_PAR:
        raise IdentificationError(f"{label}these {T} rounds do not identify the 9 parameters of eq. (7) under "
                                  f"form={form!r} (rank-deficient Jacobian): use rounds with several corners and "
                                  "price vectors (the full design has 32 x 5)")


def _multistart(prob, n_starts: int, rng, form: str, label: str):
    """Phase 3: solve from every start; the best fit and how many starts reach it."""
    fits = []
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for th0 in _starts(n_starts, rng):
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
    return best, n_agree


def _covariance_at(prob, x, cov_type: str, T: int, label: str):
    """Phase 4: the delta-method covariance, NaN (with a warning) unless x is a regular interior optimum."""
    at_bound = bool((np.abs(x[:4]) >= ETA_BOUND - 1e-6).any())
    regular = (not at_bound) and _rank(prob.jac(x)) == _N_PAR
    cov = _covariance(prob, x, cov_type, T)
    if not regular:
        cov = np.full((10, 10), np.nan)
        why = ("a weight is pushed to 0 (boundary solution)" if at_bound
               else "the Jacobian at the estimate is rank-deficient (a flat direction)")
        warnings.warn(f"{label}{why}: the delta-method standard errors are undefined (NaN) and the estimate "
                      "is not a regular interior optimum; read the bootstrap intervals (n_boot > 0)",
                      RuntimeWarning, stacklevel=4)
    return cov, regular


def _add_bootstrap(out, data, x, n_boot: int, seed, model, n_jobs, level: float, label: str) -> None:
    """Phase 5: bootstrap replicates over rounds: percentile intervals and SEs, set on ``out``."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        reps = _bootstrap(data, x, n_boot, seed, model, n_jobs)
    ok = np.array([r for r in reps if r is not None]).reshape(-1, 10)
    out.n_boot = int(n_boot)
    out.n_boot_failed = int(n_boot - len(ok))
    if len(ok) < 2:
        raise MoralkitError(f"{label}the bootstrap failed in {out.n_boot_failed} of {n_boot} replicates")
    if out.n_boot_failed > 0.1 * n_boot:
        warnings.warn(f"{label}{out.n_boot_failed} of {n_boot} bootstrap replicates did not converge "
                      "and were left out", RuntimeWarning, stacklevel=4)
    q = [(1 - level) / 2, (1 + level) / 2]
    out.boot_a, out.boot_b = ok[:, :5], ok[:, 5:]
    out.ci_a = np.quantile(out.boot_a, q, axis=0).T
    out.ci_b = np.quantile(out.boot_b, q, axis=0).T
    out.boot_se_a = out.boot_a.std(axis=0, ddof=1)
    out.boot_se_b = out.boot_b.std(axis=0, ddof=1)


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


def refit_rounds(dataset: PSMDataset, fit: UtilityFit, round_sets) -> np.ndarray:
    """Refit eq. (11) on given multisets of rounds, from ``fit``'s estimate: a bootstrap with chosen rounds.

    :func:`fit_utility`'s bootstrap draws each model's rounds on its own. To compare two respondents
    that answered the same option sets (a persona and its baseline), the same resampled rounds must
    be used for both: draw the round sets once and call this for each respondent. Replicate ``i`` of
    both is then computed on the same rounds, so their difference is a paired bootstrap replicate.

    Parameters
    ----------
    dataset : PSMDataset
        The data ``fit`` was estimated on.
    fit : UtilityFit
        :func:`fit_utility` of ``dataset`` (its ``form`` is used; the solver starts from its estimate).
    round_sets : sequence of array_like of int
        Each a multiset of round labels (``dataset.round_index`` values); every label must be an
        answered round of ``dataset``.

    Returns
    -------
    ndarray (len(round_sets), 10)
        ``a`` (5) then ``b`` (5) per replicate; a row of NaN where the solver failed.

    References
    ----------
    Seror (2025), Section 3.2, eq. (11); Efron & Tibshirani (1993), the paired bootstrap.
    """
    if not isinstance(dataset, PSMDataset):
        raise MoralkitError(f"expected a moralkit.psm.dataset.PSMDataset, got {type(dataset).__name__}")
    v = dataset.valid()
    pos = {int(r): i for i, r in enumerate(v.round_index)}
    idx = []
    for s in round_sets:
        bad = sorted({int(r) for r in s} - set(pos))
        if bad:
            raise MoralkitError(f"{dataset.model}: rounds {bad[:5]} are not answered rounds of this dataset; "
                                "draw the round sets from the rounds every compared respondent answered")
        idx.append(np.array([pos[int(r)] for r in s], dtype=np.int64))
    y = to_corner_linear(v.choices, v.corners)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        reps = _boot_chunk((v.corners.astype(float), v.prices, y, fit.form, BUDGET), _ab_to_theta(fit.a, fit.b), idx)
    return np.array([np.full(10, np.nan) if r is None else r for r in reps]).reshape(-1, 10)
