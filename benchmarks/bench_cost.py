"""Cost accounting and sweeps, measured (issue 26 items 3-4, issue 27 item 5).

``python benchmarks/bench_cost.py sweep [--kills 10] [--scenarios 50] [--seed 0]``
    A sweep of 3 models on 3 fake providers (:class:`moralkit.testing.faultserver.FaultServer` test
    doubles, 10 % of requests answered 429/500; their answers are hashes, never data): PSM 161 prompts
    + MoralChoice ``--scenarios`` low (M = 5) and high (M = 10) scenarios each. Each server bills the
    prompt tokens a real server would count, with a real tokenizer:

    - ``qwen-like``: the Qwen2.5 tokenizer and chat template (as vLLM serving Qwen2.5 counts);
    - ``smollm-like``: the SmolLM2 tokenizer and chat template;
    - ``openai-style``: the Qwen2.5 BPE on each message's text plus 3 tokens per message and 3 for the
      reply, the counting convention of OpenAI's chat format (no chat-template text).

    The sweep (``python -m moralkit sweep``) is killed with SIGKILL ``--kills`` times at random numbers of
    stored records, then resumed to completion. It prints, as JSON: records lost (stored lines that
    changed or vanished across kills), duplicated ``(task, attempt)`` records, requests answered twice
    (by the servers' logs: a request whose answer was not stored because the collector died while it
    was in flight is sent again), and, per model, ``moralkit estimate --sweep``'s input tokens against
    the tokens the servers counted for the stored answers.

``python benchmarks/bench_cost.py paper [--model NAME ...]``
    The estimate of one paper-scale run (PSM 161 prompts + MoralChoice 687 low x 6 forms x M = 5 + 679
    high x 6 x M = 10) for named models, in each mode, from the genai-prices table.

Timings are not the point here; each run prints the date and the load average.
"""

from __future__ import annotations

import argparse
import datetime as dt
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


def _counters():
    from moralkit.collect.cost import TokenCounter

    qwen = TokenCounter.for_local_model("qwen2.5-coder-0.5b-instruct").tokenizer
    smol = TokenCounter.for_local_model("smollm2-135m-instruct").tokenizer

    def templ(tok):
        def usage(req, text):
            s = tok.apply_chat_template(req["messages"], add_generation_prompt=True, tokenize=False)
            return len(tok(s, add_special_tokens=False)["input_ids"]), len(tok(text, add_special_tokens=False)["input_ids"])
        return usage

    def openai_style(req, text):
        n = sum(3 + len(qwen(m["content"], add_special_tokens=False)["input_ids"]) for m in req["messages"]) + 3
        return n, len(qwen(text, add_special_tokens=False)["input_ids"])

    return {"qwen-like": templ(qwen), "smollm-like": templ(smol), "openai-style": openai_style}


def _lines(p):
    return p.read_bytes().split(b"\n")[:-1] if p.exists() else []


def bench_sweep(kills: int, scenarios: int, seed: int) -> dict:
    from moralkit.collect.store import read_records
    from moralkit.collect.sweep import estimate_sweep, load_sweep, status_table
    from moralkit.testing.faultserver import FaultServer

    t0 = time.time()
    usage = _counters()
    t_tok = time.time() - t0
    rng = random.Random(seed)
    work = Path(tempfile.mkdtemp(prefix="bench-cost-"))
    env = dict(os.environ, FAULT_KEY="sk-bench", PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    servers = {name: FaultServer(rate=0.1, faults=("429", "500"), retry_after=0, seed=i, usage=u, max_seconds=7200)
               for i, (name, u) in enumerate(usage.items())}
    for s in servers.values():
        s.start()
    try:
        toml = ['[sweep]\ndata = "data"\n']
        for name, s in servers.items():
            toml.append(f'[providers.{name}]\nconcurrency = 4\nbase_url = "{s.url}"\napi_key_env = "FAULT_KEY"\n'
                        'timeout = 5\nbackoff = 0.02\n')
        for name in servers:
            toml.append(f'[[models]]\nlabel = "{name}"\nbackend = "openai"\nmodel = "fault-double"\n'
                        f'provider = "{name}"\nprice_in = 1.0\nprice_out = 4.0\n')
        toml.append('[[surveys]]\nsurvey = "psm"\n')
        for amb in ("low", "high"):
            toml.append(f'[[surveys]]\nsurvey = "moralchoice"\nambiguity = "{amb}"\nn_scenarios = {scenarios}\n')
        path = work / "sweep.toml"
        path.write_text("\n".join(toml))
        runs = work / "data" / "raw"
        seen: dict = {}
        lost = killed = 0
        for k in range(kills):
            total = sum(len(v) for v in seen.values())
            target = total + rng.randint(20, 1500)
            p = subprocess.Popen([sys.executable, "-m", "moralkit", "sweep", str(path), "--no-progress"], cwd=ROOT,
                                 env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            while p.poll() is None and sum(len(_lines(d / "records.jsonl")) for d in runs.glob("*")) < target:
                time.sleep(0.005)
            time.sleep(rng.uniform(0, 0.05))
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                killed += 1
            p.wait()
            for d in runs.glob("*"):
                now = _lines(d / "records.jsonl")
                old = seen.get(d.name, [])
                lost += sum(1 for a, b in zip(old, now) if a != b) + max(0, len(old) - len(now))
                seen[d.name] = now
        r = subprocess.run([sys.executable, "-m", "moralkit", "sweep", str(path), "--no-progress"], cwd=ROOT,
                           env=env, capture_output=True, text=True)
        for d in runs.glob("*"):
            now = _lines(d / "records.jsonl")
            old = seen.get(d.name, [])
            lost += sum(1 for a, b in zip(old, now) if a != b) + max(0, len(old) - len(now))
        table = status_table(path)
        stored_by_model, dup, counted = Counter(), 0, Counter()
        for d in runs.glob("*"):
            att = [x for x in read_records(d) if x["kind"] == "attempt"]
            keys = [(x["task"], x["attempt"]) for x in att]
            dup += len(keys) - len(set(keys))
            label = json.loads((d / "manifest.json").read_text())["label"]
            stored_by_model[label] += len(att)
            counted[label] += sum(x["prompt_tokens"] or 0 for x in att)
        answered = {n: len(s.usable) for n, s in servers.items()}
        twice = {n: answered[n] - stored_by_model[n] for n in servers}
        est = {}
        sw = load_sweep(path)
        est_text = estimate_sweep(path)
        for line in est_text.splitlines()[2:]:
            cells = [c.strip() for c in line.strip("|").split("|")]
            if len(cells) >= 5:
                est[cells[0]] = est.get(cells[0], 0) + int(cells[3].replace(",", ""))
        accuracy = {n: dict(estimated=est[n], counted=counted[n], error_pct=round(100 * (est[n] / counted[n] - 1), 2))
                    for n in servers}
        return dict(
            date=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), load=os.getloadavg(),
            jobs=len(sw.jobs), final_exit=r.returncode, all_done=bool((table["state"] == "done").all()),
            kills=killed, records=sum(stored_by_model.values()), records_lost=lost, records_duplicated=dup,
            requests_answered_twice=twice, estimate_vs_counted_input_tokens=accuracy,
            seconds=round(time.time() - t0, 1), seconds_loading_tokenizers=round(t_tok, 1), workdir=str(work))
    finally:
        for s in servers.values():
            s.stop()


def bench_paper(models) -> str:
    from moralkit.collect.cost import estimate_markdown

    head = f"date {dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')}, load {os.getloadavg()}\n\n"
    return head + estimate_markdown(models, "paper")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    s = sub.add_parser("sweep")
    s.add_argument("--kills", type=int, default=10)
    s.add_argument("--scenarios", type=int, default=50)
    s.add_argument("--seed", type=int, default=0)
    p = sub.add_parser("paper")
    p.add_argument("--model", action="append", default=None)
    a = ap.parse_args(argv)
    if a.what == "sweep":
        print(json.dumps(bench_sweep(a.kills, a.scenarios, a.seed), indent=1))
    else:
        print(bench_paper(a.model or ["gpt-5.5", "claude-sonnet-4-6", "gemini-3.5-flash"]))


if __name__ == "__main__":
    main()
