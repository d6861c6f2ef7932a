"""Benchmark: the exact Houtman–Maks index per T = 160 PSM dataset (moralkit.psm.houtman_maks).

Datasets: SIMULATED quadratic agents with logit noise 0.05 / 0.3 / 1.0 and a uniformly random
chooser (moralkit.psm.simulate), then the committed real runs in data/psm (small local LLMs whose
answers are close to random). Each is stopped at --time-limit seconds; a stopped run is reported
as such, never as a value.

Usage::

    .venv/bin/python benchmarks/bench_houtman_maks.py [--time-limit 600] [--no-real]

The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json

from moralkit.psm import rp
from moralkit.psm.design import make_design
from moralkit.psm.houtman_maks import houtman_maks
from moralkit.psm.simulate import (
    random_quadratic_agent,
    simulate_quadratic,
    simulate_random,
)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--time-limit", type=float, default=600.0)
    ap.add_argument("--no-real", action="store_true", help="skip the committed LLM runs")
    args = ap.parse_args(argv)
    d = make_design(0)
    data = {f"sim-noise{n}": simulate_quadratic(random_quadratic_agent(i), d, noise=n, seed=i)
            for i, n in enumerate([0.05, 0.3, 1.0])}
    data["sim-random"] = simulate_random(d, seed=9)
    if not args.no_real:
        from moralkit.psm.dataset import read_psm

        try:
            data.update(read_psm("data/psm"))
        except (FileNotFoundError, ValueError) as ex:
            print(f"no committed PSM data: {ex}")
    houtman_maks(rp.psm_expenditure_matrix(data["sim-noise0.05"])[:20, :20])  # numba warm-up
    out = {}
    for name, ds in data.items():
        try:
            r = houtman_maks(ds, time_limit=args.time_limit)
        except RuntimeError as ex:
            print(f"{name}: T = {ds.valid().n_obs}, CCEI {rp.ccei_exact(ds)}: not finished ({ex})")
            out[name] = {"finished": False, "time_limit_s": args.time_limit}
            continue
        print(f"{name}: T = {r.T}, CCEI {rp.ccei_exact(ds)}, HM = {r.n_kept}/{r.T} = {float(r.index):.3f}; "
              f"{r.wall_s:.2f} s ({r.n_cuts} cuts, {r.n_solves} master solves)")
        out[name] = {"hm": f"{r.n_kept}/{r.T}", "s": round(r.wall_s, 3), "cuts": r.n_cuts, "solves": r.n_solves}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
