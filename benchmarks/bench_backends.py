"""Throughput of the collection backends: prompt tokens/s and seconds per PSM round.

Two modes:

``python benchmarks/bench_backends.py live [--model NAME] [--rounds 3]``
    Loads the model with the transformers backend in several configurations
    (bfloat16 dense [default], GGUF packed kernels in float32, batch of 4) and
    through the OpenAI-compatible server (``moralkit.collect.server``) with the
    ``openai`` backend; sends the same real PSM prompts to each and prints the
    seconds per request, prompt tokens/s and ratios to the default, measured in
    this one run (the machine's load affects all configurations alike).

``python benchmarks/bench_backends.py records DIR [DIR ...]``
    Summarises the latencies recorded by real collection runs (``data/raw/*``):
    seconds per attempt, per completed round, prompt tokens/s, CPU load noted in
    the manifest's sessions is not available, so read these as wall-clock under
    whatever load the run had.

References
----------
Seror (2025), Section 2.1 (161 rounds, up to 3 attempts each).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def _psm_requests(n, seed=0):
    from moralkit.collect.backends import Request, Sampling
    from moralkit.psm.design import constrained_prompt, make_design

    d = make_design(0)
    s = Sampling(temperature=1.0, max_tokens=16)
    return [Request.from_prompt(constrained_prompt(d[k].options()), seed=seed + k, sampling=s) for k in range(n)]


def _time(backend, reqs, batch):
    t0 = time.perf_counter()
    out = []
    for i in range(0, len(reqs), batch):
        out += backend.generate(reqs[i:i + batch])
    dt = time.perf_counter() - t0
    toks = sum(c.prompt_tokens or 0 for c in out)
    return dt / len(reqs), toks / dt, [c.text for c in out]


def live(model, rounds):
    from moralkit.collect.backends import OpenAIBackend, TransformersBackend
    from moralkit.collect.server import start_server_thread

    reqs = _psm_requests(rounds)
    rows = []
    print(f"load average at start: {os.getloadavg()}", flush=True)
    b = TransformersBackend(model, batch_size=1)
    print(f"transformers bf16 dense: loaded in {b.load_seconds:.1f} s", flush=True)
    _time(b, reqs[:1], 1)  # warm-up
    s, tps, _ = _time(b, reqs, 1)
    rows.append(("transformers bf16 dense, batch 1 (default)", s, tps))
    b.batch_size = 4
    s4, tps4, _ = _time(b, reqs + reqs[:max(0, 4 - len(reqs))], 4)
    rows.append(("transformers bf16 dense, batch 4", s4, tps4))
    b.batch_size = 1
    srv, url = start_server_thread(b)
    try:
        ob = OpenAIBackend(b.model, base_url=url, api_key_env="MORALKIT_BENCH_NO_KEY", concurrency=1)
        so, tpso, _ = _time(ob, reqs, 1)
        rows.append(("openai backend -> moralkit server (same model)", so, tpso))
    finally:
        srv.shutdown()
    del b
    bp = TransformersBackend(model, batch_size=1, dequantize=False, dtype="float32")
    _time(bp, reqs[:1], 1)
    sp, tpsp, _ = _time(bp, reqs, 1)
    rows.append(("transformers GGUF packed kernels, float32", sp, tpsp))
    print(f"\n{'configuration':52s} {'s/request':>10s} {'prompt tok/s':>13s} {'time ratio':>11s}")
    for name, s_, t_ in rows:
        print(f"{name:52s} {s_:10.2f} {t_:13.0f} {s_ / rows[0][1]:11.2f}")
    print(f"load average at end: {os.getloadavg()}")


def records(dirs):
    from moralkit.collect.psm import psm_quality
    from moralkit.collect.store import read_records

    print(f"{'run':52s} {'attempts':>8s} {'s/attempt':>10s} {'s/round':>8s} {'prompt tok/s':>13s}")
    for d in dirs:
        recs = [r for r in read_records(d) if r.get("kind", "attempt") == "attempt"]
        if not recs:
            continue
        lat = [r["latency_s"] / max(1, r.get("batch", 1)) for r in recs]
        toks = [r["prompt_tokens"] or 0 for r in recs]
        per_round = None
        if recs[0].get("survey") == "psm":
            q = psm_quality(d)
            per_round = sum(lat) / max(1, q["rounds"] + (1 if q["q0"] is not None else 0))
        print(f"{os.path.basename(os.path.normpath(d)):52s} {len(recs):8d} {statistics.mean(lat):10.2f} "
              f"{per_round if per_round is not None else float('nan'):8.2f} {sum(toks) / sum(lat):13.0f}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="mode", required=True)
    lv = sub.add_parser("live")
    lv.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    lv.add_argument("--rounds", type=int, default=3)
    rc = sub.add_parser("records")
    rc.add_argument("dirs", nargs="+")
    a = p.parse_args(argv)
    if a.mode == "live":
        live(a.model, a.rounds)
    else:
        records(a.dirs)


if __name__ == "__main__":
    sys.exit(main())
