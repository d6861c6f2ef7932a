"""The permutation approach: draws and G (moralkit.psm.permutation); H^alpha, Table 3, Figures 3-4
(moralkit.psm.networks).

Agents are SIMULATED (moralkit.psm.simulate); Table-1/Table-3 numbers typed from the paper are used
only to check the bookkeeping (thresholds, default e), never as results.
"""

import matplotlib

matplotlib.use("Agg")

import networkx as nx
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moralkit.figures import save
from moralkit.psm.design import make_design
from moralkit.psm.networks import (
    PAPER_ALPHAS,
    plot_networks,
    plot_similarity,
    similarity_graph,
    similarity_summary,
    table3,
    threshold_graph,
)
from moralkit.psm.permutation import (
    default_e,
    describe_e,
    draw_rounds,
    e_below_ccei,
    passing_models,
    permutation_study,
    study_setup,
)
from moralkit.psm.random_choice import Table1
from moralkit.psm.rp import ccei
from moralkit.psm.simulate import QuadraticAgent, random_quadratic_agent, simulate_quadratic, simulate_random


@pytest.fixture(scope="module")
def design():
    return make_design(0)


@pytest.fixture(scope="module")
def clusters(design):
    """Two SIMULATED clusters of near-rational agents with opposite ideal points."""
    ideals = [(1, 4, 1, 4, 1), (1.2, 3.8, 1.1, 3.9, 1), (4, 1, 4, 1, 4), (3.9, 1.2, 4, 1.1, 3.8)]
    return {f"sim-{i}": simulate_quadratic(QuadraticAgent(a=np.ones(5), b=b), design, noise=0.02, seed=i,
                                           model=f"sim-{i}") for i, b in enumerate(ideals)}


@pytest.fixture(scope="module")
def mixed(design):
    """Five SIMULATED agents (quadratic and random), some rounds unanswered."""
    out = {}
    for i in range(3):
        ds = simulate_quadratic(random_quadratic_agent(i), design, noise=0.1 * i, seed=i, model=f"sim-q{i}")
        ch = ds.chosen.copy()
        ch[np.random.default_rng(i).choice(160, 15, replace=False)] = 0  # missing rounds
        out[ds.model] = ds.with_choices(ch)
    for i in range(2):
        out[f"sim-r{i}"] = simulate_random(design, seed=50 + i, model=f"sim-r{i}")
    return out


def test_clusters_are_recovered(clusters):
    e = min(ccei(ds) for ds in clusters.values()) - 1e-9  # the paper's rule: just below the smallest CCEI
    res = permutation_study(clusters, e, T=60, rho=20, seed=0, progress=False)
    G = res.G.to_numpy()
    within = [G[0, 1], G[2, 3]]
    across = [G[0, 2], G[0, 3], G[1, 2], G[1, 3]]
    assert min(within) > 0.5 > max(across)
    h = res.H(0.5)
    assert sorted(sorted(c) for c in nx.connected_components(h)) == [["sim-0", "sim-1"], ["sim-2", "sim-3"]]


def test_G_properties_and_reproducibility(mixed):
    res = permutation_study(mixed, 0.8, T=30, rho=15, seed=3, progress=False)
    G = res.G.to_numpy()
    # G is the share of draws in which two models share a type (eq. 6), recomputed for every pair from
    # the draws' partitions (this also gives symmetry, a unit diagonal and values in [0, 1])
    lab = res.labels
    share = (lab[:, :, None] == lab[:, None, :]).mean(axis=0)
    assert np.allclose(G, share, rtol=0, atol=1e-12)
    assert np.allclose(G * res.T, np.rint(G * res.T))  # shares of T draws
    assert res.labels.shape == (30, 5) and (res.n_types >= 1).all()
    again = permutation_study(mixed, 0.8, T=30, rho=15, seed=3, progress=False)
    assert np.array_equal(res.labels, again.labels)
    other = permutation_study(mixed, 0.8, T=30, rho=15, seed=4, progress=False)
    assert not np.array_equal(res.labels, other.labels)


def test_same_G_for_any_number_of_workers(mixed):
    """Each draw has its own seed, so chunks and workers do not change G. Threads keep the test cheap (no
    worker processes to start and compile); the draws go through the same joblib chunks as processes."""
    from joblib import parallel_backend

    a = permutation_study(mixed, 0.8, T=24, rho=10, seed=11, progress=False, n_jobs=1)
    with parallel_backend("threading"):
        b = permutation_study(mixed, 0.8, T=24, rho=10, seed=11, progress=False, n_jobs=2, chunk_size=5)
    assert np.array_equal(a.labels, b.labels)
    assert a.G.equals(b.G)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 30))
def test_no_round_drawn_twice_across_models(mixed, seed, rho):
    draw = draw_rounds(mixed, rho, seed)
    seen = []
    for m, pos in draw.items():
        ds = mixed[m]
        assert len(pos) == rho and len(set(pos)) == rho
        assert ds.answered[pos].all()  # only answered rounds are eligible
        seen += list(zip(ds.corner_index[pos], ds.price_index[pos]))
    assert len(seen) == len(set(seen))


def test_bad_input(mixed, design):
    two = {k: mixed[k] for k in ["sim-q0", "sim-q1"]}
    with pytest.raises(ValueError, match="at least 2 models"):
        permutation_study({"sim-q0": mixed["sim-q0"]}, 0.5, T=2, progress=False)
    with pytest.raises(ValueError, match="larger than its 145 answered rounds"):
        permutation_study(two, 0.5, T=2, rho=150, progress=False)
    with pytest.raises(ValueError, match="distinct rounds"):
        permutation_study(mixed, 0.5, T=2, rho=40, progress=False)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        permutation_study(two, 1.2, T=2, progress=False)
    with pytest.raises(ValueError, match="unknown solver"):
        permutation_study(two, 0.5, T=2, solver="lp_solve", progress=False)
    with pytest.raises(ValueError, match=r"T \(number of synthetic datasets\) must be an integer >= 1, got 0"):
        permutation_study(two, 0.5, T=0, progress=False)
    with pytest.raises(ValueError, match="not in the datasets"):
        permutation_study(two, 0.5, T=2, models=["sim-q0", "gpt"], progress=False)
    with pytest.raises(ValueError, match=r"alpha .* \(0, 1\)"):
        threshold_graph(pd.DataFrame(np.eye(2)), 1.0)


# --------------------------------------------------------------------------- paper bookkeeping

PAPER_TABLE1_TOP = pd.DataFrame({
    "model": ["gemini-1.5-flash-exp-0827", "claude-3-sonnet-20240229", "gpt-4-0125-preview", "llama3-70b",
              "Qwen1.5-110B-Chat", "llama3.2-1b", "open-mixtral-8x22b", "mistral-large-2407", "gpt-4o"],
    "CCEI": [0.417, 0.400, 0.400, 0.389, 0.385, 0.333, 0.385, 0.375, 0.333],
    "alpha": [0.006, 0.008, 0.020, 0.035, 0.041, 0.045, 0.049, 0.099, 0.301],
})

NAMES = ["gpt-4", "claude-3", "mixtral", "llama3.2", "llama3", "gemini-1.5", "Qwen1.5"]
PAPER_TABLE3 = pd.DataFrame([
    [1.00, 0.36, 0.35, 0.24, 0.34, 0.42, 0.40],
    [0.36, 1.00, 0.41, 0.25, 0.36, 0.48, 0.48],
    [0.35, 0.41, 1.00, 0.31, 0.30, 0.37, 0.38],
    [0.24, 0.25, 0.31, 1.00, 0.24, 0.26, 0.27],
    [0.34, 0.36, 0.30, 0.24, 1.00, 0.37, 0.35],
    [0.42, 0.48, 0.37, 0.26, 0.37, 1.00, 0.48],
    [0.40, 0.48, 0.38, 0.27, 0.35, 0.48, 1.00]], index=NAMES, columns=NAMES)


def test_default_e_is_smallest_ccei_among_models_passing_at_5_percent():
    assert default_e(PAPER_TABLE1_TOP) == pytest.approx(0.333, abs=1e-8) and default_e(PAPER_TABLE1_TOP) < 0.333
    assert default_e(PAPER_TABLE1_TOP, below=0) == 0.333
    assert len(passing_models(PAPER_TABLE1_TOP)) == 7
    assert default_e(PAPER_TABLE1_TOP, level=0.01) == pytest.approx(0.400, abs=1e-8)


def test_default_e_keeps_every_passing_model_consistent(clusters):
    from moralkit.psm.partition import garp_pooled
    from moralkit.psm.pooled import pool

    t1 = pd.DataFrame({"model": list(clusters), "ccei": [ccei(d) for d in clusters.values()], "alpha": 0.0})
    models, e, notes = study_setup(clusters, t1)
    assert models == list(clusters) and e < t1.ccei.min() and any("CCEI" in n for n in notes)
    P = pool(clusters)
    assert all(garp_pooled(P, e, [m]) for m in clusters)
    # at e = min CCEI itself the model attaining it violates GARP_e (the CCEI is a supremum)
    m_min = t1.model[t1.ccei.idxmin()]
    assert not garp_pooled(P, t1.ccei.min(), [m_min])
    _, e_paper, notes = study_setup(clusters, t1.assign(alpha=0.5))
    assert e_paper == 0.333 and any("no model passes" in n for n in notes)
    with pytest.raises(ValueError, match="no model passes"):
        default_e(PAPER_TABLE1_TOP.assign(alpha=0.5))
    with pytest.raises(ValueError, match="CCEI"):
        default_e(PAPER_TABLE1_TOP.drop(columns="CCEI"))
    # e is on the standard-CCEI scale: a Table 1 of another index is refused
    other = Table1(t1, {}, "origin/1-e")
    with pytest.raises(ValueError, match="standard-CCEI scale"):
        study_setup(clusters, other)


@given(st.integers(1, 11))
def test_describe_e_names_the_ccei_e_is_set_below(k):
    # e is set a hair below a CCEI k/12: the reader sees the ratio, not 0.249999999
    from fractions import Fraction

    f = Fraction(k, 12)
    assert describe_e(e_below_ccei([k / 12, 1.0])) == f"e just below {f}"
    assert describe_e(k / 12) == f"e = {f}"


def test_describe_e_other_values():
    assert describe_e(0.333) == "e = 0.333"  # the paper's e is not 1/3
    assert describe_e(0.0) == "e = 0" and describe_e(1.0) == "e = 1"
    assert describe_e(0.123456) == "e = 0.1235"
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        describe_e(1.5)


@pytest.mark.parametrize("alpha", PAPER_ALPHAS)
def test_H_alpha_thresholds(alpha):
    h = threshold_graph(PAPER_TABLE3, alpha)
    G = PAPER_TABLE3.to_numpy()
    iu = np.triu_indices(7, 1)
    assert h.number_of_edges() == int((G[iu] >= 1 - alpha - 1e-12).sum())
    for m, w in h.edges:
        assert PAPER_TABLE3.loc[m, w] >= 1 - alpha - 1e-12
    assert h.number_of_nodes() == 7


def test_summary_graphs_and_table3():
    s = similarity_summary(PAPER_TABLE3)
    assert (s["min"], s["max"]) == (0.24, 0.48)
    assert s["least_similar"] in {("gpt-4", "llama3.2"), ("llama3.2", "llama3")}
    assert s["mean"] == pytest.approx(np.mean(PAPER_TABLE3.to_numpy()[np.triu_indices(7, 1)]))
    # at alpha = 0.65 (G >= 0.35) llama3.2 is isolated (Section 3.3 says both Llama models are, but
    # Table 3 links llama3 to claude-3, gemini-1.5 and Qwen1.5 at that level)
    assert s["H"][0.65]["isolated"] == ["llama3.2"]
    assert s["H"][0.75]["n_components"] == 1
    g = similarity_graph(PAPER_TABLE3)
    assert g.number_of_edges() == 21 and g["claude-3"]["gemini-1.5"]["weight"] == 0.48
    t = table3(PAPER_TABLE3, {"gpt-4": "GPT"})
    assert t.index[0] == "GPT" and t.shape == (7, 7)


def test_figures_are_saved(tmp_path):
    f3 = plot_similarity(PAPER_TABLE3)
    f4 = plot_networks(PAPER_TABLE3, PAPER_ALPHAS)
    assert len(f4.axes) == 3 and f4.legends and len(f4.legends[0].get_texts()) == 7
    for fig, stem in ((f3, "04_fig3_similarity"), (f4, "04_fig4_networks")):
        paths = save(fig, stem, tmp_path)
        assert [p.suffix for p in paths] == [".png", ".svg"] and all(p.stat().st_size > 1000 for p in paths)


def _replayed(perm, ri, rho, seeds):
    from moralkit.psm._replay import replay_draws

    return replay_draws(ri.round_ids, ri.positions, ri.n_ids, rho, seeds, lambda rng: perm._draw(ri, rho, rng))


@pytest.mark.parametrize("rho", [1, 7, 20, 28])
def test_batched_draws_are_the_draws_of_draw_one_by_one(mixed, rho):
    """replay_draws (a chunk's draws side by side, issue 30) gives _draw's picks for each draw's
    default_rng(ss), and leaves a generator that continues the same stream (Procedure 2 breaks its ties with
    it). rho = 28 runs models out of rounds (5 x 28 of 160 rounds), so _draw's redraws are covered too."""
    from moralkit.psm import permutation as perm

    ri = perm._round_index(mixed)
    seeds = np.random.SeedSequence(rho).spawn(40)
    for ss, (picks, rng) in zip(seeds, _replayed(perm, ri, rho, seeds)):
        ref = np.random.default_rng(ss)
        expected = perm._draw(ri, rho, ref)
        assert len(picks) == len(expected)
        assert all(np.array_equal(a, b) and a.dtype == b.dtype for a, b in zip(picks, expected))
        assert rng.integers(1 << 20, size=3).tolist() == ref.integers(1 << 20, size=3).tolist()
        assert rng.integers(5) == ref.integers(5)


def test_batched_draws_fall_back_where_the_shortcut_cannot_follow(mixed, monkeypatch):
    """With no spare word for the permutation's rejections, most draws take _draw's way: the same picks."""
    from moralkit.psm import permutation as perm

    ri = perm._round_index(mixed)
    seeds = np.random.SeedSequence(9).spawn(30)
    monkeypatch.setattr("moralkit.psm._replay.PERM_SPARE", 0)
    calls = []
    real = perm._draw
    monkeypatch.setattr(perm, "_draw", lambda *a, **k: calls.append(1) or real(*a, **k))
    for ss, (picks, _) in zip(seeds, _replayed(perm, ri, 10, seeds)):
        expected = real(ri, 10, np.random.default_rng(ss))
        assert all(np.array_equal(a, b) for a, b in zip(picks, expected))
    assert 0 < len(calls) < len(seeds)


def test_batched_draws_kept_when_draw_leaves_a_spent_half_word(mixed):
    """A chunk whose first draw ends on a whole 64-bit output: ``draw``'s generator still holds the high half
    it spent earlier (``uinteger``, with ``has_uint32`` 0), the replayed one does not. Both continue the same
    stream, so the check passes and the chunk's draws stay replayed (they used to be made again by _draw)."""
    from moralkit.psm import _replay
    from moralkit.psm import permutation as perm

    ri = perm._round_index(mixed)
    seeds = np.random.SeedSequence(13).spawn(200)
    for i, ss in enumerate(seeds):
        ref = np.random.default_rng(ss)
        perm._draw(ri, 10, ref)
        st = ref.bit_generator.state
        if st["has_uint32"] == 0 and st["uinteger"] != 0:
            break
    else:
        pytest.fail("no draw ending on a whole output with a spent half-word among 200 seeds")
    chunk = seeds[i:i + 10]
    res = _replayed(perm, ri, 10, chunk)
    assert isinstance(res[0][1], _replay.ReplayedRng)
    for ss, (picks, rng) in zip(chunk, res):
        ref = np.random.default_rng(ss)
        assert all(np.array_equal(a, b) for a, b in zip(picks, perm._draw(ri, 10, ref)))
        gen = rng._get() if isinstance(rng, _replay.ReplayedRng) else rng
        assert _replay.stream_state(gen.bit_generator) == _replay.stream_state(ref.bit_generator)
        assert rng.integers(1 << 20, size=3).tolist() == ref.integers(1 << 20, size=3).tolist()


def test_stream_state_ignores_only_a_spent_half_word():
    from moralkit.psm._replay import stream_state

    a, b = np.random.default_rng(4), np.random.default_rng(4)
    a.integers(1 << 20, dtype=np.uint32)  # one 64-bit output split: its high half waits
    assert a.bit_generator.state["has_uint32"] == 1
    assert stream_state(a.bit_generator) != stream_state(b.bit_generator)
    a.integers(1 << 20, dtype=np.uint32)  # the waiting half used: the same position in the stream as b
    b.bit_generator.random_raw(1)
    assert a.bit_generator.state != b.bit_generator.state
    assert stream_state(a.bit_generator) == stream_state(b.bit_generator)
    assert a.integers(1 << 30, size=4).tolist() == b.integers(1 << 30, size=4).tolist()


def test_labels_do_not_depend_on_the_serial_chunk(mixed):
    """n_jobs=1 makes SERIAL_CHUNK draws side by side; one draw per chunk gives the same labels."""
    a = permutation_study(mixed, 0.8, T=20, rho=12, seed=5, progress=False)
    b = permutation_study(mixed, 0.8, T=20, rho=12, seed=5, progress=False, chunk_size=1)
    assert np.array_equal(a.labels, b.labels)


def test_batched_draws_checked_against_draw_once_per_chunk(mixed, monkeypatch):
    """Each chunk's first replayed draw is also made by _draw and compared: a replay that no longer follows
    NumPy's Generator (NumPy promises no stream compatibility between versions) makes every draw _draw's."""
    from moralkit.psm import _replay
    from moralkit.psm import permutation as perm

    ri = perm._round_index(mixed)
    seeds = np.random.SeedSequence(11).spawn(20)
    real_floyd = _replay._floyd
    monkeypatch.setattr(_replay, "_floyd", lambda x, n, rho, L: np.maximum(real_floyd(x, n, rho, L) - 1, 0))
    for ss, (picks, rng) in zip(seeds, _replayed(perm, ri, 7, seeds)):
        ref = np.random.default_rng(ss)
        expected = perm._draw(ri, 7, ref)
        assert all(np.array_equal(a, b) for a, b in zip(picks, expected))
        assert rng.bit_generator.state == ref.bit_generator.state
