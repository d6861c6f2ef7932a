"""Cross-method study: Mantel test and the PSM G vs MoralChoice agreement comparison."""

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import pearsonr, spearmanr

from moralkit.studies.crossmethod import (
    cross_method,
    mantel_test,
    match_models,
    min_pvalue,
    psm_similarity,
)


def _sym(rng, n):
    X = rng.random((n, n))
    X = (X + X.T) / 2
    np.fill_diagonal(X, 1.0)
    return X


def _naive_mantel(A, B, method):
    """Independent reference: loop over permutations with scipy's correlations."""
    n = len(A)
    iu = np.triu_indices(n, 1)
    f = spearmanr if method == "spearman" else pearsonr
    obs = f(A[iu], B[iu])[0]
    stats = [f(A[iu], B[np.ix_(p, p)][iu])[0] for p in itertools.permutations(range(n))]
    return obs, np.mean(np.array(stats) >= obs - 1e-12)


@pytest.mark.parametrize("method", ["spearman", "pearson"])
@pytest.mark.parametrize("n", [3, 4, 5])
def test_exact_matches_naive_enumeration(method, n):
    rng = np.random.default_rng(n)
    for _ in range(3):
        A, B = _sym(rng, n), _sym(rng, n)
        r = mantel_test(A, B, method=method)
        obs, p = _naive_mantel(A, B, method)
        assert r.exact and r.n_permutations == math.factorial(n)
        assert r.statistic == pytest.approx(obs)
        assert r.pvalue == pytest.approx(p)


def test_perfect_agreement_gives_minimum_p():
    rng = np.random.default_rng(0)
    A = _sym(rng, 5)
    B = np.exp(3 * A)  # monotone transform: same ranks
    r = mantel_test(A, B)
    assert r.statistic == pytest.approx(1.0)
    assert r.pvalue == pytest.approx(1 / 120) == r.min_pvalue
    # a distance matrix (reversed) agrees in the "less" direction
    r2 = mantel_test(A, 1 - A, alternative="less")
    assert r2.statistic == pytest.approx(-1.0) and r2.pvalue == pytest.approx(1 / 120)
    assert mantel_test(A, 1 - A).pvalue == pytest.approx(1.0)


def test_three_models_cannot_reach_five_percent():
    rng = np.random.default_rng(1)
    A = _sym(rng, 3)
    r = mantel_test(A, A)
    assert r.pvalue == pytest.approx(1 / 6) and min_pvalue(3) == pytest.approx(1 / 6)
    assert min_pvalue(4) == pytest.approx(1 / 24) and min_pvalue(4) < 0.05
    with pytest.raises(ValueError, match="at least 3"):
        mantel_test(np.eye(2), np.eye(2))


def test_monte_carlo_for_many_objects():
    rng = np.random.default_rng(2)
    A = _sym(rng, 9)
    r = mantel_test(A, A ** 2, n_permutations=499, seed=1)
    assert not r.exact and r.n_permutations == 499
    assert r.pvalue == pytest.approx(1 / 500)
    # Monte Carlo p-values estimate the exact one (all 9! relabellings): a wrong count or a wrong
    # denominator would move them off it
    B = _sym(rng, 9)
    exact = mantel_test(A, B, exact_max=10**6)
    assert exact.exact and exact.n_permutations == 362880
    mc = mantel_test(A, B, n_permutations=1999, seed=1)
    assert not mc.exact and abs(mc.pvalue - exact.pvalue) < 0.035  # 3.5 s.e. of a p near 0.5


def test_null_is_calibrated():
    # independent random matrices: exact p-values are (close to) uniform
    rng = np.random.default_rng(3)
    ps = np.array([mantel_test(_sym(rng, 5), _sym(rng, 5)).pvalue for _ in range(300)])
    assert abs((ps <= 0.10).mean() - 0.10) < 0.05
    assert abs((ps <= 0.50).mean() - 0.50) < 0.08


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000), st.integers(3, 6))
def test_invariant_to_relabelling_both(seed, n):
    rng = np.random.default_rng(seed)
    A, B = _sym(rng, n), _sym(rng, n)
    p = rng.permutation(n)
    r1 = mantel_test(A, B)
    r2 = mantel_test(A[np.ix_(p, p)], B[np.ix_(p, p)])
    assert r1.statistic == pytest.approx(r2.statistic) and r1.pvalue == pytest.approx(r2.pvalue)
    # symmetric in its arguments
    assert mantel_test(B, A).pvalue == pytest.approx(r1.pvalue)


def test_dataframes_are_aligned_and_validated():
    rng = np.random.default_rng(4)
    names = list("abcde")
    A = pd.DataFrame(_sym(rng, 5), index=names, columns=names)
    B = A.copy() ** 2
    shuffled = B.loc[names[::-1], names[::-1]]
    assert mantel_test(A, shuffled).statistic == pytest.approx(1.0)
    with pytest.raises(ValueError, match="same objects"):
        mantel_test(A, B.rename(index={"a": "z"}, columns={"a": "z"}))
    with pytest.raises(ValueError, match="symmetric"):
        mantel_test(np.arange(16.0).reshape(4, 4), np.eye(4))
    with pytest.raises(ValueError, match="constant"):
        mantel_test(np.ones((4, 4)), _sym(rng, 4))


def test_match_models():
    m = match_models(["Qwen/Qwen2.5-0.5B-Instruct", "llama3-70b", "x"],
                     ["qwen2.5-0.5b-instruct", "llama3-70b", "other"], name_map={"x": "other"})
    # pairing is by equality of the label: a different spelling is not guessed, name_map pairs it
    assert m == {"llama3-70b": "llama3-70b", "x": "other"}
    with pytest.raises(ValueError, match="no MoralChoice answers"):
        match_models(["x"], ["y"], name_map={"x": "z"})


def _frame(M, names):
    return pd.DataFrame(M, index=names, columns=names)


def test_cross_method_few_and_enough_models():
    rng = np.random.default_rng(5)
    names = ["m1", "m2", "m3", "m4", "m5"]
    G = _frame(_sym(rng, 5), names)
    C = _frame(2 * G.to_numpy() - 1, [n.upper() for n in names])  # same structure, other labels
    res = cross_method(G, C, name_map={n: n.upper() for n in names})
    assert res.models == names and res.mantel.statistic == pytest.approx(1.0)
    assert res.mantel.pvalue == pytest.approx(1 / 120)
    assert len(res.pairs()) == 10
    # only two models in common: no test, an explanation instead
    res2 = cross_method(G, _frame(np.eye(3), ["m1", "m2", "zz"]))
    assert res2.models == ["m1", "m2"] and res2.mantel is None and "one pair" in res2.note
    res3 = cross_method(G.iloc[:3, :3], C.iloc[:3, :3], name_map={n: n.upper() for n in names})
    assert res3.mantel.pvalue >= 1 / 6 and "1/6" in res3.note
    from moralkit.studies.crossplots import plot_cross_method

    fig = plot_cross_method(res)
    assert len(fig.axes) >= 3


def test_psm_similarity_on_simulated_agents():
    from moralkit.psm.design import make_design
    from moralkit.psm.simulate import QuadraticAgent, simulate_quadratic

    ags = [QuadraticAgent(np.full(5, 0.2), b) for b in ([1.0] * 5, [1.1] * 5, [4.0] * 5)]
    data = {f"sim-{i}": simulate_quadratic(a, make_design(10 + i), model=f"sim-{i}") for i, a in enumerate(ags)}
    sim = psm_similarity(data, e=0.9, T=20, rho=20, seed=0)
    G = sim.to_frame()
    assert G.shape == (3, 3) and np.allclose(np.diag(G), 1)
    assert G.loc["sim-0", "sim-1"] > G.loc["sim-0", "sim-2"]
    assert (sim.rho, sim.e, sim.T) == (20, 0.9, 20) and not sim.G.attrs  # parameters on the result, not .attrs
    assert "e = 0.9, T = 20" in sim._repr_html_()


def test_psm_similarity_uses_the_permutation_rule_for_e_and_rho():
    """One rule for e and rho: just below the smallest CCEI, rho capped by permutation.max_rho."""
    from moralkit.psm import rp
    from moralkit.psm.design import make_design
    from moralkit.psm.permutation import E_BELOW_CCEI, max_rho
    from moralkit.psm.simulate import simulate_random

    data = {f"sim-r{i}": simulate_random(make_design(0), seed=i, model=f"sim-r{i}") for i in range(3)}
    few = data["sim-r2"]
    data["sim-r2"] = few.with_choices(np.where(np.arange(160) < 30, few.chosen, 0))
    assert max_rho(data) == 30  # sim-r2 answered 30 rounds; 160 // 3 = 53
    sim = psm_similarity(data, T=3, rho=40, seed=0)
    cceis = [rp.ccei(rp.psm_expenditure_matrix(d)) for d in data.values()]
    assert sim.rho == 30
    assert sim.e == min(cceis) - E_BELOW_CCEI


def test_load_own_runs_without_data(tmp_path, monkeypatch):
    from moralkit.errors import DataError
    from moralkit.studies.crossmethod import cross_method_from_data, load_own_runs

    # a fresh project: the default folders are empty
    monkeypatch.setenv("MORALKIT_DATA_DIR", str(tmp_path))
    with pytest.warns(UserWarning, match="No PSM data yet"):
        psm, metrics, msgs = load_own_runs()
    assert psm == {} and len(metrics) == 0 and len(msgs) == 2 and "no data" in msgs[0]
    assert str(tmp_path) not in " ".join(msgs)  # no machine path on a page
    assert cross_method_from_data(psm, metrics) is None
    # a path given explicitly that does not exist is an error naming the parameter
    with pytest.raises(DataError, match="data_path=.*does not exist"):
        load_own_runs(tmp_path / "psm")
    with pytest.raises(DataError, match="moralchoice_path=.*does not exist"):
        load_own_runs(None, tmp_path / "mc")


def test_cross_method_from_data_on_simulated_inputs(tmp_path):
    """Simulated PSM agents (written to a temporary file) and constructed MoralChoice metrics."""
    from moralkit.psm.dataset import write_psm
    from moralkit.psm.design import make_design
    from moralkit.psm.simulate import QuadraticAgent, simulate_quadratic
    from moralkit.studies.crossmethod import cross_method_from_data, load_own_runs

    bs = {"sim-a": [1.0] * 5, "sim-b": [1.2] * 5, "sim-c": [4.0] * 5, "sim-d": [3.8] * 5}
    data = {m: simulate_quadratic(QuadraticAgent(np.full(5, 0.2), b), make_design(20 + i), model=m)
            for i, (m, b) in enumerate(bs.items())}
    write_psm(data, tmp_path / "psm" / "sim.csv.gz")
    (tmp_path / "none").mkdir()  # a MoralChoice folder without runs
    psm, _, msgs = load_own_runs(tmp_path / "psm", tmp_path / "none")
    assert sorted(psm) == sorted(bs) and "4 model(s)" in msgs[0]
    rng = np.random.default_rng(0)
    base = rng.random(50)
    rows = []
    for m, b in bs.items():
        p = base if b[0] < 2 else 1 - base  # two camps, as in the PSM agents
        for s in range(50):
            rows.append((m, f"S{s}", float(np.clip(p[s] + rng.normal(0, 0.05), 0, 1))))
    metrics = pd.DataFrame(rows, columns=["model", "scenario_id", "p_action1"])
    res = cross_method_from_data(psm, metrics, e=0.9, T=30, rho=20, seed=0)
    assert res.models == list(bs) and res.mantel.n == 4 and res.mantel.exact
    assert res.mantel.statistic > 0.5
    only_two = metrics[metrics.model.isin(["sim-a", "sim-c"])]
    res2 = cross_method_from_data(psm, only_two, e=0.9, T=10, seed=0)
    assert res2.mantel is None and len(res2.models) == 2


def test_cross_method_from_data_computes_each_ccei_once(monkeypatch):
    """Issue 30: with e from the CCEIs (e=None) and persona variants of one model, the comparison on one
    respondent per distinct model reuses the CCEIs of the full comparison, and e is still set from its own
    respondents."""
    from moralkit.psm import rp
    from moralkit.psm.design import make_design
    from moralkit.psm.permutation import e_below_ccei
    from moralkit.psm.simulate import QuadraticAgent, simulate_quadratic
    from moralkit.studies.crossmethod import cross_method_from_data

    labels = ["sim-1", "sim-1+persona-care", "sim-2", "sim-3"]
    psm = {m: simulate_quadratic(QuadraticAgent(np.full(5, 0.2), [1.0 + i] * 5), make_design(40 + i), model=m,
                                 noise=0.5, seed=i) for i, m in enumerate(labels)}
    rng = np.random.default_rng(1)
    metrics = pd.DataFrame([(m, f"S{s}", float(rng.random())) for m in labels for s in range(30)],
                           columns=["model", "scenario_id", "p_action1"])
    calls = []
    real = rp.ccei
    monkeypatch.setattr(rp, "ccei", lambda x: calls.append(1) or real(x))
    res = cross_method_from_data(psm, metrics, T=5, rho=5, seed=0)
    assert len(calls) == len(labels)
    cceis = {m: real(rp.psm_expenditure_matrix(psm[m])) for m in labels}
    assert res.e == e_below_ccei(cceis.values())
    assert res.distinct.models == ["sim-1", "sim-2", "sim-3"]
    assert res.distinct.e == e_below_ccei(cceis[m] for m in ("sim-1", "sim-2", "sim-3"))


def test_scatter_labels_group_coinciding_pairs():
    from moralkit.studies.crossplots import label_groups

    p = pd.DataFrame({"model_1": ["a", "a", "b", "a"], "model_2": ["b", "c", "c", "d"],
                      "psm_G": [0.970, 0.975, 0.60, 0.971], "moralchoice_corr": [0.99, 0.98, 0.99, 0.30]})
    groups = label_groups(p, {"a": 1, "b": 2, "c": 3, "d": 4}, xspan=0.1, yspan=2.16)
    labels = sorted(sorted(g[1]) for g in groups)
    # 1–2 and 1–3 coincide; 2–3 is far along G, 1–4 far along the correlation
    assert labels == [["1–2", "1–3"], ["1–4"], ["2–3"]]


def test_respondents_of_one_model_are_named_and_tested_apart():
    """Issue 28: persona variants of one model are not distinct respondents; the test is re-run on one
    respondent per model, and its smallest attainable p says what it can show."""
    from moralkit.psm.design import make_design
    from moralkit.psm.simulate import QuadraticAgent, simulate_quadratic
    from moralkit.studies.crossmethod import cross_method_from_data, underlying_model

    assert underlying_model("sim-a+persona-care") == underlying_model("sim-a-s1") == "sim-a"
    assert underlying_model("sim-a-small") == "sim-a-small"
    bs = {"sim-a": [1.0] * 5, "sim-a+persona-care": [1.1] * 5, "sim-a+persona-utilitarian": [1.2] * 5,
          "sim-b": [4.0] * 5, "sim-c": [3.8] * 5}
    psm = {m: simulate_quadratic(QuadraticAgent(np.full(5, 0.2), b), make_design(20 + i), model=m)
           for i, (m, b) in enumerate(bs.items())}
    rng = np.random.default_rng(1)
    base = rng.random(40)
    metrics = pd.DataFrame([(m, f"S{s}", float(np.clip((base if b[0] < 2 else 1 - base)[s] + rng.normal(0, 0.05), 0, 1)))
                            for m, b in bs.items() for s in range(40)], columns=["model", "scenario_id", "p_action1"])
    res = cross_method_from_data(psm, metrics, e=0.9, T=20, rho=20, seed=0)
    assert res.same_model == {"sim-a": ["sim-a", "sim-a+persona-care", "sim-a+persona-utilitarian"]}
    assert "3 of the 5 respondents are one model" in res.note and "3 of the 10 pairs" in res.note
    d = res.distinct
    assert d is not None and d.models == ["sim-a", "sim-b", "sim-c"] and d.same_model == {} and d.distinct is None
    assert d.mantel.n_permutations == 6 and d.mantel.min_pvalue == pytest.approx(1 / 6)
    # all distinct: nothing to add
    plain = cross_method_from_data({m: psm[m] for m in ("sim-a", "sim-b", "sim-c")}, metrics, e=0.9, T=10, seed=0)
    assert plain.same_model == {} and plain.distinct is None
