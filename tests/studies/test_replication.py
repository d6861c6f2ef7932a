"""The paper-calibrated replication of Section 3.3 (moralkit.replication). Every agent here is SIMULATED."""

import numpy as np
import pytest

from moralkit import paths
from moralkit.psm import reference, rp
from moralkit.psm.rationality import random_choice_test
from moralkit.studies import calibration as calib
from moralkit.studies import replication as rep
from moralkit.studies import replication_power as rpower

# Notebook 08 at its defaults (seed 0); the manual (docs/replication.md) states these numbers (test_readme_states_...)
ERR_CCEI = [0.0167, 0.0167, 0.0317, 0.0837, 0.0277, 0.0830, 0.0317]
ERR_ALPHA = [0.013, 0.054, -0.021, -0.005, -0.004, -0.006, -0.009]
RULE_MEAN_G, NEAREST_MEAN_G, NEAREST_SPEARMAN, NEAREST_MANTEL_P = 0.9697, 0.4639, 0.2940, 0.2113
RECALIBRATED_SPEARMAN = [0.29, -0.73, -0.49, -0.49, 0.53, 0.37, -0.19, 0.75]
# 24 redraws of the seed-0 agents at the nearest level (replication.redraws, g_power)
POWER = dict(mean=0.25674, sd=0.30812, q05=-0.27151, q25=0.01578, median=0.27863, q75=0.50337, q95=0.71150,
             min=-0.53479, max=0.92128, power=34 / 276, published_mean=0.35780, published_percentile=75.0)


def test_paper_agents_are_the_published_utilities():
    agents = calib.paper_agents()
    t2 = reference.published_table2()
    assert list(agents) == list(t2["b"].index) == list(reference.published_table3(full_names=True).index)
    for m, ag in agents.items():
        assert np.allclose(ag.b, t2["b"].loc[m])
        assert np.allclose(ag.a, t2["a"].loc[m] / t2["a"].loc[m].sum())
        assert np.allclose(ag.a, t2["a"].loc[m], atol=0.003)


def test_missing_rounds_match_the_published_number_of_observations():
    miss = calib.missing_rounds(160, 133, seed=1)
    assert miss.sum() == 27 and np.array_equal(miss, calib.missing_rounds(160, 133, seed=1))
    with pytest.raises(ValueError, match="n_obs"):
        calib.missing_rounds(160, 0, seed=1)


@pytest.fixture(scope="module")
def small_cal():
    return calib.calibrate((0.3, 0.6, 1.2), n_reps=3, n_datasets=150, seed=2)


def test_a_kept_calibration_is_handed_out_as_copies(small_cal):
    """calibrate keeps its result for the same arguments (notebook 08 calibrates seed 0 three times); each call
    gets a copy equal to a calibration made afresh, and changing it changes no later call."""
    again = calib.calibrate((0.3, 0.6, 1.2), n_reps=3, n_datasets=150, seed=2)
    fresh = calib.calibrate((0.3, 0.6, 1.2), n_reps=3, n_datasets=150, seed=2,
                            published=reference.published_table1())  # the same Table 1, not kept
    for cal in (again, fresh):
        assert cal is not small_cal
        assert cal.table.equals(small_cal.table) and cal.grid.equals(small_cal.grid)
        assert list(cal.datasets) == list(small_cal.datasets)
        for k, ds in cal.datasets.items():
            assert np.array_equal(ds.chosen, small_cal.datasets[k].chosen)
            assert np.array_equal(cal.nulls[k], small_cal.nulls[k])
    again.table.loc[:, "noise"] = -1.0
    again.datasets[next(iter(again.datasets))].chosen[:] = 0
    again.nulls[next(iter(again.nulls))][:] = -1.0
    third = calib.calibrate((0.3, 0.6, 1.2), n_reps=3, n_datasets=150, seed=2)
    assert third.table.equals(fresh.table) and third.grid.equals(fresh.grid)
    assert all(np.array_equal(third.datasets[k].chosen, fresh.datasets[k].chosen) for k in fresh.datasets)
    assert all(np.array_equal(third.nulls[k], fresh.nulls[k]) for k in fresh.nulls)


def test_calibrated_datasets_are_simulated_and_their_alpha_is_the_real_test(small_cal):
    t1 = reference.published_table1().set_index("model")
    tab = small_cal.table.set_index("model")
    for m, row in tab.iterrows():
        ds = small_cal.datasets[row.sim_label]
        assert ds.model == f"sim-{m}" and ds.provider == "simulated"
        assert ds.n_obs == t1.loc[m, "n_obs"]
        assert row.noise in (0.3, 0.6, 1.2)
        # the shared null gives exactly what the rationality test gives on the kept dataset
        r = random_choice_test(ds, n_datasets=150, seed=2)
        assert row.ccei_sim == r.index_value == rp.ccei(ds) and row.alpha_sim == r.alpha
        # eq. (4): alpha is the share of the random datasets with a CCEI at least the kept dataset's
        assert row.alpha_sim == pytest.approx(np.mean(r.null_index >= rp.ccei(ds) - 1e-9), abs=1e-12)
        assert row.err_ccei == pytest.approx(row.ccei_sim - t1.loc[m, "ccei"])
        assert row.err_alpha == pytest.approx(row.alpha_sim - t1.loc[m, "alpha"])
    # the chosen noise minimises the mean error over the grid
    g = small_cal.grid.assign(err=lambda d: (d.ccei - d.model.map(t1["ccei"])).abs()
                              + (d.alpha - d.model.map(t1["alpha"])).abs())
    best = g.groupby(["model", "noise"])["err"].mean().groupby("model").idxmin().map(lambda x: x[1])
    assert (best.loc[tab.index] == tab["noise"]).all()


def test_compare_g_against_table3():
    pub = reference.published_table3()
    stats, comp = rep.compare_g(reference.published_table3(full_names=True))
    assert stats["pearson"] == pytest.approx(1) and stats["mean_abs_diff"] == 0
    assert stats["mantel_p"] == pytest.approx(1 / 5040)  # the identity is the best of the 7! relabellings
    assert (comp["components_sim"] == comp["components_pub"]).all()
    assert list(comp["n_edges_pub"]) == [19, 16, 13]  # Section 3.3: H^0.75, H^0.70, H^0.65
    assert comp.loc[comp.alpha == 0.65, "components_pub"].iloc[0][1] == ["llama3.2"]
    # relabelled models: the same numbers in other places no longer agree
    names = list(pub.index)
    shuffled = pub.rename(index=dict(zip(names, names[::-1])), columns=dict(zip(names, names[::-1])))
    s2, _ = rep.compare_g(shuffled)
    assert s2["pearson"] < 0.9 and s2["mean_abs_diff"] > 0
    with pytest.raises(ValueError, match="lacks the published models"):
        rep.compare_g(pub.iloc[:6, :6])


def test_e_levels_are_the_twelfths():
    assert np.allclose(np.array(rep.e_levels()) * 12, [5, 6, 7, 8], atol=1e-6)
    assert all(e < k / 12 for e, k in zip(rep.e_levels(), range(5, 9)))


@pytest.mark.slow
def test_replication_headline_pinned():
    """Notebook 08 at its defaults (seed 0): calibration errors per model and G against Table 3."""
    res = rep.replicate()
    t = res.calibration.table.set_index("model")
    assert list(t["noise"].round(4)) == [0.6311, 0.5477, 0.5477, 0.7272, 0.6311, 0.6311, 0.5477]
    assert np.allclose(t["err_ccei"], ERR_CCEI, atol=1e-4)
    assert np.allclose(t["err_alpha"], ERR_ALPHA, atol=1e-9)
    # every simulated agent passes at 10 %, six of seven at 5 % (claude's alpha 0.062: the nearest to 0.008)
    assert (t["alpha_sim"] <= 0.10).all() and (t["alpha_sim"] <= 0.05).sum() == 6
    assert res.e_rule * 12 == pytest.approx(5) and res.e_matched * 12 == pytest.approx(7)
    rule, matched = res.stats["rule"], res.stats["matched"]
    # the paper's rule: one type almost always
    assert rule["mean_sim"] == pytest.approx(RULE_MEAN_G, abs=1e-4) and rule["min_sim"] > 0.9
    # the nearest level: the mean is nearer, the pattern is not significantly the published one
    assert matched["mean_sim"] == pytest.approx(NEAREST_MEAN_G, abs=1e-4)
    assert matched["spearman"] == pytest.approx(NEAREST_SPEARMAN, abs=1e-4)
    assert matched["mantel_p"] == pytest.approx(NEAREST_MANTEL_P, abs=1e-4) and matched["mantel_p"] > 0.05
    assert matched["mean_abs_diff"] == pytest.approx(0.1132, abs=1e-4)
    # H^0.65: the published network isolates llama3.2; the simulated one does not, even with as many edges
    c = res.components["matched"].set_index("alpha")
    assert ["llama3.2"] in c.loc[0.65, "components_pub"] and ["llama3.2"] not in c.loc[0.65, "components_sim"]
    from moralkit.psm.networks import threshold_graph

    sparse = threshold_graph(res.G["matched"], min(rep.matched_alphas(res.G["matched"])))
    assert sparse.number_of_edges() == 14 and dict(sparse.degree())["llama3.2"] == 5
    assert res.calibration.table.set_index("model")["noise"].idxmax() == "llama3.2-1b"
    # docs/replication.md: "in this design about half of the random datasets reach 1/3"
    shares = [float((n >= 1 / 3 - 1e-9).mean()) for n in res.calibration.nulls.values()]
    assert f"about half of the random datasets ({100 * min(shares):.0f}–{100 * max(shares):.0f} % per agent) reach 1/3" \
        in _replication_section()


@pytest.mark.slow
def test_independent_simulations_disagree_and_their_average_is_unrelated():
    """Notebook 08's verdict: over 8 independent simulations at the level-matched e the correlation with
    Table 3 changes sign (Spearman -0.73 to 0.75, Mantel p <= 0.05 once), and the average G is not
    significantly related to Table 3 (Spearman 0.11, Mantel p 0.38)."""
    reps = rep.replications(range(8), rep.e_levels(7, 7)[0])
    assert list(reps["spearman"].round(2)) == RECALIBRATED_SPEARMAN
    assert int((reps["mantel_p"] <= 0.05).sum()) == 1
    stats, _ = rep.compare_g(reps.mean_G)
    assert stats["spearman"] == pytest.approx(0.11, abs=0.005) and stats["mantel_p"] == pytest.approx(0.381, abs=0.001)
    assert stats["mantel_p"] > 0.05


@pytest.mark.slow
def test_power_of_the_comparison_pinned():
    """Notebook 08 and docs/replication.md: 24 redraws of the seed-0 calibrated agents at the nearest level agree with
    each other at a mean Spearman of 0.26; the Mantel test rejects in 12 % of pairs; Table 3 sits at the 75th
    percentile of the redraws' leave-one-out means."""
    cal = calib.calibrate(seed=0)
    s = rpower.g_power(rep.redraws(cal, rep.e_levels(7, 7)[0], 24))["summary"]
    assert s["n_pairs"] == 276 and s["n_simulations"] == 24
    for k, v in POWER.items():
        assert s[k] == pytest.approx(v, abs=1e-4), k


def _replication_section() -> str:
    """The manual's replication page (docs/replication.md, a page of the book; the README links to it)."""
    text = (paths.project_root() / "docs" / "replication.md").read_text()
    assert text.startswith("# A paper-calibrated replication of §3.3 (simulation)")
    return " ".join(text.split())


def test_readme_states_the_pinned_replication_numbers():
    """Every number the manual's replication page states is one the slow tests above recompute."""
    s = _replication_section().replace("−", "-")
    names = list(reference.published_table1().set_index("model").loc[list(calib.paper_agents())].index)
    for m, c, a in zip(names, ERR_CCEI, ERR_ALPHA):
        assert f"| {m} | {c:+.3f} | {a:+.3f} |" in s, m
    assert f"mean G {RULE_MEAN_G:.3f} against the published 0.353" in s
    assert f"(mean G {NEAREST_MEAN_G:.3f}:" in s
    assert f"Spearman {NEAREST_SPEARMAN:.2f} with Table 3, Mantel p {NEAREST_MANTEL_P:.2f}" in s
    P = POWER
    row = (f"| {P['mean']:.2f} | {P['sd']:.2f} | {P['q05']:.2f} | {P['q25']:.2f} | {P['median']:.2f} | "
           f"{P['q75']:.2f} | {P['q95']:.2f} | {P['min']:.2f} / {P['max']:.2f} | {100 * P['power']:.0f} % of 276 pairs |")
    assert row in s
    assert f"Table 3's mean Spearman with these simulations is {P['published_mean']:.2f}: the " \
           f"{P['published_percentile']:.0f}th percentile" in s
    assert f"Spearman with Table 3 from {min(RECALIBRATED_SPEARMAN):.2f} to {max(RECALIBRATED_SPEARMAN):.2f}" in s
    assert "about one case in eight" in s and 1 / 9 < P["power"] < 1 / 7
    assert "keeps 5 of its 6 links" in s  # test_replication_headline_pinned: degree 5 of llama3.2


def test_readme_published_cceis_the_design_cannot_produce():
    """docs/replication.md: "0.400, 0.389 and 0.385 are not multiples of 1/12" (the standard CCEI is)."""
    c = reference.published_table1()["ccei"].round(3)
    for v in (0.400, 0.389, 0.385):
        assert v in set(c) and abs(v * 12 - round(v * 12)) > 0.1
    assert "0.400, 0.389 and 0.385 are not multiples of 1/12" in _replication_section()


def test_g_power_on_known_matrices():
    pub = reference.published_table3()
    names = list(pub.index)
    rev = pub.rename(index=dict(zip(names, names[::-1])), columns=dict(zip(names, names[::-1]))).loc[names, names]
    out = rpower.g_power({0: pub, 1: pub.copy(), 2: rev})
    pairs = out["pairs"].set_index(["sim_a", "sim_b"])
    assert pairs.loc[(0, 1), "spearman"] == pytest.approx(1.0)
    from moralkit.studies.crossmethod import mantel_test

    G = {0: pub, 1: pub, 2: rev}
    for a, b in ((0, 1), (0, 2), (1, 2)):  # the vectorised exact tests are mantel_test's
        assert pairs.loc[(a, b), "mantel_p"] == mantel_test(G[a], G[b]).pvalue
    assert out["summary"]["power"] == pytest.approx(np.mean(pairs["mantel_p"] <= 0.05))
    # Table 3 against copies of itself is at the top: its mean correlation with them is 1 on (0, 1)
    pub_rows = out["published"].set_index("simulation")
    assert pub_rows.loc[0, "spearman"] == pytest.approx(1.0) and pub_rows.loc[2, "spearman"] < 0.9
    assert out["summary"]["published_mean"] == pytest.approx(pub_rows["spearman"].mean())
    loo = pub_rows["loo_mean"]
    expect = 100 * ((loo < out["summary"]["published_mean"]).sum() + 0.5 * (loo == out["summary"]["published_mean"]).sum()) / 3
    assert out["summary"]["published_percentile"] == pytest.approx(expect)
    with pytest.raises(ValueError, match="at least 2"):
        rpower.g_power({0: pub})


def test_redraws_keep_the_calibrated_agents(small_cal):
    e = rep.e_levels(7, 7)[0]
    a = rep.redraws(small_cal, e, 2, T=8, rho=10, seed=3)
    b = rep.redraws(small_cal, e, 2, T=8, rho=10, seed=3)
    assert list(a) == [0, 1] and all(a[k].equals(b[k]) for k in a)
    assert list(a[0].index) == list(reference.published_table3().index)
    assert not a[0].equals(a[1])  # new answers and draws
    with pytest.raises(ValueError, match="at least 2"):
        rep.redraws(small_cal, e, 1)


def test_replications_is_a_result_object():
    """Replications holds each seed's G and their mean as attributes (not in DataFrame.attrs)."""
    import pandas as pd

    pub = reference.published_table3()
    frame = pd.DataFrame({"seed": [0, 1], "e": [0.5, 0.5], "spearman": [0.2, -0.1], "mantel_p": [0.3, 0.6]})
    reps = rep.Replications(frame, {0: pub, 1: pub * 0.5}, 0.5)
    assert len(reps) == 2 and list(reps["spearman"]) == [0.2, -0.1]
    pd.testing.assert_frame_equal(reps.mean_G, pub * 0.75)
    out = reps.to_frame()
    out.loc[0, "spearman"] = 9.0
    assert reps.to_frame().loc[0, "spearman"] == 0.2 and not reps.to_frame().attrs
    assert reps._repr_html_() == frame._repr_html_() and repr(reps).startswith("<Replications (SIMULATED agents): 2")
    fig = reps.plot(title="t")
    assert len(fig.axes) == 2  # simulated vs published G, and every simulation's rank correlation


def test_replication_result_shows_its_summary(small_cal):
    pub = reference.published_table3()
    stats = {k: rep.compare_g(pub)[0] for k in ("rule", "matched")}
    res = rep.ReplicationResult(calibration=small_cal, table1=None, e_rule=5 / 12 - 1e-9, e_matched=7 / 12 - 1e-9,
                                scan=None, studies={}, G={"rule": pub, "matched": pub}, stats=stats, components={})
    assert res.to_frame().equals(res.summary()) and list(res.to_frame().index) == ["rule", "matched"]
    assert res._repr_html_() == res.summary()._repr_html_()
    assert "SIMULATED" in repr(res) and "\n" not in repr(res)
    assert small_cal.to_frame().equals(small_cal.table) and small_cal.note.startswith("SIMULATED")
    assert len(res.plot().axes) == 1
