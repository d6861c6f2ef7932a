"""`moralkit serve` under abuse: the latency of a normal request while abusive ones are in flight.

Starts ``python -m moralkit serve`` (default limits) on a real local model (SmolLM2-135M-Instruct, the
fastest), and measures through the official ``openai`` SDK the latency of a normal MoralChoice A/B request
(max_tokens 8, temperature 1, fixed seed):

- ``idle``: alone (median of ``--reps`` after one warm-up);
- ``abusive``: while a 100 KB prompt and a ``max_tokens: 100000`` request are sent at the same moment
  (the acceptance figure of issue 31: under 2 x idle, or a 4xx for the abusive requests);
- ``within_caps``: while a request at the caps (a ~3,800-token prompt, ``max_tokens`` 1024) runs: the
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
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _record import start_serve  # noqa: E402


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
    capped_prompt = [{"role": "user", "content": "Continue this list without stopping: " + "one two three four " * 950}]

    srv, url = start_serve(a.model)
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
        except openai.APIConnectionError:
            status = "connection closed"
        return status, time.perf_counter() - t0

    def normals(reps=a.reps):
        return [(s, round(t, 3)) for s, t in (timed(normal) for _ in range(reps))]

    def in_background(body, c=client):
        res = {}
        th = threading.Thread(target=lambda: res.update(zip(("status", "seconds"), timed(body, c))))
        th.start()
        return th, res

    def summary(runs, idle_med):
        ok = [t for st, t in runs if st == 200]
        return dict(normal=runs, ok_median_s=statistics.median(ok) if ok else None,
                    ok_ratio_to_idle=round(statistics.median(ok) / idle_med, 2) if ok and idle_med else None,
                    max_s=max(t for _, t in runs))

    out = dict(benchmark="serve_abuse", model=a.model, reps=a.reps)
    try:
        timed(normal)  # warm-up
        idle = normals()
        idle_med = statistics.median(t for st, t in idle if st == 200)
        out["idle"] = dict(normal=idle, median_s=idle_med)
        # 1. the two abusive requests of the issue, sent together, then the normal requests while they are in flight
        t_big, r_big = in_background(dict(model=a.model, messages=big_prompt, max_tokens=16))
        t_long, r_long = in_background(dict(normal, max_tokens=100000))
        out["abusive"] = summary(normals(), idle_med)
        t_big.join()
        t_long.join()
        out["abusive"].update(prompt_100kb=r_big, max_tokens_100000=r_long)
        # 2. a request at the caps (prompt under --max-prompt-tokens, max_tokens 1024): the normal requests wait
        # for the model, at most --queue-timeout, the capped one runs at most --request-timeout
        capped = dict(model=a.model, messages=capped_prompt, max_tokens=1024, temperature=1.0, seed=0)
        t_cap, r_cap = in_background(capped)
        time.sleep(1.0)  # let it take the model
        out["within_caps"] = summary(normals(2), idle_med)
        t_cap.join()
        out["within_caps"]["capped_request"] = r_cap
        # 3. the same request from a client that gives up after 2 s: its generation stops
        quitter = openai.OpenAI(base_url=url, api_key="sk-local", max_retries=0, timeout=2.0)
        t_q, r_q = in_background(capped, quitter)
        t_q.join()
        out["after_disconnect"] = summary(normals(), idle_med)
        out["after_disconnect"]["quitting_client"] = r_q
    finally:
        srv.terminate()
        srv.wait(60)
        out.update(loadavg=os.getloadavg(),
                   date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
