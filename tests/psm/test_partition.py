"""Pooled GARP_e, the exact LS(e) solver and Procedure 2 (moralkit.psm.partition).

All agents are SIMULATED (moralkit.psm.simulate) or hand-built; no LLM data.
"""

from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moralkit.psm.dataset import PSMDataset
from moralkit.psm.design import CORNERS, PRICES, make_design
from moralkit.psm.partition import (
    MAX_EXACT_MODELS,
    garp_pooled,
    largest_subset,
    largest_subsets,
    partition_types,
    violating_cycle,
)
from moralkit.psm.permutation import draw_rounds
from moralkit.psm.pooled import PooledData, pool, revealed_relations
from moralkit.psm.rp import ccei, garp
from moralkit.psm.simulate import random_quadratic_agent, simulate_quadratic, simulate_random

# --------------------------------------------------------------------------- hand-built instances

def one_round(model, price_index, bundle, corner_index=0):
    """A PSM dataset with one answered round whose only option is ``bundle``."""
    return PSMDataset(model=model, corners=CORNERS[[corner_index]], prices=PRICES[[price_index]],
                      options=np.array([[bundle]]), chosen=np.array([1]), corner_index=[corner_index],
                      price_index=[price_index])


# Corner 0 (consumer coordinates). A answers x at p1 = (2,1,1,1,1); B answers y at p2 = (1,2,1,1,1).
# p1.x = p2.y = 12 (on budget); p1.y = 8 and p2.x = 8: each reveals its own answer strictly preferred
# to the other's when e > 8/12, a GARP_e violation with two models -> two types; for e < 8/12 no relation.
X = (4, 0, 0, 4, 0)
Y = (0, 4, 0, 4, 0)
# C answers at corner (5,5,5,5,5) with p3: z = (5,5,1,5,1); z costs 22 at A's and B's prices and x, y
# cost 22 at C's: C is unrelated to both, so LS(1) is {A, C} or {B, C} (a tie).
Z = (5, 5, 1, 5, 1)


@pytest.fixture(scope="module")
def opposite():
    return {"A": one_round("A", 0, X), "B": one_round("B", 1, Y), "C": one_round("C", 2, Z, corner_index=31)}


def test_hand_built_expenditures(opposite):
    P = pool(opposite)
    assert P.E.tolist() == [[12, 8, 22], [8, 12, 22], [22, 22, 12]]


def test_opposite_models_are_two_types(opposite):
    P = pool({k: opposite[k] for k in "AB"})
    assert not garp_pooled(P, 1.0)
    assert garp_pooled(P, 1.0, ["A"]) and garp_pooled(P, 1.0, ["B"])
    assert largest_subsets(P, 1.0) == [("A",), ("B",)]
    part = partition_types(P, 1.0, seed=0)
    assert part.n_types == 2 and sorted(part.types) == [("A",), ("B",)]
    # threshold: violation iff e > 8/12
    assert partition_types(P, 0.5, seed=0).types == [("A", "B")]
    assert partition_types(P, 8 / 12, seed=0).n_types == 1
    assert partition_types(P, 8 / 12 + 1e-9, seed=0).n_types == 2


def test_ties_are_enumerated_and_broken_at_random(opposite):
    P = pool(opposite)
    assert largest_subsets(P, 1.0) == [("A", "C"), ("B", "C")]
    picks = {largest_subset(P, 1.0, seed=s) for s in range(40)}
    assert picks == {("A", "C"), ("B", "C")}
    parts = [partition_types(P, 1.0, seed=s) for s in range(5)]
    assert parts == [partition_types(P, 1.0, seed=s) for s in range(5)]  # reproducible
    for p in parts:
        assert p.n_ties[0] == 2 and p.n_types == 2


def test_identical_models_are_one_type():
    d = make_design(1)
    ds = simulate_quadratic(random_quadratic_agent(5), d, noise=0.05, seed=5, model="sim-a")
    e = ccei(ds) - 1e-9  # the dataset satisfies GARP_e for every e below its CCEI (a supremum)
    copies = {f"sim-copy{i}": PSMDataset(**{**ds.__dict__, "model": f"sim-copy{i}"}) for i in range(4)}
    P = pool(copies)
    assert P.n_obs == 4 * ds.n_obs
    assert largest_subsets(P, e) == [tuple(copies)]
    assert partition_types(P, e, seed=0).types == [tuple(copies)]


def test_self_inconsistent_models_get_their_own_type():
    d = make_design(2)
    rnd = {f"sim-r{i}": simulate_random(d, seed=i, model=f"sim-r{i}") for i in range(3)}
    P = pool(rnd)
    assert not any(garp_pooled(P, 1.0, [m]) for m in rnd)
    part = partition_types(P, 1.0, seed=0)
    assert sorted(part.types) == [(m,) for m in rnd]
    assert part.self_inconsistent == tuple(rnd)
    assert largest_subsets(P, 1.0) == [()]


# --------------------------------------------------------------------------- cross-checks

def simulated_pool(seed, n_models=None, rho=None):
    rng = np.random.default_rng(seed)
    d = make_design(int(rng.integers(3)))
    M = int(rng.integers(2, 6)) if n_models is None else n_models
    ds = {}
    for i in range(M):
        if rng.random() < 0.3:
            ds[f"sim-r{i}"] = simulate_random(d, seed=rng, model=f"sim-r{i}")
        else:
            ds[f"sim-q{i}"] = simulate_quadratic(random_quadratic_agent(rng), d, noise=float(rng.choice([0, 0.05, 0.3])),
                                                 seed=rng, model=f"sim-q{i}")
    rho = int(rng.integers(3, 12)) if rho is None else rho
    return pool(ds, draw_rounds(ds, rho, rng)), rng


def brute_force_ls(P: PooledData, e):
    """Every subset checked with moralkit.psm.rp.garp (scipy SCC) on the pooled expenditure matrix."""
    best, size = [()], 0
    for k in range(1, P.n_models + 1):
        for B in combinations(range(P.n_models), k):
            obs = np.isin(P.obs_model, B)
            if garp(P.E[np.ix_(obs, obs)], e, same_bundle=P.choices[obs]):
                if k > size:
                    best, size = [], k
                best.append(tuple(P.models[i] for i in B))
    return best


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from([0.333, 0.6, 0.75, 0.9, 1.0]))
def test_exact_solver_matches_brute_force(seed, e):
    P, _ = simulated_pool(seed)
    assert sorted(largest_subsets(P, e)) == sorted(brute_force_ls(P, e))


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from([0.5, 0.8, 1.0]))
def test_garp_pooled_and_cycles(seed, e):
    P, rng = simulated_pool(seed)
    models = [m for m in P.models if rng.random() < 0.7] or [P.models[0]]
    obs = np.isin(P.obs_model, [P.models.index(m) for m in models])
    ok = garp(P.E[np.ix_(obs, obs)], e, same_bundle=P.choices[obs])
    assert garp_pooled(P, e, models) == ok
    cyc = violating_cycle(P, e, models)
    assert (len(cyc) == 0) == ok
    if len(cyc):
        R0, P0 = revealed_relations(P, e)
        assert obs[cyc].all()
        # u P0 v, then v R0 ... R0 u: the cycle printed as [v, ..., u]
        u, v = cyc[-1], cyc[0]
        assert P0[u, v]
        assert all(R0[a, b] for a, b in zip(cyc[:-1], cyc[1:]))


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from([0.333, 0.7, 0.9, 1.0]), st.integers(0, 3))
def test_procedure2_partitions_cover_every_model_once(seed, e, tie_seed):
    P, _ = simulated_pool(seed)
    part = partition_types(P, e, seed=tie_seed)
    flat = [m for t in part.types for m in t]
    assert sorted(flat) == sorted(P.models)
    assert len(flat) == len(set(flat))
    # each type is jointly consistent (self-inconsistent singletons excepted) and sizes never increase
    for t in part.types:
        if t[0] not in part.self_inconsistent:
            assert garp_pooled(P, e, t)
    sizes = [len(t) for t in part.types if t[0] not in part.self_inconsistent]
    assert sizes == sorted(sizes, reverse=True)
    # step k's type is a largest subset of the models left
    left = list(P.models)
    for t in part.types:
        if t[0] in part.self_inconsistent:
            break
        assert len(t) == len(largest_subsets(P, e, within=left)[0])
        left = [m for m in left if m not in t]
    assert part.labels().keys() == set(P.models)


def test_relations_conventions():
    P = pool({"A": one_round("A", 0, X), "A2": one_round("A2", 0, X)})
    R0, P0 = revealed_relations(P, 1.0)
    assert R0.all()  # same bundle and equal cost: weak both ways
    assert not P0.any()
    R0, P0 = revealed_relations(P, 0.5)
    assert R0.all() and not P0.any()  # the same-bundle clause keeps R0 (Definition 1)
    assert garp_pooled(P, 0.5)


def test_bad_input():
    P = pool({"A": one_round("A", 0, X)})
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        partition_types(P, 1.5)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        garp_pooled(P, -0.1)
    with pytest.raises(ValueError, match="unknown model"):
        garp_pooled(P, 1.0, ["nope"])
    with pytest.raises(ValueError, match="PooledData"):
        partition_types({"A": 1}, 1.0)
    with pytest.raises(ValueError, match="unknown solver"):
        partition_types(P, 1.0, solver="simplex")
    with pytest.raises(ValueError, match="no datasets"):
        pool({})
    ds = one_round("A", 0, X)
    unanswered = PSMDataset(model="U", corners=ds.corners, prices=ds.prices, options=ds.options,
                            chosen=np.array([0]))
    with pytest.raises(ValueError, match="unanswered"):
        pool({"U": unanswered}, rounds={"U": [0]})
    big = {f"M{i}": one_round(f"M{i}", 0, X) for i in range(MAX_EXACT_MODELS + 1)}
    with pytest.raises(ValueError, match="solver='highs'"):
        partition_types(pool(big), 1.0)


class _ScriptedLS:
    """An LSSolver whose answers are scripted: Procedure 2 must use nothing else of a solver."""

    def __init__(self, answers):
        self.answers, self.asked = list(answers), []

    def max_subsets(self, within):
        self.asked.append(within)
        return self.answers.pop(0)


def test_procedure2_is_one_loop_over_any_ls_solver():
    from moralkit.psm.partition import procedure2

    # 4 models: a 2-way tie {0,1} / {0,2} first; the draw picks one; then the remaining models
    rng_pick = int(np.random.default_rng(5).integers(2))
    first = [0b0011, 0b0101][rng_pick]
    second = 0b1111 & ~first & 0b0111  # the model of 0-2 left
    ls = _ScriptedLS([[0b0011, 0b0101], [second], [0]])
    picks, n_ties, left = procedure2(ls, 0b1111, np.random.default_rng(5))
    assert picks == [first, second] and n_ties == [2, 1]
    assert left == 0b1000  # model 3 is consistent with nobody, not even alone: left for its own type
    assert ls.asked == [0b1111, 0b1111 & ~first, 0b1000]
    # max_types stops the loop early and a unique answer takes no random draw
    ls = _ScriptedLS([[0b0110]])
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    assert procedure2(ls, 0b0111, rng, max_types=1) == ([0b0110], [1], 0b0001)
    assert rng.bit_generator.state == state


def test_ls_solver_names_the_solver():
    from moralkit.psm.partition import MILPLS, ExactLS, ls_solver

    P = pool({"A": one_round("A", 0, X), "B": one_round("B", 1, Y)})
    assert isinstance(ls_solver(P, 0.9), ExactLS)
    assert isinstance(ls_solver(P, 0.9, "highs"), MILPLS)
    assert ls_solver(P, 0.9).max_subsets(0b11) == [0b01, 0b10]  # 0.9 x 12 > 8: a strict 2-cycle, a tie
