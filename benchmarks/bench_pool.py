"""Benchmark: the request pool against the old batch runner, and collection at fault rate 0.4.

Both parts talk to :class:`moralkit.testing.faultserver.FaultServer`, a TEST DOUBLE on 127.0.0.1
(answers are a hash of prompt and seed; nothing here is data), through the real ``openai`` backend.

1. **Busy slots** (issue 14): 81 requests, 9 of them slow (``--slow`` s, at seeded random
   positions), the rest ``--fast`` s, concurrency 8. The same tasks run through
   :func:`moralkit.collect.runner.run_tasks` as a pool (the ``openai`` backend as shipped), and as
   the old runner did: batches of ``2 * concurrency`` requests, each batch waiting for its slowest.
   Mean busy slots = request-seconds / wall seconds, over the whole run and over the part of the
   run while requests were still waiting to be sent (before the final drain, which no runner can
   fill: there is nothing left to send).
2. **Fault rate 0.4** (issue 14): ``python -m moralkit collect psm --limit 20`` against a server that
   injects every fault type at rate 0.4; how many invocations until the command exits 0, and how
   many usable responses the server sent that are not in the records (discarded).

Usage::

    .venv/bin/python benchmarks/bench_pool.py [--slow 3] [--fast 0.3] [--seed 0]

The last line printed is one JSON object with the keys ``pool_busy_slots``, ``batch_busy_slots``,
``pool_busy_slots_while_queued``, ``pool_wall_s``, ``batch_wall_s``, ``invocations_at_04`` and
``discarded_at_04``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from moralkit.collect.backends import OpenAIBackend, Sampling
from moralkit.collect.runner import Task, run_tasks
from moralkit.collect.store import RecordStore, read_records
from moralkit.testing.faultserver import FaultServer

ROOT = Path(__file__).resolve().parents[1]


class _AsBatches:
    """The old runner's view of the openai backend: ``generate`` on batches of ``2 * concurrency``."""

    def __init__(self, b):
        self.b, self.name, self.model = b, b.name, b.model
        self.batch_size, self.max_retries, self.backoff = b.batch_size, b.max_retries, b.backoff

    def generate(self, reqs):
        return self.b.generate(reqs)

    def secrets(self):
        return self.b.secrets()


def _busy(records):
    """(mean in flight over the whole run, mean in flight until the last request was sent, wall seconds)."""
    iv = []
    for r in records:
        t0 = dt.datetime.fromisoformat(r["started"].replace("Z", "+00:00")).timestamp()
        iv.append((t0, t0 + r["latency_s"]))
    start, end = min(a for a, _ in iv), max(b for _, b in iv)
    last_sent = max(a for a, _ in iv)
    total = sum(b - a for a, b in iv)
    queued = sum(max(0.0, min(b, last_sent) - a) for a, b in iv)
    return total / (end - start), queued / (last_sent - start), end - start


def busy_slots(slow, fast, seed, concurrency=8, n=81, n_slow=9):
    slow_idx = set(random.Random(seed).sample(range(n), n_slow))
    tasks = [Task(f"t{i:02d}", f"request {i}", {"slow": i in slow_idx}) for i in range(n)]
    prompts = {f"request {i}": (slow if i in slow_idx else fast) for i in range(n)}
    out = {}
    with FaultServer(rate=0.0, latency=lambda req: prompts.get(req["messages"][-1]["content"], 0.0)) as srv:
        for mode in ("pool", "batch"):
            b = OpenAIBackend("bench-double", base_url=srv.url, api_key_env="MORALKIT_BENCH_NO_KEY",
                              concurrency=concurrency, timeout=60)
            with tempfile.TemporaryDirectory() as d:
                with RecordStore(d, {"survey": "bench"}) as st:
                    rep = run_tasks(b if mode == "pool" else _AsBatches(b), st, tasks, lambda t, x: (x, "ok"),
                                    seed=seed, sampling=Sampling(max_tokens=4))
                recs = [r for r in read_records(d) if r["kind"] == "attempt"]
            assert rep.complete and len(recs) == n
            out[mode] = _busy(recs)
    return out


def fault_rate_run(rate=0.4, seed=11, max_invocations=5):
    env = dict(os.environ, FAULT_KEY="sk-test-fault-server-key-0000", PYTHONPATH=str(ROOT))
    with tempfile.TemporaryDirectory() as d, FaultServer(rate=rate, seed=seed, hang=1.5, retry_after=1) as srv:
        cmd = [sys.executable, "-m", "moralkit", "collect", "psm", "--backend", "openai", "--model", "fault-double",
               "--base-url", srv.url, "--api-key-env", "FAULT_KEY", "--concurrency", "4", "--timeout", "1",
               "--backoff", "0.05", "--limit", "20", "--out", str(Path(d) / "run"), "--no-progress"]
        for k in range(1, max_invocations + 1):
            p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
            if p.returncode == 0:
                break
        att = [r for r in read_records(Path(d) / "run") if r["kind"] == "attempt"]
        usable = len(srv.usable)
        faults = {str(f): c for f, c in srv.counts.items()}
    return dict(invocations=k, exit=p.returncode, usable_sent=usable, discarded=usable - len(att),
                attempts=len(att), faults=faults, line=p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    ap.add_argument("--slow", type=float, default=3.0)
    ap.add_argument("--fast", type=float, default=0.3)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    r = busy_slots(a.slow, a.fast, a.seed)
    for mode, (whole, queued, wall) in r.items():
        print(f"{mode:5s}: wall {wall:5.1f} s, mean busy slots {whole:.2f} of 8 over the run, "
              f"{queued:.2f} while requests were waiting to be sent")
    print(f"pool / batch wall time: {r['pool'][2] / r['batch'][2]:.2f}")
    f = fault_rate_run()
    print(f"fault rate 0.4, PSM --limit 20: {f['invocations']} invocation(s), exit {f['exit']}, "
          f"{f['discarded']} of {f['usable_sent']} usable responses discarded; faults injected {f['faults']}")
    print(f["line"])
    print(json.dumps(dict(pool_busy_slots=round(r["pool"][0], 2), pool_busy_slots_while_queued=round(r["pool"][1], 2),
                          batch_busy_slots=round(r["batch"][0], 2), pool_wall_s=round(r["pool"][2], 2),
                          batch_wall_s=round(r["batch"][2], 2), invocations_at_04=f["invocations"],
                          discarded_at_04=f["discarded"], usable_at_04=f["usable_sent"])))


if __name__ == "__main__":
    main()
