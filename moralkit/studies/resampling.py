"""Resampling tests of a mean effect over scenarios: a bootstrap interval, sign-flip and assignment p-values.

The persona effects on MoralChoice (:func:`moralkit.studies.steerability.likelihood_effects`) are means,
over scenarios, of the change of p(action 1), signed by the rules a persona's theory weighs. These
functions give their uncertainty: :func:`boot_mean_ci` (percentile bootstrap over scenarios),
:func:`signflip_p` (one-sided sign-flip permutation test of a mean above 0), :func:`assignment_p` (the
signed mean against random assignments of the same signs to the scenarios) and :func:`beats_p` (paired
bootstrap: one signing against another). Each draws from the generator it is given, in a fixed order,
so a caller's stream fixes the result.

References
----------
Efron, B. and Tibshirani, R. J. (1993), *An Introduction to the Bootstrap*, Chapters 13 and 15 (percentile
intervals, permutation tests). Good, P. (2005), *Permutation, Parametric and Bootstrap Tests of
Hypotheses*, Section 3.1 (the sign-flip test of a symmetric difference).
"""

from __future__ import annotations

import numpy as np

__all__ = ["boot_mean_ci", "signflip_p", "assignment_p", "beats_p"]


def boot_mean_ci(x, n_boot: int, rng: np.random.Generator, level: float) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``x`` at ``level`` (``n_boot`` resamples drawn from
    ``rng``); NaNs for fewer than two values.

    Examples
    --------
    >>> lo, hi = boot_mean_ci([0.1, 0.2, 0.3, 0.4], 500, np.random.default_rng(0), 0.95)
    >>> 0.1 <= lo <= 0.25 <= hi <= 0.4
    True
    """
    x = np.asarray(x, float)
    if len(x) < 2:
        return np.nan, np.nan
    idx = rng.integers(0, len(x), size=(int(n_boot), len(x)))
    m = x[idx].mean(axis=1)
    a = (1 - level) / 2
    return float(np.quantile(m, a)), float(np.quantile(m, 1 - a))


def signflip_p(x, n_perm: int, rng: np.random.Generator) -> float:
    """One-sided p-value of mean(x) > 0 under random sign flips (x symmetric about 0 under H0)."""
    x = np.asarray(x, float)
    if len(x) == 0:
        return np.nan
    obs = x.mean()
    signs = rng.choice((-1.0, 1.0), size=(int(n_perm), len(x)))
    null = np.multiply(signs, x, out=signs).mean(axis=1)  # signs * x, in the draws' array
    return float((1 + np.sum(null >= obs - 1e-15)) / (1 + int(n_perm)))


def assignment_p(s, delta, n_perm: int, rng: np.random.Generator) -> float:
    """Rule-specificity p-value: the directed effect against random assignments of the same signs.

    The persona's signs (+1, -1, 0 per scenario) are shuffled over the scenarios ``n_perm`` times;
    p = (1 + #{effect of a shuffle >= the observed effect}) / (1 + n_perm). When nearly every sign is
    +1, every shuffle gives nearly the observed effect and p is large: the effect is then a shift of
    p(action 1), not a response to the rules.
    """
    s, delta = np.asarray(s, float), np.asarray(delta, float)
    nz = s != 0
    if not nz.any():
        return np.nan
    obs = float((s * delta)[nz].mean())
    keys = rng.random((int(n_perm), len(s)))
    S = np.take(s, np.argsort(keys, axis=1), out=keys, mode="clip")  # s[perm], in the keys' array
    null = np.multiply(S, delta, out=S).sum(axis=1) / nz.sum()
    return float((1 + np.sum(null >= obs - 1e-15)) / (1 + int(n_perm)))


def beats_p(s, sq, delta, boot) -> float:
    """One-sided paired-bootstrap p-value that the directed effect under the rules ``s`` exceeds the one
    under the placebo rules ``sq`` (the same scenarios resampled for both: rows of ``boot``)."""
    s, sq, delta = (np.asarray(x, float) for x in (s, sq, delta))
    own = (s * delta)[boot].sum(axis=1) / np.maximum((s != 0)[boot].sum(axis=1), 1)
    pla = (sq * delta)[boot].sum(axis=1) / np.maximum((sq != 0)[boot].sum(axis=1), 1)
    return float((1 + np.sum(own - pla <= 0)) / (1 + len(boot)))
