"""Revealed preference in corner coordinates: expenditure matrix, GARP_e and the exact CCEI.

A dataset of ``T`` observations is summarised by its *expenditure matrix*
``E`` (``T x T``): ``E[r, k]`` is what observation ``k``'s chosen bundle costs
at observation ``r``'s prices. In the Priced Survey Methodology (PSM) the
bundle is the answer expressed in round ``r``'s corner coordinates,

    E[r, k] = p^r . q^k_{o^r},

so every chosen answer costs exactly the budget 12 in its own round
(``E[r, r] = 12``, eq. (1)). For ordinary consumer data (prices ``P`` and
quantities ``Q``, one row per observation) ``E = P Q^T``.

Conventions (Definitions 1-3 of the paper)
------------------------------------------
For a rationality level ``e`` (a scalar or one value per observation):

* ``r R0_e k`` (e-directly revealed preferred) iff ``e_r E[r, r] >= E[r, k]``,
  or the two observations chose the same bundle (Definition 1.1);
* ``r P0_e k`` (e-directly revealed *strictly* preferred) iff
  ``e_r E[r, r] > E[r, k]`` (Definition 1.2). The paper also adds "or
  ``q_o = q^r_o``" to the strict relation; that is evidently a typo copied
  from the weak relation (a bundle cannot be strictly preferred to itself,
  and with it every dataset with a repeated answer would violate GARP), so it
  is not used here;
* ``GARP_e`` (Definition 2): ``r R*_e k`` (the transitive closure of ``R0_e``)
  implies not ``k P0_e r``. Equivalently, GARP_e fails iff some strongly
  connected component of the ``R0_e`` graph contains a ``P0_e`` edge.

The same-bundle clause of ``R0_e`` never changes whether GARP_e holds: two
observations with the same bundle have identical columns of ``E`` (every
observation that reveals one preferred reveals the other, with the same
strictness), so a chain through a same-bundle link can always be shortened.
It is therefore optional in :func:`relations` and :func:`garp` and not needed
by the CCEI.

The CCEI (Definition 3) is the supremum of the rationality levels ``e in (0, 1]`` such that the data
satisfy ``GARP_e`` (the standard Afriat critical cost efficiency index; the
paper prints ``inf 1 - e``, an alternative convention, see below).
The relations change only when ``e`` crosses a ratio ``E[r, k] / E[r, r]``, so
the supremum is one of those ratios or 1. Precisely, with
``M* = min over cycles of the largest ratio on the cycle``,

    CCEI = 1 if there is no cycle among edges with ratio < 1, else max(0, M*).

At ``e = M*`` itself GARP_e may fail (ties are weak preferences and count),
but it holds for every ``e < M*`` and fails for every ``e > M*``; the supremum
is ``M*`` either way. When no ``e > 0`` satisfies GARP_e (``M* <= 0``) the
supremum of the empty set is reported as 0.

Everything here is exact, with no tolerance:

* :func:`relations` / :func:`garp` compare ``e_r E[r, r]`` with ``E[r, k]``
  through error-free products (Dekker's TwoProduct), or Fractions for an ``e``
  with a huge denominator;
* for PSM data ``E`` is an integer matrix with ``E[r, r] = 12``, so the CCEI
  is a multiple of 1/12: the smallest level ``m`` such that the graph
  ``{E[r, k] <= m}`` has a cycle (bitset DFS, binary search over the 12
  levels) gives ``m / 12`` (:func:`ccei_exact` returns a Fraction);
* for float data the ratios are correctly rounded, hence monotone in the exact
  ratio, so the smallest float threshold with a cycle is the float nearest the
  exact CCEI; :func:`ccei_exact` then separates exact ratios sharing that float
  with Fractions;
* many choice vectors over the same rounds (the random-choice test,
  :func:`moralkit.psm.ccei_many.ccei_choices`) use level-sorted sparse lists of every alternative's
  costs and add levels 0, 1, 2, ... until a cycle appears (:mod:`moralkit.psm.ccei_many`).

Alternative conventions (expenditures in unshifted coordinates, the index
reported as ``1 - e``) only change the matrix fed to these functions or the
final transform; see :mod:`moralkit.studies.conventions`.

References
----------
Seror, A. (2025). *The Moral Mind(s) of Large Language Models*, Section 2.2
(notation, eq. (1), Definitions 1-3). Afriat, S. N. (1972), Efficiency
estimation of production functions. Varian, H. (1982), The nonparametric
approach to demand analysis. Dekker, T. J. (1971), A floating-point technique
for extending the available precision.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..errors import MoralkitError
from ._rp_exact import as_fraction, ccei_float, ccei_fraction, level_arrays
from ._rp_kernels import (
    level_lists_direct,
    relation_signs,
    scc_labels,
)
from .design import BUDGET
from .level import RationalityLevel

__all__ = [
    "expenditure_matrix",
    "consumer_expenditure_matrix",
    "psm_expenditure_matrix",
    "expenditure_product",
    "option_expenditures",
    "validate_expenditure_matrix",
    "relations",
    "garp",
    "ccei",
    "ccei_exact",
    "choice_level_lists",
]



# =========================================================================== constructors


def _as_int_array(a, name: str, shape_tail=None) -> np.ndarray:
    arr = np.asarray(a)
    if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise MoralkitError(f"{name} must be a numeric array, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.floating):
        if not np.isfinite(arr).all() or (arr != np.round(arr)).any():
            raise MoralkitError(f"{name} must hold integers; convert the answers to int before calling")
    if shape_tail is not None and (arr.ndim != len(shape_tail) + 1 or arr.shape[1:] != tuple(shape_tail)):
        raise MoralkitError(f"{name} must have shape (T, {', '.join(map(str, shape_tail))}), got {arr.shape}")
    return arr.astype(np.int64, order="C")  # one dtype and layout: one compiled specialisation per kernel


def _check_psm_inputs(corners, prices, answers, answers_name="choices"):
    corners = _as_int_array(corners, "corners", (5,))
    prices = _as_int_array(prices, "prices", (5,))
    answers = np.asarray(answers)
    answers = _as_int_array(answers, answers_name, answers.shape[1:] if answers.ndim >= 2 else (5,))
    if answers.shape[-1] != 5:
        raise MoralkitError(f"{answers_name} must have 5 answers per row, got shape {answers.shape}")
    T = len(corners)
    if prices.shape[0] != T or answers.shape[0] != T:
        raise MoralkitError(
            f"corners, prices and {answers_name} must describe the same rounds: got {T}, "
            f"{prices.shape[0]} and {answers.shape[0]} rows"
        )
    if not ((corners == 0) | (corners == 5)).all():
        raise MoralkitError("corners must have entries 0 or 5 (vertices of {0..5}^5); pass the effective corner of each round")
    if (prices <= 0).any():
        raise MoralkitError("prices must be positive (eq. (2)); check the price vector of each round")
    if answers.size and (answers.min() < 0 or answers.max() > 5):
        raise MoralkitError(f"{answers_name} must be answers on the 0-5 scale; map refusals to missing rounds and drop them")
    return corners, prices, answers


def expenditure_matrix(corners, prices, choices, *, budget: int | None = BUDGET) -> np.ndarray:
    """PSM expenditure matrix in corner coordinates, ``E[r, k] = p^r . q^k_{o^r}``.

    Round ``k``'s chosen answer, expressed in the coordinates of round ``r``'s
    (effective) corner, priced at round ``r``'s prices.

    Parameters
    ----------
    corners : array_like (T, 5) of int
        Effective corner of each round (entries 0 or 5, after the flip rule).
    prices : array_like (T, 5) of int
        Price vector of each round.
    choices : array_like (T, 5) of int
        Chosen answers (raw, 0..5) of the same rounds; drop missing rounds first.
    budget : int or None, default 12
        Every chosen answer must cost exactly ``budget`` in its own round
        (eq. (1)); ``None`` skips this check.

    Returns
    -------
    E : ndarray (T, T) of int64

    Raises
    ------
    ValueError
        On bad shapes, corners not in {0, 5}, non-positive prices, answers
        outside 0..5, or a chosen answer off the budget.

    References
    ----------
    Seror (2025), Section 2.2, eq. (1) and Definition 1.
    """
    corners, prices, choices = _check_psm_inputs(corners, prices, choices)
    E = expenditure_product(corners, prices, choices)
    if budget is not None and len(E):
        d = np.diag(E)
        bad = np.nonzero(d != budget)[0]
        if len(bad):
            r = int(bad[0])
            raise MoralkitError(
                f"the answer of round {r} is off the budget: p . q_o = {int(d[r])}, expected {budget} "
                "(eq. (1)); pass the effective corner of each round (after the flip rule) and answers "
                "taken from its alternatives, or budget=None to skip this check"
            )
    return E


def expenditure_product(corners: np.ndarray, prices: np.ndarray, choices: np.ndarray) -> np.ndarray:
    """The arithmetic of :func:`expenditure_matrix`, without its checks: ``E[r, k] = p^r . q^k_{o^r}``.

    For arrays already known to be valid (int64 corners of 0s and 5s, positive prices, answers 0..5, as a
    design or a :class:`~moralkit.psm.dataset.PSMDataset` holds them); the convention audit computes
    thousands of such matrices (:func:`moralkit.psm.indices.expenditures`). The same integers as
    :func:`expenditure_matrix`, with no budget check.

    References
    ----------
    Seror (2025), Section 2.2, eq. (1) and Definition 1.
    """
    # p^r . |q - o^r| = A[r] . q + b[r]: +p where o^r = 0, -p and a constant 5p where o^r = 5
    A = prices * np.where(corners == 0, 1, -1)
    b = 5 * (prices * (corners == 5)).sum(1)
    if len(A) and np.abs(A).sum(1).max() * 5 + b.max() < 2**53:  # float BLAS: exact for these integers
        return (A.astype(np.float64) @ choices.T.astype(np.float64)).astype(np.int64) + b[:, None]
    return A @ choices.T + b[:, None]


def psm_expenditure_matrix(dataset) -> np.ndarray:
    """Expenditure matrix of a :class:`~moralkit.psm.dataset.PSMDataset`, missing rounds excluded.

    References
    ----------
    Seror (2025), Section 2.2; missing rounds are not in R^m (Section 2.2, notation).
    """
    ds = dataset if dataset.answered.all() else dataset.valid()  # (valid() copies and re-validates)
    return expenditure_matrix(ds.corners, ds.prices, ds.choices)


def option_expenditures(corners, prices, options, *, budget: int | None = BUDGET) -> np.ndarray:
    """Cost of every alternative of every round at every round's prices and corner.

    ``V[r, k, j] = p^r . (options[k, j])_{o^r}``, so the expenditure matrix of
    any choice vector ``c`` (0-based option indices) is
    ``E[r, k] = V[r, k, c[k]]``. This is what makes the random-choice test
    fast: ``V`` is computed once per model.

    Parameters
    ----------
    corners, prices : array_like (T, 5) of int
    options : array_like (T, n, 5) of int
        The alternatives shown in each round (raw answers 0..5).
    budget : int or None, default 12
        Every alternative must cost exactly ``budget`` in its own round.

    Returns
    -------
    V : ndarray (T, T, n) of int16

    References
    ----------
    Seror (2025), Section 2.2, eq. (1); Section 2.3 (random datasets).
    """
    options = np.asarray(options)
    if options.ndim != 3 or options.shape[2] != 5:
        raise MoralkitError(f"options must have shape (T, n_options, 5), got {options.shape}")
    corners, prices, options = _check_psm_inputs(corners, prices, options, "options")
    T, n, _ = options.shape
    # p . |q - o| = a . q + b with a = p * sign, b = sum of p over the statements where o = 5
    sign = np.where(corners == 0, 1, -1)
    A = prices * sign  # (T, 5)
    b = (prices * (corners == 5)).sum(1) * 5  # (T,)
    if T and (np.abs(A).sum(1).max() * 5 + b.max() > np.iinfo(np.int16).max):
        raise MoralkitError("prices too large for the PSM (expenditures exceed 32767)")
    # float64 BLAS product: exact here (small integers), much faster than an integer matmul
    V = A.astype(np.float64) @ options.reshape(T * n, 5).T.astype(np.float64)  # (r, k*n + j)
    V += b[:, None]
    V = V.astype(np.int16).reshape(T, T, n)
    if budget is not None and T:
        own = V[np.arange(T), np.arange(T)]  # (T, n)
        bad = np.argwhere(own != budget)
        if len(bad):
            t, j = bad[0]
            raise MoralkitError(
                f"option {j + 1} of round {t} is off the budget: p . q_o = {int(own[t, j])}, expected "
                f"{budget} (eq. (1)); every alternative must satisfy the budget in its round's corner "
                "coordinates (pass the effective corners)"
            )
    return V


def consumer_expenditure_matrix(prices, quantities) -> np.ndarray:
    """Expenditure matrix of ordinary consumer data, ``E = P Q^T`` (floats).

    ``E[r, k] = p^r . q^k``: the bundle bought at observation ``k`` priced at
    observation ``r``'s prices. With all corners at the origin the PSM
    definitions reduce to these (Section 2.2, after Definition 1), which lets
    :func:`ccei` be checked against independent consumer-data tools.

    Parameters
    ----------
    prices, quantities : array_like (T, K)
        Positive prices and non-negative quantities, one row per observation.

    Returns
    -------
    E : ndarray (T, T) of float64

    References
    ----------
    Varian (1982); Seror (2025), Section 2.2.
    """
    P = np.asarray(prices, dtype=float)
    Q = np.asarray(quantities, dtype=float)
    if P.ndim != 2 or P.shape != Q.shape:
        raise MoralkitError(f"prices and quantities must be 2-D arrays of the same shape (T, K); got {P.shape} and {Q.shape}")
    if not (np.isfinite(P).all() and np.isfinite(Q).all()):
        raise MoralkitError("prices and quantities must be finite; drop or impute observations with NaN/inf")
    if (P <= 0).any():
        raise MoralkitError("prices must be strictly positive")
    if (Q < 0).any():
        raise MoralkitError("quantities must be non-negative")
    return P @ Q.T


# =========================================================================== validation


def validate_expenditure_matrix(E) -> np.ndarray:
    """Check that ``E`` is a finite square matrix with positive diagonal; return it as an array.

    Integer matrices are returned as int64, anything else as float64, always as a new C-ordered array.

    Raises
    ------
    ValueError
        Naming the problem (shape, non-finite entries, non-positive own expenditure).
    """
    if hasattr(E, "valid") and hasattr(E, "chosen"):
        raise MoralkitError("got a PSMDataset where an expenditure matrix was expected; use psm_expenditure_matrix(ds)")
    E = np.asarray(E)
    if E.dtype == bool or E.dtype == object or not np.issubdtype(E.dtype, np.number):
        raise MoralkitError(f"E must be a numeric matrix, got dtype {E.dtype}")
    if np.issubdtype(E.dtype, np.complexfloating):
        raise MoralkitError("E must be real")
    if E.ndim != 2 or E.shape[0] != E.shape[1]:
        raise MoralkitError(f"E must be a square T x T expenditure matrix, got shape {E.shape}; build it with "
                            "expenditure_matrix() or consumer_expenditure_matrix()")
    # a copy in C order: the kernels see one layout, so numba compiles one specialisation of each (an
    # F-ordered matrix, e.g. a transpose, would compile a second one, a few seconds of CPU)
    if np.issubdtype(E.dtype, np.integer):
        E = E.astype(np.int64, order="C")
    else:
        E = E.astype(np.float64, order="C")
        if not np.isfinite(E).all():
            raise MoralkitError("E has non-finite entries (NaN or inf); drop the observations that produce them")
    d = np.diag(E)
    if (d <= 0).any():
        r = int(np.nonzero(d <= 0)[0][0])
        raise MoralkitError(
            f"own expenditure E[{r}, {r}] = {d[r]} is not positive; every observation must spend a "
            "positive amount on its own choice (drop empty bundles / check the prices)"
        )
    return E


def choice_level_lists(corners, prices, options, budget):
    """Sparse CCEI level lists of a model's rounds, for :func:`psm_levels_choices`.

    Parameters
    ----------
    corners, prices : array (T, 5) of int
        Effective corner and prices of each round.
    options : array (T, n_options, 5) of int
        The alternatives shown (raw answers 0..5), each on the round's budget.
    budget : int
        The budget B (12 in the PSM); levels run over 0..B.

    Returns
    -------
    start, rows : ndarray of int
        ``rows[start[k, j, L]:start[k, j, L + 1]]`` are the rounds r whose chosen answer
        option j of round k reveals at level L; the input of :func:`psm_levels_choices`.

    Raises
    ------
    ValueError
        Bad shapes, or an option off its round's budget.
    """
    options = np.asarray(options)
    if options.ndim != 3 or options.shape[2] != 5:
        raise MoralkitError(f"options must have shape (T, n_options, 5), got {options.shape}")
    corners, prices, options = _check_psm_inputs(corners, prices, options, "options")
    A = prices * np.where(corners == 0, 1, -1)
    b = (prices * (corners == 5)).sum(1) * 5
    start, rows, bad = level_lists_direct(A, b, np.ascontiguousarray(options), int(budget), int(budget))
    if bad[0] >= 0:
        raise MoralkitError(
            f"option {bad[1] + 1} of round {bad[0]} is off the budget: p . q_o = {bad[2]}, expected {budget} "
            "(eq. (1)); every alternative must satisfy the budget in its round's corner coordinates "
            "(pass the effective corners)"
        )
    return start, rows


# =========================================================================== relations and GARP


def _same_bundle_matrix(same_bundle, T):
    if same_bundle is None:
        return None
    S = np.asarray(same_bundle)
    if S.ndim == 2 and S.shape == (T, T) and S.dtype == bool:
        return S
    if S.ndim == 2 and S.shape[0] == T:  # bundles, one row per observation
        return (S[:, None, :] == S[None, :, :]).all(-1)
    raise MoralkitError("same_bundle must be a (T, T) boolean matrix or the (T, K) array of chosen bundles")


def relations(E, e=1.0, *, same_bundle=None):
    """The direct revealed-preference relations ``R0_e`` and ``P0_e`` (Definition 1), exactly.

    Parameters
    ----------
    E : array_like (T, T)
        Expenditure matrix (:func:`expenditure_matrix`, :func:`consumer_expenditure_matrix`).
    e : float, fractions.Fraction or array_like (T,), default 1.0
        Rationality level(s) in [0, 1]; a scalar applies to every observation.
        Comparisons ``e_r E[r, r] >= E[r, k]`` are exact (a float ``e`` is the
        binary number it holds; use a Fraction such as ``Fraction(5, 12)`` for
        an exact rational level).
    same_bundle : (T, T) bool or (T, K) bundles, optional
        Adds the "or the same bundle" clause of ``R0_e`` (Definition 1.1).

    Returns
    -------
    R0, P0 : ndarray (T, T) of bool
        ``R0[r, k]``: ``r R0_e k``; ``P0[r, k]``: ``r P0_e k``. The diagonal of
        ``R0`` is True, that of ``P0`` False.

    References
    ----------
    Seror (2025), Section 2.2, Definition 1 (the "or q_o = q^r_o" clause in the
    strict relation is treated as a typo, see the module docstring).
    """
    E = validate_expenditure_matrix(E)
    T = len(E)
    ev = level_arrays(e, T)
    if ev is None:  # a rational e with a huge denominator: exact Fraction arithmetic
        e = e.exact if isinstance(e, RationalityLevel) else e
        F = [[as_fraction(x) for x in row] for row in E]
        S = np.array([[(lambda d: (d > 0) - (d < 0))(e * F[r][r] - F[r][k]) for k in range(T)] for r in range(T)],
                     dtype=np.int8).reshape(T, T)
    else:
        num, den = ev
        if np.issubdtype(E.dtype, np.integer) and T and np.abs(E).max() >= 2**53:
            raise MoralkitError("integer expenditures must be below 2**53 in absolute value")
        # rows rescaled by powers of two (exact; signs unchanged) keep the error-free products in range
        Ef = np.ldexp(E.astype(np.float64), -np.frexp(np.diag(E).astype(np.float64))[1][:, None]) if T else E
        S = relation_signs(Ef, num, den) if T else np.zeros((0, 0), np.int8)
    R0 = S >= 0
    P0 = S > 0
    np.fill_diagonal(R0, True)
    np.fill_diagonal(P0, False)
    sb = _same_bundle_matrix(same_bundle, T)
    if sb is not None:
        R0 |= sb
    return R0, P0


def garp(E, e=1.0, *, same_bundle=None, method: str = "scc") -> bool:
    """Whether the data satisfy ``GARP_e`` (Definition 2), exactly.

    Parameters
    ----------
    E : array_like (T, T)
        Expenditure matrix.
    e : float, fractions.Fraction or array_like (T,), default 1.0
        Rationality level(s) in [0, 1] (see :func:`relations`).
    same_bundle : optional
        See :func:`relations`; never changes the result (module docstring),
        accepted so the relation is exactly Definition 1.
    method : {"scc", "warshall"}, default "scc"
        ``"scc"``: GARP_e fails iff a strongly connected component of the
        ``R0_e`` graph contains a ``P0_e`` edge (linear time after building the
        relations). ``"warshall"``: the reference transitive closure of ``R0_e``
        (Varian 1982), O(T^3).

    Returns
    -------
    bool
        True when ``r R*_e k`` never meets ``k P0_e r``.

    References
    ----------
    Seror (2025), Section 2.2, Definitions 1-2; Varian (1982).
    """
    R0, P0 = relations(E, e, same_bundle=same_bundle)
    T = len(R0)
    if T < 2:
        return True
    if method == "warshall":
        C = R0.copy()
        for k in range(T):
            C |= C[:, k:k + 1] & C[k:k + 1, :]
        return not (C & P0.T).any()
    if method == "scc":
        lab = scc_labels(np.ascontiguousarray(R0), np.ones(T, dtype=np.bool_))
        r, k = np.nonzero(P0)
        return not (lab[r] == lab[k]).any()
    raise MoralkitError(f"method must be 'scc' or 'warshall', got {method!r}")


# =========================================================================== CCEI


def ccei_exact(E) -> Fraction:
    """The exact CCEI as a :class:`fractions.Fraction` (see :func:`ccei`).

    For PSM data (integer ``E`` with ``E[r, r] = 12``) the result is ``m / 12``.
    For float data it is the exact rational value of a ratio of two stored
    floats ``E[r, k] / E[r, r]`` (or 1, or 0).

    References
    ----------
    Seror (2025), Section 2.2, Definition 3; Afriat (1972).

    Examples
    --------
    >>> from moralkit.psm.simulate import simulate_random
    >>> E = psm_expenditure_matrix(simulate_random(0, seed=1))
    >>> ccei_exact(E)
    Fraction(1, 3)
    >>> garp(E, 0.333), garp(E, Fraction(1, 3))  # GARP_e holds below the CCEI, not at it
    (True, False)
    """
    if hasattr(E, "valid") and hasattr(E, "chosen"):
        E = psm_expenditure_matrix(E)
    return ccei_fraction(validate_expenditure_matrix(E))


def ccei(E) -> float:
    """Critical Cost Efficiency Index: the supremum of ``e in (0, 1]`` with ``GARP_e``.

    Computed exactly (no bisection tolerance): the supremum is the smallest,
    over revealed-preference cycles, of the largest ratio ``E[r, k] / E[r, r]``
    on the cycle, or 1 when no cycle uses only ratios below 1. Weak preferences
    (ties) count. Integer matrices with a constant diagonal ``B`` (PSM data,
    ``B = 12``) use a fast path over the ``B`` possible levels.

    Parameters
    ----------
    E : array_like (T, T) or PSMDataset
        Expenditure matrix (``E[r, k]`` = observation ``k``'s bundle at
        observation ``r``'s prices; see :func:`expenditure_matrix` and
        :func:`consumer_expenditure_matrix`), or a PSM dataset (missing rounds
        are excluded).

    Returns
    -------
    float
        In [0, 1]; the float nearest to :func:`ccei_exact`. 0 means no
        ``e > 0`` satisfies ``GARP_e``.

    Raises
    ------
    ValueError
        If ``E`` is not square, has non-finite entries or a non-positive
        diagonal.

    References
    ----------
    Seror (2025), Section 2.2, Definition 3 (the standard supremum convention;
    the paper prints ``inf 1 - e``); Afriat (1972); Halevy, Persitz and Zrill
    (2018).

    Examples
    --------
    >>> import numpy as np
    >>> ccei(np.array([[9.0, 6.0], [6.0, 9.0]]))  # a strict 2-cycle
    0.6666666666666666
    """
    if hasattr(E, "valid") and hasattr(E, "chosen"):
        E = psm_expenditure_matrix(E)
    return ccei_float(validate_expenditure_matrix(E))
