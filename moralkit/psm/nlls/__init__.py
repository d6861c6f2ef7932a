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
same in either system (checked in ``tests/psm/test_nlls.py``).

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
Eq. (11) is solved by SciPy's trust-region reflective method with bounds
(analytic Jacobian; :func:`scipy.optimize.least_squares`'s driver, called
without its per-call wrapping through :mod:`moralkit.psm.nlls._trf`, with the
same iterates bit for bit) over 9 free parameters: four logits ``eta``
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

Modules
-------
- :mod:`moralkit.psm.nlls.model`: coordinates and the predicted answer (eqs. (7)-(10)).
- :mod:`moralkit.psm.nlls.fit`: the estimator (eq. (11)), standard errors, the bootstrap.
- :mod:`moralkit.psm.nlls._trf`: SciPy's trust-region reflective driver restated for the fit.
- :mod:`moralkit.psm.nlls.report`: Table 2, :func:`compare_forms`, Figures 1-2.
"""

from .fit import ETA_BOUND, MIN_ROUNDS, fit_answers, fit_models, fit_utility, refit_rounds
from .model import FORMS, predict_answers
from .report import (
    CONVERGENCE_COLUMNS,
    compare_forms,
    convergence_notes,
    convergence_table,
    plot_parameters,
    plot_q0_minus_b,
    published_fits,
    table2,
    table2_view,
)
from .result import UtilityFit

__all__ = [
    "FORMS",
    "MIN_ROUNDS",
    "ETA_BOUND",
    "UtilityFit",
    "predict_answers",
    "fit_answers",
    "fit_utility",
    "fit_models",
    "refit_rounds",
    "table2",
    "table2_view",
    "compare_forms",
    "plot_parameters",
    "plot_q0_minus_b",
    "published_fits",
    "convergence_table",
    "convergence_notes",
    "CONVERGENCE_COLUMNS",
]
