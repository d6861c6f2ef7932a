"""Batch APIs, M samples per request and the response cache (issue 27, items 1, 2 and 4).

The server is :class:`moralkit.testing.fake_batches.FakeBatchServer`, a *test double* on 127.0.0.1 of
OpenAI's files + batches (and chat completions) and Anthropic's message batches, driven through the
official ``openai`` and ``anthropic`` clients. Its answers are a hash of prompt, seed and choice index
(never data), so a batch run and an online run of the same requests get the same answers. Every loop
is bounded in count and time.
"""

import gzip
import os
import random
import signal
import subprocess
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import pytest

import moralkit.moralchoice as mc
from moralkit.collect.backends import OpenAIBackend, Request, Sampling
from moralkit.collect.batch import BatchBackend, BatchPendingError, Journal
from moralkit.collect.cache import CachedBackend, ResponseCache
from moralkit.collect.moralchoice import run_moralchoice
from moralkit.collect.psm import export_psm, run_psm
from moralkit.collect.store import RecordStore, read_records
from moralkit.testing.fake_batches import REFUSAL, FakeBatchServer

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-test-fake-batch-key-0000"
ENV = dict(os.environ, FAKE_KEY=KEY, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
os.environ["FAKE_KEY"] = KEY


def _batch(srv, provider="openai", **kw):
    url = srv.openai_url if provider == "openai" else srv.anthropic_url
    kw = {"poll_interval": 0.01, "status": None, **kw}
    return BatchBackend(provider, "fake-model", base_url=url, api_key_env="FAKE_KEY", **kw)


def _online(srv, **kw):
    return OpenAIBackend("fake-model", base_url=srv.openai_url, api_key_env="FAKE_KEY", backoff=0.01, **kw)


def _attempts(run):
    return [r for r in read_records(run) if r.get("kind", "attempt") == "attempt"]


def _keys_unique(run):
    keys = [(a["task"], a["attempt"]) for a in _attempts(run)]
    return len(keys) == len(set(keys))


def _no_key(path):
    for f in Path(path).rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            assert KEY.encode() not in (gzip.decompress(data) if f.suffix == ".gz" else data), f


@pytest.fixture(scope="module")
def low():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mc.load_scenarios("low")


# ------------------------------------------------------------------ item 1: batch = online, byte for byte
def test_openai_batch_psm_export_is_byte_identical_to_online(tmp_path):
    """Invalid answers (3 attempts), per-request failures, an expired and a failed batch: the export equals
    an online run's, byte for byte, and no request is submitted twice."""
    with FakeBatchServer(invalid_pct=25, fail_pct=10, expire_batches=(2,), fail_batches=(3,), seed=1) as srv:
        ds, rep = run_psm(_batch(srv), tmp_path / "b" / "run", limit=30, progress=False, return_report=True)
        twice, lines = srv.submitted_twice(), list(srv.lines)
        run_psm(_online(srv), tmp_path / "o" / "run", limit=30, progress=False)
    assert rep.complete and ds.n_rounds == 30
    outcomes = Counter(o for *_, o in lines)
    assert outcomes["expired"] > 0 and outcomes["failed"] > 0 and outcomes["error"] > 0, outcomes
    assert max(ds.attempts) == 3 and (ds.chosen == 0).any()  # invalid answers were retried, up to 3 attempts
    assert twice == 0 and _keys_unique(tmp_path / "b" / "run")
    recs = read_records(tmp_path / "b" / "run")
    errs = [r for r in recs if r["kind"] == "error"]
    assert errs and all(r["batch_submission"] and r["custom_id"] for r in errs)  # failures resubmitted, recorded
    a = export_psm(tmp_path / "b" / "run", tmp_path / "b" / "psm.csv.gz").read_bytes()
    b = export_psm(tmp_path / "o" / "run", tmp_path / "o" / "psm.csv.gz").read_bytes()
    assert a == b
    _no_key(tmp_path / "b")


def test_moralchoice_batch_equals_online_with_n_samples_per_request(tmp_path, low):
    ids = list(low["scenario_id"][:4])
    frames = {}
    with FakeBatchServer(fail_pct=10, expire_batches=(1,)) as srv:
        for mode, k in (("batch", 1), ("online", 1), ("batch", 3), ("online", 3)):
            b = _batch(srv) if mode == "batch" else _online(srv)
            n0 = srv.counts.get("chat", 0) + len(srv.lines)
            df = run_moralchoice(b, tmp_path / f"{mode}{k}" / "run", ambiguity="low", scenarios=ids, samples=3,
                                 samples_per_request=k, progress=False)
            sent = srv.counts.get("chat", 0) + len(srv.lines) - n0
            frames[mode, k] = (df.drop(columns=["timestamp"]), sent)
        twice = srv.submitted_twice()
    assert twice == 0
    assert frames["batch", 1][0].equals(frames["online", 1][0])
    assert frames["batch", 3][0].equals(frames["online", 3][0])
    assert len(frames["batch", 3][0]) == 4 * 6 * 3  # one row per sample
    assert sorted(frames["batch", 3][0]["eval_sample_nb"].unique()) == [0, 1, 2]
    assert frames["online", 3][1] == 4 * 6  # one request per (scenario, form, ordering)
    assert frames["online", 1][1] == 4 * 6 * 3
    # n > 1 draws are other draws: one seed per request, not per sample
    assert not frames["online", 3][0]["answer_raw"].equals(frames["online", 1][0]["answer_raw"])
    recs = _attempts(tmp_path / "online3" / "run")
    by_req = Counter((r["scenario_id"], r["question_type"], r["ordering"], r["seed"]) for r in recs)
    assert set(by_req.values()) == {3} and {r["n"] for r in recs} == {3} and {r["choice"] for r in recs} == {0, 1, 2}


def test_anthropic_message_batches_partial_failures_and_expiry(tmp_path):
    with FakeBatchServer(fail_pct=20, expire_batches=(2,)) as srv:
        ds, rep = run_psm(_batch(srv, "anthropic"), tmp_path / "run", limit=20, progress=False, return_report=True)
        outcomes = Counter(o for *_, o in srv.lines)
        twice = srv.submitted_twice()
        bodies = [b["requests"][0] for b in srv.mbatches.values()]
    assert rep.complete and ds.n_rounds == 20
    assert outcomes["expired"] > 0 and outcomes["errored"] > 0 and twice == 0
    p = bodies[0]
    assert "seed" not in p["params"] and "top_p" not in p["params"] and p["params"]["max_tokens"] >= 16
    assert all(c.isalnum() or c in "_-" for c in p["custom_id"]) and len(p["custom_id"]) <= 64
    assert _keys_unique(tmp_path / "run")


def test_batch_lines_are_the_online_request_bodies(tmp_path, monkeypatch):
    """A batch line sends what the online backend sends: no top_p at its default, max_completion_tokens for a
    reasoning model, and no n for Anthropic."""
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    rq = Request.from_prompt("Q", system="S", seed=1, sampling=Sampling(temperature=1.0, max_tokens=5))
    o = BatchBackend("openai", "o4-mini", status=None)
    assert o.api.body(rq) == o.online.request_body(rq)
    assert "top_p" not in o.api.body(rq) and o.api.body(rq)["max_completion_tokens"] == 5
    a = BatchBackend("anthropic", "claude-sonnet-4-6", status=None)
    p = a.api.body(rq)
    assert p["system"] == "S" and p["max_tokens"] == 5 and "top_p" not in p and "seed" not in p
    with pytest.raises(ValueError, match="no n"):
        a.api.body(Request(messages=rq.messages, extra_body={"n": 2}))


def test_bad_batch_settings_are_moralkit_errors(monkeypatch):
    """Issue 29: --wait and --poll-interval that are not numbers, and negative counts, are MoralkitErrors
    naming the option (a --wait of "soon" was a plain ValueError from float())."""
    from moralkit.errors import MoralkitError

    monkeypatch.setenv("OPENAI_API_KEY", "k")
    for kw, message in [(dict(wait="soon"), "--wait must be a number of seconds >= 0, got 'soon'"),
                        (dict(wait=-1), "--wait must be >= 0 seconds"),
                        (dict(poll_interval=0), "--poll-interval must be > 0 seconds"),
                        (dict(max_retries=-1), "max_retries must be an integer >= 0"),
                        (dict(max_requests=2.5), "max_requests must be an integer")]:
        with pytest.raises(MoralkitError, match=message):
            BatchBackend("openai", "o4-mini", status=None, **kw)
    assert BatchBackend("openai", "o4-mini", status=None, max_requests=7.0, wait=0).max_requests == 7


# ------------------------------------------------------------------ kills at every step (in process, exact)
class _Kill(BaseException):
    """Stands for SIGKILL at one exact point (nothing after it runs; no except clause catches it)."""


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("step", ["intent", "file", "batch", "poll", "ended", "merge", "merged"])
def test_stop_at_each_step_of_the_life_cycle_then_resume(tmp_path, monkeypatch, provider, step):
    """Stop at each step: before the upload (``intent``), after the upload before its id is stored
    (``file``), after the batch was created before its id is stored (``batch``), while polling, after the
    results were downloaded (``ended``), in the middle of merging, before ``merged``. The resumed run
    uploads and creates nothing twice, submits nothing twice, and ends as an uninterrupted run."""
    if provider == "anthropic" and step == "file":
        pytest.skip("Anthropic has no file stage")
    run = tmp_path / "run"
    with FakeBatchServer(invalid_pct=20, polls_to_finish=3) as srv:
        real_append, real_poll, real_store = Journal.append, None, RecordStore.append
        hits = Counter()

        def append(self, event):
            if event["event"] == step and hits[step] == 0 and (step != "intent" or "requests" in event):
                hits[step] += 1
                raise _Kill(step)  # the event is not written: the process died just before
            return real_append(self, event)

        def store_append(self, rec):
            if step == "merge" and rec.get("batch_submission") and hits["merge"] == 0:
                hits["m"] += 1
                if hits["m"] == 5:
                    hits["merge"] += 1
                    raise _Kill("merge")
            return real_store(self, rec)

        b = _batch(srv, provider)
        real_poll = type(b.api).poll

        def poll(self, bid):
            hits["p"] += 1
            if step == "poll" and hits["p"] == 2:
                raise _Kill("poll")
            return real_poll(self, bid)

        monkeypatch.setattr(Journal, "append", append)
        monkeypatch.setattr(RecordStore, "append", store_append)
        monkeypatch.setattr(type(b.api), "poll", poll)
        with pytest.raises(_Kill):
            run_psm(b, run, limit=12, progress=False)
        monkeypatch.undo()
        before = (run / "records.jsonl").read_bytes() if (run / "records.jsonl").exists() else b""
        ds = run_psm(_batch(srv, provider), run, limit=12, progress=False)
        uploads, creates = srv.counts.get("upload", 0), srv.counts.get("create", 0)
        twice = srv.submitted_twice()
        subs = Journal(run).submissions()
        ref = run_psm(_online(srv), tmp_path / "ref" / "run", limit=12, progress=False) if provider == "openai" else None
    assert (run / "records.jsonl").read_bytes().startswith(before)  # nothing stored was lost or changed
    assert ds.n_rounds == 12 and _keys_unique(run) and twice == 0
    assert creates == len(subs)  # one batch per submission, even when its id was lost
    if provider == "openai":
        assert uploads == len(subs)
        assert list(ds.chosen) == list(ref.chosen) and list(ds.attempts) == list(ref.attempts)


# ------------------------------------------------------------------ waiting: status line, exit 3, resume
def _cli(*args, timeout=240):
    return subprocess.run([sys.executable, "-m", "moralkit", *map(str, args)], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=timeout)


def _args(srv, out, *extra, provider="openai"):
    url = srv.openai_url if provider == "openai" else srv.anthropic_url
    return ["collect", "psm", "--backend", provider, "--model", "fake-model", "--base-url", url, "--api-key-env",
            "FAKE_KEY", "--batch", "--poll-interval", "0.02", "--out", out, "--no-progress", *extra]


def test_wait_limit_exits_3_with_the_resume_command_then_resumes(tmp_path):
    out = tmp_path / "run"
    with FakeBatchServer(polls_to_finish=4) as srv:
        p = _cli(*_args(srv, out, "--limit", "10", "--wait", "0"))
        assert p.returncode == 3, p.stderr[-2000:]
        assert "[batch] openai batch_000001: validating, 0/1 done, 0 failed, age 0:00:0" in p.stderr
        assert "stopped waiting for 1 batch(es)" in p.stderr and "nothing is lost" in p.stderr
        resume = p.stderr.split("Resume with: ")[1].strip()
        assert resume.startswith("python -m moralkit collect psm") and "--batch" in resume
        assert srv.counts["create"] == 1
        p2 = _cli(*_args(srv, out, "--limit", "10"))
        assert p2.returncode == 0, p2.stderr[-2000:]
        assert "complete: 11/11 rounds (incl. round 0) done" in p2.stdout
        assert srv.counts["create"] == 2 and srv.submitted_twice() == 0  # round 0's batch, then the rounds'
    _no_key(out)


def test_ctrl_c_while_waiting_exits_3(tmp_path):
    out = tmp_path / "run"
    with FakeBatchServer(polls_to_finish=10 ** 6) as srv:  # never ends
        proc = subprocess.Popen([sys.executable, "-m", "moralkit", *map(str, _args(srv, out, "--limit", "3"))],
                                cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        t0 = time.time()
        while srv.counts.get("poll", 0) < 3 and time.time() - t0 < 120 and proc.poll() is None:
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err[-2000:]
    assert "Resume with: python -m moralkit collect psm" in err and "in_progress" in err


def test_online_session_on_open_batches_is_refused_then_batch_resumes(tmp_path):
    run = tmp_path / "run"
    with FakeBatchServer(polls_to_finish=3) as srv:
        with pytest.raises(BatchPendingError, match="Resume with"):
            run_psm(_batch(srv, wait=0), run, limit=5, progress=False)
        with pytest.raises(ValueError, match="not collected yet.*--batch"):
            run_psm(_online(srv), run, limit=5, progress=False)
        assert srv.counts.get("chat", 0) == 0
        ds = run_psm(_batch(srv), run, limit=5, progress=False)
        assert ds.n_rounds == 5 and srv.counts["create"] == 2 and srv.submitted_twice() == 0


# ------------------------------------------------------------------ SIGKILL at random points, 20 kills
def _lines(p):
    return p.read_bytes().split(b"\n")[:-1] if p.exists() else []


#: SIGKILLs of the life-cycle test: one per step by default (CI time); the issue's acceptance figure is
#: ``MORALKIT_BATCH_KILLS=20 pytest tests/collect/test_batch.py -k sigkills -s``.
N_KILLS = int(os.environ.get("MORALKIT_BATCH_KILLS", "5"))
PHASES = ("intent", "upload", "create", "poll", "merge")


def test_sigkills_across_the_batch_life_cycle(tmp_path):
    """SIGKILLs at each step of the batch life cycle in turn (after the intent, after the upload, after the
    create, while polling, while merging), with invalid answers, failed requests and an expired batch.
    0 records lost or duplicated, 0 requests submitted twice, and the exports equal online runs' byte for
    byte. Each kill starts a Python process (about 2 s on an idle machine): 5 kills by default, 20 for the
    acceptance figure (``N_KILLS``)."""
    rng = random.Random(27)
    kills, phases, runs, lost = 0, Counter(), [], 0
    with FakeBatchServer(invalid_pct=20, fail_pct=10, expire_batches=(3,), polls_to_finish=4) as srv:
        while kills < N_KILLS and len(runs) < 8:
            out = tmp_path / f"b{len(runs)}" / "run"
            runs.append(out)
            seen: list = []
            for _ in range(12):  # bounded: invocations of this run
                phase = PHASES[kills % len(PHASES)]
                J = out / "batches.jsonl"
                n_int = sum(b'"intent"' in x for x in _lines(J))
                c0 = dict(srv.counts)
                n_rec = len(_lines(out / "records.jsonl"))
                k = rng.randint(1, 3)
                ready = {
                    "intent": lambda: sum(b'"intent"' in x for x in _lines(J)) > n_int,
                    "upload": lambda: srv.counts.get("upload", 0) > c0.get("upload", 0),
                    "create": lambda: srv.counts.get("create", 0) > c0.get("create", 0),
                    "poll": lambda: srv.counts.get("poll", 0) >= c0.get("poll", 0) + k,
                    "merge": lambda: len(_lines(out / "records.jsonl")) >= n_rec + k,
                }[phase]
                srv.hold = {"upload": 5.0} if phase == "upload" else {"create": 5.0} if phase == "create" else {}
                p = subprocess.Popen([sys.executable, "-m", "moralkit", *map(str, _args(
                    srv, out, "--limit", "24", "--seed", str(len(runs))))], cwd=ROOT, env=ENV,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                t0 = time.time()
                while p.poll() is None and time.time() - t0 < 120 and not ready():
                    time.sleep(0.001)
                time.sleep(rng.uniform(0, 0.03))
                killed = p.poll() is None
                if killed:
                    p.send_signal(signal.SIGKILL)
                p.wait(60)
                srv.hold = {}
                kills += killed
                phases[phase] += killed
                now = _lines(out / "records.jsonl")
                lost += sum(a != b for a, b in zip(seen, now)) + max(0, len(seen) - len(now))
                assert now[:len(seen)] == seen  # no stored record lost or changed
                seen = now
                if not killed or kills >= N_KILLS:
                    break
        finals = []
        for i, out in enumerate(runs):
            p = _cli(*_args(srv, out, "--limit", "24", "--seed", str(i + 1)))
            assert p.returncode == 0, p.stderr[-2000:]
            finals.append(export_psm(out, out.parent / "psm.csv.gz").read_bytes())
        twice = srv.submitted_twice()
        ok_lines = [(bid, cid) for bid, cid, _, o in srv.lines if o == "ok"]
        per_sub = Counter((b["obj"]["metadata"] or {}).get("moralkit_submission") for b in srv.batches.values())
        refs = []
        for i, out in enumerate(runs):
            ref = tmp_path / f"o{i}" / "run"
            run_psm(_online(srv), ref, limit=24, seed=i + 1, progress=False)
            refs.append(export_psm(ref, ref.parent / "psm.csv.gz").read_bytes())
    stored = {r.get("custom_id") for out in runs for r in _attempts(out)}
    lost_paid = sum(1 for bid, cid in ok_lines if cid not in stored)
    dup = sum(not _keys_unique(out) for out in runs)
    identical = sum(a == b for a, b in zip(finals, refs))
    print(f"\nbatch kills: {kills} SIGKILLs {dict(phases)} over {len(runs)} runs; records lost {lost}, duplicated {dup}, "
          f"requests submitted twice {twice}, batches created twice {sum(v > 1 for v in per_sub.values())}, "
          f"answers received but not stored {lost_paid}, exports byte-identical to online {identical}/{len(runs)}")
    assert kills >= N_KILLS and len([p for p in phases if phases[p]]) >= min(4, N_KILLS - 1)
    assert lost == 0 and dup == 0 and twice == 0 and lost_paid == 0 and max(per_sub.values()) == 1
    assert identical == len(runs)


# ------------------------------------------------------------------ item 4: the response cache
def test_second_identical_run_with_the_cache_sends_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("MORALKIT_CACHE_DIR", str(tmp_path / "cache"))
    with FakeBatchServer(invalid_pct=20) as srv:
        b1 = CachedBackend(_online(srv), ResponseCache())
        run_psm(b1, tmp_path / "a" / "run", limit=15, progress=False)
        first = srv.counts["chat"]
        b2 = CachedBackend(_online(srv), ResponseCache())
        run_psm(b2, tmp_path / "b" / "run", limit=15, progress=False)
        second = srv.counts["chat"] - first
        # a batch run of the same requests is answered from the cache too (same body, same endpoint)
        n_lines = len(srv.lines)
        run_psm(_batch(srv, cache=ResponseCache()), tmp_path / "c" / "run", limit=15, progress=False)
        batch_lines = len(srv.lines) - n_lines
    print(f"\ncache: first run {first} requests, second identical run {second} requests sent, batch run "
          f"{batch_lines} request lines")
    assert first >= 16 and second == 0 and b2.sent == 0 and batch_lines == 0
    assert all(r.get("cached") for r in _attempts(tmp_path / "b" / "run"))
    assert not any(r.get("cached") for r in _attempts(tmp_path / "a" / "run"))
    a = export_psm(tmp_path / "a" / "run", tmp_path / "a" / "p.csv.gz").read_bytes()
    assert export_psm(tmp_path / "b" / "run", tmp_path / "b" / "p.csv.gz").read_bytes() == a


def test_cache_key_is_the_body_the_server_receives_and_any_sent_field_misses(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    with FakeBatchServer() as srv:
        b = CachedBackend(_online(srv), cache)
        rq = Request.from_prompt("Respond solely with A or B", seed=5, sampling=Sampling(max_tokens=4))
        b.generate([rq])
        assert srv.last_chat_body == b.request_body(rq)  # the key covers every sent field
        n = srv.counts["chat"]
        b.generate([rq])
        assert srv.counts["chat"] == n
        variants = [
            Request.from_prompt("Respond solely with A or B", seed=6, sampling=Sampling(max_tokens=4)),
            Request.from_prompt("Respond solely with A or B", seed=5, sampling=Sampling(max_tokens=5)),
            Request.from_prompt("Respond solely with A or B", seed=5, sampling=Sampling(max_tokens=4, temperature=0.5)),
            Request.from_prompt("Respond solely with A or B", seed=5, sampling=Sampling(max_tokens=4, top_p=0.9)),
            Request.from_prompt("Respond solely with A or B", system="S", seed=5, sampling=Sampling(max_tokens=4)),
            Request.from_prompt("Respond solely with A or b", seed=5, sampling=Sampling(max_tokens=4)),
            Request(messages=rq.messages, seed=5, sampling=rq.sampling, extra_body={"n": 2}),
        ]
        for v in variants:
            b.generate([v])
        assert srv.counts["chat"] == n + len(variants)
        other = CachedBackend(OpenAIBackend("other-model", base_url=srv.openai_url, api_key_env="FAKE_KEY"), cache)
        other.generate([rq])
        assert srv.counts["chat"] == n + len(variants) + 1
    # a request that is not sent with a seed still keys on the derived seed (two samples never share)
    k1 = cache.key("anthropic.messages", "u", {"model": "m"}, 1)
    k2 = cache.key("anthropic.messages", "u", {"model": "m"}, 2)
    assert k1 != k2


def _writer(path, start):
    c = ResponseCache(path)
    for i in range(start, start + 200):
        c.put(c.key("api", "u", {"i": i % 250}, 0), {"text": str(i % 250)})


def test_cache_is_safe_under_concurrent_writers_and_cli_reports_and_clears(tmp_path):
    import multiprocessing as mp

    path = tmp_path / "cache" / "responses.sqlite"
    ResponseCache(path).close()
    ps = [mp.get_context("fork").Process(target=_writer, args=(path, s)) for s in (0, 100, 150)]
    for p in ps:
        p.start()
    for p in ps:
        p.join(120)
    assert [p.exitcode for p in ps] == [0, 0, 0]
    c = ResponseCache(path)
    assert c.stats()["entries"] == 250
    assert all(c.get(c.key("api", "u", {"i": i}, 0))["text"] == str(i) for i in range(250))
    env = dict(ENV, MORALKIT_CACHE_DIR=str(tmp_path / "cache"))
    p = subprocess.run([sys.executable, "-m", "moralkit", "cache"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0 and "250 cached responses" in p.stdout, p.stderr
    p = subprocess.run([sys.executable, "-m", "moralkit", "cache", "--clear"], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0 and "cleared 250" in p.stdout and "0 cached responses" in p.stdout


def test_refusal_is_not_an_option():
    from moralkit.psm.design import parse_option

    assert parse_option(REFUSAL).status != "ok"
