"""Table 1's Houtman–Maks column (moralkit.psm.hm_table1) and its journal (moralkit.psm.hm_journal).

The journal tests use SIMULATED agents (moralkit.psm.simulate) with few random datasets; the committed-table
test recomputes a sample of the committed decisions on the project's own PSM runs.
"""

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from moralkit.errors import MoralkitError
from moralkit.psm import hm_journal, hm_table1, rationality, rp
from moralkit.psm.dataset import read_psm, write_psm
from moralkit.psm.design import make_design
from moralkit.psm.houtman_maks import houtman_maks, houtman_maks_decision, houtman_maks_upper_bound
from moralkit.psm.simulate import random_quadratic_agent, simulate_quadratic

N = 12  # random datasets per respondent in these tests


@pytest.fixture(scope="module")
def psm(tmp_path_factory):
    """Two SIMULATED respondents (near-rational: their random datasets are decided in milliseconds)."""
    d = make_design(0)
    out = tmp_path_factory.mktemp("psm")
    write_psm([simulate_quadratic(random_quadratic_agent(0), d, noise=0.05, seed=0, model="sim-a")], out / "sim-a.csv.gz")
    write_psm([simulate_quadratic(random_quadratic_agent(1), d, noise=0.0, seed=1, model="sim-b")], out / "sim-b.csv.gz")
    return out


@pytest.fixture(scope="module")
def straight(psm):
    """(table, decisions) computed in one go, in memory."""
    return hm_table1.compute(read_psm(psm), n_datasets=N, seed=0, time_limit=30, psm_dir=psm)


def _inputs(psm, **kw):
    return dict(dict(input_sha256=hm_table1.input_hashes(psm), seed=0, n_datasets=N, time_limit_s=30.0,
                     own_time_limit_s=None), **kw)


def test_journal_resumes_after_an_interruption_with_identical_results(psm, straight, tmp_path, monkeypatch):
    """A run killed after 5 decisions (and a torn last line, as a SIGKILL mid-write leaves) continues where it
    stopped: nothing decided is recomputed, and table and decisions equal an uninterrupted run's, which equal
    hm_random_choice_test's."""
    data = read_psm(psm)
    jpath = tmp_path / "journal.jsonl"
    calls = []
    real = hm_table1.hm_decide

    def dies_after_5(*a, **kw):
        if len(calls) == 5:
            raise KeyboardInterrupt
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(hm_table1, "hm_decide", dies_after_5)
    with pytest.raises(KeyboardInterrupt), hm_journal.Journal(jpath, _inputs(psm)) as j:
        hm_table1.run(data, j)
    monkeypatch.setattr(hm_table1, "hm_decide", real)
    st = hm_journal.read_journal(jpath)
    assert sum(map(len, st.decisions.values())) == 5 and set(st.own) == {"sim-a", "sim-b"}
    with open(jpath, "ab") as f:
        f.write(b'{"kind":"decision","model":"sim-a","data')  # torn by the kill
    seen = []
    monkeypatch.setattr(hm_table1, "hm_decide", lambda *a, **kw: seen.append(1) or real(*a, **kw))
    with hm_journal.Journal(jpath, _inputs(psm)) as j:
        hm_table1.run(data, j)
        tab, dec = hm_table1.build(j.state, data)
    assert len(seen) == 2 * N - 5  # only what the journal lacked
    pd.testing.assert_frame_equal(tab.drop(columns=["seconds", "cpu_seconds"]),
                                  straight[0].drop(columns=["seconds", "cpu_seconds"]))
    pd.testing.assert_frame_equal(dec[["model", "dataset", "decision", "decided_by"]],
                                  straight[1][["model", "dataset", "decision", "decided_by"]])
    for m, ds in data.items():
        ref = rationality.hm_random_choice_test(ds, n_datasets=N, seed=0, time_limit=30)
        assert dec[dec["model"] == m]["decision"].tolist() == ref.decisions.tolist()
    st = hm_journal.read_journal(jpath)
    assert st.n_done("sim-a") == N  # the torn line was cut, the file reads whole
    seq = [r["model"] for r in st.records if r["kind"] == "decision"]
    assert seq == ["sim-a"] * N + ["sim-b"] * N  # one respondent finished before the next, cheapest first


def test_cheapest_respondent_first():
    """Fewer rounds first (SmolLM2's 94 before 160), then a higher own HM (bounds decide more often)."""
    own = {"q0.5": dict(n_obs=160, n_kept=40), "smol": dict(n_obs=94, n_kept=29), "q1.5": dict(n_obs=160, n_kept=43),
           "q0.5-s1": dict(n_obs=160, n_kept=40)}
    assert hm_table1.order(own) == ["smol", "q1.5", "q0.5", "q0.5-s1"]


def test_results_do_not_depend_on_n_jobs(psm, straight):
    """Two workers (threads here, to keep the test cheap; the command's default backend is processes)
    decide the same datasets the same way, whatever order they finish in."""
    from joblib import parallel_backend

    with parallel_backend("threading"):
        tab, dec = hm_table1.compute(read_psm(psm), n_datasets=N, seed=0, time_limit=30, psm_dir=psm, n_jobs=2)
    assert dec[["model", "dataset", "decision"]].equals(straight[1][["model", "dataset", "decision"]])


def test_a_journal_of_other_inputs_or_in_use_is_refused(psm, tmp_path):
    jpath = tmp_path / "j.jsonl"
    with hm_journal.Journal(jpath, _inputs(psm)) as j:
        with pytest.raises(MoralkitError, match="another run is writing"):
            hm_journal.Journal(jpath, _inputs(psm))
        j.append({"kind": "decision", "model": "sim-a", "dataset": 0, "decision": 1, "decided_by": "bound",
                  "seconds": 0.1, "cpu_seconds": 0.1, "at": 0.0})
    for change, words in ((dict(seed=1), "seed: journal 0, this run 1"),
                          (dict(n_datasets=1000), "n_datasets: journal 12, this run 1000"),
                          (dict(time_limit_s=None), "time_limit_s: journal 30.0, this run None"),
                          (dict(input_sha256={"sim-a.csv.gz": "0" * 64}), "PSM data files differ (sim-a.csv.gz, sim-b")):
        with pytest.raises(MoralkitError, match="holds another computation") as e:
            hm_journal.Journal(jpath, _inputs(psm, **change))
        assert words in str(e.value) and "--journal NEW_PATH" in str(e.value)
    assert hm_journal.read_journal(jpath).n_done("sim-a") == 1  # a refused run changes nothing
    with pytest.raises(MoralkitError, match="--table-only: no journal"):
        hm_table1.main(["--psm-dir", str(psm), "--out", str(tmp_path / "none"), "--table-only"])
    with pytest.raises(MoralkitError, match=r"--models: no answered PSM data for \['sim-c'\]"):
        hm_table1.main(["--psm-dir", str(psm), "--out", str(tmp_path), "--models", "sim-a,sim-c"])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind":"start"}\n')
    with pytest.raises(MoralkitError, match="not a moralkit hm_table1 journal"):
        hm_journal.read_journal(bad)


def test_partial_journal_gives_interval_alphas_with_reasons(psm, tmp_path, capsys):
    """The command on one respondent, then the table built from its journal: that respondent's alpha exact, the
    other 'not computed yet'; a partly done respondent gets [low, high] and how many are missing."""
    hm_table1.main(["--psm-dir", str(psm), "--out", str(tmp_path), "--n-datasets", str(N), "--time-limit", "30",
                    "--models", "sim-a"])
    tab, meta, why = hm_table1.load(tmp_path, psm)
    assert why is None and meta["n_decided"] == N and meta["n_requested"] == 2 * N and meta["journal_lines"] > N
    a, b = tab.set_index("model").loc["sim-a"], tab.set_index("model").loc["sim-b"]
    assert hm_table1.alpha_text(a) == f"{a['alpha_hm']:.3f}" and a["n_missing"] == 0
    assert a["hm_exact"] == f"{houtman_maks(read_psm(psm)['sim-a']).n_kept}/160"
    assert hm_table1.alpha_text(b) == "not computed yet" and b["hm_exact"] == "not computed"
    d = hm_table1.describe(meta)
    assert d.startswith(f"HM column: {N} random datasets per respondent (seed 0), at most 30 s each; {N} of {2 * N} "
                        "random datasets decided (1 of 2 respondents complete) in 1 run from ")
    assert "(--n-jobs 1; the last: `python -m moralkit.psm.hm_table1 " in d and " at the start, " in d
    view = hm_table1.beside(pd.DataFrame({"model": ["sim-a", "sim-b", "other"], "label": ["0.9**", "1", "0.5"],
                                          "alpha": [0.01, 1, 0.5]}), tab)
    assert view.loc["sim-b", "alpha (HM)"] == "not computed yet" and view.loc["other", "HM"] == "not computed"
    assert view["random datasets decided"].tolist() == [f"{N} of {N}", f"0 of {N}", "none"]
    row = dict(hm_kept=29, hm_upper=29, n_undecided=0, n_missing=600, n_datasets=1000, alpha_hm_low=0.2,
               alpha_hm_high=0.8, alpha_hm=float("nan"), time_limit_s=None)
    assert hm_table1.alpha_text(row) == "[0.200, 0.800]: 600 of 1,000 random datasets not computed yet"
    row.update(n_undecided=3, n_missing=1000 - 997, time_limit_s=600.0)
    assert hm_table1.alpha_text(row) == ("[0.200, 0.800]: 3 of 1,000 random datasets not computed yet; 3 of 1,000 "
                                         "random datasets undecided within 600 s each")
    row.update(n_missing=0, hm_upper=45, own_time_limit_s=60.0)
    assert hm_table1.alpha_text(row).endswith("; the respondent's own HM only bounded to [29, 45] within 60 s")


def test_committed_hm_table_round_trip_and_hash_check(psm, straight, tmp_path):
    """The table is shown only for the data it was computed on."""
    tab, dec = straight
    assert list(tab.columns) == hm_table1.COLUMNS and sorted(tab["model"]) == ["sim-a", "sim-b"]
    assert len(dec) == 2 * N and set(dec["decision"]) <= {0, 1} and (tab["n_undecided"] == 0).all()
    meta = {"seed": 0, "n_datasets": N, "input_sha256": hm_table1.input_hashes(psm)}
    hm_table1.write(tab, meta, tmp_path, dec)
    got, m, why = hm_table1.load(tmp_path, psm)
    assert why is None and m == json.loads(json.dumps(meta))
    cols = ["model", "hm_exact", "stars_hm", "n_exact"]
    assert got[cols].to_dict("records") == tab[cols].to_dict("records")
    (tmp_path / "psm2").mkdir()
    for f in ("sim-a.csv.gz", "sim-b.csv.gz"):
        (tmp_path / "psm2" / f).write_bytes((psm / "sim-a.csv.gz").read_bytes())  # the data changed
    got, m, why = hm_table1.load(tmp_path, tmp_path / "psm2")
    assert got is None and "sim-b.csv.gz" in why and "recompute" in why
    got, m, why = hm_table1.load(tmp_path / "nowhere", psm)
    assert got is None and m is None and "hm_table1" in why


def recompute_sample(out_dir, psm_dir, model=None, n=5, seed=0):
    """Check a committed HM table against its journal and recompute ``n`` of its decisions (of ``model``, or of
    every respondent). Returns the number of decisions recomputed."""
    out_dir = Path(out_dir)
    tab, meta, why = hm_table1.load(out_dir, psm_dir)
    assert why is None, why
    data = read_psm(psm_dir)
    data = {m: ds for m, ds in data.items() if m in set(tab["model"])}
    st = hm_journal.read_journal(out_dir / meta["journal"], max_lines=meta["journal_lines"])
    again, dec = hm_table1.build(st, data)
    assert again.to_csv(index=False) == (out_dir / "table1_hm.csv").read_text()  # the table is the journal's
    committed = pd.read_csv(out_dir / "table1_hm_decisions.csv.gz")
    assert committed[["model", "dataset", "decision"]].equals(dec[["model", "dataset", "decision"]])
    rng, checked = np.random.default_rng(seed), 0
    for _, row in tab[tab["n_done"] > 0].iterrows():
        if model is not None and row["model"] != model:
            continue
        E = rp.psm_expenditure_matrix(data[row["model"]])
        assert row["hm_kept"] <= row["hm_upper"] <= houtman_maks_upper_bound(E)
        mine = dec[(dec["model"] == row["model"]) & (dec["decision"] >= 0)].set_index("dataset")
        for i in rng.permutation(mine.index.to_numpy())[:n]:
            Ei = rationality.random_dataset_expenditure(data[row["model"]], i, meta["n_datasets"], meta["seed"])
            want = int(mine.loc[i, "decision"])
            got = houtman_maks_decision(Ei, int(row["hm_upper"] if want == 1 else row["hm_kept"])).at_least
            assert int(got) == want, (row["model"], i)
            checked += 1
    return checked


def test_the_same_check_on_a_table_built_by_the_command(psm, tmp_path):
    hm_table1.main(["--psm-dir", str(psm), "--out", str(tmp_path), "--n-datasets", "3", "--time-limit", "30"])
    assert recompute_sample(tmp_path, psm, n=2) == 4


def test_committed_hm_table_recomputes_on_a_sample():
    """The committed HM Table 1 (data/derived, `python -m moralkit.psm.hm_table1`): rebuilt from its journal,
    and 5 of SmolLM2-135M's decisions recomputed: its random datasets are the cheapest (about 0.5 s of CPU
    each); the whole test takes about 3 s of CPU (more wall time on a loaded machine)."""
    from moralkit.paths import data_dir

    out = data_dir() / "derived"
    if not (out / "table1_hm.csv").exists():
        pytest.skip("no HM Table 1 committed yet: compute it with `python -m moralkit.psm.hm_table1`")
    assert recompute_sample(out, data_dir() / "psm", model="smollm2-135m-instruct") == 5


def test_alpha_estimate_is_clopper_pearson_on_the_first_decided_datasets():
    """The estimate uses the longest run of decided datasets from index 0 (a gap or an undecided one ends it),
    and its interval is scipy's exact binomial interval."""
    from scipy.stats import binomtest

    dec = {i: {"decision": d} for i, d in enumerate([1, 0, 0, 1, 0, 0, 0, 0, 1, 0])}
    n, est, lo, hi = hm_table1.alpha_estimate(dec)
    ci = binomtest(3, 10).proportion_ci(confidence_level=0.95, method="exact")
    assert (n, est) == (10, 0.3) and np.isclose(lo, ci.low) and np.isclose(hi, ci.high)
    assert hm_table1.alpha_estimate({**dec, 12: {"decision": 1}})[:2] == (10, 0.3)  # 10, 11 missing: stop at 10
    assert hm_table1.alpha_estimate({**dec, 4: {"decision": -1}})[:2] == (4, 0.5)  # undecided ends the run
    n, est, lo, hi = hm_table1.alpha_estimate({})
    assert n == 0 and np.isnan(est) and (lo, hi) == (0.0, 1.0)
    assert hm_table1.alpha_estimate({0: {"decision": 0}, 1: {"decision": 0}})[2] == 0.0
    assert hm_table1.alpha_estimate({0: {"decision": 1}, 1: {"decision": 1}})[3] == 1.0


def test_alpha_estimate_interval_covers_the_true_alpha_at_least_95_percent():
    """Coverage on 2,000 simulated runs of 40 Bernoulli(alpha) decisions for three alphas (one near 0):
    an interval built on the wrong tail or of the wrong width falls well below 0.95."""
    rng = np.random.default_rng(0)
    for alpha in (0.03, 0.3, 0.6):
        x = rng.random((2000, 40)) < alpha
        covered = 0
        for row in x:
            _, _, lo, hi = hm_table1.alpha_estimate({i: {"decision": int(v)} for i, v in enumerate(row)})
            covered += lo <= alpha <= hi
        assert covered / 2000 >= 0.94, (alpha, covered)


def test_partial_respondent_shows_the_estimate_beside_its_interval():
    row = dict(hm_kept=40, hm_upper=40, n_undecided=0, n_missing=700, n_datasets=1000, alpha_hm_low=0.1,
               alpha_hm_high=0.8, alpha_hm=float("nan"), time_limit_s=600.0, n_estimate=300, alpha_hm_estimate=0.25,
               alpha_hm_ci_low=0.2025, alpha_hm_ci_high=0.3021)
    assert hm_table1.alpha_text(row) == ("[0.100, 0.800]: 700 of 1,000 random datasets not computed yet; estimate "
                                         "from the first 300: 0.250 (95 % CI 0.203–0.302)")


def test_first_pass_decides_the_first_datasets_of_every_respondent_then_the_rest(psm, straight, tmp_path):
    """`--first 4`: datasets 0-3 of both respondents before any later one; the same table and decisions as
    one respondent after the other, and each respondent has an estimate after the first pass."""
    jpath = tmp_path / "j.jsonl"
    data = read_psm(psm)
    with hm_journal.Journal(jpath, _inputs(psm)) as j:
        hm_table1.run(data, j, first=4)
        tab, dec = hm_table1.build(j.state, data)
    seq = [(r["model"], r["dataset"]) for r in hm_journal.read_journal(jpath).records if r["kind"] == "decision"]
    assert sorted(seq[:8]) == [(m, i) for m in ("sim-a", "sim-b") for i in range(4)]
    assert len(seq) == len(set(seq)) == 2 * N
    pd.testing.assert_frame_equal(dec[["model", "dataset", "decision", "decided_by"]],
                                  straight[1][["model", "dataset", "decision", "decided_by"]])
    assert (tab["n_estimate"] == N).all()
    hm_table1.main(["--psm-dir", str(psm), "--out", str(tmp_path / "o"), "--n-datasets", str(N), "--time-limit", "30",
                    "--first", "2", "--models", "sim-b"])
    got = pd.read_csv(tmp_path / "o" / "table1_hm_decisions.csv.gz")
    assert got["model"].tolist() == ["sim-b"] * N


def test_committed_alphas_are_the_ones_the_docs_state():
    """docs/psm.md states every respondent's exact alpha_HM, its 95 % interval and how many random datasets the exact
    solver decided, as in the committed table, which is complete; and that only SmolLM2-135M's alpha_HM is below 0.1,
    about what chance gives among seven respondents (1 - 0.9^7)."""
    from moralkit.paths import data_dir

    tab = pd.read_csv(data_dir() / "derived" / "table1_hm.csv")
    docs = " ".join((Path(__file__).resolve().parents[2] / "docs" / "psm.md").read_text().split())
    assert len(tab) == 7 and (tab["n_done"] == tab["n_datasets"]).all() and (tab["n_datasets"] == 1000).all()
    assert (tab["n_undecided"] == 0).all() and (tab["alpha_hm_low"] == tab["alpha_hm_high"]).all()
    for _, r in tab.iterrows():
        row = (f"| `{r['model']}` | {r['hm_exact']} | {r['alpha_hm']:.3f}{r['stars_hm'] if isinstance(r['stars_hm'], str) else ''} "
               f"| {r['alpha_hm_ci_low']:.3f}–{r['alpha_hm_ci_high']:.3f} | {r['n_exact']:,} |")
        assert row in docs, row
    assert tab.loc[tab["alpha_hm"] < 0.1, "model"].tolist() == ["smollm2-135m-instruct"]
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    ccei_alpha = {m: float(a) for m, a in re.findall(r"^\| ([\w.+-]+) \| \d+ \| [\d.]+ % \| [\d/]+ \| ([\d.]+) \|$",
                                                     readme, flags=re.M)}
    assert sorted(ccei_alpha) == sorted(tab["model"]) and min(ccei_alpha.values()) > 0.1
    assert f"CCEI α {ccei_alpha['smollm2-135m-instruct']:.3f}" in docs
    assert f"1 − 0.9^7 = {1 - 0.9 ** 7:.2f}" in docs
    total = f"{int(tab['n_exact'].sum()):,} of 7,000 by the exact solver"
    assert total in docs, total


def test_reading_counts_exact_alphas_below_the_level_against_the_binomial_tail():
    """hm_table1.reading: respondents not complete are left out; the chance of at least k of n alphas below the
    level under the null is the Binomial(n, level) tail (1 of 7: 1 - 0.9^7; 3 of 5: worked by hand); alpha exactly
    at the level counts (the weak comparison of the stars)."""
    def tab(alphas, done=None):
        n = len(alphas)
        done = done or [1000] * n
        return pd.DataFrame({"model": [f"m{i}" for i in range(n)], "alpha_hm": alphas, "n_done": done,
                             "n_at_least": [round(a * 1000) for a in alphas],
                             "n_datasets": [1000] * n, "n_undecided": [0] * n,
                             "alpha_hm_ci_low": [max(a - 0.02, 0) for a in alphas],
                             "alpha_hm_ci_high": [a + 0.02 for a in alphas]})

    assert hm_table1.reading(tab([0.5, 0.2, 0.11])) == (
        "alpha_HM is at most 0.1 for 0 of 3 respondents whose alpha_HM is exact: none is distinguishable from "
        "random choice at the 10 % level.")
    one = hm_table1.reading(tab([0.061, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]))
    assert f"with probability at most {1 - 0.9 ** 7:.2f}: so together they give no evidence" in one
    assert "(m0: 0.061, 95 % interval 0.041–0.081)" in one
    p = 10 * 0.1 ** 3 * 0.9 ** 2 + 5 * 0.1 ** 4 * 0.9 + 0.1 ** 5  # P(X >= 3), X ~ Binomial(5, 0.1)
    three = hm_table1.reading(tab([0.01, 0.02, 0.1, 0.5, 0.6]))
    assert f"at least 3 would be at most 0.1 with probability at most {p:.1e}: so at least one of them" in three
    part = hm_table1.reading(tab([0.01, 0.02, 0.03, 0.5, 0.6], done=[1000, 1000, 500, 1000, 1000]))
    assert part.startswith("alpha_HM is at most 0.1 for 2 of 4 respondents whose alpha_HM is exact (1 not complete yet)")
    assert hm_table1.reading(tab([0.2], done=[3])) == "No respondent's alpha_HM is exact yet."
    with pytest.raises(MoralkitError, match="level must be between 0 and 1"):
        hm_table1.reading(tab([0.2]), level=10)
    from moralkit.paths import data_dir

    committed = pd.read_csv(data_dir() / "derived" / "table1_hm.csv")
    assert "for 1 of 7 respondents" in hm_table1.reading(committed)
