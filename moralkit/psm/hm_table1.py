"""Table 1's Houtman–Maks column, computed once by a command and committed with its inputs' hashes.

On near-random answers (the committed LLM runs) deciding whether a random dataset's HM reaches the
model's takes seconds to minutes each (``benchmarks/bench_houtman_maks.py``), so 1,000 random
datasets x 7 respondents are too slow for notebook 02's run. The command

    .venv/bin/python -m moralkit.psm.hm_table1 [--n-datasets 1000] [--time-limit 10] [--n-jobs 2]

runs :func:`moralkit.psm.rationality.table1` with ``hm=True`` (the test of
:mod:`moralkit.psm.hm_random_choice`) on the committed PSM data (:func:`moralkit.runs.run_dir` ``("psm")``)
and writes ``table1_hm.csv`` (one row per respondent) to ``run_dir("derived")``, with ``table1_hm.json`` (the run's
parameters, the SHA-256 of every input file, the date, the load and the wall time). Notebook 02
reads it with :func:`load` and shows it only when the hashes match the data it analyses; a test
recomputes a sample of rows.

References
----------
Seror (2025), Section 2.3 (Procedure 1, eq. (4)); Houtman and Maks (1985).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import pandas as pd

from .. import runs
from ..errors import MoralkitError
from .hm_random_choice import HMTestResult

__all__ = ["COLUMNS", "alpha_text", "compute", "decisions_frame", "default_dir", "input_hashes", "load", "main",
           "write", "beside", "describe"]

COLUMNS = ["model", "n_obs", "ccei_exact", "alpha", "hm_exact", "hm", "hm_kept", "hm_upper", "alpha_hm", "alpha_hm_low",
           "alpha_hm_high", "stars_hm", "n_datasets", "n_at_least", "n_below", "n_undecided", "n_exact", "time_limit_s",
           "own_time_limit_s"]


def default_dir() -> Path:
    """Where the committed table lives: :func:`moralkit.runs.run_dir` ``("derived")``."""
    return runs.run_dir("derived")


def input_hashes(psm_dir=None) -> dict:
    """SHA-256 of every ``*.csv.gz`` file of the PSM data directory (or of one file), by file name.

    The default directory is the committed PSM runs, :func:`moralkit.runs.run_dir` ``("psm")``.
    """
    d = Path(psm_dir) if psm_dir is not None else runs.run_dir("psm")
    files = [d] if d.is_file() else sorted(d.glob("*.csv.gz"))
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def compute(datasets, n_datasets: int = 1000, seed: int = 0, time_limit: float = 10.0, n_jobs: int = 1,
            own_time_limit: float | None = None):
    """Table 1 with the HM column (:func:`moralkit.psm.rationality.table1`, ``hm=True``) as tidy rows.

    The HM column is :func:`moralkit.psm.hm_random_choice.hm_random_choice_test` of each respondent.

    Returns (table, decisions): one row per respondent, and one row per (respondent, random
    dataset) with its decision (1: HM at least the respondent's, 0: below, -1: undecided within
    ``time_limit``) and what decided it (``bound``, ``greedy`` or ``exact``). ``own_time_limit``
    bounds each respondent's own exact HM (then ``hm_kept``/``hm_upper`` bracket it).
    """
    from .rationality import table1

    tab = table1(datasets, n_datasets=n_datasets, seed=seed, n_jobs=n_jobs, hm=True, hm_time_limit=time_limit,
                 hm_own_time_limit=own_time_limit)
    res = tab.hm_results
    rows = []
    for _, r in tab.to_frame().iterrows():
        h = res[r["model"]]
        rows.append(dict(model=r["model"], n_obs=int(r["n_obs"]), ccei_exact=r["ccei_exact"], alpha=r["alpha"],
                         hm_exact=r["hm_exact"], hm=r["hm"], hm_kept=h.n_kept,
                         hm_upper=h.n_upper if h.n_upper >= 0 else h.n_kept, alpha_hm=r["alpha_hm"], alpha_hm_low=h.alpha_low,
                         alpha_hm_high=h.alpha_high, stars_hm=r["stars_hm"], n_datasets=h.n_datasets,
                         n_at_least=h.n_at_least, n_below=h.n_below, n_undecided=h.n_undecided, n_exact=h.n_exact,
                         time_limit_s=time_limit, own_time_limit_s=own_time_limit))
    return pd.DataFrame(rows, columns=COLUMNS), decisions_frame(res)


def decisions_frame(results: dict[str, HMTestResult]) -> pd.DataFrame:
    """One row per (respondent, random dataset) of :class:`~moralkit.psm.hm_random_choice.HMTestResult` objects:
    ``model``, ``dataset`` (its index), ``decision`` (1, 0 or -1) and ``decided_by``."""
    return pd.DataFrame([dict(model=m, dataset=i, decision=int(d), decided_by=b)
                         for m, h in results.items() for i, (d, b) in enumerate(zip(h.decisions, h.decided_by))],
                        columns=["model", "dataset", "decision", "decided_by"])


def write(df: pd.DataFrame, meta: dict, out_dir=None, decisions: pd.DataFrame | None = None) -> Path:
    out = Path(out_dir) if out_dir is not None else default_dir()
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / "table1_hm.csv", index=False)
    if decisions is not None:
        decisions.to_csv(out / "table1_hm_decisions.csv.gz", index=False)
    (out / "table1_hm.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    return out / "table1_hm.csv"


def load(out_dir=None, psm_dir=None):
    """(table, meta, why_not): the committed table when its input hashes match the data, else
    (None, meta or None, the reason)."""
    out = Path(out_dir) if out_dir is not None else default_dir()
    f, m = out / "table1_hm.csv", out / "table1_hm.json"
    if not f.exists() or not m.exists():
        return None, None, (f"no committed HM table in {out.name}/; compute it with "
                            "`.venv/bin/python -m moralkit.psm.hm_table1`")
    meta = json.loads(m.read_text())
    now = input_hashes(psm_dir)
    if meta.get("input_sha256") != now:
        changed = sorted(set(now) ^ set(meta.get("input_sha256", {})) | {k for k in now if meta.get(
            "input_sha256", {}).get(k) not in (None, now[k])})
        return None, meta, (f"the committed HM table was computed on other data (files differing: {changed}); "
                            "recompute it with `.venv/bin/python -m moralkit.psm.hm_table1`")
    return pd.read_csv(f, dtype={"ccei_exact": str, "hm_exact": str, "stars_hm": str}, keep_default_na=False,
                       na_values=[""]), meta, None


def beside(tab: pd.DataFrame, hm_tab: pd.DataFrame) -> pd.DataFrame:
    """Table 1's CCEI columns (``tab``: :func:`moralkit.psm.rationality.table1`) with the committed HM
    column beside them, one row per respondent of ``tab`` ("not computed" where the HM table has none)."""
    rows = hm_tab.set_index("model")
    out = tab[["model", "label", "alpha"]].rename(columns={"label": "CCEI", "alpha": "alpha (CCEI)"})
    have = out["model"].isin(rows.index)
    out["HM"] = [rows.loc[m, "hm_exact"] if h else "not computed" for m, h in zip(out["model"], have)]
    out["alpha (HM)"] = [alpha_text(rows.loc[m]) if h else "not computed" for m, h in zip(out["model"], have)]
    out["stars (HM)"] = [rows.loc[m, "stars_hm"] if h else "" for m, h in zip(out["model"], have)]
    out["decided exactly"] = [int(rows.loc[m, "n_exact"]) if h else 0 for m, h in zip(out["model"], have)]
    return out.set_index("model")


def describe(meta: dict) -> str:
    """One sentence on how the committed table was computed (datasets, limits, date, wall time, load)."""
    own = meta.get("own_time_limit_s")
    return (f"HM column: {meta['n_datasets']} random datasets per respondent (seed {meta['seed']}), at most "
            f"{meta['time_limit_s']:g} s each" + (f", the respondent's own HM at most {own:g} s" if own else "")
            + f"; computed {meta['date']} in {meta['wall_s']:.0f} s (load {meta['load_start'][0]:.1f}, "
            f"{meta.get('cpus', '?')} cores).")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m moralkit.psm.hm_table1", description=__doc__.split("\n")[0])
    ap.add_argument("--n-datasets", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-limit", type=float, default=10.0, help="seconds per undecided random dataset")
    ap.add_argument("--own-time-limit", type=float, default=None,
                    help="seconds for each respondent's own exact HM (default: none; then bounds)")
    ap.add_argument("--n-jobs", type=int, default=1)
    ap.add_argument("--psm-dir", default=None, help=f"default: {runs.run_dir('psm')}")
    ap.add_argument("--out", default=None, help=f"default: {runs.run_dir('derived')}")
    args = ap.parse_args(argv)
    from .dataset import read_psm

    psm_dir = Path(args.psm_dir) if args.psm_dir else runs.run_dir("psm")
    data = {m: ds for m, ds in read_psm(psm_dir).items() if ds.n_obs > 0}
    if not data:
        raise MoralkitError(f"no answered PSM rounds in {psm_dir}")
    load0, t0 = [round(x, 2) for x in os.getloadavg()], time.perf_counter()
    df, dec = compute(data, n_datasets=args.n_datasets, seed=args.seed, time_limit=args.time_limit,
                      n_jobs=args.n_jobs, own_time_limit=args.own_time_limit)
    meta = {"command": "python -m moralkit.psm.hm_table1 " + " ".join(sys.argv[1:] if argv is None else argv),
            "n_datasets": args.n_datasets, "seed": args.seed, "time_limit_s": args.time_limit,
            "n_jobs": args.n_jobs, "own_time_limit_s": args.own_time_limit, "input_sha256": input_hashes(psm_dir),
            "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "wall_s": round(time.perf_counter() - t0, 1), "load_start": load0,
            "load_end": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count()}
    path = write(df, meta, args.out, dec)
    print(df.to_string(index=False))
    print(f"wrote {path} ({meta['wall_s']} s)")


if __name__ == "__main__":
    main()


def alpha_text(row) -> str:
    """alpha_HM as printed: exact when every random dataset was decided, else ``[low, high]`` and why."""
    if row["n_undecided"] == 0:
        return f"{row['alpha_hm']:.3f}"
    why = (f"{int(row['n_undecided'])} of {int(row['n_datasets'])} random datasets undecided within "
           f"{row['time_limit_s']:g} s each")
    if "hm_upper" in row and int(row["hm_upper"]) != int(row["hm_kept"]):
        why += (f"; the respondent's own HM only bounded to [{int(row['hm_kept'])}, {int(row['hm_upper'])}] "
                f"within {row['own_time_limit_s']:g} s")
    return f"[{row['alpha_hm_low']:.3f}, {row['alpha_hm_high']:.3f}]: {why}"
