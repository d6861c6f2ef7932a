"""Types of models: pooled data, the largest jointly rational subset LS(e), Procedure 2.

A *type* is a set of models whose pooled answers jointly satisfy GARP_e
(Seror 2025, Section 2.4). This module holds

* the pooled observations of several models are :func:`moralkit.psm.pooled.pool`'s
  (every round keeps its own effective corner and prices, eq. (1) and Definition 1);
* :func:`garp_pooled` / :func:`violating_cycle` -- GARP_e (Definition 2) on the
  pooled observations of a subset of models;
* :func:`largest_subsets` / :func:`largest_subset` -- LS(e), optimisation (5),
  solved **exactly** without a MILP (see below), or with the MILP of
  Proposition 1 (:mod:`moralkit.psm.milp`);
* :class:`LSSolver` -- what Procedure 2 asks of a solver (every maximum subset),
  implemented by :class:`ExactLS` and :class:`MILPLS` (a MILP of :mod:`moralkit.psm.milp`);
  :func:`ls_solver` picks one by name;
* :func:`procedure2` / :func:`partition_types` -- Procedure 2: remove LS(e)
  until no model is left, one loop for every solver.

The exact solver
----------------
GARP_e consistency of a set of models is *monotone*: if the pooled data of
``B`` satisfy GARP_e, so do those of every subset of ``B`` (a violating cycle in
a subset is a violating cycle in ``B``). The solver therefore maximises ``|B|``
over the subsets of the models subject to *cuts* "not all of S", where each
``S`` is the set of models owning the rounds of a GARP_e-violating cycle found
in the pooled data (any set containing ``S`` contains that cycle). It takes the
largest subsets that satisfy every cut found so far, checks each against
GARP_e on the pooled data, adds a cut for each one that fails, and stops at the
first size at which some candidate passes; every candidate of that size has
then been checked, so *all* maximum subsets are known. This is exact (it
returns the same ``|LS(e)|`` as Proposition 1; the tests check it against the
MILP with HiGHS, GLPK and Gurobi) and needs a handful of GARP checks on the
pooled graph per call, each a Tarjan SCC pass compiled with numba. Subsets are
held as bit masks, which limits the exact solver to 20 models (use the MILP
beyond that).

Ties
----
LS(e) need not be unique. :func:`largest_subsets` returns all maximum subsets;
:func:`partition_types` picks one of them uniformly at random with the run's
random generator (``seed``), at each step of Procedure 2. The permutation
approach (:mod:`moralkit.psm.permutation`) averages over these choices. A MILP
solver enumerates every maximum subset and breaks ties with the same random
draw, so the partitions (and the permutation study's G) are identical.

Conventions (as :mod:`moralkit.psm.rp`)
-----------------------------------
``E[r, k] = p^r . q^k_{o^r}``; ``r R0_e k`` iff ``e E[r, r] >= E[r, k]`` or the
two answers are the same bundle; ``r P0_e k`` iff ``e E[r, r] > E[r, k]``
(strict). GARP_e fails iff a strongly connected component of the R0_e graph
contains a P0_e edge.

References
----------
Seror, A. (2025). *The Moral Mind(s) of Large Language Models*, Section 2.2
(Definitions 1-2), Section 2.4 (optimisation (5), Procedure 2), Section 3.3 and
Appendix A.1 (Proposition 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

import numpy as np

from ..checks import as_generator
from ..errors import MoralkitError
from ._partition_kernels import max_subsets as _max_subsets
from ._partition_kernels import violating_cycle_obs
from .level import RationalityLevel, rationality_level
from .milp import solve_ls_milp
from .pooled import PooledData, check_pooled, revealed_relations

__all__ = [
    "LSSolver",
    "ExactLS",
    "MILPLS",
    "ls_solver",
    "procedure2",
    "garp_pooled",
    "violating_cycle",
    "largest_subsets",
    "largest_subset",
    "partition_types",
    "Partition",
    "MAX_EXACT_MODELS",
]

#: The exact solver holds subsets of models as bit masks over ``2**M`` entries.
MAX_EXACT_MODELS = 20


# --------------------------------------------------------------------------- GARP on pooled data


def _model_mask(pooled: PooledData, models) -> int:
    if models is None:
        return (1 << pooled.n_models) - 1
    mask = 0
    for m in models:
        if m not in pooled.models:
            raise MoralkitError(f"unknown model {m!r}; pooled models are {list(pooled.models)}")
        mask |= 1 << pooled.models.index(m)
    return mask


def violating_cycle(pooled: PooledData, e: float = 1.0, models=None) -> np.ndarray:
    """Indices of the observations of a GARP_e-violating cycle, or an empty array.

    The cycle ``u -> v -> ... -> u`` starts with a strict edge ``u P0_e v``
    followed by a path of R0_e edges back to ``u``.

    Parameters
    ----------
    pooled : PooledData
    e : float, Fraction or RationalityLevel in [0, 1]
        Rationality level.
    models : iterable of str, optional
        Check only the observations of these models (default all).

    References
    ----------
    Seror (2025), Definitions 1-2.
    """
    R0, P0 = revealed_relations(pooled, e)
    mask = _model_mask(pooled, models)
    inc = ((mask >> pooled.obs_model) & 1).astype(bool)
    return violating_cycle_obs(R0, P0, inc)


def garp_pooled(pooled: PooledData, e: float = 1.0, models=None) -> bool:
    """True when the pooled observations of ``models`` satisfy GARP_e (Definition 2)."""
    return len(violating_cycle(pooled, e, models)) == 0


# --------------------------------------------------------------------------- exact LS(e)


def _popcount(a: np.ndarray) -> np.ndarray:
    c = np.zeros(a.shape, dtype=np.int64)
    b = a.copy()
    while b.any():
        c += b & 1
        b >>= 1
    return c


@lru_cache(maxsize=None)
def _mask_table(n_models: int) -> tuple[np.ndarray, np.ndarray]:
    """``(masks, size)``: every bit mask over ``n_models`` models and its number of models (read-only).
    Shared by every :class:`ExactLS` of that size: the permutation approach builds one per draw."""
    masks = np.arange(1 << n_models, dtype=np.int64)
    size = _popcount(masks)
    masks.flags.writeable = False
    size.flags.writeable = False
    return masks, size


class ExactLS:
    """Exact LS(e) by cuts over subsets of models (the solver of this module's docstring); an :class:`LSSolver`.

    Its state (the cuts found) is reused across calls, because Procedure 2 and
    the tie enumeration ask it about the same pooled graph many times; the
    permutation approach builds one per synthetic dataset.

    Parameters
    ----------
    R0, P0 : ndarray (n, n) of bool
        Relations of the pooled observations (:func:`revealed_relations`).
    owner : ndarray (n,) of int
        Model index of each observation (:attr:`PooledData.obs_model`).
    n_models : int
        At most :data:`MAX_EXACT_MODELS` (subsets are bit masks over the models).
    max_tries : int
        Strict edges tried per violating component when looking for a cut with few models.
    """

    def __init__(self, R0, P0, owner, n_models, max_tries=4):
        if n_models > MAX_EXACT_MODELS:
            raise MoralkitError(f"the exact solver handles at most {MAX_EXACT_MODELS} models, got {n_models}; "
                                "use solver='highs' (MILP of Proposition 1) for more models")
        self.R0 = np.ascontiguousarray(R0)
        self.P0 = np.ascontiguousarray(P0)
        self.owner = np.ascontiguousarray(owner, dtype=np.int64)
        self.M = n_models
        self.masks, self.size = _mask_table(int(n_models))
        self.feasible = np.ones(1 << n_models, dtype=bool)  # satisfies every cut so far
        self.consistent = np.zeros(1 << n_models, dtype=bool)  # known GARP_e-consistent
        self.consistent[0] = True
        self.max_tries = max_tries
        self.n_checks = 0

    def max_subsets(self, within: int) -> list[int]:
        """Every maximum GARP_e-consistent subset of the models in the bit mask ``within``, in increasing
        bit-mask order (``[0]`` when none is consistent on its own); the cuts found are kept."""
        good, n = _max_subsets(self.R0, self.P0, self.owner, self.masks, self.size, self.feasible,
                               self.consistent, np.int64(within), self.max_tries)
        self.n_checks += int(n)
        return good.tolist()


class MILPLS:
    """LS(e) by a MILP solver (:mod:`moralkit.psm.milp`); an :class:`LSSolver`.

    Each call of :meth:`max_subsets` solves :func:`solve_ls_milp` with
    ``all_optima=True`` among the models of a bit mask, and passes on the cycle
    cuts found so far (``formulation="cuts"``), so later steps of Procedure 2
    start from them.

    Parameters
    ----------
    pooled : PooledData
    e : float, Fraction or RationalityLevel in [0, 1]
    solver : {"highs", "glpk", "gurobi", "cbc"}, default "highs"
    time_limit : float, optional
        Seconds per MILP; a MILP stopped before proving optimality raises ``RuntimeError``.
    formulation : {"cuts", "prop1"}, default "cuts"

    References
    ----------
    Seror (2025), Section 2.4 (Procedure 2); Appendix A.1, Proposition 1.
    """

    def __init__(self, pooled: PooledData, e: float | RationalityLevel, *, solver: str = "highs",
                 time_limit: float | None = None, formulation: str = "cuts"):
        self.pooled, self.e = pooled, rationality_level(e)
        self.solver, self.time_limit, self.formulation = solver, time_limit, formulation
        self.cuts = ()

    def max_subsets(self, within: int) -> list[int]:
        """Every maximum subset of the models in the bit mask ``within``, in increasing bit-mask order
        (``[0]`` when none is consistent on its own)."""
        models = self.pooled.models
        res = solve_ls_milp(self.pooled, self.e, within=_mask_to_models(models, within),
                            solver=self.solver, time_limit=self.time_limit, formulation=self.formulation,
                            all_optima=True, cuts=self.cuts)
        if not res.optimal:
            raise RuntimeError(f"the {self.solver} MILP stopped ({res.status}) before proving optimality "
                               f"after {res.wall_s:.1f} s; raise time_limit or use solver='exact'")
        self.cuts = res.cuts
        return [sum(1 << models.index(m) for m in best) for best in res.all_models]


def _mask_to_models(pooled_models, mask: int) -> tuple:
    return tuple(m for i, m in enumerate(pooled_models) if (mask >> i) & 1)


def _resolve_within(pooled: PooledData, within) -> int:
    return _model_mask(pooled, within)


def largest_subsets(pooled: PooledData, e: float = 1.0, within=None) -> list[tuple]:
    """All maximum subsets of models whose pooled data satisfy GARP_e: LS(e), eq. (5).

    Exact, without a MILP (see the module docstring).

    Parameters
    ----------
    pooled : PooledData
        From :func:`moralkit.psm.pooled.pool`.
    e : float, Fraction or RationalityLevel in [0, 1]
        Rationality level of the partition.
    within : iterable of str, optional
        The set W of models to choose from (default all pooled models).

    Returns
    -------
    list of tuple of str
        Every subset of maximum size, in increasing bit-mask order. ``[()]`` when
        no model of W satisfies GARP_e on its own.

    References
    ----------
    Seror (2025), Section 2.4, optimisation (5); Appendix A.1 (the MILP it matches).
    """
    check_pooled(pooled)
    R0, P0 = revealed_relations(pooled, e)
    solver = ExactLS(R0, P0, pooled.obs_model, pooled.n_models)
    return [_mask_to_models(pooled.models, c) for c in solver.max_subsets(_resolve_within(pooled, within))]


def largest_subset(pooled: PooledData, e: float = 1.0, within=None, *, solver: str = "exact",
                   seed=None, time_limit: float | None = None, formulation: str = "cuts") -> tuple:
    """One largest jointly GARP_e-consistent subset of models, LS(e).

    Parameters
    ----------
    pooled : PooledData
    e : float, Fraction or RationalityLevel in [0, 1]
    within : iterable of str, optional
        The set W (default all pooled models).
    solver : {"exact", "highs", "glpk", "gurobi", "cbc"}
        ``"exact"`` (default) uses the cut solver of this module; the others
        solve a MILP (:func:`moralkit.psm.milp.solve_ls_milp`). Ties are
        broken uniformly at random with ``seed`` in both cases.
    seed : int, numpy Generator or None
        Randomness for ties.
    time_limit : float, optional
        Seconds, MILP solvers only.
    formulation : {"cuts", "prop1"}, default "cuts"
        MILP solvers only.

    Returns
    -------
    tuple of str

    References
    ----------
    Seror (2025), Section 2.4, optimisation (5); Appendix A.1, Proposition 1.
    """
    part = partition_types(pooled, e, solver=solver, seed=seed, time_limit=time_limit,
                           within=within, max_types=1, formulation=formulation)
    return part.types[0] if part.types else ()


@dataclass
class Partition:
    """Result of Procedure 2.

    Attributes
    ----------
    types : list of tuple of str
        LS_1(e), LS_2(e), ... in the order found; together they cover W once.
    self_inconsistent : tuple of str
        Models that violate GARP_e on their own; each forms its own type,
        appended after the others (Procedure 2 cannot place them: LS(e) of a
        set made only of such models is empty).
    n_ties : list of int
        Number of maximum subsets available at each step (1 = unique).
    e : float
    solver : str
    """

    types: list
    self_inconsistent: tuple
    n_ties: list
    e: float
    solver: str

    @property
    def n_types(self) -> int:
        return len(self.types)

    def labels(self) -> dict:
        """``{model: type number}`` (0-based, in the order types were found)."""
        return {m: k for k, t in enumerate(self.types) for m in t}


def _rng(seed):
    return as_generator(seed)


class LSSolver(Protocol):
    """What Procedure 2 asks of an LS(e) solver: every maximum subset of a set of models.

    Subsets of models are bit masks over the pooled models (bit ``i`` is
    ``pooled.models[i]``). Two solvers implement it: :class:`ExactLS` (this
    module) and :class:`MILPLS` (the MILP of Proposition 1 or its cut
    formulation, :mod:`moralkit.psm.milp`); :func:`ls_solver` builds either by name.
    """

    def max_subsets(self, within: int) -> list[int]:
        """Every maximum GARP_e-consistent subset of the models in ``within``, in increasing
        bit-mask order; ``[0]`` when no model of ``within`` is consistent on its own."""
        ...


def ls_solver(pooled: PooledData, e: float, solver: str = "exact", *, time_limit: float | None = None,
              formulation: str = "cuts") -> LSSolver:
    """The LS(e) solver called ``solver`` on ``pooled`` at level ``e`` (see :class:`LSSolver`).

    Parameters
    ----------
    pooled : PooledData
    e : float, Fraction or RationalityLevel in [0, 1]
    solver : {"exact", "highs", "glpk", "gurobi", "cbc"}, default "exact"
        ``"exact"``: :class:`ExactLS`; the others: :class:`MILPLS`.
    time_limit : float, optional
        Seconds per MILP (MILP solvers only).
    formulation : {"cuts", "prop1"}, default "cuts"
        MILP solvers only.
    """
    if solver == "exact":
        R0, P0 = revealed_relations(pooled, e)
        return ExactLS(R0, P0, pooled.obs_model, pooled.n_models)
    return MILPLS(pooled, e, solver=solver, time_limit=time_limit, formulation=formulation)


def procedure2(ls: LSSolver, W: int, rng, max_types=None):
    """Procedure 2 on bit masks, with any LS(e) solver: remove LS(e) until no model is left.

    Parameters
    ----------
    ls : LSSolver
        :class:`ExactLS` or :class:`MILPLS` (:func:`ls_solver`).
    W : int
        Bit mask of the models to partition.
    rng : numpy.random.Generator
        Breaks ties between maximum subsets uniformly at random (the same draw
        for every solver, since each lists the maximum subsets in bit-mask order).
    max_types : int, optional
        Stop after this many types.

    Returns
    -------
    picks : list of int
        The type masks LS_1(e), LS_2(e), ... in the order found.
    n_ties : list of int
        Number of maximum subsets at each step.
    W : int
        Mask of the models left (those violating GARP_e on their own).

    References
    ----------
    Seror (2025), Section 2.4, Procedure 2.
    """
    picks, n_ties = [], []
    while W and (max_types is None or len(picks) < max_types):
        best = ls.max_subsets(W)
        if best == [0]:
            break
        pick = best[int(rng.integers(len(best)))] if len(best) > 1 else best[0]
        picks.append(pick)
        n_ties.append(len(best))
        W &= ~pick
    return picks, n_ties, W


def partition_types(pooled: PooledData, e: float = 1.0, *, solver: str = "exact", seed=None,
                    time_limit: float | None = None, within=None, max_types: int | None = None,
                    formulation: str = "cuts") -> Partition:
    """Procedure 2: partition models into types by removing LS(e) until none is left.

    Step k finds LS_k(e) of the models not yet assigned, optimisation (5), and
    removes it. Ties between maximum subsets are broken uniformly at random
    with the run's random generator (``seed``), the same way for every
    solver (a MILP solver enumerates every maximum subset), so the exact
    solver and a MILP give the same partition for the same seed. A model violating GARP_e on its own cannot
    join any type; once only such models remain each becomes its own type
    (listed in ``Partition.self_inconsistent``).

    Parameters
    ----------
    pooled : PooledData
        Pooled observations (:func:`moralkit.psm.pooled.pool`).
    e : float, Fraction or RationalityLevel in [0, 1]
        Rationality level of the partition.
    solver : {"exact", "highs", "glpk", "gurobi", "cbc"}, default "exact"
    seed : int, numpy Generator or None
        Random generator for tie-breaking.
    time_limit : float, optional
        Seconds per MILP (MILP solvers); a MILP stopped by it before proving
        optimality raises ``RuntimeError``.
    formulation : {"cuts", "prop1"}, default "cuts"
        MILP solvers only (:func:`moralkit.psm.milp.solve_ls_milp`).
    within : iterable of str, optional
        The set W to partition (default all pooled models).
    max_types : int, optional
        Stop after this many types (``1`` gives LS(e) only).

    Returns
    -------
    Partition

    References
    ----------
    Seror (2025), Section 2.4, Procedure 2 and optimisation (5); Appendix A.1.

    Examples
    --------
    >>> from moralkit.psm.pooled import pool
    >>> from moralkit.psm.simulate import QuadraticAgent, simulate_quadratic, simulate_random
    >>> agent = QuadraticAgent(a=[0.2] * 5, b=[2.5] * 5)
    >>> pooled = pool({"sim-a": simulate_quadratic(agent, 0, model="sim-a"),
    ...                "sim-r": simulate_random(0, seed=1, model="sim-r")})
    >>> partition_types(pooled, e=0.9, seed=0).types  # sim-r violates GARP_0.9 on its own
    [('sim-a',), ('sim-r',)]
    """
    check_pooled(pooled)
    lv = rationality_level(e)
    if pooled.n_models < 1:
        raise MoralkitError("no models to partition")
    rng = _rng(seed)
    W = _resolve_within(pooled, within)
    ls = ls_solver(pooled, lv, solver, time_limit=time_limit, formulation=formulation)
    picks, n_ties, W = procedure2(ls, W, rng, max_types)
    types = [_mask_to_models(pooled.models, c) for c in picks]
    rest = _mask_to_models(pooled.models, W) if max_types is None else ()
    for m in rest:
        types.append((m,))
        n_ties.append(1)
    return Partition(types=types, self_inconsistent=rest, n_ties=n_ties, e=lv.value, solver=solver)
