"""The resampling p-values draw and compute exactly as their plain NumPy statements do.

:func:`~moralkit.studies.resampling.signflip_p` and :func:`~moralkit.studies.resampling.assignment_p`
work in the arrays of their draws (to spare two large temporaries); these tests compare them with the
statements they replace, on the p-value and on the generator's state afterwards.
"""

from __future__ import annotations

import numpy as np
import pytest

from moralkit.studies.resampling import assignment_p, signflip_p


def _signflip_plain(x, n_perm, rng):
    x = np.asarray(x, float)
    signs = rng.choice((-1.0, 1.0), size=(n_perm, len(x)))
    null = (signs * x).mean(axis=1)
    return null, float((1 + np.sum(null >= x.mean() - 1e-15)) / (1 + n_perm))


def _assignment_plain(s, delta, n_perm, rng):
    nz = s != 0
    obs = float((s * delta)[nz].mean())
    perm = np.argsort(rng.random((n_perm, len(s))), axis=1)
    null = (s[perm] * delta).sum(axis=1) / nz.sum()
    return null, float((1 + np.sum(null >= obs - 1e-15)) / (1 + n_perm))


@pytest.mark.parametrize("n", [1, 2, 9, 300])
def test_signflip_and_assignment_p_equal_the_plain_statements(n):
    data = np.random.default_rng([11, n])
    for _ in range(3):
        x = data.normal(0.05, 1.0, n)
        s = data.integers(-1, 2, n).astype(float)
        s[0] = 1.0
        for ours, plain, args in ((signflip_p, _signflip_plain, (x,)), (assignment_p, _assignment_plain, (s, x))):
            r1, r2 = np.random.default_rng([n, 5]), np.random.default_rng([n, 5])
            r1.integers(0, 3), r2.integers(0, 3)  # a half-used 64-bit draw left in the generator
            _, p = plain(*args, 499, r2)
            assert ours(*args, 499, r1) == p
            assert r1.integers(0, 2**40) == r2.integers(0, 2**40)  # the same draws consumed


def test_the_p_values_see_the_data():
    """Far from 0 the sign-flip p-value is its floor, and shuffled signs rarely reach a perfectly signed effect."""
    rng = np.random.default_rng(0)
    x = np.full(40, 1.0)
    assert signflip_p(x, 999, rng) == 1 / 1000
    s = np.r_[np.ones(20), -np.ones(20)]
    assert assignment_p(s, s * 0.5, 999, rng) < 0.01
    assert assignment_p(s, np.full(40, 0.5), 999, rng) > 0.1
