"""The random-choice rationality test (moralkit.psm.rationality): Section 2.3, eq. (4), Procedure 1, Table 1.

The simulation checks use SIMULATED respondents (moralkit.psm.simulate), never LLM answers.
"""

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from moralkit.psm import rp
from moralkit.psm.design import make_design
from moralkit.psm.random_choice import RandomChoiceResult, Table1, plot_null_distributions, stars
from moralkit.psm.random_datasets import CHUNK_SIZE, chunk_rng
from moralkit.psm.rationality import (
    random_choice_test,
    random_choice_tests,
    table1,
)
from moralkit.psm.simulate import simulate_agents, simulate_quadratic, simulate_random


@pytest.fixture(scope="module")
def design():
    return make_design(0)


@pytest.fixture(scope="module")
def few(design):
    q = simulate_agents(3, "quadratic", design, seed=11)
    r = simulate_agents(3, "random", design, seed=11)
    return {**q, **r}


def test_null_datasets_are_uniform_draws_from_the_same_option_sets(design):
    """Rebuild the synthetic datasets from the documented seeding and recompute their
    CCEIs with the slow general path: the test's null distribution must match."""
    ds = simulate_random(design, seed=3, model="sim-r")
    chosen = ds.chosen.copy()
    chosen[[2, 50, 51, 159]] = 0  # missing rounds are excluded
    ds = ds.with_choices(chosen)
    n = CHUNK_SIZE + 17
    res = random_choice_test(ds, n_datasets=n, seed=5)
    v = ds.valid()
    assert res.n_obs == v.n_obs == 156 and res.n_datasets == n
    draws = np.concatenate([chunk_rng(5, "sim-r", 0).integers(0, 100, size=(CHUNK_SIZE, 156)),
                            chunk_rng(5, "sim-r", 1).integers(0, 100, size=(17, 156))])
    expected = []
    for c in draws:
        E = rp.expenditure_matrix(v.corners, v.prices, v.options[np.arange(156), c])
        expected.append(rp.ccei_exact(E.astype(float)))  # general exact path, not the level kernel
    assert [Fraction(x).limit_denominator(12) for x in res.null_index] == expected
    own = rp.ccei_exact(rp.psm_expenditure_matrix(v))
    assert res.index_exact == own and res.index_value == float(own)
    k = sum(x >= own for x in expected)
    assert res.n_at_least == k and res.alpha == k / n  # eq. (4): weakly greater counts


def test_draws_are_uniform_over_the_100_options():
    draws = np.concatenate([chunk_rng(0, "m", c).integers(0, 100, size=(CHUNK_SIZE, 160)) for c in range(10)])
    counts = np.bincount(draws.ravel(), minlength=100)
    expected = draws.size / 100
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 160  # 99 degrees of freedom: P(chi2 > 160) < 1e-4


def test_seeded_and_independent_of_workers_and_companions(few):
    a = random_choice_tests(few, n_datasets=300, seed=1, n_jobs=1)
    b = random_choice_tests(few, n_datasets=300, seed=1, n_jobs=2)
    name = next(iter(few))
    c = random_choice_test(few[name], n_datasets=300, seed=1)
    d = random_choice_test(few[name], n_datasets=300, seed=2)
    for m in few:
        assert np.array_equal(a[m].null_index, b[m].null_index) and a[m].alpha == b[m].alpha
    assert np.array_equal(a[name].null_index, c.null_index)
    assert not np.array_equal(c.null_index, d.null_index)


def test_process_backend_gives_the_same_results(few):
    # a caller-chosen joblib backend (processes here; Dask works the same way) takes precedence
    import joblib

    sub = dict(list(few.items())[:2])
    a = random_choice_tests(sub, n_datasets=150, seed=3, n_jobs=1)
    with joblib.parallel_backend("loky"):
        b = random_choice_tests(sub, n_datasets=150, seed=3, n_jobs=2)
    for m in sub:
        assert np.array_equal(a[m].null_index, b[m].null_index)


def test_stars_are_weak_inequalities():
    assert stars(0.0) == stars(0.01) == "***"
    assert stars(0.011) == stars(0.05) == "**"
    assert stars(0.051) == stars(0.1) == "*"
    assert stars(0.101) == stars(0.5) == ""
    r = RandomChoiceResult(model="m", provider="p", index_value=0.5, index_exact=Fraction(1, 2), alpha=0.05,
                           n_at_least=50, null_index=np.zeros(1000), n_obs=160, n_datasets=1000, seed=0)
    assert r.stars == "**" and r.rejects(0.05) and not r.rejects(0.01) and r.rejects(0.10)


def test_table1_layout_and_order(few):
    t = table1(few, n_datasets=200, seed=0)
    assert isinstance(t, Table1) and t.index == "ccei" and t.hm_results is None
    df = t.to_frame()
    assert list(df.columns) == ["provider", "model", "ccei", "ccei_exact", "alpha", "stars", "label", "n_obs"]
    assert len(df) == 6 and set(df["model"]) == set(few)
    assert df["alpha"].is_monotonic_increasing
    assert (df["n_obs"] == 160).all() and (df["provider"] == "simulated").all()
    res = t.results
    assert list(res) == list(few) and not df.attrs  # no state rides in DataFrame.attrs
    for _, row in df.iterrows():
        r = res[row["model"]]
        assert row["ccei"] == r.index_value and row["alpha"] == r.alpha and row["stars"] == r.stars
        assert row["label"] == f"{r.index_value:.3f}{r.stars}"
        assert Fraction(row["ccei_exact"]) == r.index_exact
    # a table can be rebuilt from results without recomputation
    df2 = table1(res).to_frame()
    pd.testing.assert_frame_equal(df, df2)
    assert t.passing(0.05) == [m for m in df["model"] if res[m].alpha <= 0.05]


def test_table1_is_a_result_object(few):
    """to_frame() gives a copy; the page shows the table; repr is one line; plot() draws every model."""
    t = table1({m: few[m] for m in list(few)[:3]}, n_datasets=60, seed=0)
    df = t.to_frame()
    df.loc[0, "alpha"] = -1.0
    assert t.to_frame().loc[0, "alpha"] != -1.0
    assert t._repr_html_() == t.to_frame()._repr_html_()
    r = repr(t)
    assert r.startswith("<Table1: 3 models, index 'ccei', 60 random datasets each") and "\n" not in r
    assert len(t) == 3 and list(t["model"]) == list(t.to_frame()["model"])  # column access reads the table
    fig = t.plot(ncols=3)
    assert [a.get_title().split("\n")[0] for a in fig.axes if a.get_visible()] == list(t.to_frame()["model"])
    with pytest.raises(ValueError, match="Table1"):
        plot_null_distributions(t.to_frame())


def test_table1_leaves_out_models_without_answers(design):
    ds = simulate_random(design, seed=1, model="sim-empty")
    empty = ds.with_choices(np.zeros(160, int))
    ok = simulate_random(design, seed=2, model="sim-ok")
    with pytest.warns(UserWarning, match="sim-empty"):
        df = table1([empty, ok], n_datasets=50)
    assert list(df["model"]) == ["sim-ok"]
    with pytest.raises(ValueError, match="no answered"):
        random_choice_test(empty, n_datasets=50)


def test_bad_arguments(few):
    ds = next(iter(few.values()))
    with pytest.raises(ValueError, match="n_datasets"):
        random_choice_test(ds, n_datasets=0)
    with pytest.raises(ValueError, match="seed"):
        random_choice_test(ds, seed=-1)
    with pytest.raises(ValueError, match="unique"):
        random_choice_tests([ds, ds], n_datasets=10)
    with pytest.raises(ValueError, match="PSMDataset"):
        random_choice_test(np.eye(3), n_datasets=10)


def test_the_hm_test_checks_its_counts_before_solving(few):
    """hm_random_choice_test names a bad n_datasets or seed (it used to return an empty test for 0 datasets)."""
    from moralkit.errors import MoralkitError
    from moralkit.psm.hm_random_choice import hm_random_choice_test

    ds = next(iter(few.values()))
    with pytest.raises(MoralkitError, match="n_datasets must be an integer >= 1, got 0"):
        hm_random_choice_test(ds, n_datasets=0)
    with pytest.raises(MoralkitError, match="seed must be an integer >= 0, got -1"):
        hm_random_choice_test(ds, seed=-1)


def test_plot_null_distributions(few):
    import matplotlib

    matplotlib.use("Agg")
    df = table1(few, n_datasets=100)
    fig = plot_null_distributions(df, ncols=4)
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert len(visible) == 6
    assert visible[0].get_title().startswith(df["model"].iloc[0])
    with pytest.raises(ValueError):
        plot_null_distributions([])


# --------------------------------------------------------------------------- simulation checks (SIMULATED agents)


def test_simulated_quadratic_agents_pass_at_5_percent(design):
    """SIMULATED: 100 agents with random single-peaked quadratic utilities (eq. (7)), each
    choosing its best option of the 100 in every round (corner flip from its own best
    answer), tested against 1,000 random datasets each: >= 95 reject H0 at 5 %."""
    agents = simulate_agents(100, "quadratic", design, seed=2024)
    res = random_choice_tests(agents, n_datasets=1000, seed=0, n_jobs=2)
    passed = sum(r.rejects(0.05) for r in res.values())
    assert passed >= 95, passed


def test_simulated_random_agents_rarely_pass(design):
    """SIMULATED: 200 uniformly random respondents (H0): at most 8 % reject at 5 %
    (the test is conservative since the PSM CCEI takes few values)."""
    agents = simulate_agents(200, "random", design, seed=2025)
    res = random_choice_tests(agents, n_datasets=1000, seed=0, n_jobs=2)
    passed = sum(r.rejects(0.05) for r in res.values())
    assert passed <= 16, passed


# --------------------------------------------------------------------------- index conventions (issue 12)


def test_convention_index_uses_the_same_random_datasets(design):
    """index='origin/1-e': rebuild the synthetic datasets from the documented seeding and score each with the
    general exact path of moralkit.conventions (origin coordinates, 1 - e*)."""
    from moralkit.psm import indices as cv

    ds = simulate_quadratic(None, design, noise=0.5, seed=4, model="sim-q")
    chosen = ds.chosen.copy()
    chosen[[0, 7, 99]] = 0
    ds = ds.with_choices(chosen)
    n = 40
    res = random_choice_test(ds, n_datasets=n, seed=2, index="origin/1-e")
    v = ds.valid()
    draws = chunk_rng(2, "sim-q", 0).integers(0, 100, size=(n, v.n_obs))
    expected = [1 - cv.critical_efficiency(v.with_choices(c + 1), "origin") for c in draws]
    assert [Fraction(x).limit_denominator(30) for x in res.null_index] == expected
    own = 1 - cv.critical_efficiency(v, "origin")
    assert res.index == "origin/1-e" and res.index_exact == own and res.index_value == float(own)
    k = sum(x >= own for x in expected)  # eq. (4) on the reported index
    assert res.n_at_least == k and res.alpha == k / n


def test_corner_one_minus_e_mirrors_the_standard_test(few):
    std = random_choice_tests(few, n_datasets=150, seed=3)
    mir = random_choice_tests(few, n_datasets=150, seed=3, index="corner/1-e")
    for m in few:
        assert np.allclose(mir[m].null_index, 1 - std[m].null_index)  # same random datasets
        assert mir[m].index_value == pytest.approx(1 - std[m].index_value)
        # "1 - e* at least the model's" counts the random datasets at most as consistent
        le = int((std[m].null_index <= std[m].index_value + 1e-12).sum())
        assert mir[m].n_at_least == le


def test_default_index_is_the_standard_ccei(few):
    a = table1(few, n_datasets=120, seed=1)
    b = table1(few, n_datasets=120, seed=1, index="ccei")
    c = table1(few, n_datasets=120, seed=1, index="corner/e")
    pd.testing.assert_frame_equal(a.to_frame(), b.to_frame())
    pd.testing.assert_frame_equal(a.to_frame(), c.to_frame())
    assert a.index == "ccei"
    o = table1(few, n_datasets=60, seed=1, index="origin/1-e")
    assert o.index == "origin/1-e" and set(o.to_frame()["model"]) == set(a.to_frame()["model"])
    with pytest.raises(ValueError, match="origin/1-e"):
        table1(few, n_datasets=10, index="polar/e")
    fig = plot_null_distributions(o)
    assert "origin/1-e" in fig.axes[0].get_title()


def test_retest_reuses_the_null_of_the_same_option_sets(design):
    from moralkit.psm.rationality import retest
    from moralkit.psm.simulate import QuadraticAgent

    ag = QuadraticAgent(a=[0.2, 0.25, 0.15, 0.2, 0.2], b=[2.6, 2.4, 2.9, 2.2, 2.7])
    a = simulate_quadratic(ag, design, noise=0.2, seed=1, model="sim-a")
    b = simulate_quadratic(ag, design, noise=1.5, seed=2, model="sim-a")  # same option sets, other answers
    ra = random_choice_test(a, n_datasets=200, seed=9)
    rb = random_choice_test(b, n_datasets=200, seed=9)
    again = retest(ra, b)
    assert (again.index_value, again.alpha, again.n_at_least) == (rb.index_value, rb.alpha, rb.n_at_least)
    assert np.array_equal(again.null_index, rb.null_index)
    other = simulate_quadratic(ag, make_design(1), noise=0.2, seed=1, model="sim-a")  # other option sets
    with pytest.raises(ValueError, match="option sets"):
        retest(ra, other)
