"""The NLLS estimate of one model's utility (eq. (11)): :class:`UtilityFit`, as :mod:`.fit` returns it.

References
----------
Seror, A. (2025). *The Moral Mind(s) of Large Language Models*, Section 3.2, eqs. (7)-(11).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..design import DIMENSIONS

__all__ = ["UtilityFit"]


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
