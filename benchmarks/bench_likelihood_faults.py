"""Issue 31's acceptance figures for `likelihood` on the shared runner, and secrets across collectors.

Measures, against the fault-injecting test double (:class:`moralkit.testing.faultserver.FaultServer`,
never data), with the real command line (``python -m moralkit likelihood``, 3 low-ambiguity scenarios,
all three question types: 150 requests):

- at fault rates 0.4 and 0.7 (every fault type): invocations needed to finish, usable answers the
  server sent vs. recorded; of those not recorded, the ones whose request had already timed out at the
  client (the response never arrived) and the others (discarded by the collector);
- ``--kills`` SIGKILLs at random numbers of stored records, then a finishing run: records lost,
  duplicated, and answers that were in flight at a kill (re-sent, not lost);
- bytes matching the API key or its base64 forms in everything each collector (psm, moralchoice,
  likelihood) writes and prints, under a server echoing the key and the Authorization header in
  400/500 and 401 errors.

Prints one JSON line per measurement as it ends (the first and last with the date and the load average). Usage::

    PYTHONPATH=. python benchmarks/bench_likelihood_faults.py [--kills 20]

Measured 2026-11-26 on the shared 2-core machine (load average 32 at the start of run 1, 10 in run 2):
fault rate 0.4: 1 invocation, 150/150 usable answers recorded, 0 discarded, 97 faults injected (runs 1
and 2); 0.7: 2 invocations (exit 3, then 0), 0 discarded in run 2 (268 faults); in run 1 (269 faults,
before the timed-out/discarded split was counted) the server logged 151 usable answers for 150
recorded; 20 SIGKILLs (all hit a running process): 0 records lost, 0 duplicated, 30 answers in flight
at a kill re-sent; secrets: 0 bytes of the key or its base64 forms across psm, moralchoice and
likelihood, under 400/500 (27 echoing errors) and 401 (7) responses.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import test_collect_hardening as h  # noqa: E402

from moralkit.testing.faultserver import FaultServer  # noqa: E402


def invocations(rate: float, tmp: Path, max_invocations: int = 20) -> dict:
    out = tmp / f"lk-{rate}"
    codes = []
    with FaultServer(rate=rate, seed=11, hang=1.5, retry_after=1, max_seconds=7200) as srv:
        args = h._lk_args(srv.url, out)
        args[args.index("ab,repeat")] = "ab,repeat,compare"
        while len(codes) < max_invocations:
            p = h._cli(*args, timeout=900)
            codes.append(p.returncode)
            if p.returncode == 0:
                break
        usable = list(srv.usable)
        faults = {str(k): v for k, v in srv.counts.items() if k}
    att = h._attempts(out)
    keys = [(a["task"], a["attempt"]) for a in att]
    lost, timed_out = h.discarded(out, usable)
    return dict(rate=rate, invocations=len(codes), exit_codes=codes, requests=len(att), usable_sent=len(usable),
                recorded=len(att), discarded=lost, timed_out_at_the_client_before_arriving=timed_out,
                duplicated=len(keys) - len(set(keys)), faults_injected=sum(faults.values()))


def kills(n: int, tmp: Path, extra=(), name="kills") -> dict:
    d = tmp / name
    d.mkdir()
    hit, lost, dup, in_flight = h.likelihood_kill_run(d, kills=n, max_seconds=7200, extra=extra)
    return dict(kills_attempted=n, kills_that_hit=hit, records_lost=lost, records_duplicated=dup,
                answers_in_flight_at_a_kill=in_flight)


def secrets(tmp: Path) -> dict:
    res = {}
    for faults in (("400", "500"), ("401",)):
        d = tmp / ("sec-" + "-".join(faults))
        d.mkdir()
        texts = []
        with FaultServer(rate=1.0 if "401" in faults else 0.5, faults=faults, seed=7, echo=True,
                         max_seconds=7200) as srv:
            for name, args in h._collectors(srv.url, d):
                p = h._cli(*args)
                texts += [p.stdout, p.stderr]
                res.setdefault("exit_codes", {})[f"{name} {'/'.join(faults)}"] = p.returncode
            echoed = sum(v for k, v in srv.counts.items() if k)
        res[f"secret_bytes {'/'.join(faults)}"] = h._secret_bytes(d, texts=texts)
        res[f"errors_echoing_the_key {'/'.join(faults)}"] = echoed
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: faults,kills,secrets")
    a = ap.parse_args()
    skip = set(a.skip.split(","))
    out = dict(date=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), load_average=os.getloadavg(),
               git=subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                  text=True).stdout.strip())
    print(json.dumps(out), flush=True)
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        if "faults" not in skip:
            for r in (0.4, 0.7):
                print(json.dumps({"fault_rate": invocations(r, tmp)}), flush=True)
        if "secrets" not in skip:
            print(json.dumps({"secrets": secrets(tmp)}), flush=True)
        if "kills" not in skip:  # the full kill counts (the tests kill 3 and 2 times)
            print(json.dumps({"sigkill": kills(a.kills, tmp)}), flush=True)
            print(json.dumps({"sigkill_top_logprobs": kills(a.kills, tmp, ("--estimator", "top_logprobs", "--samples",
                                                                           "2"), "kills-top")}), flush=True)
    print(json.dumps({"load_average_end": os.getloadavg()}), flush=True)


if __name__ == "__main__":
    main()
