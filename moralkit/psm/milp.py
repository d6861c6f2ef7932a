"""The MILP of Proposition 1 (Appendix A.1) for LS(e), in Pyomo, with exact strict inequalities.

For the pooled rounds ``i, j`` of the models in W (:class:`moralkit.psm.pooled.PooledData`),
with ``E[i, j] = p^i . q^j_{o(i)}``, binaries ``x^m`` (model m in LS(e)) and
``psi^{i,j}``, utilities ``U^i in [0, 1)`` and a big-M ``A > max_i E[i, i]``::

    max  sum_m x^m
    (IP1)  U^i - U^j < psi^{i,j}
    (IP2)  psi^{i,j} - 1 <= U^i - U^j
    (IP3)  x^{m(i)} e E[i, i] - E[i, j] < psi^{i,j} A
    (IP4)  (psi^{i,j} - 1) A <= E[j, i] - x^{m(j)} e E[j, j]

for all ordered pairs ``(i, j)`` (the diagonal included, as printed; it only
forces ``psi^{i,i} = 1``).

Two formulations (``formulation=``)
-----------------------------------
``"prop1"``
    IP1-IP4 literally, one constraint of each per ordered pair of pooled
    rounds (``4 n^2`` constraints, ``n^2`` binaries ``psi``).
``"cuts"`` (default)
    Constraint generation over ``x`` only: a master problem
    ``max sum_m x^m`` subject to ``sum_{m in S} x^m <= |S| - 1`` ("not all of
    S") for every set S of models owning a GARP_e-violating cycle found so far,
    solved by the same Pyomo solver; its optimum is checked exactly against
    GARP_e on the pooled data (a compiled SCC search), a violating cycle adds a
    cut, and the loop stops when the optimum passes. The master is a
    relaxation of optimisation (5), so an optimum that passes is LS(e). It
    needs a few master solves of ``M`` binaries instead of one MILP with
    ``n^2`` binaries. The master starts with the cuts of every single model
    and every pair that violates GARP_e (``M (M + 1) / 2`` compiled checks).

Both return the same |LS(e)| as the exact solver of :mod:`moralkit.psm.partition`
(tested on every boundary level, below). With ``all_optima=True`` every maximum
subset is enumerated (no-good cuts), so Procedure 2 can break ties exactly as
the exact solver does.

Exact strict inequalities
-------------------------
A MILP solver cannot hold ``<`` and works to a tolerance (~1e-6), so a strict
inequality is written as an integer inequality with a gap of at least 1:

* ``e`` is first converted exactly as the exact solver does: a float is the
  binary number it holds (``Fraction(0.6666666666666666)`` is *below* 2/3, so
  at that level ``8 <= 12 e`` is false).
* (IP3)/(IP4): the only thing ``e`` decides is how ``c_i = e E[i, i]`` compares
  with the integer expenditures ``E[i, j]``. Let ``t_i = 2 c_i`` when ``c_i``
  is an integer and ``t_i = 2 floor(c_i) + 1`` otherwise. Then for every
  integer ``v``, ``t_i - 2 v`` has the sign of ``c_i - v`` (both ``>=`` and
  ``>``), so after multiplying by 2 every coefficient is an integer and
  ``x t_i - 2 E[i, j] < 2 A psi`` is exactly ``x t_i - 2 E[i, j] <= 2 A psi - 1``.
  (Scaling literally by e's denominator would give coefficients of order
  ``2^53 E`` for a float ``e``, beyond a double's precision; ``t_i`` keeps them
  below ``2 (A + 1)``, about 130 for the PSM.)
* (IP1)/(IP2): ``U`` is scaled by ``n`` (``U in [0, n - 1]``), so
  ``U^i - U^j <= n psi - 1``; any weak order of at most ``n`` levels fits.

``A = max_i E[i, i] + max(0, -min E) + 1``. Expenditures must be integers
(they are for PSM data: integer prices and answers).

Solvers
-------
``solver=`` names one of :data:`moralkit.psm.milp_solvers.SOLVERS` (how to install each is in
:mod:`moralkit.psm.milp_solvers`). The termination condition is checked before any value is read,
and every subset returned is re-checked against GARP_e exactly.

References
----------
Seror, A. (2025). *The Moral Mind(s) of Large Language Models*, Appendix A.1,
Proposition 1 and Corollary 1; Section 2.4, optimisation (5).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ..errors import MoralkitError
from ._partition_kernels import violation_models
from .level import RationalityLevel, rationality_level
from .milp_solvers import get_solver, solve_once
from .pooled import PooledData, check_pooled, revealed_relations

__all__ = [
    "FORMULATIONS",
    "MILPResult",
    "build_ls_model",
    "build_master_model",
    "integer_thresholds",
    "solve_ls_milp",
]

#: Formulations accepted by :func:`solve_ls_milp` (see the module docstring).
FORMULATIONS = ("cuts", "prop1")

@dataclass
class MILPResult:
    """Outcome of one LS(e) MILP.

    Attributes
    ----------
    models : tuple of str or None
        The set LS(e) read from ``x`` (``None`` when the solver returned no solution).
    status : str
        ``"optimal"``, ``"time_limit"`` (a feasible, not proven optimal
        solution), ``"time_limit_no_solution"``.
    optimal : bool
    objective : float or None
    wall_s : float
        Build + solve time in seconds.
    n_vars, n_cons : int
        Size of the (last) MILP solved.
    solver : str
    build_s : float
        Time spent building Pyomo models.
    formulation : str
        ``"prop1"`` or ``"cuts"``.
    n_solves : int
        MILPs solved (master problems for ``"cuts"``, plus no-good re-solves).
    all_models : list of tuple of str or None
        With ``all_optima=True``: every maximum subset, in increasing bit-mask
        order of the pooled models (the order of
        :func:`moralkit.psm.partition.largest_subsets`).
    cuts : tuple of int
        ``"cuts"`` only: the cycle cuts found, as bit masks over the pooled
        models; pass them back (``cuts=``) to reuse them in Procedure 2.
    """

    models: tuple | None
    status: str
    optimal: bool
    objective: float | None
    wall_s: float
    n_vars: int
    n_cons: int
    solver: str
    build_s: float = 0.0
    formulation: str = "prop1"
    n_solves: int = 1
    all_models: list | None = None
    cuts: tuple = ()


def integer_thresholds(own, e) -> np.ndarray:
    """Doubled integer thresholds ``t_i`` with ``sign(t_i - 2 v) == sign(e own_i - v)`` for every integer ``v``.

    ``t_i = 2 e own_i`` when ``e own_i`` is an integer, else ``2 floor(e own_i) + 1``
    (computed with Fractions; ``e`` as :func:`~moralkit.psm.level.rationality_level` converts it).

    Parameters
    ----------
    own : array_like of int
        Own expenditures ``E[i, i]``.
    e : float, Fraction or RationalityLevel

    Examples
    --------
    >>> integer_thresholds([12, 12], 2 / 3).tolist()  # 12 x float(2/3) lies in (7, 8)
    [15, 15]
    >>> integer_thresholds([12], 0.75).tolist()  # 12 x 0.75 = 9 exactly
    [18]
    """
    ef = rationality_level(e).exact
    out = []
    for v in np.asarray(own).tolist():
        if int(v) != v:
            raise MoralkitError("expenditures must be integers for the exact MILP (PSM data are)")
        c = ef * int(v)
        out.append(2 * c.numerator if c.denominator == 1 else 2 * (c.numerator // c.denominator) + 1)
    return np.array(out, dtype=np.int64)


def _sub_problem(pooled: PooledData, within):
    names = list(pooled.models) if within is None else list(within)
    for m in names:
        if m not in pooled.models:
            raise MoralkitError(f"unknown model {m!r}; pooled models are {list(pooled.models)}")
    midx = [pooled.models.index(m) for m in names]
    obs = np.nonzero(np.isin(pooled.obs_model, midx))[0]
    E = np.asarray(pooled.E)
    if E.size and not np.issubdtype(E.dtype, np.integer):
        if not np.array_equal(E, np.round(E)):
            raise MoralkitError("the pooled expenditures must be integers for the exact MILP")
        E = E.astype(np.int64)
    E = E[np.ix_(obs, obs)]
    owner = [names.index(pooled.models[int(k)]) for k in pooled.obs_model[obs]]
    return names, obs, E, owner


def build_ls_model(pooled: PooledData, e: float = 1.0, within=None):
    """The Pyomo model of Proposition 1 for the models ``within`` (default all), in exact integers.

    Returns
    -------
    pyomo.environ.ConcreteModel
        Variables ``x[m]`` (models), ``psi[i, j]``, ``U[i]`` (scaled by ``n``:
        ``U in [0, n - 1]``); constraints ``IP1``..``IP4`` multiplied out to
        integer coefficients (module docstring); objective ``size`` (maximise
        ``sum_m x[m]``). ``model.rounds`` maps the MILP's round index to pooled
        observation, ``model.model_names`` lists the models, ``model.t`` holds
        the thresholds of :func:`integer_thresholds` and ``model.A`` the big-M.

    References
    ----------
    Seror (2025), Appendix A.1, Proposition 1.
    """
    import pyomo.environ as pyo

    check_pooled(pooled)
    ef = rationality_level(e).exact
    names, obs, E, owner = _sub_problem(pooled, within)
    n = len(obs)
    own = np.diag(E)
    t = integer_thresholds(own, ef).tolist()
    A = (int(own.max()) + max(0, -int(E.min())) + 1) if n else 1
    E2 = (2 * E).tolist()
    A2 = 2 * A

    mdl = pyo.ConcreteModel(name="LS(e) Proposition 1")
    mdl.R = pyo.RangeSet(0, n - 1)
    mdl.W = pyo.RangeSet(0, len(names) - 1)
    mdl.x = pyo.Var(mdl.W, within=pyo.Binary)
    mdl.psi = pyo.Var(mdl.R, mdl.R, within=pyo.Binary)
    mdl.U = pyo.Var(mdl.R, bounds=(0, max(n - 1, 0)))
    mdl.A, mdl.t, mdl.e = A, t, ef
    mdl.rounds = obs
    mdl.model_names = names
    x, psi, U = mdl.x, mdl.psi, mdl.U

    def ip1(m, i, j):  # U^i - U^j < psi (U scaled by n)
        return U[i] - U[j] <= n * psi[i, j] - 1

    def ip2(m, i, j):
        return n * (psi[i, j] - 1) <= U[i] - U[j]

    def ip3(m, i, j):  # x e E[i,i] - E[i,j] < psi A, times 2, e E[i,i] replaced by t_i / 2
        return t[i] * x[owner[i]] - E2[i][j] <= A2 * psi[i, j] - 1

    def ip4(m, i, j):
        return A2 * (psi[i, j] - 1) <= E2[j][i] - t[j] * x[owner[j]]

    mdl.IP1 = pyo.Constraint(mdl.R, mdl.R, rule=ip1)
    mdl.IP2 = pyo.Constraint(mdl.R, mdl.R, rule=ip2)
    mdl.IP3 = pyo.Constraint(mdl.R, mdl.R, rule=ip3)
    mdl.IP4 = pyo.Constraint(mdl.R, mdl.R, rule=ip4)
    mdl.size = pyo.Objective(expr=sum(x[w] for w in mdl.W), sense=pyo.maximize)
    mdl.nogood = pyo.ConstraintList()
    return mdl


def build_master_model(model_names):
    """The master problem of ``formulation="cuts"``: ``max sum_m x[m]`` over binaries, with an
    (initially empty) ``ConstraintList`` ``cuts`` for "not all of S" and ``nogood`` for
    tie enumeration."""
    import pyomo.environ as pyo

    mdl = pyo.ConcreteModel(name="LS(e) master")
    mdl.W = pyo.RangeSet(0, len(model_names) - 1)
    mdl.x = pyo.Var(mdl.W, within=pyo.Binary)
    mdl.size = pyo.Objective(expr=sum(mdl.x[w] for w in mdl.W), sense=pyo.maximize)
    mdl.cuts = pyo.ConstraintList()
    mdl.nogood = pyo.ConstraintList()
    mdl.model_names = list(model_names)
    return mdl


def solve_ls_milp(pooled: PooledData, e: float = 1.0, within=None, *, solver: str = "highs",
                  formulation: str = "cuts", time_limit: float | None = None, tee: bool = False,
                  all_optima: bool = False, cuts=None) -> MILPResult:
    """Solve LS(e) among the models ``within`` with a MILP solver (Proposition 1, or cycle cuts).

    Parameters
    ----------
    pooled : PooledData
        Pooled observations (:func:`moralkit.psm.pooled.pool`).
    e : float in [0, 1]
        Rationality level; a float is the exact binary number it holds, as in
        the exact solver (:func:`~moralkit.psm.level.rationality_level`).
    within : iterable of str, optional
        The set W (default every pooled model).
    solver : {"highs", "glpk", "gurobi", "cbc"}, default "highs"
    formulation : {"cuts", "prop1"}, default "cuts"
        ``"prop1"``: the literal MILP of Proposition 1; ``"cuts"``: constraint
        generation over ``x`` with exact GARP_e checks (module docstring).
    time_limit : float, optional
        Seconds for the whole call; honoured by every solver.
    tee : bool
        Show the solver log.
    all_optima : bool, default False
        Enumerate every maximum subset (``result.all_models``) with no-good cuts.
    cuts : iterable of int, optional
        ``"cuts"`` only: cycle cuts (bit masks over ``pooled.models``) from an
        earlier call on the same pooled data and ``e``.

    Returns
    -------
    MILPResult
        ``optimal`` is True only when the solver proved optimality; values are
        read only when the solver reports a solution. Every subset returned is
        GARP_e-consistent (checked exactly).

    Raises
    ------
    ValueError
        Unknown or missing solver or formulation; non-integer expenditures; an
        instance too large for gurobipy's size-limited licence.

    References
    ----------
    Seror (2025), Appendix A.1, Proposition 1; Section 2.4, optimisation (5).

    Examples
    --------
    >>> from moralkit.psm.pooled import pool
    >>> from moralkit.psm.dataset import PSMDataset
    >>> from moralkit.psm.design import CORNERS, PRICES
    >>> def one(m, p, q):
    ...     return PSMDataset(model=m, corners=CORNERS[[0]], prices=PRICES[[p]], options=np.array([[q]]),
    ...                       chosen=np.array([1]), corner_index=[0], price_index=[p])
    >>> P = pool([one("A", 0, (4, 0, 0, 4, 0)), one("B", 1, (0, 4, 0, 4, 0))])  # each costs 8 at the other's prices
    >>> solve_ls_milp(P, 0.9, all_optima=True).all_models  # 0.9 x 12 > 8: a strict 2-cycle, two types
    [('A',), ('B',)]
    >>> solve_ls_milp(P, 2 / 3).models  # the float 2/3 x 12 < 8: no relation, one type
    ('A', 'B')
    """
    if time_limit is not None and not time_limit > 0:
        raise MoralkitError(f"time_limit must be a positive number of seconds, got {time_limit}")
    if formulation not in FORMULATIONS:
        raise MoralkitError(f"unknown formulation {formulation!r}; choose one of {FORMULATIONS}")
    check_pooled(pooled)
    opt = get_solver(solver)
    t0 = time.perf_counter()
    prob = _build_problem(pooled, rationality_level(e), within, formulation)
    build_s = time.perf_counter() - t0
    if formulation == "cuts":
        _seed_cuts(prob, cuts)
    deadline = None if time_limit is None else t0 + time_limit
    found, status, n_solves = _solve_loop(prob, opt, solver, deadline, tee, all_optima)
    if formulation == "cuts":
        prob.n_cons = len(prob.mdl.cuts) + len(prob.mdl.nogood)
    return _milp_result(prob, found, status, all_optima, solver, time.perf_counter() - t0, build_s, n_solves)


def _milp_result(prob, found, status, all_optima, solver, wall, build_s, n_solves) -> MILPResult:
    """Phase 4: the subsets found (bit masks) as model names; no values when the solver found none."""
    def models_of(mask):
        return tuple(m for i, m in enumerate(prob.pooled.models) if (mask >> i) & 1)

    if not found:
        return MILPResult(None, status, False, None, wall, prob.n_vars, prob.n_cons, solver, build_s,
                          prob.formulation, n_solves, None, tuple(prob.found_cuts))
    models = models_of(found[0])
    all_models = [models_of(m) for m in sorted(found)] if all_optima else None
    return MILPResult(models, status, status == "optimal", float(len(models)), wall, prob.n_vars, prob.n_cons,
                      solver, build_s, prob.formulation, n_solves, all_models, tuple(prob.found_cuts))


@dataclass
class _Problem:
    """One LS(e) MILP being solved: the Pyomo model, the exact relations that check its answers, the cuts."""

    pooled: PooledData
    formulation: str
    mdl: object
    names: list
    R0: np.ndarray
    P0: np.ndarray
    n_vars: int
    n_cons: int
    size_note: str
    known: set = field(default_factory=set)
    found_cuts: list = field(default_factory=list)

    @cached_property
    def bit(self) -> list:
        return [1 << self.pooled.models.index(m) for m in self.names]

    def violation(self, mask: int) -> int:
        """The models of a GARP_e violation among ``mask`` (0 when consistent), checked exactly."""
        return int(violation_models(self.R0, self.P0, self.pooled.obs_model, np.int64(mask), 4))

    def add_cut(self, S: int) -> None:
        members = [w for w, b in enumerate(self.bit) if S & b]
        self.mdl.cuts.add(sum(self.mdl.x[w] for w in members) <= len(members) - 1)
        self.known.add(S)
        self.found_cuts.append(int(S))


def _build_problem(pooled: PooledData, lv: RationalityLevel, within, formulation: str) -> _Problem:
    """Phase 1: the Pyomo model of ``formulation`` and the exact relations at the level ``lv``."""
    R0, P0 = revealed_relations(pooled, lv)
    if formulation == "prop1":
        mdl = build_ls_model(pooled, lv, within)
        names, n = mdl.model_names, len(mdl.rounds)
        n_vars, n_cons = len(names) + n * n + n, 4 * n * n
        return _Problem(pooled, formulation, mdl, names, R0, P0, n_vars, n_cons,
                        f"{n} pooled rounds: {n_vars} variables, {n_cons} constraints")
    names = _sub_problem(pooled, within)[0]
    return _Problem(pooled, formulation, build_master_model(names), names, R0, P0, len(names), 0,
                    f"master over {len(names)} models")


def _seed_cuts(prob: _Problem, cuts) -> None:
    """Phase 2 (``"cuts"``): the cuts of an earlier call, then the violations of every model and pair.

    The M (M + 1) / 2 compiled checks seed the master: with e binding most of LS(e)'s structure is
    there, so few master solves remain."""
    bit = prob.bit
    W_mask = sum(bit)
    for S in cuts or ():
        S = int(S)
        if S and (S & ~W_mask) == 0 and S not in prob.known:
            prob.add_cut(S)
    for a in range(len(bit)):
        for b in range(a, len(bit)):
            S = prob.violation(bit[a] | bit[b])
            if S and S not in prob.known:
                prob.add_cut(S)


def _solve_loop(prob: _Problem, opt, solver, deadline, tee, all_optima):
    """Phase 3: solve, check the subset exactly, cut or record it (no-good cuts for every optimum).

    Returns ``(found, status, n_solves)``: the consistent maximum subsets (bit masks) in the order found."""
    mdl, names, bit = prob.mdl, prob.names, prob.bit
    found, best_k, n_solves, status = [], None, 0, "optimal"
    while True:
        left = None if deadline is None else deadline - time.perf_counter()
        if left is not None and left <= 0:
            status = "time_limit" if found else "time_limit_no_solution"
            break
        st = solve_once(opt, mdl, solver, left, tee, prob.size_note)
        n_solves += 1
        if st != "optimal":
            status = st if not found else "time_limit"
            break
        chosen = [w for w in range(len(names)) if (mdl.x[w].value or 0) > 0.5]
        mask = sum(bit[w] for w in chosen)
        if best_k is not None and len(chosen) < best_k:
            break  # every maximum subset is known
        S = prob.violation(mask)  # exact GARP_e check
        if S and prob.formulation == "cuts":
            prob.add_cut(S)
            continue
        if S:  # pragma: no cover - prop1 is exact by construction
            raise RuntimeError(f"{solver} returned a subset that violates GARP_e; please report this instance")
        best_k = len(chosen)
        found.append(mask)
        if not all_optima or best_k == 0:
            break
        mdl.nogood.add(sum(1 - mdl.x[w] for w in chosen)
                       + sum(mdl.x[w] for w in range(len(names)) if w not in chosen) >= 1)
    return found, status, n_solves
