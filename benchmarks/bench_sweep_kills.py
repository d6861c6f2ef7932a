"""Issue 26's acceptance run: a 3-model sweep on the fake providers, SIGKILLed at random and resumed.

``python benchmarks/bench_sweep_kills.py [--mode online|batch|both] [--kills 10] [--rounds 160]
[--scenarios 50] [--seed 0]``

The sweep (``python -m moralkit sweep FILE``, in a subprocess) has three models, each on its own fake
provider (test doubles on 127.0.0.1, reached through the official ``openai`` / ``anthropic`` SDKs; their
answers are hashes of the prompt, never data):

- ``reasoner``: an OpenAI-style reasoning model (``o4-mini`` on :class:`moralkit.testing.fake_openai.FakeOpenAI`):
  it refuses ``max_tokens`` and ``top_p`` with OpenAI's 400s and spends completion tokens on hidden
  reasoning;
- ``claude``: an Anthropic Messages model (``claude-haiku-4-5`` on
  :class:`moralkit.testing.fake_anthropic.FakeAnthropic`, which refuses sampling parameters under the SDK's
  API version);
- ``compatible``: an OpenAI-compatible chat model (``fake-chat``, ``top_k`` accepted, as vLLM does).

Each does the PSM (round 0 + ``--rounds`` rounds) and MoralChoice low ambiguity, ``--scenarios`` scenarios
x 6 forms at the paper's M = 5. Online, the servers draw 5 % transient faults (429 / 500); in batch mode
(``[sweep] batch = true``) the three providers are :class:`moralkit.testing.fake_batches.FakeBatchServer` s
(the reasoner's lines checked and answered as the online endpoint does; 5 % of lines fail, one batch
expires), so every step of the batch life cycle is met.

The sweep is killed with SIGKILL ``--kills`` times: online at a random number of stored records, in batch
mode at a random number of journal events (intent, upload, create, end, merge) plus stored records, each
followed by a random delay of up to 50 ms; then it is resumed to completion. Printed, one ``BENCH`` JSON
line per mode (:mod:`benchmarks._record`: date, load average):

- ``records_lost``: stored record lines that changed or vanished across kills;
- ``records_duplicated``: ``(task, attempt)`` attempt records stored twice;
- ``requests_paid_twice``: per model, answers the fake server produced (online: usable responses; batch:
  lines answered) minus answers stored. Online, a request in flight at a SIGKILL is answered (paid) but
  its answer dies with the process; the resume sends it again. A SIGKILL cannot be caught; SIGTERM and
  SIGINT drain the requests in flight first (``tests/collect/test_sweep.py``), so the online count is the
  honest cost of SIGKILL only;
- ``estimate_vs_counted``: per model, ``moralkit estimate --sweep``'s input tokens against the input tokens
  the fake servers billed for the stored answers. The servers count with a real tokenizer (the Qwen2.5
  BPE on each message plus 3 tokens per message and 3 for the reply: OpenAI's chat-format convention),
  as a provider would; the estimate does not know that tokenizer (it uses the committed runs' measured
  tokens per character, as for any API model).

Run it niced (``nice -n 5``); it takes minutes on a loaded 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _record import emit, load  # noqa: E402

LABELS = ("reasoner", "claude", "compatible")


def _prompt_tokens():
    """Input tokens of a chat as a provider bills them: a real BPE (Qwen2.5) per message + 3, + 3."""
    from moralkit.collect.cost import TokenCounter

    tok = TokenCounter.for_local_model("qwen2.5-coder-0.5b-instruct").tokenizer

    def count(messages):
        return sum(3 + len(tok(str(m["content"]), add_special_tokens=False)["input_ids"]) for m in messages) + 3

    return count


def _servers(mode, count):
    from moralkit.testing.fake_anthropic import FakeAnthropic
    from moralkit.testing.fake_batches import FakeBatchServer
    from moralkit.testing.fake_openai import FakeOpenAI, ModelSpec

    if mode == "online":
        kw = dict(fault_rate=0.05, faults=("429", "500"), retry_after=0, prompt_tokens=count, max_seconds=7200)
        return {"reasoner": FakeOpenAI(models={"o4-mini": ModelSpec("reasoning")}, seed=1, **kw),
                "claude": FakeAnthropic(seed=2, **kw),
                "compatible": FakeOpenAI(models={"fake-chat": ModelSpec("chat")}, accepts_top_k=True, seed=3, **kw)}
    kw = dict(polls_to_finish=3, fail_pct=5, expire_batches=(2,), prompt_tokens=count, max_seconds=7200)
    return {"reasoner": FakeBatchServer(openai_models={"o4-mini": ModelSpec("reasoning")}, seed=1, **kw),
            "claude": FakeBatchServer(seed=2, **kw),
            "compatible": FakeBatchServer(openai_models={"fake-chat": ModelSpec("chat")}, seed=3, **kw)}


def _sweep_file(work, mode, servers, rounds, scenarios) -> Path:
    def url(name, anthropic=False):
        s = servers[name]
        return (s.anthropic_url if anthropic else s.openai_url) if mode == "batch" else s.url

    text = f'''[sweep]
data = "data"
batch = {"true" if mode == "batch" else "false"}
poll_interval = 0.05

[providers.OpenAI]
concurrency = 4
base_url = "{url("reasoner")}"
api_key_env = "BENCH_KEY"
timeout = 10
backoff = 0.02

[providers.Anthropic]
concurrency = 4
base_url = "{url("claude", anthropic=True)}"
api_key_env = "BENCH_KEY"
timeout = 10
backoff = 0.02

[providers.Compatible]
concurrency = 4
base_url = "{url("compatible")}"
api_key_env = "BENCH_KEY"
timeout = 10
backoff = 0.02

[[models]]
label = "reasoner"
backend = "openai"
model = "o4-mini"
provider = "OpenAI"
price_in = 1.1
price_out = 4.4

[[models]]
label = "claude"
backend = "anthropic"
model = "claude-haiku-4-5"
provider = "Anthropic"
price_in = 1.0
price_out = 5.0

[[models]]
label = "compatible"
backend = "openai"
model = "fake-chat"
provider = "Compatible"
price_in = 0.2
price_out = 0.2

[[surveys]]
survey = "psm"
limit = {rounds}

[[surveys]]
survey = "moralchoice"
ambiguity = "low"
n_scenarios = {scenarios}
'''
    p = work / "sweep.toml"
    p.write_text(text)
    return p


def _lines(p):
    return p.read_bytes().split(b"\n")[:-1] if p.exists() else []


def _progress(runs, mode) -> int:
    n = sum(len(_lines(d / "records.jsonl")) for d in runs.glob("*"))
    if mode == "batch":
        n += sum(len(_lines(d / "batches.jsonl")) for d in runs.glob("*"))
    return n


def run(mode, kills, rounds, scenarios, seed, count) -> dict:
    from moralkit.collect.store import read_records
    from moralkit.collect.sweep import estimate_sweep_table, load_sweep, status_table

    t0 = time.time()
    rng = random.Random(seed)
    work = Path(tempfile.mkdtemp(prefix=f"bench-sweep-{mode}-"))
    env = dict(os.environ, BENCH_KEY="sk-bench-0000", PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    servers = _servers(mode, count)
    for s in servers.values():
        s.start()
    try:
        path = _sweep_file(work, mode, servers, rounds, scenarios)
        runs = work / "data" / "raw"
        expected = sum(int(x) for x in status_table(path)["total"])
        seen: dict = {}
        lost = killed = 0
        cmd = [sys.executable, "-m", "moralkit", "sweep", str(path), "--no-progress"]

        def check():
            nonlocal lost
            for d in runs.glob("*"):
                now = _lines(d / "records.jsonl")
                old = seen.get(d.name, [])
                lost += sum(1 for a, b in zip(old, now) if a != b) + max(0, len(old) - len(now))
                seen[d.name] = now

        for k in range(kills):
            step = rng.randint(1, 8) if mode == "batch" else rng.randint(20, max(21, 2 * expected // kills))
            target = _progress(runs, mode) + step
            p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            while p.poll() is None and _progress(runs, mode) < target:
                time.sleep(0.005)
            time.sleep(rng.uniform(0, 0.05))
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                killed += 1
            p.wait()
            check()
        final = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        check()
        table = status_table(path)
        stored, stored_all, dup, counted = Counter(), Counter(), 0, Counter()
        for d in runs.glob("*"):
            recs = read_records(d)
            att = [x for x in recs if x["kind"] == "attempt"]
            keys = [(x["task"], x["attempt"]) for x in att]
            dup += len(keys) - len(set(keys))
            label = json.loads((d / "manifest.json").read_text())["label"]
            stored[label] += len(att)
            stored_all[label] += len(recs)
            counted[label] += sum(x.get("prompt_tokens") or 0 for x in att)
        if mode == "online":
            produced = {n: len(s.usable) for n, s in servers.items()}
        else:
            produced = {n: sum(1 for *_, o in s.lines if o in ("ok", "succeeded")) for n, s in servers.items()}
        twice = {n: produced[n] - stored[n] for n in servers}
        est = estimate_sweep_table(path).groupby("model")["input_tokens"].sum()
        accuracy = {n: dict(estimated=int(est[n]), counted=int(counted[n]),
                            error_pct=round(100 * (est[n] / counted[n] - 1), 2) if counted[n] else None)
                    for n in servers}
        tot_e, tot_c = int(est.sum()), sum(counted.values())
        extra = {}
        if mode == "batch":
            extra["batches_created"] = {n: s.counts.get("create", 0) for n, s in servers.items()}
            extra["lines_submitted_twice_after_an_answer"] = {n: s.submitted_twice() for n, s in servers.items()
                                                              if n != "claude"}  # Anthropic has no seed
        return dict(mode=mode, jobs=len(load_sweep(path).jobs), rounds=rounds, scenarios=scenarios, samples_M=5,
                    final_exit=final.returncode, all_done=bool((table["state"] == "done").all()),
                    kills=killed, records=sum(stored.values()), expected_tasks=expected, records_lost=lost,
                    records_duplicated=dup, requests_paid_twice=twice,
                    requests_paid_twice_total=sum(twice.values()), estimate_vs_counted=accuracy,
                    estimate_vs_counted_total_pct=round(100 * (tot_e / tot_c - 1), 2) if tot_c else None,
                    seconds=round(time.time() - t0, 1), **extra)
    finally:
        for s in servers.values():
            s.stop()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=("online", "batch", "both"), default="both")
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=160)
    ap.add_argument("--scenarios", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    count = _prompt_tokens()
    for mode in (("batch", "online") if a.mode == "both" else (a.mode,)):
        start = load()
        res = run(mode, a.kills, a.rounds, a.scenarios, a.seed, count)
        emit("bench_sweep_kills", mode, start, **res)


if __name__ == "__main__":
    main()
