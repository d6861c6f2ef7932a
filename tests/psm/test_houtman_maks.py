"""The exact Houtman–Maks index (moralkit.psm.houtman_maks): brute force, revpref and prefgraph.

Agents are SIMULATED (moralkit.psm.simulate) or random consumer data; no LLM data.
"""

from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moralkit.psm import rp
from moralkit.psm.design import make_design
from moralkit.psm.houtman_maks import (
    houtman_maks,
    houtman_maks_at_least,
    houtman_maks_index,
    houtman_maks_upper_bound,
)
from moralkit.psm.simulate import (
    random_quadratic_agent,
    simulate_quadratic,
    simulate_random,
)


def brute_force_hm(E, e=1):
    """Largest k such that some k-subset satisfies GARP_e (moralkit.psm.rp.garp, scipy SCC)."""
    T = len(E)
    for k in range(T, 0, -1):
        for S in combinations(range(T), k):
            idx = np.array(S)
            if rp.garp(E[np.ix_(idx, idx)], e):
                return k
    return 0


def _psm_subset(rng, T):
    d = make_design(int(rng.integers(3)))
    if rng.random() < 0.5:
        ds = simulate_random(d, seed=int(rng.integers(1 << 30)))
    else:
        ds = simulate_quadratic(random_quadratic_agent(int(rng.integers(1000))), d, noise=float(rng.choice([0.3, 1.0])),
                                seed=int(rng.integers(1 << 30)))
    E = rp.psm_expenditure_matrix(ds)
    idx = np.sort(rng.choice(len(E), T, replace=False))
    return E[np.ix_(idx, idx)]


@pytest.mark.parametrize("e", [1, 11 / 12, Fraction(11, 12)])
def test_matches_brute_force_on_psm_subsets(e):
    rng = np.random.default_rng(11)
    below = 0
    for _ in range(30):
        E = _psm_subset(rng, int(rng.integers(4, 10)))
        r = houtman_maks(E, e)
        assert r.n_kept == brute_force_hm(E, e)
        assert houtman_maks_upper_bound(E, e) >= r.n_kept
        assert houtman_maks_at_least(E, r.n_kept, e) and not houtman_maks_at_least(E, r.n_kept + 1, e)
        assert rp.garp(E[np.ix_(r.kept, r.kept)], e)
        assert r.index == Fraction(r.n_kept, len(E))
        assert sorted(np.concatenate([r.kept, r.removed]).tolist()) == list(range(len(E)))
        below += r.n_kept < len(E)
    assert below >= (10 if e == 1 else 2)  # the instances are not all consistent


def _consumer(rng, T, K=3):
    P = rng.uniform(0.5, 2.0, (T, K))
    Q = rng.uniform(0.0, 3.0, (T, K))
    return P, Q


def test_agrees_with_revpref_on_consumer_data():
    revpref = pytest.importorskip("revpref")
    pytest.importorskip("pulp")
    rng = np.random.default_rng(21)
    below = agree = 0
    for _ in range(40):
        P, Q = _consumer(rng, int(rng.integers(3, 13)))
        ours = houtman_maks(rp.consumer_expenditure_matrix(P, Q)).index
        agree += abs(revpref.RevealedPreference(P, Q).hmi("mtz") - float(ours)) <= 1e-12
        below += ours < 1
    assert agree == 40 and below >= 10


def test_agrees_with_prefgraph_on_consumer_data():
    """prefgraph's exact ("ilp") Houtman–Maks agrees on most datasets. Where it does not, brute force
    and revpref side with moralkit (prefgraph keeps a subset that violates GARP or removes a round too
    many: seen on 5 of 60 random datasets with seed 22, T = 3..24)."""
    prefgraph = pytest.importorskip("prefgraph")
    rng = np.random.default_rng(22)
    below = agree = 0
    n = 60
    for _ in range(n):
        P, Q = _consumer(rng, int(rng.integers(3, 13)))
        E = rp.consumer_expenditure_matrix(P, Q)
        ours = houtman_maks(E)
        theirs = prefgraph.compute_houtman_maks_index(prefgraph.ConsumerSession(prices=P, quantities=Q), method="ilp")
        if abs((1 - theirs.fraction) - float(ours.index)) <= 1e-12:
            agree += 1
        else:  # the referee: every subset checked with moralkit.psm.rp.garp
            assert ours.n_kept == brute_force_hm(E)
        below += ours.index < 1
    assert agree >= 0.9 * n and below >= 20


def test_full_psm_dataset_near_rational():
    """T = 160 rounds of a near-rational SIMULATED agent: exact and quick."""
    ds = simulate_quadratic(random_quadratic_agent(0), make_design(0), noise=0.05, seed=0)
    r = houtman_maks(ds)
    assert r.T == 160 and 0.5 < r.index < 1
    assert rp.garp(rp.psm_expenditure_matrix(ds)[np.ix_(r.kept, r.kept)])
    # one round more than the optimum: every way to add a removed round back violates GARP
    E = rp.psm_expenditure_matrix(ds)
    for k in r.removed[:10]:
        idx = np.sort(np.append(r.kept, k))
        assert not rp.garp(E[np.ix_(idx, idx)])


def test_consistent_data_and_bad_input():
    ds = simulate_quadratic(random_quadratic_agent(1), make_design(0), noise=0.0, seed=1)
    E = rp.psm_expenditure_matrix(ds)
    assert houtman_maks_index(E, rp.ccei_exact(E) - Fraction(1, 10**6)) == 1
    assert houtman_maks_index(np.array([[5]])) == 1
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        houtman_maks(E, 1.5)
    with pytest.raises(ValueError, match="square"):
        houtman_maks(np.ones((2, 3)))
    with pytest.raises(ValueError, match="time_limit"):
        houtman_maks(E, time_limit=0)


def test_table1_hm_column_is_additive():
    """Table 1 with the HM column: the CCEI columns are unchanged, and two near-rational SIMULATED agents
    beat every random dataset (each random dataset decided by the packing bound, no timeout)."""
    import pandas as pd

    from moralkit.psm.rationality import hm_random_choice_test, table1

    d = make_design(0)
    data = [simulate_quadratic(random_quadratic_agent(0), d, noise=0.05, seed=0, model="sim-a"),
            simulate_quadratic(random_quadratic_agent(1), d, noise=0.0, seed=1, model="sim-b")]
    base = table1(data, n_datasets=30, seed=0)
    tab = table1(data, n_datasets=30, seed=0, hm=True)
    pd.testing.assert_frame_equal(tab[list(base.columns)], base.to_frame())
    for m, ds in zip(["sim-a", "sim-b"], data):
        row = tab.set_index("model").loc[m]
        r = houtman_maks(ds)
        assert row["hm"] == float(r.index) and row["hm_exact"] == f"{r.n_kept}/{r.T}"
        assert row["alpha_hm"] == row["alpha_hm_low"] == row["alpha_hm_high"] == 0.0 and row["stars_hm"] == "***"
    res = hm_random_choice_test(data[0], n_datasets=30, seed=0)
    assert res.n_below == 30 and res.n_undecided == 0
    assert len(res.decisions) == 30 and set(res.decided_by) <= {"bound", "greedy", "exact"}
    assert res.n_exact == int((res.decided_by == "exact").sum())
    assert list(tab["n_hm_exact"]) == [tab.hm_results[m].n_exact for m in tab["model"]]


# --------------------------------------------------------------------------- branch-and-cut (issue 30)


def test_scip_and_cut_loop_agree_on_harder_psm_subsets():
    """The branch-and-cut (default) and the earlier cut loop over HiGHS are two independent exact methods."""
    rng = np.random.default_rng(30)
    hard = 0
    for _ in range(6):
        E = _psm_subset(rng, int(rng.integers(30, 45)))
        a, b = houtman_maks(E), houtman_maks(E, method="cuts")
        assert a.method == "scip" and b.method == "cuts"
        assert a.optimal and b.optimal and a.n_kept == b.n_kept == a.n_upper == b.n_upper
        assert rp.garp(E[np.ix_(a.kept, a.kept)]) and rp.garp(E[np.ix_(b.kept, b.kept)])
        hard += a.n_kept < 0.8 * len(E)
    assert hard >= 3  # far from consistent: the search has work to do


def test_time_limit_returns_bounds_not_a_guess():
    """A search stopped by the time limit says so, and returns a consistent subset and a proven upper bound."""
    ds = simulate_random(make_design(0), seed=9)  # a random chooser: thousands of nodes, never done in 10 ms
    E = rp.psm_expenditure_matrix(ds)
    for method in ("scip", "cuts"):
        r = houtman_maks(E, time_limit=0.01, method=method)
        assert not r.optimal and r.status == "timelimit"
        assert 0 < r.n_kept < r.n_upper <= houtman_maks_upper_bound(E)
        assert r.index < r.index_upper
        assert rp.garp(E[np.ix_(r.kept, r.kept)])
    with pytest.raises(ValueError, match="method"):
        houtman_maks(E, method="bogus")


def test_decision_says_what_decided_it():
    from moralkit.psm.houtman_maks import houtman_maks_decision

    rng = np.random.default_rng(31)
    seen = set()
    for _ in range(12):
        E = _psm_subset(rng, int(rng.integers(8, 30)))
        n = houtman_maks(E).n_kept
        for k in (n - 2, n, n + 1, n + 3):
            d = houtman_maks_decision(E, k)
            assert d.at_least == (n >= k)
            assert d.by in ("bound", "greedy", "exact")
            seen.add(d.by)
    assert seen == {"bound", "greedy", "exact"}


def test_warmup_reaches_the_kernels_the_notebooks_use():
    from moralkit.psm.warmup import dispatchers, warm_kernels

    r = warm_kernels()
    assert set(r["compiled"]) | set(r["not_compiled"]) == set(dispatchers())
    for k in ("_rp_kernels.relation_signs", "_rp_kernels.scc_labels", "_partition_kernels.max_subsets",
              "_hm_kernels.shortest_violating_cycles", "_hm_kernels.greedy_consistent",
              "_subset_kernels.int_ratio_levels", "_partition_kernels.violating_cycle_obs",
              "_rp_kernels.min_cycle_ratio", "_nlls_kernels.exact_corner"):
        assert k in r["compiled"]


def test_combinatorial_bnb_and_scip_each_match_brute_force(monkeypatch):
    """The combinatorial branch-and-bound alone (it finishes on small components) and SCIP alone (the
    branch-and-bound given one node) both give the brute-force optimum, and decide ">= k" alike."""
    import moralkit.psm._hm_scip as hm

    rng = np.random.default_rng(5)
    Es = [_psm_subset(rng, int(rng.integers(6, 10))) for _ in range(12)]
    truth = [brute_force_hm(E) for E in Es]
    assert sum(t < len(E) for t, E in zip(truth, Es)) >= 6
    for nodes in (1, 10**6):
        monkeypatch.setattr(hm, "HEUR_NODES", nodes)
        monkeypatch.setattr(hm, "DECISION_NODES", nodes)
        for E, t in zip(Es, truth):
            assert houtman_maks(E).n_kept == t
            assert houtman_maks_at_least(E, t) and not houtman_maks_at_least(E, t + 1)


def test_hm_alpha_with_a_time_limited_own_hm_is_an_interval():
    """A respondent whose own HM the time limit leaves bounded: each random dataset is decided at both
    ends of [kept, upper], and alpha is an interval (NaN as a point), never a guess."""
    from moralkit.psm.rationality import hm_random_choice_test

    ds = simulate_random(make_design(0), seed=9, model="sim-random")  # a SIMULATED random chooser
    r = hm_random_choice_test(ds, n_datasets=3, seed=0, time_limit=0.2, own_time_limit=0.01)
    assert not r.own_exact and r.n_kept < r.n_upper
    assert r.hm_text == f"[{r.n_kept}, {r.n_upper}]/160"
    assert r.n_at_least + r.n_below + r.n_undecided == 3 and set(r.decisions) <= {-1, 0, 1}
    assert r.alpha_low <= r.alpha_high


def test_ccei_kernels_compile_one_layout_for_fortran_input():
    """A Fortran-ordered expenditure matrix reaches the CCEI kernels C-ordered, so that a first run
    compiles one specialisation of each, not a C and an F one (issue 30: first-run compile cost)."""
    from moralkit.psm import _rp_kernels as k

    rng = np.random.default_rng(0)
    P, Q = _consumer(rng, 12)
    E = rp.consumer_expenditure_matrix(P, Q)
    assert rp.ccei(np.asfortranarray(E)) == rp.ccei(np.ascontiguousarray(E))
    for f in (k.min_cycle_ratio,):  # the float CCEI's threshold search (a selection, not a sort of candidates)
        assert f.signatures and all(a.layout == "C" for sig in f.signatures for a in sig if hasattr(a, "layout"))


# --------------------------------------------------------------------------- speed (issue 30, part 1)


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 14), st.floats(0.05, 0.9), st.integers(0, 2**31 - 1))
def test_clique_cover_rows_are_maximal_cliques_covering_every_violating_2_cycle(n, density, seed):
    """The branch-and-cut states the violating 2-cycles as clique rows: each row must be a clique of the
    conflict graph (else it cuts off a consistent subset), maximal, and every conflict edge must lie in one
    (else a pair of conflicting rounds could both be kept)."""
    from moralkit.psm._hm_scip import clique_cover

    rng = np.random.default_rng(seed)
    A = np.triu(rng.random((n, n)) < density, 1)
    A = A | A.T
    covered = np.zeros_like(A)
    for q in clique_cover(A):
        assert len(q) >= 2 and len(set(q)) == len(q)
        sub = A[np.ix_(q, q)]
        assert (sub | np.eye(len(q), dtype=bool)).all()  # a clique
        common = np.logical_and.reduce(A[q], axis=0)
        common[q] = False
        assert not common.any()  # maximal
        covered[np.ix_(q, q)] = True
    assert not (A & ~covered).any()


def _lightest_cycle_reference(R, P, y, threshold):
    """For each round v: the smallest node-weighted (1 - y) length of a violating cycle through v (v, an
    R0 path over rounds with 1 - y below the threshold, then a strict edge back to v), by Bellman-Ford."""
    n = len(R)
    w = np.clip(1 - y, 0, None)
    act = w < threshold
    out = {}
    for v in range(n):
        if not act[v]:
            continue
        d = np.full(n, np.inf)
        d[v] = w[v]
        edge = R & act[:, None] & act[None, :]
        edge[:, v] = False
        for _ in range(n):
            d = np.minimum(d, np.where(edge, d[:, None], np.inf).min(axis=0) + w)
        best = min((d[u] for u in range(n) if u != v and P[u, v]), default=np.inf)
        if best < threshold:
            out[v] = best
    return out


def test_lightest_violating_cycles_finds_the_lightest_cycle_through_each_round():
    """The fractional separation (numba, adjacency lists and a threshold-pruned Dijkstra on a heap, stopped
    at the lightest closing round): for each round the lightest violating cycle through it, a true violating
    cycle of that weight, as a slow reference."""
    from moralkit.psm._hm_kernels import lightest_violating_cycles

    rng = np.random.default_rng(40)
    found = 0
    for _ in range(25):
        E = _psm_subset(rng, int(rng.integers(6, 16)))
        R, P = rp.relations(E, Fraction(1))
        R, P = np.ascontiguousarray(R), np.ascontiguousarray(P)
        y = rng.choice([0.0, 1 / 3, 0.5, 0.8, 1.0], size=len(E))
        ref = _lightest_cycle_reference(R, P, y, 1 - 1e-3)
        flat, starts, wts = lightest_violating_cycles(R, P, y, 1 - 1e-3, False)
        got = {}
        for c in range(len(starts) - 1):
            cyc = flat[starts[c]:starts[c + 1]][::-1]  # v, ..., u: R0 edges along it, u P0 v closes it
            assert all(R[a, b] for a, b in zip(cyc[:-1], cyc[1:])) and P[cyc[-1], cyc[0]]
            assert len(set(cyc.tolist())) == len(cyc)
            assert np.isclose(wts[c], np.clip(1 - y[cyc], 0, None).sum())
            got[int(cyc[0])] = wts[c]
        assert got.keys() == ref.keys()
        assert all(np.isclose(got[v], ref[v]) for v in ref)
        # every strict edge (all_edges): the search runs to the threshold, not only to the lightest cycle
        flat, starts, wts = lightest_violating_cycles(R, P, y, 1 - 1e-3, True)
        every = {}
        for c in range(len(starts) - 1):
            v = int(flat[starts[c + 1] - 1])
            every[v] = min(every.get(v, np.inf), wts[c])
        assert every.keys() == ref.keys() and all(np.isclose(every[v], ref[v]) for v in ref)
        assert len(starts) - 1 >= len(ref)
        found += len(ref)
    assert found >= 20


def test_local_conflicts_are_the_pairs_that_cannot_join_the_kept_rounds():
    """The local clique cuts' conflict graph (numba, closure bitsets): a, b conflict iff the fixed
    rounds plus a and b violate GARP (checked here with the exact rp.garp); greedy_cliques returns
    cliques of it heavier than the threshold."""
    from moralkit.psm._hm_kernels import greedy_cliques, greedy_consistent, local_conflicts

    rng = np.random.default_rng(41)
    n_conf = n_cliques = 0
    for _ in range(10):
        E = _psm_subset(rng, int(rng.integers(8, 13)))
        R, P = (np.ascontiguousarray(M) for M in rp.relations(E, Fraction(1)))
        ok = np.nonzero(greedy_consistent(R, P, rng.permutation(len(E)).astype(np.int64)))[0]
        fixed = np.sort(rng.choice(ok, min(len(ok), int(rng.integers(0, 4))), replace=False)).astype(np.int64)
        frac = np.setdiff1d(np.arange(len(E)), fixed).astype(np.int64)
        conf = local_conflicts(R, P, fixed, frac)
        for a in range(len(frac)):
            assert not conf[a, a]
            for b in range(a + 1, len(frac)):
                idx = np.sort(np.r_[fixed, frac[[a, b]]])
                assert conf[a, b] == conf[b, a] == (not rp.garp(E[np.ix_(idx, idx)]))
        n_conf += conf.sum()
        w = rng.random(len(frac))
        flat, starts = greedy_cliques(conf, w, 0.9)
        for c in range(len(starts) - 1):
            q = flat[starts[c]:starts[c + 1]]
            assert w[q].sum() > 0.9 and len(set(q.tolist())) == len(q)
            assert all(conf[a, b] for a in q for b in q if a != b)
            n_cliques += 1
    assert n_conf > 0 and n_cliques > 0


def test_local_clique_cuts_keep_the_optimum(monkeypatch):
    """Below the root SCIP adds local clique cuts: on components where it branches (the combinatorial
    branch-and-bound given one node), the optimum and the decisions are those found without them."""
    import moralkit.psm._hm_scip as hm

    calls = []
    real = hm.local_conflicts
    monkeypatch.setattr(hm, "local_conflicts", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setattr(hm, "HEUR_NODES", 1)
    monkeypatch.setattr(hm, "DECISION_NODES", 1)
    rng = np.random.default_rng(42)
    Es = [_psm_subset(rng, 60) for _ in range(4)]
    got = [houtman_maks(E) for E in Es]
    dec = [(houtman_maks_at_least(E, r.n_kept), houtman_maks_at_least(E, r.n_kept + 1)) for E, r in zip(Es, got)]
    assert len(calls) > 0  # the local cuts were separated
    monkeypatch.setattr(hm, "_LOCAL_CLIQUES", False)
    for E, r, d in zip(Es, got, dec):
        assert r.optimal and r.n_kept == houtman_maks(E).n_kept < len(E)
        assert d == (True, False)
