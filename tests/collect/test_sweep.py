"""Sweeps (issue 26 item 4): one TOML file, every model x survey, strict validation, the same run directories
and exports as single runs, a status table, and SIGKILL at random points loses and duplicates nothing.

The servers are :class:`moralkit.collect.faultserver.FaultServer` test doubles (answers are hashes, never
data), reached through the official ``openai`` SDK by the real collectors.
"""

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from moralkit.collect.store import read_records
from moralkit.collect.sweep import load_sweep, status_table
from moralkit.errors import MoralkitError
from moralkit.testing.faultserver import FaultServer

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, FAULT_KEY="sk-test-fault-server-key-0000", PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
SHARED = ROOT.parent / "shared" / "moralchoice"
needs_mc = pytest.mark.skipif(not SHARED.exists(), reason="MoralChoice survey files not available")


def _cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "moralkit", *map(str, args)], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=timeout)


def _sweep(tmp_path, urls, surveys=None, extra_model=""):
    surveys = surveys or '''
[[surveys]]
survey = "psm"
limit = 5

[[surveys]]
survey = "moralchoice"
ambiguity = "low"
n_scenarios = 3
samples = 2
'''
    text = f'''
[sweep]
data = "data"

[providers.OpenAI]
concurrency = 3
rpm = 60000
tpm = 100000000
base_url = "{urls[0]}"
api_key_env = "FAULT_KEY"
timeout = 2
backoff = 0.02

[providers.Local]
concurrency = 2
base_url = "{urls[1]}"
api_key_env = "FAULT_KEY"
timeout = 2
backoff = 0.02

[[models]]
label = "fake-a"
backend = "openai"
model = "fault-double"
provider = "OpenAI"
price_in = 1.0
price_out = 4.0
{extra_model}

[[models]]
label = "fake-b"
backend = "openai"
model = "fault-double"
provider = "Local"
{surveys}'''
    p = tmp_path / "sweep.toml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("bad, message", [
    ('[[models]]\nbackend = "openai"\nmodel = "m"\ntemprature = 1\n[[surveys]]\nsurvey = "psm"\n',
     r"\[\[models\]\] #1 \(m\): unknown key 'temprature'; allowed keys: .*parameters"),
    ('[[models]]\nbackend = "opnai"\nmodel = "m"\n[[surveys]]\nsurvey = "psm"\n',
     r"backend 'opnai' is unknown; use one of .*openai"),
    ('[[models]]\nbackend = "openai"\n[[surveys]]\nsurvey = "psm"\n', r"missing key 'model'"),
    ('[[models]]\nbackend = "openai"\nmodel = "m"\n[[models]]\nbackend = "openai"\nmodel = "m"\n'
     '[[surveys]]\nsurvey = "psm"\n', r"label 'm' is used twice"),
    ('[[models]]\nbackend = "openai"\nmodel = "m"\nparameters = { temperature = "hot" }\n[[surveys]]\nsurvey = "psm"\n',
     r"parameters: temperature must be an integer or a number, got 'hot'"),
    ('[[models]]\nbackend = "openai"\nmodel = "m"\n[[surveys]]\nsurvey = "moralchoice"\n',
     r"\[\[surveys\]\] #1: ambiguity must be one of 'low', 'high', got None"),
    ('[[models]]\nbackend = "openai"\nmodel = "m"\n[[surveys]]\nsurvey = "moralchoice"\nambiguity = "low"\n'
     'n_scenarios = 3\nscenarios = ["A"]\n', r"give scenarios or n_scenarios, not both"),
    ('[providers.OpenAI]\nrpm = 0\n[[models]]\nbackend = "openai"\nmodel = "m"\n[[surveys]]\nsurvey = "psm"\n',
     r"\[providers.OpenAI\]: rpm must be >= 1"),
    ('[providers.OpenAI]\n[[models]]\nbackend = "openai"\nmodel = "m"\nprovider = "OpenAl"\n[[surveys]]\nsurvey = "psm"\n',
     r"provider 'OpenAl' has no \[providers.OpenAl\] table"),
    ('[[models]]\nbackend = "openai"\nmodel = "m"\n[[surveys]]\nsurvey = "psm"\nlimits = 3\n',
     r"\(psm\): unknown key 'limits'; allowed keys: attempts, batch, design_seed, limit, order, survey"),
    ('[[models]]\nbackend = "openai"\nmodel = "m"\n', r"no \[\[surveys\]\]"),
    ('[modles]\n', r"unknown top-level key 'modles'"),
    ('[[models]]\nbackend = "openai"\nmodel = "m"\n[[surveys]]\nsurvey = "psn"\n',
     r"\[\[surveys\]\] #1: survey must be one of 'psm', 'moralchoice', 'likelihood', got 'psn'"),
    ('surveys = ["psm"]\n[[models]]\nbackend = "openai"\nmodel = "m"\n',
     r"\[\[surveys\]\] #1: must be a table with survey = "),
    ('[[models]]\nbackend = "openai"\nmodel = "m"\n[[surveys]]\nsurvey = "psm"\norder = "table"\n',
     r"\[\[surveys\]\] #1: order must be one of 'paper', 'shuffled', got 'table'"),
    ('[[models]\n', r"not valid TOML"),
])
def test_sweep_files_are_validated_strictly(tmp_path, bad, message):
    p = tmp_path / "s.toml"
    p.write_text(bad)
    with pytest.raises(MoralkitError, match=message):
        load_sweep(p)


def test_a_bad_sweep_file_exits_2_with_one_line():
    """The command line turns any of the errors above into status 2 and one line (checked once: each call
    starts a Python process)."""
    r = _cli("sweep", ROOT / "tests" / "no-such-sweep.toml", "--status")
    assert r.returncode == 2 and r.stderr.startswith("error: ") and "no such sweep file" in r.stderr
    assert "Traceback" not in r.stderr


@needs_mc
def test_sweep_writes_the_same_runs_and_exports_as_single_runs(tmp_path):
    with FaultServer(rate=0.2, faults=("429", "500", "drop"), retry_after=0, hang=0.5) as a, FaultServer() as b:
        path = _sweep(tmp_path, (a.url, b.url))
        from moralkit.collect.sweep import status_markdown

        assert status_markdown(path).count("| not started |") == 4
        r = _cli("sweep", path, "--no-progress")
        assert r.returncode == 0, r.stderr[-2000:]
        single = tmp_path / "single"
        s = _cli("collect", "moralchoice", "--backend", "openai", "--model", "fault-double", "--label", "fake-b",
                 "--base-url", b.url, "--api-key-env", "FAULT_KEY", "--ambiguity", "low", "--n-scenarios", "3",
                 "--samples", "2", "--out", single / "raw" / "mc-low-fake-b-t1-s0", "--no-progress",
                 "--export", single / "fake-b-low.csv.gz")
        assert s.returncode == 0, s.stderr[-2000:]
        p = _cli("collect", "psm", "--backend", "openai", "--model", "fault-double", "--label", "fake-a",
                 "--base-url", a.url, "--api-key-env", "FAULT_KEY", "--limit", "5", "--backoff", "0.02",
                 "--out", single / "raw" / "psm-fake-a-t1-s0", "--no-progress", "--export", single / "fake-a.csv.gz")
        assert p.returncode == 0, p.stderr[-2000:]
    data = tmp_path / "data"
    assert sorted(d.name for d in (data / "raw").iterdir()) == [
        "mc-low-fake-a-t1-s0", "mc-low-fake-b-t1-s0", "psm-fake-a-t1-s0", "psm-fake-b-t1-s0"]
    # the exports are those of single runs of the same answers, apart from when each answer came (timestamp)
    # and the organisation the sweep file names (`provider`; the single runs did not give one)
    import pandas as pd

    for got, ref, provider in ((data / "moralchoice" / "fake-b-low.csv.gz", single / "fake-b-low.csv.gz", "Local"),
                               (data / "psm" / "fake-a.csv.gz", single / "fake-a.csv.gz", "OpenAI")):
        g, e = pd.read_csv(got, keep_default_na=False), pd.read_csv(ref, keep_default_na=False)
        assert list(g.columns) == list(e.columns) and len(g) == len(e) > 0
        assert set(g["provider"].astype(str)) == {provider}
        drop = [c for c in ("timestamp", "provider") if c in g.columns]
        pd.testing.assert_frame_equal(g.drop(columns=drop), e.drop(columns=drop))
    t = status_table(path).set_index(["model", "survey"])
    assert (t["state"] == "done").all() and t.loc[("fake-a", "psm"), "total"] == 6
    assert t.loc[("fake-b", "moralchoice-low"), "done"] == 3 * 6 * 2
    assert t.loc[("fake-a", "psm"), "input_tokens"] == 60  # the double bills 10 prompt tokens per answer
    assert t.loc[("fake-a", "psm"), "cost_usd"] == pytest.approx((60 * 1.0 + 12 * 4.0) / 1e6)
    assert "--only fake-b/moralchoice-low" in t.loc[("fake-b", "moralchoice-low"), "command"]
    assert "[sweep] fake-a/psm: done, 6/6 done" in r.stdout


def test_a_budget_leaves_one_job_incomplete_and_the_sweep_exits_3(tmp_path):
    with FaultServer() as a, FaultServer() as b:
        path = _sweep(tmp_path, (a.url, b.url), surveys='[[surveys]]\nsurvey = "psm"\nlimit = 4\n',
                      extra_model="max_cost = 0.003")
        r = _cli("sweep", path, "--no-progress")
    assert r.returncode == 3, r.stderr[-2000:]
    assert "INCOMPLETE sweep: 1 job(s) not done: fake-a/psm" in r.stderr and "budget" in r.stdout
    t = status_table(path).set_index("model")
    assert t.loc["fake-b", "state"] == "done" and t.loc["fake-a", "state"] == "incomplete"


def _lines(p):
    return p.read_bytes().split(b"\n")[:-1] if p.exists() else []


@needs_mc
def test_sigkill_of_a_sweep_loses_and_duplicates_nothing(tmp_path):
    """A sweep killed at random points and resumed: every stored record kept, none duplicated; a request is
    answered twice only if it was in flight at a kill."""
    rng = random.Random(26)
    with FaultServer(rate=0.1, faults=("429", "500"), retry_after=0, seed=1) as a, FaultServer(seed=2) as b:
        path = _sweep(tmp_path, (a.url, b.url))
        runs = tmp_path / "data" / "raw"
        seen: dict = {}
        kills = 0
        for k in range(3):  # 3 kills here; benchmarks/bench_sweep_kills.py kills a paper-size sweep 10 times
            target = sum(len(v) for v in seen.values()) + rng.randint(3, 25)
            proc = subprocess.Popen([sys.executable, "-m", "moralkit", "sweep", str(path), "--no-progress"], cwd=ROOT,
                                    env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            t0 = time.time()
            while proc.poll() is None and time.time() - t0 < 120 and \
                    sum(len(_lines(d / "records.jsonl")) for d in runs.glob("*")) < target:
                time.sleep(0.002)
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                kills += 1
            proc.wait(60)
            for d in runs.glob("*"):
                now = _lines(d / "records.jsonl")
                assert now[:len(seen.get(d.name, []))] == seen.get(d.name, [])  # nothing stored was lost or changed
                seen[d.name] = now
        r = _cli("sweep", path, "--no-progress")
        assert r.returncode == 0, r.stderr[-2000:]
        answered = Counter(s for s, _ in a.usable) + Counter(s for s, _ in b.usable)
    assert kills >= 2
    stored = Counter()
    for d in runs.glob("*"):
        att = [x for x in read_records(d) if x["kind"] == "attempt"]
        keys = [(x["task"], x["attempt"]) for x in att]
        assert len(keys) == len(set(keys))  # 0 duplicated
        stored.update(x["seed"] for x in att)
        assert _lines(d / "records.jsonl")[:len(seen[d.name])] == seen[d.name]
    twice = sum((answered - stored).values())
    assert twice <= 3 * kills + 2 * kills  # only requests in flight at a kill (concurrency 3 + 2) are re-sent
    assert (status_table(path)["state"] == "done").all()


# ------------------------------------------------------------------ batch sweeps (issue 27 item 1, for sweeps)
def _batch_sweep(tmp_path, srv, data="data", batch_line=""):
    text = f'''
[sweep]
data = "{data}"
{batch_line}

[providers.OpenAI]
base_url = "{srv.openai_url}"
api_key_env = "FAKE_KEY"
backoff = 0.01

[providers.Anthropic]
base_url = "{srv.anthropic_url}"
api_key_env = "FAKE_KEY"

[[models]]
label = "fake-o"
backend = "openai"
model = "fake-model"
provider = "OpenAI"
price_in = 2.0
price_out = 8.0

[[models]]
label = "fake-c"
backend = "anthropic"
model = "fake-claude"
provider = "Anthropic"

[[surveys]]
survey = "psm"
limit = 4

[[surveys]]
survey = "moralchoice"
ambiguity = "low"
n_scenarios = 2
samples = 2
'''
    p = tmp_path / f"{data}.toml"
    p.write_text(text)
    return p


@needs_mc
def test_batch_sweep_waits_resumes_and_equals_an_online_sweep(tmp_path):
    """``sweep FILE --batch`` through the official SDKs against the fake batch APIs (OpenAI files + batches,
    Anthropic message batches): ``--wait 0`` submits every job's first batch and exits 3 with a resume
    command that keeps ``--batch``; the status table shows the open batches; the resumed sweep completes with
    no request submitted twice, nothing sent online, batch-price costs, and exports equal to an online sweep
    of the same answers (OpenAI's batch answers are its online answers in the fake)."""
    import io

    import pandas as pd

    from moralkit.collect.sweep import run_sweep
    from moralkit.testing.fake_batches import FakeBatchServer

    env = dict(ENV, FAKE_KEY="sk-test-fake-batch-key-0000")
    os.environ["FAKE_KEY"] = env["FAKE_KEY"]
    with FakeBatchServer(polls_to_finish=2, fail_pct=10, seed=3) as srv:
        path = _batch_sweep(tmp_path, srv)
        r = subprocess.run([sys.executable, "-m", "moralkit", "sweep", str(path), "--batch", "--wait", "0",
                            "--poll-interval", "0.01", "--no-progress"], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 3, r.stderr[-2000:]
        assert "batch pending" in r.stderr and f"re-run `python -m moralkit sweep {path} --batch`" in r.stderr
        assert srv.counts["create"] == 4 and srv.counts.get("chat", 0) == 0  # one batch per job, all at once
        t = status_table(load_sweep(path, batch=True)).set_index(["model", "survey"])
        assert set(t["mode"]) == {"batch"} and set(t["state"]) == {"batch pending"}
        assert t.loc[("fake-o", "psm"), "batch"].startswith("1 submitted; batch_0000")
        assert "--batch" in t.loc[("fake-c", "psm"), "command"]
        # without --batch, the open submissions still make the jobs batch jobs: nothing is paid twice
        assert set(status_table(path)["mode"]) == {"batch"}
        out = io.StringIO()
        table = run_sweep(path, progress=False, out=out, poll_interval=0.01)
        lines = len(srv.lines)  # request lines the fake processed (answered or failed): each one paid
        assert srv.counts.get("chat", 0) == 0
        online = _batch_sweep(tmp_path, srv, data="online")  # the same jobs online: the fake's chat endpoint
        jobs = [f"fake-o/{s}" for s in ("psm", "moralchoice-low")]
        run_sweep(online, only=jobs, progress=False, out=io.StringIO())
    assert (table["state"] == "done").all(), table
    assert "waiting for batches" in out.getvalue()
    stored = 0
    for d in (tmp_path / "data" / "raw").iterdir():
        recs = read_records(d)
        keys = [(x["task"], x["attempt"]) for x in recs if x["kind"] == "attempt"]
        assert len(keys) == len(set(keys)) and keys
        stored += len(recs)
    # every line the fake processed is one stored record (an answer or a failure to resubmit): none paid twice
    # (the fake's submitted_twice() cannot tell Anthropic's unseeded samples of one prompt apart)
    assert lines == stored
    t = table.set_index(["model", "survey"])
    assert t.loc[("fake-o", "psm"), "batch"].endswith("all merged")
    tin, tout = t.loc[("fake-o", "psm"), ["input_tokens", "output_tokens"]]
    assert t.loc[("fake-o", "psm"), "cost_usd"] == pytest.approx((tin * 1.0 + tout * 4.0) / 1e6)  # half price
    for sub, name in (("psm", "fake-o.csv.gz"), ("moralchoice", "fake-o-low.csv.gz")):
        g = pd.read_csv(tmp_path / "data" / sub / name, keep_default_na=False)
        e = pd.read_csv(tmp_path / "online" / sub / name, keep_default_na=False)
        drop = [c for c in ("timestamp",) if c in g.columns]
        pd.testing.assert_frame_equal(g.drop(columns=drop), e.drop(columns=drop))
    assert (tmp_path / "data" / "psm" / "fake-c.csv.gz").exists()


def test_batch_in_a_sweep_file_is_validated(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text('[[models]]\nbackend = "transformers"\nmodel = "qwen2.5-0.5b"\nbatch = true\n[[surveys]]\nsurvey = "psm"\n')
    with pytest.raises(MoralkitError, match="batch = true needs backend openai or anthropic"):
        load_sweep(p)
    p.write_text('[[models]]\nbackend = "openai"\nmodel = "m"\nmax_cost = 1.0\n[[surveys]]\nsurvey = "psm"\n')
    assert not load_sweep(p).jobs[0].batch
    with pytest.raises(MoralkitError, match="max_cost is not enforced in batch mode"):
        load_sweep(p, batch=True)
    p.write_text('[sweep]\nbatch = true\n[[models]]\nbackend = "openai"\nmodel = "m"\n[[models]]\nbackend = '
                 '"openai"\nmodel = "v"\nbatch = false\n[[surveys]]\nsurvey = "psm"\n[[surveys]]\nsurvey = '
                 '"likelihood"\nambiguity = "low"\nn_scenarios = 1\n')
    assert [(j.key, j.batch) for j in load_sweep(p).jobs] == [
        ("m/psm", True), ("m/likelihood-low", False), ("v/psm", False), ("v/likelihood-low", False)]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_and_sigint_drain_the_requests_in_flight(tmp_path, sig):
    """A first SIGTERM / SIGINT stops sending, awaits the requests in flight and stores their answers (they
    are paid for), then the sweep exits 3 with the resume command; the resumed sweep finishes. Every answer
    the server sent is stored once. (The server holds each answer 0.3 s, so that requests are in flight
    when the signal comes: a wait for a condition, not a timing assertion.)"""
    from moralkit.testing.fake_openai import FakeOpenAI

    with FakeOpenAI(latency=lambda path, body: 0.3) as srv:
        p = tmp_path / "s.toml"
        p.write_text(f'[sweep]\ndata = "data"\n[providers.P]\nconcurrency = 4\nbase_url = "{srv.url}"\n'
                     'api_key_env = "FAULT_KEY"\n[[models]]\nlabel = "m"\nbackend = "openai"\nmodel = "fake-chat"\n'
                     'provider = "P"\n[[surveys]]\nsurvey = "psm"\nlimit = 30\n')
        proc = subprocess.Popen([sys.executable, "-m", "moralkit", "sweep", str(p), "--no-progress"], cwd=ROOT,
                                env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        rec = tmp_path / "data" / "raw" / "psm-m-t1-s0" / "records.jsonl"
        t0 = time.time()
        while proc.poll() is None and len(_lines(rec)) < 3 and time.time() - t0 < 120:
            time.sleep(0.01)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 3, err[-2000:]
        assert f"interrupted by {signal.Signals(sig).name}" in out and "re-run `python -m moralkit sweep" in err
        stored = [r["response_id"] for r in read_records(rec.parent) if r["kind"] == "attempt"]
        answered = [rid for rid, _ in srv.usable]
        assert sorted(stored) == sorted(answered) and len(stored) < 31  # nothing answered was lost
        r = _cli("sweep", p, "--no-progress")
        assert r.returncode == 0, r.stderr[-2000:]
        stored = [r["response_id"] for r in read_records(rec.parent) if r["kind"] == "attempt"]
        assert sorted(stored) == sorted(rid for rid, _ in srv.usable) and len(set(stored)) == len(stored)


def test_a_sweep_without_data_writes_into_the_projects_run_folders(tmp_path, monkeypatch):
    """The run directories and exports of a sweep without ``[sweep] data`` are the folders moralkit.runs
    names under the project's data folder (MORALKIT_DATA_DIR), like single runs."""
    from moralkit import runs

    monkeypatch.setenv("MORALKIT_DATA_DIR", str(tmp_path / "d"))
    p = tmp_path / "s.toml"
    p.write_text('[[models]]\nbackend = "openai"\nmodel = "m"\n[[surveys]]\nsurvey = "psm"\n'
                 '[[surveys]]\nsurvey = "moralchoice"\nambiguity = "low"\n'
                 '[[surveys]]\nsurvey = "likelihood"\nambiguity = "high"\n')
    sweep = load_sweep(p)
    assert sweep.data == tmp_path / "d"
    assert {j.run_dir.parent for j in sweep.jobs} == {runs.run_dir("raw")}
    assert [j.export.parent for j in sweep.jobs] == [runs.run_dir(k) for k in ("psm", "responses", "likelihoods")]
