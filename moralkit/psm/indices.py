"""CCEI index conventions: in which coordinates answers are priced, and whether e* or 1 - e* is reported.

The package's CCEI is the standard one (:func:`moralkit.psm.rp.ccei`): the
supremum of ``e`` for which GARP_e holds, with the relations of Definition 1
in each round's (effective) corner coordinates. There every chosen answer
costs exactly 12 (eq. (1)), so the CCEI is a multiple of 1/12. The published
Table 1 prints values such as 0.385, 0.400, 0.353 that are not. This module
defines, as documented options, the conventions that could produce them; the
random-choice test takes one as ``index=`` (:func:`moralkit.psm.rationality.table1`)
and notebook ``06_audit`` (:mod:`moralkit.studies.conventions`) tests which one
reproduces the published (CCEI, alpha) pairs. **The default everywhere is the
standard convention.**

A convention is a pair ``(coordinates, report)``:

``coordinates`` -- in which coordinates answers are priced, ``E[r, k] = p^r . q^k_?``:

* ``"corner"`` (standard): round ``r``'s effective corner (after the flip rule),
  ``E[r, k] = p^r . q^k_{o^r}``; ``E[r, r] = 12``; values ``m/12``.
* ``"origin"``: raw answers, i.e. every corner at the origin (the
  "consumer-choice" reading, Section 2.2 after Definition 1),
  ``E[r, k] = p^r . q^k``; own expenditure ``p^r . q^r`` varies by round
  (an integer in 1..30), so values are fractions ``a/b`` with ``b <= 30``.
* ``"origin_budget"``: raw answers priced as in ``"origin"``, but the
  efficiency compares them with the nominal budget 12 instead of the chosen
  answer's own raw expenditure (``e * 12 >= p^r . q^k``); values ``a/12``.
* ``"nominal"``: the nominal corner of the round, *ignoring the flip rule*
  (the flip applied when drawing the options but not in the analysis). In a
  flipped round the chosen answer costs ``5 * sum(p) - 12 = 18``, so values
  are ``a/12`` or ``a/18``.

``report`` -- which number is reported:

* ``"e"`` (standard): the critical efficiency ``e* = sup{e : GARP_e}``;
  1 for data satisfying GARP.
* ``"1-e"``: ``1 - e*``, Definition 3 read literally ("inf over e with
  GARP_e of 1 - e"); 0 for data satisfying GARP, larger = *less* consistent.

References
----------
Seror (2025), Section 2.2 (eq. (1), Definitions 1-3, corner flip), Table 1.
Afriat (1972); Varian (1982).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..errors import MoralkitError
from . import rp
from .design import BUDGET, CORNERS

__all__ = [
    "COORDINATES",
    "REPORTS",
    "CONVENTIONS",
    "Convention",
    "convention",
    "expenditure_matrix",
    "expenditures",
    "option_expenditures",
    "critical_efficiency",
    "critical_efficiencies",
    "exact_ratio",
    "reported_index",
]

COORDINATES = ("corner", "origin", "origin_budget", "nominal")
REPORTS = ("e", "1-e")


@dataclass(frozen=True)
class Convention:
    """A CCEI convention: ``coordinates`` in :data:`COORDINATES`, ``report`` in :data:`REPORTS`."""

    coordinates: str = "corner"
    report: str = "e"

    def __post_init__(self):
        if self.coordinates not in COORDINATES:
            raise MoralkitError(f"coordinates must be one of {COORDINATES}, got {self.coordinates!r}")
        if self.report not in REPORTS:
            raise MoralkitError(f"report must be one of {REPORTS}, got {self.report!r}")

    @property
    def name(self) -> str:
        return f"{self.coordinates}/{self.report}"

    @property
    def is_standard(self) -> bool:
        return self.coordinates == "corner" and self.report == "e"


#: Every convention, standard first.
CONVENTIONS: tuple[Convention, ...] = tuple(Convention(c, r) for c in COORDINATES for r in REPORTS)


def convention(spec) -> Convention:
    """Parse ``"origin/1-e"``, ``("origin", "1-e")`` or a :class:`Convention`; ``None`` = standard."""
    if spec is None:
        return Convention()
    if isinstance(spec, Convention):
        return spec
    if isinstance(spec, str):
        parts = spec.split("/")
        if len(parts) == 1:
            return Convention(parts[0], "e")
        if len(parts) == 2:
            return Convention(*parts)
    if isinstance(spec, tuple) and len(spec) == 2:
        return Convention(*spec)
    raise MoralkitError(f"unrecognised convention {spec!r}; use e.g. 'corner/e' (standard), 'origin/1-e'")


# --------------------------------------------------------------------------- expenditures


def _nominal_corners(ds) -> np.ndarray:
    if ds.corner_index is None:
        raise MoralkitError(f"{ds.model}: the 'nominal' convention needs corner_index (the round's nominal corner)")
    return CORNERS[ds.corner_index]


def expenditure_matrix(dataset, coordinates: str = "corner") -> np.ndarray:
    """Expenditure matrix of a PSM dataset (missing rounds excluded) in the given coordinates.

    Parameters
    ----------
    dataset : PSMDataset
    coordinates : {"corner", "origin", "origin_budget", "nominal"}, default "corner"
        See the module docstring. ``"corner"`` is :func:`moralkit.psm.rp.psm_expenditure_matrix`.

    Returns
    -------
    E : ndarray (T, T) of int64

    References
    ----------
    Seror (2025), Section 2.2, eq. (1) and Definition 1.
    """
    Convention(coordinates)  # validates
    ds = dataset if dataset.answered.all() else dataset.valid()  # (valid() copies and re-validates)
    if coordinates == "corner":
        return rp.psm_expenditure_matrix(ds)
    return expenditures(ds.corners, ds.prices, ds.choices,
                        _nominal_corners(ds) if coordinates == "nominal" else None, coordinates)


def expenditures(corners, prices, q, nominal=None, coordinates: str = "corner") -> np.ndarray:
    """:func:`expenditure_matrix` of answered rounds given as arrays (validated input assumed): effective
    ``corners``, ``prices``, chosen answers ``q`` and, for ``"nominal"``, the nominal corners of the rounds.
    The hot loops of the convention audit (:mod:`moralkit.studies.conventions`) call it without building a
    dataset.
    """
    if coordinates == "corner":
        return rp.expenditure_product(corners, prices, q)
    base = nominal if coordinates == "nominal" else np.zeros_like(corners)
    E = rp.expenditure_product(np.asarray(base, dtype=np.int64), prices, q)
    if coordinates == "origin_budget":
        np.fill_diagonal(E, BUDGET)
    return E


def critical_efficiency(dataset, coordinates: str = "corner") -> Fraction:
    """Exact ``e* = sup{e in (0, 1] : GARP_e}`` in the given coordinates (a Fraction).

    References
    ----------
    Seror (2025), Definitions 1-3; computed by :func:`moralkit.psm.rp.ccei_exact`.
    """
    return rp.ccei_exact(expenditure_matrix(dataset, coordinates))


def exact_ratio(x: float, max_den: int = 1000) -> Fraction:
    """The fraction with denominator at most ``max_den`` nearest to ``x``: the exact ``e*`` from its float.

    On PSM data every ``e*`` is 0, 1 or a ratio of integer expenditures with
    denominator at most 30 (the own expenditure), and :func:`moralkit.psm.rp.ccei`
    returns the float nearest to it. Two such ratios differ by at least 1/900,
    far more than a float's rounding error, so the fraction is recovered exactly;
    ``1 - e*`` is then computed exactly too.

    Examples
    --------
    >>> exact_ratio(5 / 13)
    Fraction(5, 13)
    """
    return Fraction(float(x)).limit_denominator(int(max_den))


def reported_index(dataset, convention_="corner/e") -> float:
    """The index a given convention reports for a dataset (default: the standard CCEI).

    Parameters
    ----------
    dataset : PSMDataset
    convention_ : str, tuple or Convention, default "corner/e"
        ``"corner/e"`` is the standard CCEI, equal to :func:`moralkit.psm.rp.ccei`.

    Returns
    -------
    float
        ``e*`` or ``1 - e*``.

    References
    ----------
    Seror (2025), Definition 3 (printed as ``inf 1 - e``).
    """
    c = convention(convention_)
    # rp.ccei returns the float nearest the exact e* (the same float as float(critical_efficiency(...))),
    # without the exact Fraction refinement, which is ~20x slower outside corner coordinates
    e = exact_ratio(rp.ccei(expenditure_matrix(dataset, c.coordinates)))
    return float(e if c.report == "e" else 1 - e)


def option_expenditures(dataset, coordinates: str = "corner") -> np.ndarray:
    """Cost of every alternative of every answered round at every round's prices, in the given coordinates.

    ``V[r, k, j]`` is the cost of option ``j`` of round ``k`` at round ``r``'s
    prices, so the expenditure matrix of a choice vector ``c`` (0-based) is
    ``E[r, k] = V[r, k, c[k]]`` (with the diagonal set to 12 for
    ``"origin_budget"``). ``"corner"`` is :func:`moralkit.psm.rp.option_expenditures`.

    Returns
    -------
    V : ndarray (T, T, n) of int16 (T answered rounds)

    References
    ----------
    Seror (2025), Section 2.2, eq. (1); Section 2.3 (random datasets).
    """
    Convention(coordinates)  # validates
    ds = dataset.valid()
    if coordinates == "corner":
        return rp.option_expenditures(ds.corners, ds.prices, ds.options)
    corners = _nominal_corners(ds) if coordinates == "nominal" else np.zeros_like(ds.corners)
    return rp.option_expenditures(corners, ds.prices, ds.options, budget=None)


def critical_efficiencies(V, choices, coordinates: str = "corner") -> np.ndarray:
    """``e*`` (floats) of many choice vectors over the same rounds, in the given coordinates.

    Parameters
    ----------
    V : ndarray (T, T, n)
        From :func:`option_expenditures` with the same ``coordinates``.
    choices : array_like (N, T) of int
        0-based option chosen in each answered round, one row per dataset.
    coordinates : str

    Returns
    -------
    ndarray (N,) of float
        Each value is the float nearest to the exact ``e*`` (a ratio of integers
        with denominator at most 30, so distinct values never share a float and
        comparisons between them are exact).

    References
    ----------
    Seror (2025), Definitions 1-3.
    """
    from ._rp_exact import MAX_LEVELS
    from ._rp_kernels import ccei_float_choices

    Convention(coordinates)
    C = np.ascontiguousarray(np.atleast_2d(np.asarray(choices, dtype=np.int64)))
    V = np.ascontiguousarray(V)  # C order, as option_expenditures returns it: one compiled specialisation
    T = V.shape[0]
    rows = np.arange(T)
    # one compiled pass over the rows: the same float operations as rp.ccei, without its per-matrix
    # Python calls; the rows it leaves (integer-level path, invalid matrices) go through rp.ccei
    out, done = ccei_float_choices(V, C, BUDGET if coordinates == "origin_budget" else 0, MAX_LEVELS)
    for i in np.flatnonzero(~done):
        E = V[:, rows, C[i]].astype(np.int64)
        if coordinates == "origin_budget":
            np.fill_diagonal(E, BUDGET)
        out[i] = rp.ccei(E)
    return out
