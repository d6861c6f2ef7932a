"""Exact GARP_e and CCEI (moralkit.psm.rp): Definitions 1-3 of Seror (2025), cross-checked with revpref and prefgraph."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moralkit.psm import ccei_many, rp
from moralkit.psm._rp_kernels import cmp_prod
from moralkit.psm.design import BUDGET, make_design, to_corner
from moralkit.psm.simulate import simulate_random

# --------------------------------------------------------------------------- an independent reference


def _F(x):
    return Fraction(int(x)) if isinstance(x, (int, np.integer)) else Fraction(float(x))


def _ref_garp(E, e):
    """Definition 2 with Fractions and a Warshall closure (no moralkit code)."""
    T = len(E)
    e = Fraction(e)
    F = [[_F(E[r][k]) for k in range(T)] for r in range(T)]
    R = [[r == k or e * F[r][r] >= F[r][k] for k in range(T)] for r in range(T)]
    P = [[r != k and e * F[r][r] > F[r][k] for k in range(T)] for r in range(T)]
    for m in range(T):
        for i in range(T):
            if R[i][m]:
                for j in range(T):
                    if R[m][j]:
                        R[i][j] = True
    return not any(R[r][k] and P[k][r] for r in range(T) for k in range(T))


def _ref_ccei(E):
    """sup{e in (0, 1]: GARP_e} straight from the definition.

    The relations are constant on each open interval between consecutive candidate
    ratios, so test GARP_e at the midpoints: the supremum is the right end of the last
    interval on which GARP_e holds (GARP_e only gets harder as e grows).
    """
    T = len(E)
    ratios = {_F(E[r][k]) / _F(E[r][r]) for r in range(T) for k in range(T) if r != k}
    cuts = sorted({x for x in ratios if 0 < x < 1} | {Fraction(0), Fraction(1)})
    best = Fraction(0)
    for lo, hi in zip(cuts, cuts[1:]):
        if _ref_garp(E, (lo + hi) / 2):
            best = hi
        else:
            break
    return best


def _consumer(rng, T, K, ties):
    if ties:
        P = rng.integers(1, 4, (T, K)).astype(float)
        Q = rng.integers(0, 4, (T, K)).astype(float)
        Q[Q.sum(1) == 0, 0] = 1
        if rng.random() < 0.4:  # a repeated bundle
            Q[rng.integers(T)] = Q[rng.integers(T)]
    else:
        P = rng.uniform(0.5, 2.0, (T, K))
        Q = rng.uniform(0.05, 1.0, (T, K))
    return P, Q


# --------------------------------------------------------------------------- hand-built datasets


def test_strict_two_cycle():
    E = np.array([[9.0, 6.0], [6.0, 9.0]])  # p=(1,2),(2,1); q=(1,4),(4,1)
    assert rp.ccei_exact(E) == Fraction(2, 3)
    assert rp.ccei(E) == 2 / 3
    assert not rp.garp(E)
    # at e = 2/3 both revealed preferences are weak: GARP holds; above it fails
    assert rp.garp(E, Fraction(2, 3))
    assert not rp.garp(E, Fraction(2, 3) + Fraction(1, 10**9))
    assert rp.garp(E, 0.66)


def test_tie_only_violation_has_ccei_one():
    # 0 R0 1 only through a tie (E[0,1] = E[0,0]); 1 P0 0 strictly: GARP_1 fails,
    # but GARP_e holds for every e < 1, so the supremum is 1
    E = np.array([[2.0, 2.0], [2.0, 4.0]])
    assert not rp.garp(E) and not rp.garp(E, method="warshall")
    assert rp.garp(E, 0.999999)
    assert rp.ccei(E) == 1.0 and rp.ccei_exact(E) == 1
    R0, P0 = rp.relations(E)
    assert R0[0, 1] and not P0[0, 1] and P0[1, 0]


def test_supremum_not_attained():
    # cycle 0 -> 1 (ratio 1/2) -> 0 (ratio 3/10): at e = 1/2 the first edge is weak
    # and the second strict, so GARP_{1/2} fails; it holds for every e < 1/2
    E = np.array([[10, 5], [3, 10]])
    assert rp.ccei_exact(E) == Fraction(1, 2)
    assert not rp.garp(E, Fraction(1, 2))
    assert rp.garp(E, Fraction(1, 2) - Fraction(1, 10**12))
    assert _ref_ccei(E) == Fraction(1, 2)


def test_three_cycle_without_two_cycles():
    E = np.array([[12, 5, 20], [30, 12, 4], [3, 30, 12]])
    assert rp.ccei_exact(E) == Fraction(5, 12) == _ref_ccei(E)
    assert rp.ccei_exact(E.astype(float)) == Fraction(5, 12)


def test_identical_bundles():
    P = np.array([[1.0, 2.0], [2.0, 1.0], [1.0, 1.0]])
    Q = np.array([[1.0, 1.0], [1.0, 1.0], [3.0, 0.5]])  # observations 0 and 1 chose the same bundle
    E = rp.consumer_expenditure_matrix(P, Q)
    assert E[0, 1] == E[0, 0] and E[1, 0] == E[1, 1]
    assert rp.garp(E) and rp.ccei(E) == 1.0
    R0, P0 = rp.relations(E, 0.5, same_bundle=Q)
    assert R0[0, 1] and R0[1, 0]  # the same-bundle clause of Definition 1.1
    assert not P0[0, 1] and not P0[1, 0]  # never strict (the paper's clause in 1.2 is a typo)
    R0b, _ = rp.relations(E, 0.5)
    assert not R0b[0, 1]
    # the clause never changes GARP_e
    for e in (0.3, 0.5, 0.9, 1.0):
        assert rp.garp(E, e, same_bundle=Q) == rp.garp(E, e)


def test_no_efficiency_rescues_zero_cost_cycle():
    # each bundle costs nothing at the other's prices: GARP_e fails for every e > 0
    E = np.array([[12, 0], [0, 12]])
    assert rp.ccei_exact(E) == 0 and rp.ccei(E) == 0.0
    assert not rp.garp(E, 1e-9) and rp.garp(E, 0.0)


def test_small_and_consistent_datasets():
    assert rp.ccei(np.array([[3.0]])) == 1.0
    assert rp.ccei(np.zeros((0, 0))) == 1.0
    E = np.array([[10.0, 12.0], [8.0, 10.0]])  # only 1 R0 0: consistent
    assert rp.garp(E) and rp.ccei(E) == 1.0


def test_psm_multiples_of_one_twelfth():
    rng = np.random.default_rng(0)
    for _ in range(40):
        T = int(rng.integers(2, 12))
        E = rng.integers(0, 31, (T, T))
        np.fill_diagonal(E, 12)
        c = rp.ccei_exact(E)
        assert (c * 12).denominator == 1
        assert c == _ref_ccei(E)
        assert rp.ccei(E) == float(c)
        assert rp.ccei(E.astype(float)) == float(c)  # general path, same answer


def test_expenditure_matrix_in_corner_coordinates():
    d = make_design(0)
    q0 = np.array([1, 4, 2, 0, 3])
    rounds = [d[0], d[7], d[33], d[100]]
    corners = np.stack([r.corner(q0) for r in rounds])
    prices = np.stack([r.prices for r in rounds])
    choices = np.stack([r.options(q0)[i] for i, r in enumerate(rounds)])
    E = rp.expenditure_matrix(corners, prices, choices)
    for a in range(4):
        for b in range(4):
            assert E[a, b] == int(prices[a] @ to_corner(choices[b], corners[a]))
    assert (np.diag(E) == BUDGET).all()
    # the lifted consumer representation gives the same matrix: goods (q, 5 - q)
    Pi = np.concatenate([prices * (corners == 0), prices * (corners == 5)], 1)
    X = np.concatenate([choices, 5 - choices], 1)
    assert np.array_equal(Pi @ X.T, E)


def test_option_expenditures_and_batched_paths():
    ds = simulate_random(0, seed=5).valid()
    V = rp.option_expenditures(ds.corners, ds.prices, ds.options)
    assert V.shape == (160, 160, 100)
    assert (V[np.arange(160), np.arange(160)] == BUDGET).all()
    rng = np.random.default_rng(1)
    C = rng.integers(0, 100, size=(6, 160))
    Es = np.stack([rp.expenditure_matrix(ds.corners, ds.prices, ds.options[np.arange(160), c]) for c in C])
    for c, E in zip(C, Es):
        assert np.array_equal(V[:, np.arange(160), c], E)
    rounds = (ds.corners, ds.prices, ds.options)
    m = ccei_many.ccei_choices(*rounds, C, numerators=True)
    assert m.dtype.kind == "i"
    assert np.array_equal(ccei_many.ccei_choices(*rounds, C), m / 12)
    assert np.array_equal(ccei_many.ccei_batch(Es), m / 12)
    assert [rp.ccei_exact(E) for E in Es] == [Fraction(int(x), 12) for x in m]
    assert ccei_many.ccei_choices(*rounds, C[0]) == m[0] / 12
    assert rp.ccei(ds) == rp.ccei(rp.psm_expenditure_matrix(ds))
    # a float stack goes through the general exact path
    assert np.array_equal(ccei_many.ccei_batch(Es[:3].astype(float)), m[:3] / 12)


def test_choice_level_lists_match_the_option_expenditures():
    # rows[start[k, j, L]:start[k, j, L + 1]] = the rounds r != k where option j of round k costs L,
    # increasing (options with the same raw answer share one list)
    rng = np.random.default_rng(6)
    for seed in range(3):
        ds = simulate_random(make_design(seed), seed=seed).valid()
        keep = np.sort(rng.choice(160, 40, replace=False)) if seed == 2 else np.arange(160)
        corners, prices, options = ds.corners[keep], ds.prices[keep], ds.options[keep]
        V = rp.option_expenditures(corners, prices, options)  # V[r, k, j]
        start, rows = rp.choice_level_lists(corners, prices, options, BUDGET)
        T = len(keep)
        assert start.shape == (T, 100, BUDGET + 1)
        for k in range(T):
            for j in range(100):
                lv = np.clip(V[:, k, j], 0, BUDGET)
                lv[k] = BUDGET
                for L in range(BUDGET):
                    assert rows[start[k, j, L]:start[k, j, L + 1]].tolist() == np.nonzero(lv == L)[0].tolist()
    bad = options.copy()
    bad[5, 7] = [5, 5, 5, 5, 5] if (bad[5, 7] != 5).any() else [0, 0, 0, 0, 0]
    bad[9, 2] = bad[5, 7]
    with pytest.raises(ValueError, match="option 8 of round 5 is off the budget"):
        rp.choice_level_lists(corners, prices, bad, BUDGET)


def test_dataset_entry_point_excludes_missing_rounds():
    ds = simulate_random(0, seed=6)
    chosen = ds.chosen.copy()
    chosen[[0, 5, 17]] = 0
    ds2 = ds.with_choices(chosen)
    E = rp.psm_expenditure_matrix(ds2)
    assert E.shape == (157, 157)
    assert rp.ccei_exact(ds2) == rp.ccei_exact(E)


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("E,match", [
    (np.ones((2, 3)), "square"),
    (np.ones(3), "square"),
    (np.array([[1.0, np.nan], [1.0, 1.0]]), "non-finite"),
    (np.array([[1.0, np.inf], [1.0, 1.0]]), "non-finite"),
    (np.array([[0.0, 1.0], [1.0, 1.0]]), "not positive"),
    (np.array([[-1, 1], [1, 1]]), "not positive"),
    (np.array([["a", "b"], ["c", "d"]]), "numeric"),
])
def test_bad_matrices(E, match):
    with pytest.raises(ValueError, match=match):
        rp.ccei(E)
    with pytest.raises(ValueError, match=match):
        rp.garp(E)


def test_bad_psm_inputs():
    d = make_design(0)
    rounds = [d[0], d[1], d[2]]
    corners = np.stack([r.nominal_corner for r in rounds])
    prices = np.stack([r.prices for r in rounds])
    choices = np.stack([r.options()[0] for r in rounds])
    assert rp.expenditure_matrix(corners, prices, choices).shape == (3, 3)
    with pytest.raises(ValueError, match="0-5 scale"):
        rp.expenditure_matrix(corners, prices, choices + 6)
    with pytest.raises(ValueError, match="0 or 5"):
        rp.expenditure_matrix(corners + 1, prices, choices)
    with pytest.raises(ValueError, match="positive"):
        rp.expenditure_matrix(corners, -prices, choices)
    with pytest.raises(ValueError, match="same rounds"):
        rp.expenditure_matrix(corners[:2], prices, choices)
    with pytest.raises(ValueError, match="off the budget"):
        rp.expenditure_matrix(5 - corners, prices, choices)
    assert rp.expenditure_matrix(5 - corners, prices, choices, budget=None).shape == (3, 3)
    with pytest.raises(ValueError, match="integers"):
        rp.expenditure_matrix(corners, prices, choices + 0.5)
    opts = np.stack([r.options() for r in rounds])
    with pytest.raises(ValueError, match="off the budget"):
        rp.option_expenditures(5 - corners, prices, opts)
    with pytest.raises(ValueError, match="option indices"):
        ccei_many.ccei_choices(corners, prices, opts, np.array([[0, 1, 100]]))
    with pytest.raises(ValueError, match="shape"):
        ccei_many.ccei_choices(corners, prices, opts, np.array([[0, 1]]))
    with pytest.raises(ValueError, match="off the budget"):
        ccei_many.ccei_choices(5 - corners, prices, opts, np.array([[0, 1, 2]]))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        rp.garp(np.eye(2) + 1, e=1.5)
    with pytest.raises(ValueError, match="positive"):
        rp.consumer_expenditure_matrix([[0.0, 1.0]], [[1.0, 1.0]])
    with pytest.raises(ValueError, match="finite"):
        rp.consumer_expenditure_matrix([[np.nan, 1.0]], [[1.0, 1.0]])


# --------------------------------------------------------------------------- cross-checks


def test_matches_definition_reference_on_random_data():
    rng = np.random.default_rng(2)
    for i in range(150):
        P, Q = _consumer(rng, int(rng.integers(2, 7)), int(rng.integers(1, 4)), ties=i % 2 == 0)
        E = rp.consumer_expenditure_matrix(P, Q)
        assert rp.ccei_exact(E) == _ref_ccei(E)
        for e in (Fraction(1, 2), Fraction(9, 10), Fraction(1)):
            assert rp.garp(E, e) == _ref_garp(E, e) == rp.garp(E, e, method="warshall")


def test_agrees_with_revpref_warshall():
    revpref = pytest.importorskip("revpref")
    rng = np.random.default_rng(3)
    n_ok = n = 0
    for i in range(240):
        P, Q = _consumer(rng, int(rng.integers(2, 16)), int(rng.integers(1, 5)), ties=i % 2 == 0)
        ours = rp.ccei(rp.consumer_expenditure_matrix(P, Q))
        theirs = revpref.RevealedPreference(P, Q).ccei("warshall")
        n += 1
        n_ok += abs(ours - theirs) <= 1e-12
    assert n_ok == n == 240


def test_agrees_with_prefgraph_engine():
    prefgraph = pytest.importorskip("prefgraph")
    rng = np.random.default_rng(4)
    users = [_consumer(rng, int(rng.integers(2, 30)), int(rng.integers(1, 5)), ties=i % 2 == 0) for i in range(300)]
    res = prefgraph.Engine(metrics=("garp", "ccei")).analyze_arrays(users)
    ccei_ok = sum(abs(rp.ccei(rp.consumer_expenditure_matrix(P, Q)) - r.ccei) <= 1e-12 for (P, Q), r in zip(users, res))
    garp_ok = sum(rp.garp(rp.consumer_expenditure_matrix(P, Q)) == r.is_garp for (P, Q), r in zip(users, res))
    assert ccei_ok == garp_ok == 300
    # longer datasets (several 64-bit words per bitset row)
    big = [_consumer(rng, int(rng.integers(65, 140)), 3, ties=i % 2 == 0) for i in range(12)]
    res = prefgraph.Engine(metrics=("garp", "ccei")).analyze_arrays(big)
    for (P, Q), r in zip(big, res):
        E = rp.consumer_expenditure_matrix(P, Q)
        assert abs(rp.ccei(E) - r.ccei) <= 1e-12 and rp.garp(E) == r.is_garp


def test_agrees_with_prefgraph_and_revpref_on_psm_data():
    """PSM expenditure matrices written as consumer data: goods (q, 5 - q), prices p on the
    statements measured from the origin, zero elsewhere (prefgraph's public Engine refuses
    zero prices, so its Rust batch function is called directly)."""
    revpref = pytest.importorskip("revpref")
    try:
        from prefgraph._rust_backend import HAS_RUST, _rust_analyze_batch
    except ImportError:  # pragma: no cover
        HAS_RUST = False
    d = make_design(1)
    rng = np.random.default_rng(5)
    users, Es = [], []
    for i in range(60):
        ds = simulate_random(d, seed=int(rng.integers(1 << 30))).valid()
        q = ds.choices
        E = rp.psm_expenditure_matrix(ds)
        Pi = np.concatenate([ds.prices * (ds.corners == 0), ds.prices * (ds.corners == 5)], 1).astype(float)
        X = np.concatenate([q, 5 - q], 1).astype(float)
        assert np.array_equal(Pi @ X.T, E)
        users.append((Pi, X))
        Es.append(E)
    # revpref (pure Python, O(T^3)): on 25-round subsets
    for (Pi, X), E in zip(users[:40], Es[:40]):
        idx = np.sort(rng.choice(160, 25, replace=False))
        assert abs(revpref.RevealedPreference(Pi[idx], X[idx]).ccei("warshall") - rp.ccei(E[np.ix_(idx, idx)])) <= 1e-12
    if HAS_RUST:
        res = _rust_analyze_batch([u[0] for u in users], [u[1] for u in users], True, False, False, False, False,
                                  False, False, False, 1e-10)
        assert [r["ccei"] for r in res] == pytest.approx([rp.ccei(E) for E in Es], abs=1e-12)


def test_revpref_check_garp_ignores_weak_preferences():
    """Documented discrepancy: revpref's ``check_garp`` builds its graph from strict
    preferences only (e E_ii > E_ij), so it misses violations that run through a tie.
    Definition 2 counts weak preferences (R0): here 0 R0 1 (tie) and 1 P0 0, so GARP_1
    fails. The CCEI (a supremum) is unaffected, and revpref's CCEI agrees with ours."""
    revpref = pytest.importorskip("revpref")
    P = np.array([[1.0, 1.0], [1.0, 2.0]])
    Q = np.array([[2.0, 0.0], [0.0, 2.0]])
    E = rp.consumer_expenditure_matrix(P, Q)
    assert E.tolist() == [[2.0, 2.0], [2.0, 4.0]]
    assert not rp.garp(E) and not _ref_garp(E, Fraction(1))
    assert revpref.RevealedPreference(P, Q).check_garp() is True  # the tool's convention
    assert revpref.RevealedPreference(P, Q).ccei("warshall") == rp.ccei(E) == 1.0


# --------------------------------------------------------------------------- properties

_settings = settings(max_examples=60, deadline=None, derandomize=True,
                     suppress_health_check=[HealthCheck.too_slow])


@st.composite
def consumer_data(draw, min_T=2, max_T=10, integer=None):
    T = draw(st.integers(min_T, max_T))
    K = draw(st.integers(1, 4))
    integer = draw(st.booleans()) if integer is None else integer
    if integer:
        P = np.array(draw(st.lists(st.integers(1, 4), min_size=T * K, max_size=T * K)), float).reshape(T, K)
        Q = np.array(draw(st.lists(st.integers(0, 4), min_size=T * K, max_size=T * K)), float).reshape(T, K)
        Q[Q.sum(1) == 0, 0] = 1
    else:
        f = st.floats(0.1, 10.0, allow_nan=False, allow_infinity=False)
        P = np.array(draw(st.lists(f, min_size=T * K, max_size=T * K))).reshape(T, K)
        Q = np.array(draw(st.lists(f, min_size=T * K, max_size=T * K))).reshape(T, K)
    return P, Q


@_settings
@given(consumer_data())
def test_ccei_in_unit_interval_and_exact(data):
    P, Q = data
    E = rp.consumer_expenditure_matrix(P, Q)
    c = rp.ccei_exact(E)
    assert 0 < c <= 1  # positive prices and quantities: some e > 0 always works
    assert rp.ccei(E) == float(c)
    assert c == _ref_ccei(E)
    if c < 1:
        assert rp.garp(E, c - Fraction(1, 10**12))
        assert not rp.garp(E, min(Fraction(1), c + Fraction(1, 10**12)))


@_settings
@given(consumer_data(), st.data())
def test_invariant_to_scaling_prices_per_observation(data, more):
    P, Q = data
    s = np.array(more.draw(st.lists(st.sampled_from([0.5, 2.0, 3.0, 0.125, 10.0]), min_size=len(P),
                                    max_size=len(P))))
    E = rp.consumer_expenditure_matrix(P, Q)
    E2 = rp.consumer_expenditure_matrix(P * s[:, None], Q)
    # exact rational data: compare exactly with a rescaled integer version when possible
    assert rp.ccei(E2) == pytest.approx(rp.ccei(E), abs=1e-12)
    Ei = np.rint(E).astype(np.int64)
    if np.array_equal(Ei, E):
        k = np.array(more.draw(st.lists(st.integers(1, 7), min_size=len(P), max_size=len(P))))
        assert rp.ccei_exact(Ei * k[:, None]) == rp.ccei_exact(Ei)


@_settings
@given(consumer_data(min_T=3), st.data())
def test_removing_an_observation_never_lowers_ccei(data, more):
    P, Q = data
    E = rp.consumer_expenditure_matrix(P, Q)
    i = more.draw(st.integers(0, len(P) - 1))
    keep = np.delete(np.arange(len(P)), i)
    assert rp.ccei_exact(E[np.ix_(keep, keep)]) >= rp.ccei_exact(E)


@_settings
@given(consumer_data(), st.sampled_from([Fraction(1, 3), Fraction(1, 2), Fraction(4, 5), Fraction(1), 0.7]))
def test_scc_garp_agrees_with_warshall(data, e):
    P, Q = data
    E = rp.consumer_expenditure_matrix(P, Q)
    assert rp.garp(E, e) == rp.garp(E, e, method="warshall") == _ref_garp(E, Fraction(e))


@_settings
@given(st.integers(2, 8), st.integers(1, 4), st.integers(0, 2**32 - 1))
def test_concave_utility_maximisers_have_ccei_one(T, K, seed):
    """Data generated by maximising a concave utility on full budget sets satisfy GARP (CCEI 1)."""
    rng = np.random.default_rng(seed)
    P = rng.integers(1, 6, (T, K))
    # Leontief u = min_j q_j / w_j (concave): q^r = w * m_r / (p^r . w); incomes chosen so
    # that the bundles are integers, hence the check is exact
    w = rng.integers(1, 4, K)
    t = rng.integers(1, 6, T)
    Q = w[None, :] * t[:, None]
    E = P @ Q.T
    assert rp.garp(E) and rp.ccei_exact(E) == 1
    # Cobb-Douglas u = sum_j a_j log q_j: q_j = a_j m / p_j (floats; equal up to rounding)
    a = rng.dirichlet(np.ones(K))
    m = rng.uniform(5, 30, T)
    Qc = a * m[:, None] / P
    assert rp.ccei(rp.consumer_expenditure_matrix(P, Qc)) == pytest.approx(1.0, abs=1e-12)


@_settings
@given(st.integers(0, 2**32 - 1))
def test_psm_fast_path_matches_reference_garp(seed):
    """PSM level path vs the reference Warshall garp at the neighbouring levels."""
    rng = np.random.default_rng(seed)
    T = int(rng.integers(2, 40))
    ds = simulate_random(make_design(int(rng.integers(3))), seed=seed)
    idx = np.sort(rng.choice(160, T, replace=False))
    E = rp.psm_expenditure_matrix(ds.subset(idx))
    c = rp.ccei_exact(E)
    assert c.denominator in (1, 2, 3, 4, 6, 12)
    m = int(c * 12)
    if m < 12:
        assert rp.garp(E, Fraction(m, 12) - Fraction(1, 24), method="warshall")
        assert not rp.garp(E, Fraction(m, 12) + Fraction(1, 24), method="warshall")
    else:
        assert rp.garp(E, Fraction(23, 24), method="warshall")


def _subsets_reference(E, subsets):
    return [rp.ccei(E[np.ix_(s, s)]) for s in subsets]


def test_ccei_subsets_equals_ccei_of_each_restricted_matrix_on_psm_data():
    # every coordinate system of the convention audit: constant own expenditure 12 (corner,
    # origin_budget), 12 or 18 (nominal), 1..30 (origin); nested, disjoint and tiny subsets
    from moralkit.psm.indices import COORDINATES, expenditure_matrix

    rng = np.random.default_rng(3)
    for i in range(12):
        ds = simulate_random(make_design(i % 3), seed=i)
        perm = rng.permutation(160)
        subsets = [np.sort(perm[:n]) for n in (160, 151, 150, 133, 125, 40, 3, 2, 1, 0)]
        subsets += [perm[100:], perm[:30], rng.choice(160, 17, replace=False), perm[:60]]  # not nested, unsorted
        for co in COORDINATES:
            E = expenditure_matrix(ds, co)
            got = ccei_many.ccei_subsets(E, subsets)
            assert got.dtype == np.float64
            assert got.tolist() == _subsets_reference(E, subsets)


@_settings
@given(consumer_data(min_T=2, max_T=9), st.data())
def test_ccei_subsets_equals_ccei_on_consumer_data(data, more):
    # float matrices (sorted ratios) and integer ones (the table of pairs), random subsets
    P, Q = data
    E = rp.consumer_expenditure_matrix(P, Q)
    T = len(E)
    subsets = [np.array(more.draw(st.lists(st.integers(0, T - 1), unique=True, max_size=T)), dtype=np.int64)
               for _ in range(more.draw(st.integers(1, 5)))]
    Ei = np.rint(E).astype(np.int64)
    for M in (E, Ei) if np.array_equal(Ei, E) else (E,):
        assert ccei_many.ccei_subsets(M, subsets).tolist() == _subsets_reference(M, subsets)


def test_ccei_subsets_integer_paths_agree():
    # small non-negative integers use the table of pairs; large or negative ones the sorted ratios
    rng = np.random.default_rng(4)
    for _ in range(40):
        T = int(rng.integers(2, 25))
        E = rng.integers(0, 12, size=(T, T))
        np.fill_diagonal(E, rng.integers(1, 12, size=T))
        subsets = [np.sort(rng.choice(T, int(rng.integers(0, T + 1)), replace=False)) for _ in range(4)]
        ref = _subsets_reference(E, subsets)
        assert ccei_many.ccei_subsets(E, subsets).tolist() == ref
        assert ccei_many.ccei_subsets(E * 2000, subsets).tolist() == ref  # above the table: sorted ratios
        assert ccei_many.ccei_subsets(E.astype(float), subsets).tolist() == ref
        E2 = E.copy()
        E2[0, -1] = -3  # a negative cost: sorted ratios, clamped at 0 as in ccei
        assert ccei_many.ccei_subsets(E2, subsets).tolist() == _subsets_reference(E2, subsets)


def test_ccei_subsets_rejects_bad_subsets():
    E = rp.psm_expenditure_matrix(simulate_random(0, seed=1))
    with pytest.raises(ValueError, match="repeats an observation"):
        ccei_many.ccei_subsets(E, [[0, 1, 1]])
    with pytest.raises(ValueError, match="outside 0..159"):
        ccei_many.ccei_subsets(E, [[0, 160]])
    with pytest.raises(ValueError, match="integer observation indices"):
        ccei_many.ccei_subsets(E, [[0.0, 1.0]])
    with pytest.raises(ValueError, match="square"):
        ccei_many.ccei_subsets(E[:3], [[0, 1]])
    assert ccei_many.ccei_subsets(E, []).shape == (0,)
    assert ccei_many.ccei_subsets(np.zeros((0, 0), dtype=np.int64), [[], []]).tolist() == [1.0, 1.0]


def test_two_product_comparisons_are_exact():
    rng = np.random.default_rng(9)
    a, b, c = rng.uniform(-1e3, 1e3, (3, 2000))
    d = a * b / c  # c * d is within rounding of a * b
    for x, y, z, w in zip(a, b, c, d):
        exact = Fraction(x) * Fraction(y) - Fraction(z) * Fraction(w)
        assert cmp_prod(x, y, z, w) == (exact > 0) - (exact < 0)


def test_min_cycle_ratio_equals_the_sorted_threshold_search():
    # the selection search (no sort) of the batched float CCEI finds the same float threshold as
    # candidates + min_cycle_threshold (rp.ccei's path), ties and acyclic matrices included
    from moralkit.psm._rp_kernels import candidates, min_cycle_ratio, min_cycle_threshold

    rng = np.random.default_rng(7)
    n_cyclic = 0
    for trial in range(600):
        T = int(rng.integers(2, 30))
        E = rng.integers(1, 9, size=(T, T)).astype(float) if trial % 2 else rng.uniform(0.1, 2.0, size=(T, T))
        R = E / np.diag(E)[:, None]
        cand = candidates(R)
        i = min_cycle_threshold(R, cand)
        assert min_cycle_ratio(R) == (2.0 if i >= len(cand) else cand[i])
        n_cyclic += i < len(cand)
    assert 0 < n_cyclic < 600


@pytest.mark.parametrize("coordinates", ["origin", "origin_budget", "nominal", "corner"])
def test_critical_efficiencies_equal_rp_ccei_row_by_row(coordinates):
    # the compiled batch (and its fallback to rp.ccei for constant-diagonal rows) returns the very
    # float rp.ccei returns for each expenditure matrix
    from moralkit.psm import indices

    ds = simulate_random(0, seed=3)
    V = indices.option_expenditures(ds, coordinates)
    rng = np.random.default_rng(2)
    keep = np.sort(rng.choice(160, 40, replace=False))
    V = V[np.ix_(keep, keep)]
    C = rng.integers(0, V.shape[2], size=(25, 40))
    got = indices.critical_efficiencies(V, C, coordinates)
    for c, x in zip(C, got):
        E = V[:, np.arange(40), c].astype(np.int64)
        if coordinates == "origin_budget":
            np.fill_diagonal(E, BUDGET)
        assert x == rp.ccei(E)


def test_heap_argsort_sorts_ties_and_edge_cases():
    # int_ratio_levels' sort (numba's np.argsort compiles its quicksort, ~1.5 s of a first run)
    from moralkit.psm._subset_kernels import heap_argsort

    rng = np.random.default_rng(11)
    for n in (0, 1, 2, 3, 7, 64, 513):
        for x in (rng.random(n), rng.integers(0, 4, n).astype(float), np.sort(rng.random(n))[::-1].copy()):
            idx = heap_argsort(x)
            assert sorted(idx.tolist()) == list(range(n))
            assert x[idx].tolist() == np.sort(x).tolist()


def _new_signatures(calls):
    """The signatures the PSM kernels gain while ``calls`` run, by kernel name."""
    ds = _kernels()
    before = {k: set(f.signatures) for k, f in ds.items()}
    calls()
    return {k: set(f.signatures) - before[k] for k, f in ds.items() if set(f.signatures) - before[k]}


def _kernels():
    """The PSM kernels by ``module.name`` of their definition (a kernel imported by another module once)."""
    from moralkit.psm.warmup import dispatchers

    return {f"{f.py_func.__module__.rsplit('.', 1)[-1]}.{f.__name__}": f for f in dispatchers().values()}


def test_kernels_see_one_layout_and_dtype_whatever_the_callers_arrays():
    # F-ordered, int32, float32 and strided inputs reach the kernels as the C-ordered int64/float64
    # arrays the notebooks pass, so numba compiles one specialisation of each kernel, not one per
    # layout (each costs seconds of a fresh clone's first run). Fails if a second one comes back.
    from numba import types

    from moralkit.psm import indices

    A = lambda dt, nd: types.Array(dt, nd, "C")  # noqa: E731
    i8, f8, b1 = types.int64, types.float64, types.boolean
    ds = simulate_random(0, seed=5)
    E = rp.psm_expenditure_matrix(ds)[:40, :40]
    V = indices.option_expenditures(ds, "origin")[:30, :30]
    C = np.random.default_rng(0).integers(0, V.shape[2], size=(3, 30))
    v = ds.valid()

    def calls():
        for M in (E, np.asfortranarray(E), E.astype(np.int32).T, E[::2, ::2], E.astype(np.float32),
                  np.asfortranarray(E / 7.0)):
            rp.ccei(M)
            rp.garp(M, 0.5)
            ccei_many.ccei_subsets(M, [np.arange(len(M) // 2)])
        for VV, CC in ((V, C), (np.asfortranarray(V), np.asfortranarray(C))):
            indices.critical_efficiencies(VV, CC, "origin")
        rp.choice_level_lists(np.asfortranarray(v.corners), np.asfortranarray(v.prices), v.options, BUDGET)

    allowed = {
        "_rp_kernels.psm_levels_batch": {(A(i8, 3), i8)},
        "_rp_kernels.min_cycle_ratio": {(A(f8, 2),)},
        "_rp_kernels.relation_signs": {(A(f8, 2), A(f8, 1), A(f8, 1))},
        "_rp_kernels.scc_labels": {(A(b1, 2), A(b1, 1))},
        "_subset_kernels.int_ratio_levels": {(A(i8, 2), i8)},
        "_subset_kernels.ratio_levels": {(A(f8, 2),)},
        "_subset_kernels.subset_levels": {(A(i8, 2), i8, A(i8, 2), A(i8, 1))},
        "_subset_kernels.heap_argsort": {(A(f8, 1),)},
        "_rp_kernels.ccei_float_choices": {(A(types.int16, 3), A(i8, 2), i8, i8)},
        "_rp_kernels.level_lists_direct": {(A(i8, 2), A(i8, 1), A(i8, 3), i8, i8)},
    }
    new = _new_signatures(calls)
    for k, sigs in allowed.items():  # (the helpers they call are compiled along with them)
        assert new.get(k, set()) <= sigs, f"{k} compiled another specialisation: {new[k] - sigs}"
    ds_ = _kernels()
    for k, sigs in allowed.items():  # each called directly was reached (a nested one may come from the cache)
        if k != "_subset_kernels.heap_argsort":
            assert sigs <= set(ds_[k].signatures), k


def test_expenditure_product_is_the_definition_on_design_rounds():
    """rp.expenditure_product (the unchecked arithmetic the convention audit calls thousands of times) gives
    E[r, k] = p^r . |q^k - o^r| exactly, for effective, nominal and origin corners."""
    from moralkit.psm.design import CORNERS, make_design
    from moralkit.psm.simulate import random_chosen_answers

    d = make_design(2)
    rng = np.random.default_rng(11)
    for _ in range(3):
        _, corners, prices, ci, q = random_chosen_answers(d, rng)
        for base in (corners, CORNERS[ci], np.zeros_like(corners)):
            ref = (prices[:, None, :] * np.abs(q[None, :, :] - base[:, None, :])).sum(-1)
            E = rp.expenditure_product(base, prices, q)
            assert E.dtype == np.int64 and E.flags.c_contiguous and np.array_equal(E, ref)
        assert (np.diag(rp.expenditure_product(corners, prices, q)) == 12).all()
