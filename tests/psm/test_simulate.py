"""Simulated PSM respondents (moralkit.psm.simulate)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moralkit.psm.design import BUDGET, make_design, to_corner
from moralkit.psm.simulate import (
    QuadraticAgent,
    random_quadratic_agent,
    simulate_agents,
    simulate_quadratic,
    simulate_random,
)


@pytest.fixture(scope="module")
def design():
    return make_design(3)


def test_agent_normalises_and_validates():
    ag = QuadraticAgent(a=[2, 2, 2, 2, 2], b=[1, 2, 3, 4, 5])
    assert np.allclose(ag.a, 0.2)
    assert np.array_equal(ag.best_answer(), [1, 2, 3, 4, 5])
    with pytest.raises(ValueError, match="positive"):
        QuadraticAgent(a=[1, 0, 1, 1, 1], b=[0, 0, 0, 0, 0])
    with pytest.raises(ValueError, match="5 entries"):
        QuadraticAgent(a=[1, 1], b=[0, 0])


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000))
def test_best_answer_is_rounded_ideal_point(seed):
    # u is separable, so the best answer in {0..5}^5 is b rounded and clipped coordinatewise
    ag = random_quadratic_agent(seed, b_range=(-1, 6))
    assert np.array_equal(ag.best_answer(), np.clip(np.rint(ag.b), 0, 5))


def test_noiseless_agent_picks_best_option_with_flip(design):
    ag = QuadraticAgent(a=[0.1, 0.3, 0.2, 0.2, 0.2], b=[4.2, 1.1, 2.6, 0.4, 3.3])
    ds = simulate_quadratic(ag, design, model="sim-q")
    assert ds.model.startswith("sim-") and ds.provider == "simulated"
    assert np.array_equal(ds.q0, ag.best_answer())
    assert ds.n_obs == 160
    for t, rnd in enumerate(design):
        corner = rnd.corner(ds.q0)
        assert np.array_equal(ds.corners[t], corner)
        u = ag.utility(ds.options[t])
        assert ds.chosen[t] == np.argmax(u) + 1
        # the flip rule: q0 lies beyond the budget in the effective corner's coordinates
        assert ds.prices[t] @ to_corner(ds.q0, corner) > BUDGET
    # chosen answers satisfy the budget in corner coordinates (validated by PSMDataset too)
    y = to_corner(ds.choices, ds.corners)
    assert ((y * ds.prices).sum(1) == BUDGET).all()


def test_logit_noise_scale(design):
    ag = QuadraticAgent(a=[0.13, 0.27, 0.21, 0.17, 0.22], b=[2.31, 3.12, 1.77, 2.64, 2.93])  # no ties
    best = simulate_quadratic(ag, design).chosen
    small = simulate_quadratic(ag, design, noise=1e-4, seed=1).chosen
    big = simulate_quadratic(ag, design, noise=1e4, seed=1).chosen
    assert (small == best).mean() > 0.95
    assert (big == best).mean() < 0.2
    # seeded
    assert np.array_equal(simulate_quadratic(ag, design, noise=0.3, seed=5).chosen,
                          simulate_quadratic(ag, design, noise=0.3, seed=5).chosen)


def test_logit_probabilities_match_softmax():
    # one round repeated: empirical choice frequencies follow exp(u / scale)
    from moralkit.psm.design import Design

    d = Design(seed=0, rounds=(make_design(0)[0],))  # a one-round design
    ag = QuadraticAgent(a=np.full(5, 0.2), b=[2.5] * 5)
    q0 = ag.best_answer()
    u = ag.utility(d[0].options(q0))
    w = np.exp((u - u.max()) / 0.5)
    w /= w.sum()
    counts = np.zeros(100)
    for s in range(400):
        ds = simulate_quadratic(ag, d, noise=0.5, seed=s)
        counts[ds.chosen[0] - 1] += 1
    top = np.argsort(w)[::-1][:3]
    assert abs(counts[top].sum() / 400 - w[top].sum()) < 0.08


def test_random_agent_uniform(design):
    ds = simulate_random(design, seed=0)
    assert ds.model == "sim-random" and ds.n_obs == 160
    many = np.concatenate([simulate_random(design, seed=s).chosen for s in range(20)])
    counts = np.bincount(many, minlength=101)
    # every one of the 100 options is drawn (an off-by-one would leave out option 1 or 100), and uniformly
    assert counts[0] == 0 and (counts[1:] > 0).all()
    expected = len(many) / 100
    assert ((counts[1:] - expected) ** 2 / expected).sum() < 160  # 99 d.o.f.: P(chi2 > 160) < 1e-4


def test_simulate_agents_seeded_and_labelled(design):
    a = simulate_agents(3, design=design, seed=7)
    b = simulate_agents(3, design=design, seed=7)
    assert list(a) == ["sim-quadratic-0", "sim-quadratic-1", "sim-quadratic-2"]
    for k in a:
        assert np.array_equal(a[k].chosen, b[k].chosen)
    r = simulate_agents(2, "random", design=design, seed=7)
    assert list(r) == ["sim-random-0", "sim-random-1"]
    with pytest.raises(ValueError, match="kind"):
        simulate_agents(2, "clever")
    with pytest.raises(ValueError, match="sim-"):
        simulate_random(design, model="gpt-4")
    with pytest.raises(ValueError, match="noise"):
        simulate_quadratic(design=design, noise=-1)


def test_rational_agents_beat_random_agents_on_ccei(design):
    from moralkit.psm.rp import ccei, psm_expenditure_matrix

    q = [ccei(psm_expenditure_matrix(d)) for d in simulate_agents(15, design=design, seed=2).values()]
    r = [ccei(psm_expenditure_matrix(d)) for d in simulate_agents(15, "random", design=design, seed=2).values()]
    assert min(q) > max(r)


def test_logit_choices_batch_matches_single_draws(design):
    from moralkit.psm.simulate import logit_choices

    ag = QuadraticAgent(a=[0.13, 0.27, 0.21, 0.17, 0.22], b=[2.31, 3.12, 1.77, 2.64, 2.93])
    ds = simulate_quadratic(ag, design, noise=0.4, seed=8)
    u = ag.utility(ds.options)
    one = logit_choices(u, 0.4, np.random.default_rng(8))
    assert np.array_equal(one + 1, ds.chosen)  # simulate_quadratic draws through logit_choices
    batch = logit_choices(u, 0.4, np.random.default_rng(8), size=3)
    assert batch.shape == (3, 160) and np.array_equal(batch[0], one)
    assert not np.array_equal(batch[1], batch[0])
    assert np.array_equal(logit_choices(u, 0, size=2)[1], np.argmax(u, axis=1))


def test_a_seed_that_is_not_one_is_named():
    """simulate_* take their seed through moralkit.checks.as_generator: a float or negative seed is a
    MoralkitError naming the argument (numpy's own TypeError/ValueError before)."""
    from moralkit.errors import MoralkitError

    with pytest.raises(MoralkitError, match="seed must be None, an integer >= 0"):
        simulate_random(0, seed=1.5)
    with pytest.raises(MoralkitError, match="seed must be an integer >= 0, got -2"):
        simulate_quadratic(None, 0, seed=-2)
    with pytest.raises(MoralkitError, match="kind must be one of 'quadratic', 'random', got 'logit'"):
        simulate_agents(2, "logit")


@pytest.mark.parametrize("q0", [None, (0, 0, 0, 0, 0), (5, 1, 4, 2, 3)])
@pytest.mark.parametrize("seed", [0, 3])
def test_random_chosen_answers_are_the_chosen_rows_of_random_answers(seed, q0):
    """The convention audit's lean draw: the same random numbers as random_answers, the chosen options' rows,
    and the generator left in the same state."""
    from moralkit.psm.design import make_design
    from moralkit.psm.simulate import random_answers, random_chosen_answers

    d = make_design(seed)
    r1, r2 = np.random.default_rng(seed + 7), np.random.default_rng(seed + 7)
    for _ in range(3):
        q0a, (corners, prices, options, ci, _, _), chosen = random_answers(d, r1, q0)
        q0b, corners_b, prices_b, ci_b, q = random_chosen_answers(d, r2, q0)
        assert np.array_equal(q0a, q0b) and np.array_equal(corners, corners_b)
        assert np.array_equal(prices, prices_b) and np.array_equal(ci, ci_b)
        assert q.dtype == options.dtype and np.array_equal(q, options[np.arange(len(options)), chosen - 1])
    assert r1.bit_generator.state == r2.bit_generator.state


def test_arrays_without_options_are_the_other_arrays():
    from moralkit.psm.design import make_design

    d = make_design(0)
    full, lean = d.arrays([2, 2, 3, 3, 4]), d.arrays([2, 2, 3, 3, 4], options=False)
    assert lean[2] is None and full[2].shape == (160, 100, 5)
    assert all(np.array_equal(a, b) for k, (a, b) in enumerate(zip(full, lean)) if k != 2)


def test_simulate_quadratic_noises_are_simulate_quadratic_at_each_level(design):
    from moralkit.psm.simulate import simulate_quadratic_noises

    ag = random_quadratic_agent(4)
    noises, q0 = [0.0, 0.3, 2.0], [1, 1, 4, 4, 2]
    seeds = [np.random.SeedSequence(9).spawn(3)[k] for k in range(3)]
    got = simulate_quadratic_noises(ag, design, noises, [np.random.default_rng(s) for s in seeds], model="sim-n",
                                    q0=q0)
    for ds, noise, ss in zip(got, noises, seeds):
        ref = simulate_quadratic(ag, design, noise=noise, seed=np.random.default_rng(ss), model="sim-n", q0=q0)
        for f in ("corners", "prices", "options", "chosen", "round_index", "corner_index", "price_index", "q0"):
            assert np.array_equal(getattr(ds, f), getattr(ref, f)), f
        assert ds.model == ref.model and ds.provider == ref.provider == "simulated"
    assert got[0].corners is not got[1].corners
    assert not np.array_equal(got[1].chosen, got[2].chosen)
    with pytest.raises(ValueError, match="one seed per noise level"):
        simulate_quadratic_noises(ag, design, noises, seeds[:2])
