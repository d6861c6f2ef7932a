"""Benchmark: how many draws the noise bands of ``compare_estimators`` need for the count of measures in
their bands not to move with the seed (issue 28).

The README's findings block counts how many of the 12 agreement measures (r and the mean absolute
difference of 6 respondent x level rows, committed data at the paper's M) lie inside their 95 % noise
bands. The bands are quantiles of ``n_sim`` simulated draws, so their edges, and a measure that sits
near an edge, move with the seed. For each ``n_sim`` this runs the seeds given and prints, as JSON, the
in-band count per seed, the band edges' spread over the seeds for the measures nearest to an edge, and
the CPU seconds per full comparison (``time.process_time``: other load on the machine does not count),
with the load average and the date.

Usage: ``PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_noise_bands.py --n-sim 200 1000 10000 --seeds 0 1 2 3 4``
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import time
import warnings

import numpy as np
import pandas as pd


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-sim", type=int, nargs="+", default=[200, 1000, 2000, 5000, 10000])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    from moralkit import moralchoice as mc
    from moralkit import runs
    from moralkit.moralchoice.comparison import compare_at_paper_m
    from moralkit.moralchoice.likelihood import load_likelihoods

    data = {a: (load_likelihoods(a), mc.load_responses(a, own_data=runs.run_dir("responses"), include_shared=False))
            for a in mc.PAPER_SAMPLES}
    out = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "load_average": os.getloadavg(), "results": []}
    for n in args.n_sim:
        counts, cpu, edges = [], [], []
        for s in args.seeds:
            t0 = time.process_time()
            cmp = pd.concat([compare_at_paper_m(lk, rs, a, seed=s, fallback=False, n_sim=n).to_frame().assign(ambiguity=a)
                             for a, (lk, rs) in data.items()], ignore_index=True)
            cpu.append(time.process_time() - t0)
            inside = sum(int(lo <= v <= hi) for m in ("r_p", "mad_p")
                         for v, lo, hi in cmp[[m, f"{m}_sim_lo", f"{m}_sim_hi"]].to_numpy())
            counts.append(inside)
            # distance of each measure to its nearer band edge (negative: outside)
            d = np.concatenate([np.minimum(cmp[m] - cmp[f"{m}_sim_lo"], cmp[f"{m}_sim_hi"] - cmp[m]).to_numpy()
                                for m in ("r_p", "mad_p")])
            edges.append(d)
        e = np.array(edges)
        k = int(np.argmin(np.abs(e).mean(axis=0)))
        out["results"].append({"n_sim": n, "in_band_per_seed": counts, "cpu_s_per_comparison": round(float(np.mean(cpu)), 2),
                               "nearest_edge_distance_per_seed": [round(float(x), 4) for x in e[:, k]]})
        print(json.dumps(out["results"][-1]), flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
