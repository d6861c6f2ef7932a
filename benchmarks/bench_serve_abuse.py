"""`moralkit serve` under abuse: the latency of a normal request while abusive ones are in flight.

Starts ``python -m moralkit serve`` (default limits) on a real local model (SmolLM2-135M-Instruct, the
fastest), and measures through the official ``openai`` SDK the latency of a normal MoralChoice A/B request
(max_tokens 8, temperature 1, fixed seed):

- ``idle``: alone (median of ``--reps`` after one warm-up);
- ``abusive``: while a 100 KB prompt and a ``max_tokens: 100000`` request are sent at the same moment
  (the acceptance figure of issue 31: under 2 x idle, or a 4xx for the abusive requests);
- ``within_caps``: while a request at the caps (a ~6,800-token prompt, ``max_tokens`` 1024) runs: the
  normal request waits for the model (one generation at a time), bounded by ``--request-timeout``;
- ``after_disconnect``: after a client that sent the same capped request gave up after 2 s: its
  generation is stopped, so the normal request no longer waits.

Prints one JSON line with the numbers, the load average and the date.

    .venv/bin/python benchmarks/bench_serve_abuse.py --reps 5
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def start_server(model, extra=()):
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT))
    p = subprocess.Popen([sys.executable, "-m", "moralkit", "serve", "--model", model, "--port", "0", *extra],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    for line in p.stdout:
        if line.startswith("serving "):
            return p, line.split(" on ")[1].split(" ")[0]
    p.wait()
    raise SystemExit(f"the server did not start (exit {p.returncode})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()

    import openai

    from moralkit import moralchoice as mc

    sc = mc.load_scenarios("high").iloc[0]
    header, text = mc.build_prompt(sc, "ab", 0)
    normal = dict(model=a.model, messages=[{"role": "system", "content": header}, {"role": "user", "content": text}],
                  max_tokens=8, temperature=1.0, seed=0)
    big_prompt = [{"role": "user", "content": ("The quick brown fox jumps over the lazy dog. " * 2400)[:100 * 1024]}]
    capped_prompt = [{"role": "user", "content": "Continue this list without stopping: " + "one two three four " * 1700}]

    srv, url = start_server(a.model)
    client = openai.OpenAI(base_url=url, api_key="sk-local", max_retries=0, timeout=1800)

    def timed(body, c=client):
        t0 = time.perf_counter()
        try:
            c.chat.completions.create(**body)
            status = 200
        except openai.APIStatusError as e:
            status = e.status_code
        except openai.APITimeoutError:
            status = "client timeout"
        return status, time.perf_counter() - t0

    def normals():
        out = [timed(normal) for _ in range(a.reps)]
        assert all(s == 200 for s, _ in out), out
        return [round(t, 3) for _, t in out]

    def in_background(body, c=client):
        res = {}
        th = threading.Thread(target=lambda: res.update(zip(("status", "seconds"), timed(body, c))))
        th.start()
        return th, res

    try:
        timed(normal)  # warm-up
        idle = normals()
        # 1. the two abusive requests of the issue, sent together, then the normal requests
        t_big, r_big = in_background(dict(model=a.model, messages=big_prompt, max_tokens=16))
        t_long, r_long = in_background(dict(normal, max_tokens=100000))
        abusive = normals()
        t_big.join()
        t_long.join()
        # 2. a request at the caps (prompt under --max-prompt-tokens, max_tokens 1024)
        capped = dict(model=a.model, messages=capped_prompt, max_tokens=1024, temperature=1.0, seed=0)
        t_cap, r_cap = in_background(capped)
        time.sleep(1.0)  # let it take the model
        within = normals()
        t_cap.join()
        # 3. the same request from a client that gives up after 2 s
        quitter = openai.OpenAI(base_url=url, api_key="sk-local", max_retries=0, timeout=2.0)
        t_q, r_q = in_background(capped, quitter)
        t_q.join()
        after = normals()
    finally:
        srv.terminate()
        srv.wait(60)
    med = statistics.median
    print(json.dumps(dict(
        benchmark="serve_abuse", model=a.model, reps=a.reps,
        idle_s=idle, idle_median_s=med(idle),
        abusive=dict(prompt_100kb=r_big, max_tokens_100000=r_long, normal_s=abusive, normal_median_s=med(abusive), normal_max_s=max(abusive),
                     ratio_to_idle=round(med(abusive) / med(idle), 2),
                     max_ratio_to_idle=round(max(abusive) / med(idle), 2)),
        within_caps=dict(capped_request=r_cap, normal_s=within, normal_median_s=med(within), normal_max_s=max(within),
                         ratio_to_idle=round(med(within) / med(idle), 2),
                         max_ratio_to_idle=round(max(within) / med(idle), 2)),
        after_disconnect=dict(quitting_client=r_q, normal_s=after, normal_median_s=med(after), normal_max_s=max(after),
                              ratio_to_idle=round(med(after) / med(idle), 2),
                              max_ratio_to_idle=round(max(after) / med(idle), 2)),
        loadavg=os.getloadavg(), date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))))


if __name__ == "__main__":
    main()
