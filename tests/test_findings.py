"""The README's "What the committed runs show" is computed from the committed data: every number it states
is recomputed here (`python -m moralkit findings`), so a change of data or code that moves a finding fails."""

import math
import re

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
    return re.search(r"<!-- /findings -->\n\nReading them:\n(.*?)\n## ", text, re.S).group(1)


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
    p = results["cross_method"].mantel.pvalue
    assert ("the correlation is not significant" in prose) == (p > 0.05)
    assert f"and {p:.3f} at" in prose  # the latest of the p-values the prose lists
