"""The README's "What the committed runs show" is computed from the committed data: every number it states
is recomputed here (`python -m moralkit findings`), so a change of data or code that moves a finding fails."""

import math
import re

import numpy as np
import pandas as pd
import pytest

from moralkit import paths
from moralkit.figures import format_interval
from moralkit.studies import findings


@pytest.fixture(scope="module")
def results():
    return findings.findings(seed=0)


def test_readme_states_what_the_committed_runs_show(results):
    text = (paths.project_root() / "README.md").read_text()
    m = re.search(r"<!-- findings: python -m moralkit findings -->\n(.*?)<!-- /findings -->", text, re.S)
    assert m, "README.md has lost its findings markers"
    assert m.group(1) == findings.findings_markdown(results=results), (
        "README.md's findings are out of date: replace the block with the output of `python -m moralkit findings`")


def test_findings_cover_the_panel(results):
    # issue 15: >= 6 respondents answer both surveys, so the Mantel test is computed
    res = results["cross_method"]
    assert res is not None and len(res.models) >= 6 and res.mantel is not None and res.mantel.exact
    assert res.mantel.min_pvalue == pytest.approx(1 / math.factorial(len(res.models)))
    cov = results["coverage"]
    # the baseline model and SmolLM2 have exact likelihoods for every scenario of both levels
    for m in ("qwen2.5-coder-0.5b-instruct", "smollm2-135m-instruct"):
        rows = cov[cov["respondent"] == m]
        assert set(rows["ambiguity"]) == {"low", "high"}
        assert (rows["scenarios"] == rows["of"]).all() and (rows["forms"] == 6 * rows["of"]).all()


def test_coverage_counts_scenarios_and_forms(tmp_path):
    rows = [dict(model="m", scenario_id=f"A_{i:03d}", question_type=q, ordering=o, form=f"{q}{o}",
                 mass_action1=0.3, mass_action2=0.5, covered=0.8, uncovered=0.2, p_action1=0.375, p_action2=0.625,
                 n_answers=4, estimator="token_probability")
            for i in range(3) for q in ("ab", "repeat", "compare") for o in (0, 1)]
    pd.DataFrame(rows).to_csv(tmp_path / "m-low.csv.gz", index=False)
    cov = findings.likelihood_coverage(tmp_path)
    assert cov[["respondent", "ambiguity", "scenarios", "forms"]].values.tolist() == [["m", "low", 3, 18]]
    assert cov["covered"].iloc[0] == pytest.approx(0.8) and cov["of"].iloc[0] == 687


def test_agreement_says_which_measures_lie_in_their_noise_band():
    assert findings._within_noise(0.5, 0.4, 0.6, 0.07, 0.06, 0.08) == "both"
    assert findings._within_noise(0.3, 0.4, 0.6, 0.07, 0.06, 0.08) == "mean abs. diff. only"
    assert findings._within_noise(0.5, 0.4, 0.6, 0.09, 0.06, 0.08) == "r only"
    assert findings._within_noise(0.7, 0.4, 0.6, 0.05, 0.06, 0.08) == "neither"
    # a band edge counts as inside
    assert findings._within_noise(0.4, 0.4, 0.6, 0.08, 0.06, 0.08) == "both"


def test_mantel_sentence_states_significance_at_5_percent():
    assert findings._significance(0.037) == "significant at the 5 % level"
    assert findings._significance(0.05) == "significant at the 5 % level"
    assert findings._significance(0.101) == "not significant at the 5 % level"
    assert findings._significance(0.02, level=0.01) == "not significant at the 1 % level"


def _reading_them() -> str:
    text = (paths.project_root() / "README.md").read_text()
    return re.search(r"<!-- /findings -->\n\nReading them:\n(.*?)(?:\n## |\Z)", text, re.S).group(1)


def test_readme_prose_restates_the_computed_findings(results):
    """The bullets under the findings block repeat some of its numbers in words: they must move with it."""
    prose = " ".join(_reading_them().split())
    ag = results["agreement"]
    bands = [ag[[m, f"{m}_sim_lo", f"{m}_sim_hi"]].to_numpy() for m in ("r_p", "mad_p")]
    inside = sum(int(lo <= v <= hi) for b in bands for v, lo, hi in b)
    assert f"{inside} of the {2 * len(ag)} measures above lie in their noise bands" in prose
    digits = {0: 2, 1: 3}  # as the findings block prints r and the mean abs. diff.
    for k, b in enumerate(bands):
        for v, lo, hi in b:
            if not lo <= v <= hi:  # a measure outside its band is named, with the digits that show it
                assert f"({format_interval(v, lo, hi, digits[k]).split()[0]})" in prose
    smp = results["sampling"].set_index(["respondent", "ambiguity"])["invalid_or_refusal"]
    smol = [smp[("smollm2-135m-instruct", a)] for a in ("low", "high")]
    assert f"{100 * smol[0]:.1f} % and {100 * smol[1]:.1f} % of its answers map to neither action" in prose
    q15 = sorted(smp[("qwen2.5-coder-1.5b-instruct", a)] for a in ("low", "high"))
    assert f"{100 * q15[0]:.1f}–{100 * q15[1]:.1f} % of its sampled answers map to neither action" in prose
    m = results["cross_method"].mantel
    assert (f"r = {m.statistic:.3f} (p = {m.pvalue:.3f}) is not significant" in prose) == (m.pvalue > 0.05)


def _intro() -> str:
    text = (paths.project_root() / "README.md").read_text()
    return " ".join(text[text.index("## What the committed runs show"):text.index("<!-- findings:")].split())


def test_readme_intro_states_the_committed_runs(results):
    """The paragraphs above the findings block: every number in them is recomputed here (issue 28)."""
    from moralkit.psm.dataset import read_psm
    from moralkit.studies.steerability import option_sets_differ

    intro = _intro()
    runs = results["psm_runs"].set_index("respondent")
    smol, base = "smollm2-135m-instruct", findings.BASE
    qwen = runs[runs.index.str.startswith("qwen")]
    assert (f'"Option 1" in {100 * qwen["option1"].min():.1f}–{100 * qwen["option1"].max():.1f} % of their rounds '
            f'and SmolLM2 in {100 * runs.loc[smol, "option1"]:.1f} %') in intro
    assert f"SmolLM2-135M-Instruct ({runs.loc[smol, 'answered']} rounds answered" in intro
    assert (runs.drop(index=smol)["answered"] == 160).all()
    assert (runs["alpha"] > 0.05).all() and f"(α {runs['alpha'].min():.2f}–{runs['alpha'].max():.2f})" in intro
    data = read_psm(paths.data_dir() / "psm")
    assert f"in {option_sets_differ(data[base], data[base + '-s1'])} of the 160 rounds" in intro
    personas = [m for m in data if "+persona-" in m]
    assert len(personas) == 3 and all(option_sets_differ(data[base], data[m]) == 0 for m in personas)
    assert "The persona runs answered exactly seed 0's option sets" in intro
    smp = results["sampling"]
    assert (smp["scenarios"] == 200).all() and (smp["scenarios_at_paper_M"] == 200).all()
    assert "on the same 200 low- and 200 high-ambiguity scenarios" in intro
    for a in ("low", "high"):  # the same scenarios for every sampled respondent
        r = findings._own_responses(a)
        assert len({frozenset(g["scenario_id"]) for _, g in r.groupby("model")}) == 1
    cov = results["coverage"]
    assert (cov["scenarios"] == cov["of"]).all()
    assert set(zip(cov["ambiguity"], cov["of"])) == {("low", 687), ("high", 679)} and "(687 low, 679 high)" in intro


def test_readme_reading_states_the_placebo_and_mantel_findings(results):
    prose = " ".join(_reading_them().split()).replace("−", "-")
    cov = results["coverage"].set_index(["respondent", "ambiguity"])["covered"]
    smp = results["sampling"].set_index(["respondent", "ambiguity"])["invalid_or_refusal"]

    def pct_range(xs):
        return f"{round(100 * min(xs))}–{round(100 * max(xs))} %"

    smol, q05, q15 = "smollm2-135m-instruct", findings.BASE, "qwen2.5-coder-1.5b-instruct"
    assert f"SmolLM2 puts only {pct_range([cov[(smol, a)] for a in ('low', 'high')])} of its probability" in prose
    valid = [M * (1 - smp[(smol, a)]) for a, M in (("low", 5), ("high", 10))]
    assert f"rest on {valid[0]:.1f} and {valid[1]:.1f} valid answers per form" in prose
    assert f"(0.5B: {100 * smp[(q05, 'low')]:.1f} %)" in prose and f"{100 * smp[(q05, 'high')]:.1f}" == f"{100 * smp[(q05, 'low')]:.1f}"
    assert f"hold {pct_range([cov[(q15, a)] for a in ('low', 'high')])} of its probability" in prose
    assert f"(0.5B: {pct_range([cov[(q05, a)] for a in ('low', 'high')])})" in prose
    # QF-E: the sampled value is the plug-in bias of M draws
    ag = results["agreement"]
    bias = (ag["qfe_sampled"] - ag["qfe_sampled_sim"]).abs()
    gap = ag["qfe_exact"] - ag["qfe_sampled"]
    assert (bias < gap / 2).all()
    assert f"`expected` is within {bias.max():.2f} of `sampled` while both lie {gap.min():.2f}–{gap.max():.2f} below" in prose
    low05 = ag[(ag["model"] == q05) & (ag["ambiguity"] == "low")].iloc[0]
    assert low05["qfe_sampled"] < 0.7 < low05["qfe_exact"]
    assert f"from {low05['qfe_exact']:.2f} (exact) to {low05['qfe_sampled']:.2f} (sampled)" in prose
    # the Mantel test and what its respondents are
    res = results["cross_method"]
    m, d = res.mantel, res.distinct
    n, k = len(res.models), len(res.same_model[q05])
    assert f"The Mantel test has {n} respondents, so its smallest attainable p is 1/{math.factorial(n)}" in prose
    assert f"r = {m.statistic:.3f} (p = {m.pvalue:.3f}) is not significant" in prose and m.pvalue > 0.05
    assert (f"{k} of the {n} are one model" in prose
            and f"{k * (k - 1) // 2} of the {n * (n - 1) // 2} pairs compare that model with itself" in prose)
    assert len(d.models) == 3 and d.mantel.min_pvalue == pytest.approx(1 / 6) and d.mantel.min_pvalue > 0.05
    assert f"cannot reach 5 % at all (r = {d.mantel.statistic:.3f}, p = {d.mantel.pvalue:.3f})" in prose
    # personas: what beats the placebos, and what does not
    eff = results["persona_moralchoice"].set_index(["persona", "ambiguity"])
    assert f"(largest mean change {eff['mean_delta'].abs().max():.4f})" in prose and eff["mean_delta"].abs().max() < 0.01
    towards = eff[eff["verdict"] == "towards its rules"]
    assert list(towards.index) == [("deontological", "high")]
    t = towards.iloc[0]
    assert (f"{t['directed_effect']:+.4f}, beating shuffled signs (p {t['p_specific']:.4f}) and the "
            f"care and utilitarian rules (paired p {t['p_beats_placebos']:.4f})") in prose
    care = eff.loc["care"]
    assert (care["verdict"] == "a shift, not specific to its rules").all() and (care["placebo_p_min"] <= 0.0001).all()
    assert f"raises p(action 1) by {care['mean_delta'].min():.4f}–{care['mean_delta'].max():.4f}" in prose
    low_share = eff.xs("low", level="ambiguity")["share_plus"]
    assert f"in {100 * low_share.min():.1f}–{100 * low_share.max():.1f} % of the signed scenarios" in prose
    assert all(eff.loc[(p, "low"), "verdict"] == "a shift away, not specific to its rules"
               for p in ("deontological", "utilitarian"))
    assert eff.loc[("utilitarian", "high"), "verdict"] == "no shift towards its rules"
    ps = results["persona_psm"]
    rows = results["persona_psm_effects"]
    assert not ps.attrs
    pers = rows[rows["persona"].notna()]
    excl = pers[(pers["delta_lo"] > 0) | (pers["delta_hi"] < 0)]
    assert f"{len(excl)} of the {len(pers)} shifts of b has an interval that excludes 0" in prose
    for _, r in excl.iterrows():
        assert f"the {r['persona']} persona's {r['dimension']}, {format_interval(r['delta'], r['delta_lo'], r['delta_hi'], 2, signed=True)}" in prose.replace("−", "-")
        assert r["agrees"]
    s1 = ps[ps["persona"].isna()].iloc[0]
    assert f"differ in {s1['rounds_options_differ']} rounds, moves b by up to {s1['max_abs_delta']:.2f}" in prose


def test_with_200_draws_the_in_band_count_moved_with_the_seed():
    """README: "with 200 draws the count moved between 11 and 12 with the seed" (the reason for N_SIM)."""
    from moralkit import moralchoice as mc
    from moralkit.moralchoice.comparison import N_SIM, compare_at_paper_m
    from moralkit.moralchoice.likelihood import load_likelihoods

    def inside(seed):
        n = 0
        for a in mc.PAPER_SAMPLES:
            c = compare_at_paper_m(load_likelihoods(a), findings._own_responses(a), a, seed=seed, fallback=False,
                                   n_sim=200).to_frame()
            n += sum(int(lo <= v <= hi) for m in ("r_p", "mad_p") for v, lo, hi in c[[m, f"{m}_sim_lo", f"{m}_sim_hi"]].to_numpy())
        return n

    assert (inside(0), inside(1)) == (11, 12) and N_SIM >= 2000
    assert "with 200 draws the count moved between 11 and 12 with the seed" in " ".join(_reading_them().split())


# ----------------------------------------------------------------------------- the manual's audit page


def _audit_page() -> str:
    return " ".join((paths.project_root() / "docs" / "audit.md").read_text(encoding="utf-8").split())


def test_audit_page_printed_values_each_convention_can_produce():
    """docs/audit.md: "The standard CCEI ... can produce only 4 of the 21 distinct values printed in Table 1",
    and "Only expenditures in unshifted coordinates can produce all of them"."""
    from moralkit.psm import reference
    from moralkit.studies import conventions as cv

    printed = sorted(set(reference.published_table1()["ccei"].round(3)))
    standard = int(cv.in_support(printed, "corner/e").sum())
    assert f"can produce only {standard} of the {len(printed)} distinct values printed in Table 1" in _audit_page()
    assert (standard, len(printed)) == (4, 21)
    every = [c for c in cv.CONVENTIONS if cv.in_support(printed, c).all()]
    assert every and all(c.coordinates == "origin" for c in every)
    assert "Only expenditures in unshifted coordinates can produce all of them" in _audit_page()


def test_audit_page_power_at_noise_2_and_equal_5_and_10_percent_columns():
    """docs/audit.md: the CI-size power shares (noise 0 / 0.3 / 1 / 2, and the random agents) and "The 5 % and
    10 % tests coincide, because the CCEI only takes multiples of 1/12" (about 3 s)."""
    from moralkit.studies import audit
    from moralkit.studies import conventions as cv

    study = audit.power_study((0.0, 0.3, 1.0, 2.0), n_agents=40, n_random=100, n_datasets=200, seed=0)
    tab = audit.power_table(study)
    assert (tab["pass_5%"] == tab["pass_10%"]).all()
    assert cv.in_support(study["ccei"].unique(), "corner/e").all()  # every CCEI a multiple of 1/12
    shares = " / ".join(f"{100 * v:g}" for v in tab.xs("quadratic", level="kind")["pass_5%"])
    rand = 100 * tab.loc[("random", np.inf), "pass_5%"]
    text = _audit_page()
    assert f"the shares are {shares} % and {rand:g} %" in text
    assert "The 5 % and 10 % tests coincide, because the CCEI only takes multiples of 1/12" in text


@pytest.mark.slow
def test_audit_page_nlls_cross_forms_rmse():
    """docs/audit.md: fitting one NLLS form to answers generated by the other "gives RMSE 0.1–0.4 on a and b".
    At the notebook's 40 agents (its table, not a smaller stand-in: about 10 s, the one slow pin here)."""
    from moralkit.studies import audit

    x = audit.nlls_cross_forms(n_agents=40, seed=0)
    off = x[x["generated"] != x["fitted"]]
    assert set(off["param"].str[0]) == {"a", "b"} and (off["n_failed"] == 0).all()
    lo, hi = off["rmse"].min(), off["rmse"].max()
    assert f"gives RMSE {lo:.1f}–{hi:.1f} on a and b" in _audit_page()


def test_audit_page_partition_sanity():
    """docs/audit.md: at e = 0.333 every simulated agent falls into one type; at e = 0.8–0.9 the groups are
    recovered with accuracy 0.95–0.99 (ρ = 20, the notebook's T = 200 and seed: its table's rows)."""
    from moralkit.studies import audit

    df = audit.partition_recovery(rhos=(20,), es=(0.333, 0.8, 0.9), T=200, seed=0).set_index("e")
    assert df.loc[0.333, "mean_types"] == 1.0 and df.loc[0.333, "accuracy"] == pytest.approx(3 / 15)
    acc = df.loc[[0.8, 0.9], "accuracy"]
    assert f"(accuracy {acc.min():.2f}–{acc.max():.2f} with ρ = 20)" in _audit_page()
    assert "At the paper's e = 0.333, simulated agents with distinct utilities all fall into one type" in _audit_page()


@pytest.mark.slow
def test_audit_page_power_and_size_of_the_full_run():
    """docs/audit.md: "Quadratic agents with logit noise 0 / 0.3 / 1 / 2 pass at 5 % in 100 / 98 / 81 / 37 % of
    cases" and "Uniformly random agents pass in 3 %": notebook 06's own power study (8 noise levels, 100 agents
    each, 200 random agents, 1,000 random datasets, seed 0), recomputed. Slow (about 25 s of CPU): these are the
    page's numbers, and a smaller study draws other agents."""
    from moralkit.studies import audit

    levels = [0.0, 0.1, 0.3, 0.5, 1.0, 2.0, 3.0, 5.0]  # notebook 06's noise_levels
    tab = audit.power_table(audit.power_study(levels, n_agents=100, n_random=200, n_datasets=1000, seed=0))
    quad = tab.xs("quadratic", level="kind")["pass_5%"]
    shares = " / ".join(f"{100 * quad[x]:.0f}" for x in (0.0, 0.3, 1.0, 2.0))
    rand = 100 * tab.loc[("random", np.inf), "pass_5%"]
    text = _audit_page()
    assert f"Quadratic agents with logit noise 0 / 0.3 / 1 / 2 pass at 5 % in {shares} % of cases" in text
    assert f"Uniformly random agents pass in {rand:.0f} % of cases" in text
    assert (tab["pass_5%"] == tab["pass_10%"]).all()
