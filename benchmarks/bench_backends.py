"""Throughput of the collection backends: prompt tokens/s and seconds per PSM round.

Two modes:

``python benchmarks/bench_backends.py live [--model NAME] [--rounds 3]``
    Loads the model with the transformers backend in several configurations
    (bfloat16 dense [default], GGUF packed kernels in float32, batch of 4) and
    through the OpenAI-compatible server (``moralkit.collect.server``) with the
    ``openai`` backend; sends the same real PSM prompts to each and prints the
    seconds per request, prompt tokens/s and ratios to the default, measured in
    this one run (the machine's load affects all configurations alike).

``python benchmarks/bench_backends.py throughput [--model NAME] [--rounds 4] [--threads 1]``
    What batching and shared-prefix caching buy for PSM rounds with the
    transformers backend, against a **roofline measured in the same run**: the
    bf16 matmul rate of this CPU (GFLOP/s, a bare ``torch.matmul`` of the
    model's MLP shape) divided by the model's FLOPs per prompt token (2 x the
    non-embedding parameters + causal attention at the prompt's length) is the
    prompt tokens/s no implementation can beat on these threads. Configurations,
    interleaved round by round so that the machine's load hits them alike:
    (a) the default: one round per ``generate`` call; (b) the shared prefix of
    all rounds' prompts (chat header, instructions and the five statements)
    computed once and its key/value cache copied into each round's ``generate``;
    (c) four rounds per forward pass (left padding; one seed per batch, so an
    answer then depends on its batch: not used for collection); (d) as (a) with
    the weights in float32 instead of bfloat16. It prints
    seconds per round, prompt tokens/s, the share of the roofline, and whether
    (b) gives the same answers as (a) for the same seeds.

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


def roofline(threads=1, reps=10):
    """bf16 and fp32 matmul rates (GFLOP/s) of this CPU on ``threads`` threads, MLP-shaped (512 x 896 @ 896 x 4864)."""
    import torch

    torch.set_num_threads(int(threads))
    out = {}
    for name, dt in (("bfloat16", torch.bfloat16), ("float32", torch.float32)):
        a = torch.randn(512, 896, dtype=dt)
        b = torch.randn(896, 4864, dtype=dt)
        torch.matmul(a, b)
        t0 = time.perf_counter()
        for _ in range(reps):
            torch.matmul(a, b)
        out[name] = 2 * 512 * 896 * 4864 * reps / (time.perf_counter() - t0) / 1e9
    return out


def flops_per_token(lm, n_ctx):
    """Forward FLOPs per prompt token: 2 x non-embedding parameters + causal attention at context ``n_ctx``."""
    cfg = lm.config
    emb = lm.get_input_embeddings().weight.numel()
    n = sum(p.numel() for p in lm.parameters()) - emb
    if not getattr(cfg, "tie_word_embeddings", False):
        n -= lm.get_output_embeddings().weight.numel()  # the LM head runs on the last position only
    d_attn = cfg.num_attention_heads * getattr(cfg, "head_dim", cfg.hidden_size // cfg.num_attention_heads)
    return 2 * n + 2 * n_ctx * d_attn * cfg.num_hidden_layers


def throughput(model, rounds, threads):
    import copy

    import torch
    from transformers import DynamicCache

    from moralkit.collect.backends import TransformersBackend

    print(f"load average at start: {os.getloadavg()}", flush=True)
    roof0 = roofline(threads)
    b = TransformersBackend(model, batch_size=1, threads=threads)
    reqs = _psm_requests(max(4, rounds))
    texts = [b.chat_text(r.messages) for r in reqs]
    ids = [b.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    n_common = next(k for k in range(min(map(len, ids))) if len({tuple(x[:k + 1]) for x in ids}) > 1)
    n_ctx = sum(map(len, ids)) / len(ids)
    fpt = flops_per_token(b.lm, n_ctx)
    prefix = DynamicCache(config=b.lm.config)
    with torch.inference_mode():
        b.lm(input_ids=torch.tensor([ids[0][:n_common]]), past_key_values=prefix, use_cache=True, logits_to_keep=1)

    def gen_prefix(r, x):
        s = r.sampling
        cache = copy.deepcopy(prefix)
        t0 = time.perf_counter()
        torch.manual_seed(int(r.seed))
        with torch.inference_mode():
            out = b.lm.generate(input_ids=torch.tensor([x]), attention_mask=torch.ones(1, len(x), dtype=torch.long),
                                past_key_values=cache, max_new_tokens=s.max_tokens, do_sample=True,
                                temperature=s.temperature, top_p=s.top_p, top_k=0,
                                pad_token_id=b.tokenizer.pad_token_id)
        text = b.tokenizer.decode(out[0, len(x):], skip_special_tokens=True)
        return time.perf_counter() - t0, text

    b.generate(reqs[:1])  # warm-up
    t = {"a": 0.0, "b": 0.0, "c": 0.0}
    same = 0
    for k in range(rounds):
        t0 = time.perf_counter()
        ca = b.generate([reqs[k]])[0]
        t["a"] += time.perf_counter() - t0
        dt, text = gen_prefix(reqs[k], ids[k])
        t["b"] += dt
        same += text.strip() == (ca.text or "").strip()
    b32 = TransformersBackend(model, batch_size=1, threads=threads, dtype="float32")
    b32.generate(reqs[:1])
    t["d"] = 0.0
    for k in range(rounds):
        t0 = time.perf_counter()
        b32.generate([reqs[k]])
        t["d"] += time.perf_counter() - t0
    del b32
    b.batch_size = 4
    for k in range(0, rounds, 4):
        batch = [reqs[(k + j) % len(reqs)] for j in range(4)]
        t0 = time.perf_counter()
        b.generate(batch)
        t["c"] += (time.perf_counter() - t0) * min(4, rounds - k) / 4
    roof1 = roofline(threads)
    roof = {k: (roof0[k] + roof1[k]) / 2 for k in roof0}
    toks = sum(len(x) for x in ids[:rounds])
    print(f"\nmodel {b.model}: {fpt / 1e9:.2f} GFLOP per prompt token at a {n_ctx:.0f}-token prompt; "
          f"shared prefix {n_common} tokens ({n_common / n_ctx:.0%})")
    print(f"bf16 matmul roofline on {threads} thread(s): {roof['bfloat16']:.1f} GFLOP/s "
          f"(start {roof0['bfloat16']:.1f}, end {roof1['bfloat16']:.1f}; fp32 {roof['float32']:.1f}) "
          f"-> at most {roof['bfloat16'] * 1e9 / fpt:.0f} prompt tokens/s")
    print(f"\n{'configuration':58s} {'s/round':>8s} {'prompt tok/s':>13s} {'of roofline':>12s} {'time ratio':>11s}")
    names = {"a": "(a) one round per generate (default)", "b": "(b) shared-prefix KV cache, one round per call",
             "c": "(c) 4 rounds per forward pass (seed per batch)",
             "d": "(d) as (a), float32 weights"}
    for key in "abcd":
        sr = t[key] / rounds
        tps = toks / t[key]
        r = roof["float32" if key == "d" else "bfloat16"]
        print(f"{names[key]:58s} {sr:8.2f} {tps:13.0f} {tps * fpt / 1e9 / r:12.1%} "
              f"{t[key] / t['a']:11.2f}")
    print("(of roofline: bf16 matmul rate for (a)-(c), fp32 for (d))")
    print(f"(b) gave the same answer as (a) for {same}/{rounds} rounds (same seeds)")
    print(f"load average at end: {os.getloadavg()}")


def records(dirs):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _record import emit, load

    from moralkit.collect.psm import psm_quality
    from moralkit.collect.store import read_records

    print(f"{'run':52s} {'attempts':>8s} {'s/attempt':>10s} {'s/round':>8s} {'prompt tok/s':>13s}")
    for d in dirs:
        recs = [r for r in read_records(d) if r.get("kind", "attempt") == "attempt"]
        if not recs or "prompt_tokens" not in recs[0]:
            continue  # no attempts, or a likelihood run (mcl-*: scores, not generations)
        lat = [r["latency_s"] / max(1, r.get("batch", 1)) for r in recs]
        toks = [r["prompt_tokens"] or 0 for r in recs]
        per_round = None
        if recs[0].get("survey") == "psm":
            q = psm_quality(d)
            per_round = sum(lat) / max(1, q["rounds"] + (1 if q["q0"] is not None else 0))
        name = os.path.basename(os.path.normpath(d))
        print(f"{name:52s} {len(recs):8d} {statistics.mean(lat):10.2f} "
              f"{per_round if per_round is not None else float('nan'):8.2f} {sum(toks) / sum(lat):13.0f}")
        # one record per run: the run's own wall times (read from its records), not a timing of this machine
        emit("backends", f"records:{name}", load(), attempts=len(recs), s_per_attempt=round(statistics.mean(lat), 2),
             s_per_round=None if per_round is None else round(per_round, 2),
             prompt_tokens_per_s=round(sum(toks) / sum(lat)), survey=recs[0].get("survey"),
             collected=[recs[0].get("started"), recs[-1].get("finished")], note="wall time recorded by the collection run itself")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="mode", required=True)
    lv = sub.add_parser("live")
    lv.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    lv.add_argument("--rounds", type=int, default=3)
    tp = sub.add_parser("throughput")
    tp.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    tp.add_argument("--rounds", type=int, default=4)
    tp.add_argument("--threads", type=int, default=1)
    rc = sub.add_parser("records")
    rc.add_argument("dirs", nargs="+")
    a = p.parse_args(argv)
    if a.mode == "live":
        live(a.model, a.rounds)
    elif a.mode == "throughput":
        throughput(a.model, a.rounds, a.threads)
    else:
        records(a.dirs)


if __name__ == "__main__":
    sys.exit(main())
