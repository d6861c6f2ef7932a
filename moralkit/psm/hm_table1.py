"""Table 1's Houtman–Maks column, computed once by a resumable command and committed with its inputs' hashes.

On near-random answers (the committed LLM runs) deciding whether a random dataset's HM reaches the
respondent's takes from a fraction of a second to many seconds each (``benchmarks/bench_houtman_maks.py``),
so 1,000 random datasets x 7 respondents take hours: too slow for notebook 02's run. The command

    .venv/bin/python -m moralkit.psm.hm_table1 [--models M,...] [--n-datasets 1000] [--time-limit 600] [--n-jobs 1]

computes the test of :mod:`moralkit.psm.hm_random_choice` on the committed PSM data
(:func:`moralkit.runs.run_dir` ``("psm")``) and journals every decided random dataset as it goes
(:mod:`moralkit.psm.hm_journal`, ``table1_hm_journal.jsonl`` in :func:`moralkit.runs.run_dir`
``("derived")``): a killed run loses at most the decisions in flight, and a re-run continues where it
stopped (it refuses a journal of other inputs). Respondents are done one after the other, cheapest first
(:func:`order`). The results depend only on the data, the seed, ``n_datasets`` and the time limit: not on
``--n-jobs`` nor on how often the run was interrupted.

From the journal it writes ``table1_hm.csv`` (one row per respondent: alpha exact when all its random
datasets are decided, else an interval and why), ``table1_hm_decisions.csv.gz`` (one row per decided
random dataset) and ``table1_hm.json`` (the inputs, the SHA-256 of every PSM data file, the runs that
wrote the journal, wall and CPU seconds, the load); ``--table-only`` rebuilds them from the journal
alone, also while a run is writing it. Notebook 02 reads the table with :func:`load` and shows it only
when the hashes match the data it analyses; a test recomputes a sample of the decisions.

References
----------
Seror (2025), Section 2.3 (Procedure 1, eq. (4)); Houtman and Maks (1985).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import math
import os
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

from .. import runs
from ..checks import check_int
from ..errors import MoralkitError
from .hm_journal import JOURNAL_NAME, Journal, JournalState, read_journal
from .hm_random_choice import hm_decide, random_expenditures
from .random_choice import rejects, stars
from .random_datasets import answered_part, chunk_choices, chunk_sizes

__all__ = ["COLUMNS", "alpha_estimate", "alpha_text", "beside", "build", "compute", "decisions_frame", "default_dir",
           "describe", "input_hashes", "load", "main", "order", "run", "write"]

COLUMNS = ["model", "n_obs", "hm_exact", "hm", "hm_kept", "hm_upper", "alpha_hm", "alpha_hm_low", "alpha_hm_high",
           "stars_hm", "n_datasets", "n_done", "n_at_least", "n_below", "n_undecided", "n_missing", "n_exact",
           "n_estimate", "alpha_hm_estimate", "alpha_hm_ci_low", "alpha_hm_ci_high",
           "time_limit_s", "own_time_limit_s", "seconds", "cpu_seconds"]
DECISION_COLUMNS = ["model", "dataset", "decision", "decided_by", "seconds", "cpu_seconds"]


def default_dir() -> Path:
    """Where the committed table and its journal live: :func:`moralkit.runs.run_dir` ``("derived")``."""
    return runs.run_dir("derived")


def input_hashes(psm_dir=None) -> dict:
    """SHA-256 of every ``*.csv.gz`` file of the PSM data directory (or of one file), by file name.

    The default directory is the committed PSM runs, :func:`moralkit.runs.run_dir` ``("psm")``.
    """
    d = Path(psm_dir) if psm_dir is not None else runs.run_dir("psm")
    files = [d] if d.is_file() else sorted(d.glob("*.csv.gz"))
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def _now() -> tuple[float, str]:
    t = time.time()
    return round(t, 2), _dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def order(own: dict) -> list[str]:
    """The respondents, cheapest first: fewer answered rounds first, then a higher own HM count (its random
    datasets are more often decided by the bounds), then by name. ``own``: model -> journal ``own`` record."""
    return sorted(own, key=lambda m: (own[m]["n_obs"], -own[m]["n_kept"], m))


def _own_hm(journal: Journal, model: str, ds, own_time_limit) -> dict:
    from . import rp
    from .houtman_maks import houtman_maks

    if model not in journal.state.own:
        w0, c0 = time.perf_counter(), time.process_time()
        r = houtman_maks(rp.psm_expenditure_matrix(answered_part(ds)), time_limit=own_time_limit)
        at, _ = _now()
        journal.append({"kind": "own", "model": model, "n_obs": int(r.T), "n_kept": int(r.n_kept),
                        "n_upper": int(r.n_upper if r.n_upper >= 0 else r.n_kept),
                        "seconds": round(time.perf_counter() - w0, 3),
                        "cpu_seconds": round(time.process_time() - c0, 3), "at": at})
    return journal.state.own[model]


def _decide_one(E, k, time_limit, k_hi, i):
    w0, c0 = time.perf_counter(), time.process_time()
    d, how = hm_decide(E, k, time_limit, k_hi)
    return i, d, how, time.perf_counter() - w0, time.process_time() - c0


def _tasks(ds, seed: int, n_datasets: int, todo: list[int]):
    """(index, expenditure matrix) of the random datasets ``todo`` (the draws of Table 1's CCEI test)."""
    V = random_expenditures(ds)
    T, n_opt = V.shape[1], V.shape[2]
    sizes, cols, cache = chunk_sizes(n_datasets), np.arange(T), {}
    model = answered_part(ds).model
    for i in todo:
        c, pos = divmod(i, sizes[0])
        if c not in cache:
            cache.clear()
            cache[c] = chunk_choices(seed, model, c, sizes[c], T, n_opt)
        yield i, V[:, cols, cache[c][pos]]


def run(datasets: dict, journal: Journal, *, models=None, n_jobs: int = 1, progress=None, on_done=None,
        first: int | None = None) -> list[str]:
    """Decide every random dataset of ``models`` (default: all of ``datasets``) that ``journal`` lacks.

    One respondent after the other in :func:`order`: its own HM, then its random datasets (the own HMs of
    all respondents with the same number of rounds come first, to order them). With ``first``, a first
    pass decides only random datasets ``0 .. first - 1`` of every respondent, so that each gets an
    estimate of alpha early (:func:`alpha_estimate`); a second pass then decides the rest. Each result
    is appended to ``journal`` as it comes. ``progress(text)`` receives a line now and then,
    ``on_done(model)`` is called at the end of each respondent's pass. Returns the order.
    """
    inp = journal.inputs
    n, seed, tl = int(inp["n_datasets"]), int(inp["seed"]), inp["time_limit_s"]
    models = list(datasets) if models is None else list(models)
    say = progress or (lambda text: None)
    n_obs = {m: answered_part(datasets[m]).n_obs for m in models}
    passes = [n] if first is None or first >= n else [check_int(first, "first", minimum=1), n]
    todo_order = []
    for stop in passes:
        for size in sorted(set(n_obs.values())):  # own HMs of the next size only: the cheapest starts at once
            group = [m for m in models if n_obs[m] == size]
            own = {m: _own_hm(journal, m, datasets[m], inp["own_time_limit_s"]) for m in group}
            for m in order(own):
                if m not in todo_order:
                    todo_order.append(m)
                _run_one(datasets[m], m, own[m], journal, n, seed, tl, n_jobs, say, stop)
                if on_done is not None:
                    on_done(m)
    return todo_order


def _run_one(ds, m, own, journal, n, seed, tl, n_jobs, say, stop=None) -> None:
    from joblib import Parallel, delayed

    done = journal.state.decisions.get(m, {})
    stop = n if stop is None else min(stop, n)
    todo = [i for i in range(stop) if i not in done]
    n0, k, k_hi = len(done), own["n_kept"], own["n_upper"]
    say(f"{m}: HM {k}/{own['n_obs']}" + (f" (upper {k_hi})" if k_hi != k else "")
        + f"; {n0} of {n} random datasets already decided, {len(todo)} to go"
        + ("" if stop == n else f" in this pass (the first {stop})"))
    tasks = (delayed(_decide_one)(E, k, tl, k_hi, i) for i, E in _tasks(ds, seed, n, todo))
    results = (Parallel(n_jobs=n_jobs, return_as="generator_unordered")(tasks) if n_jobs != 1
               else (f(*a, **kw) for f, a, kw in tasks))
    w0 = time.perf_counter()
    for j, (i, d, how, wall, cpu) in enumerate(results, 1):
        at, _ = _now()
        journal.append({"kind": "decision", "model": m, "dataset": int(i), "decision": int(d),
                        "decided_by": how, "seconds": round(wall, 3), "cpu_seconds": round(cpu, 3), "at": at})
        if j % 50 == 0 or j == len(todo):
            say(f"{m}: {n0 + j}/{n} decided ({(time.perf_counter() - w0) / j:.2f} s wall each)")


def alpha_estimate(decisions: dict, level: float = 0.95) -> tuple[int, float, float, float]:
    """alpha_HM estimated from the decided random datasets 0, 1, ..., n - 1 (the longest run of decided
    ones from the first): ``(n, estimate, ci_low, ci_high)``, with the exact (Clopper–Pearson) ``level``
    confidence interval; ``(0, nan, 0.0, 1.0)`` when dataset 0 is not decided.

    ``decisions``: dataset index -> journal decision record (``decision`` 1, 0 or -1). The random
    datasets are independent draws, and which of them form this run does not depend on their outcomes
    (the command decides them in index order, and a parallel run's completion order, which could depend
    on how hard a dataset is, is not used), so the estimate is unbiased for the alpha that all random
    datasets would give in the limit, and the interval covers it with probability at least ``level``.
    An undecided dataset (-1) ends the run.

    References
    ----------
    Clopper and Pearson (1934), Biometrika 26(4), 404–413; Seror (2025), eq. (4).
    """
    from scipy.stats import beta

    n = 0
    while n in decisions and int(decisions[n]["decision"]) >= 0:
        n += 1
    if n == 0:
        return 0, math.nan, 0.0, 1.0
    x = sum(int(decisions[i]["decision"]) for i in range(n))
    a = (1.0 - level) / 2
    lo = 0.0 if x == 0 else float(beta.ppf(a, x, n - x + 1))
    hi = 1.0 if x == n else float(beta.ppf(1 - a, x + 1, n - x))
    return n, x / n, lo, hi


def build(state: JournalState, datasets: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(table, decisions) from a journal: one row per respondent of ``datasets`` (see :data:`COLUMNS`), and
    one per decided random dataset. A respondent's alpha is exact when all its random datasets are decided,
    else ``[alpha_hm_low, alpha_hm_high]`` counts the undecided and the ``n_missing`` not yet computed as
    either side. ``alpha_hm_estimate`` and its 95 % interval ``[alpha_hm_ci_low, alpha_hm_ci_high]`` come
    from the first ``n_estimate`` random datasets (:func:`alpha_estimate`): informative while a respondent is
    only partly done."""
    inp = state.inputs
    N = int(inp["n_datasets"])
    rows = []
    for m in datasets:
        own, dec = state.own.get(m), state.decisions.get(m, {})
        d = np.array([int(r["decision"]) for r in dec.values()], dtype=np.int64)
        at_least, below, undecided = int((d == 1).sum()), int((d == 0).sum()), int((d == -1).sum())
        missing = N - len(dec)
        lo, hi = Fraction(at_least, N), Fraction(at_least + undecided + missing, N)
        s_lo, s_hi = stars(lo), stars(hi)
        secs = [r["seconds"] for r in dec.values()] + ([own["seconds"]] if own else [])
        cpus = [r["cpu_seconds"] for r in dec.values()] + ([own["cpu_seconds"]] if own else [])
        kept, upper = (own["n_kept"], own["n_upper"]) if own else (None, None)
        n_obs = own["n_obs"] if own else answered_part(datasets[m]).n_obs
        n_est, est, ci_lo, ci_hi = alpha_estimate(dec)
        rows.append(dict(
            model=m, n_obs=n_obs, hm_exact=("not computed" if own is None else f"{kept}/{n_obs}" if kept == upper
                                            else f"[{kept}, {upper}]/{n_obs}"),
            hm=kept / n_obs if own else math.nan, hm_kept=kept, hm_upper=upper,
            alpha_hm=float(lo) if lo == hi else math.nan, alpha_hm_low=float(lo), alpha_hm_high=float(hi),
            stars_hm=s_lo if s_lo == s_hi else "?", n_datasets=N, n_done=len(dec), n_at_least=at_least,
            n_below=below, n_undecided=undecided, n_missing=missing,
            n_exact=sum(r["decided_by"] == "exact" for r in dec.values()), n_estimate=n_est,
            alpha_hm_estimate=est, alpha_hm_ci_low=round(ci_lo, 4), alpha_hm_ci_high=round(ci_hi, 4),
            time_limit_s=inp["time_limit_s"],
            own_time_limit_s=inp["own_time_limit_s"], seconds=round(sum(secs), 1), cpu_seconds=round(sum(cpus), 1)))
    return pd.DataFrame(rows, columns=COLUMNS), decisions_frame(state)


def decisions_frame(state: JournalState) -> pd.DataFrame:
    """One row per decided random dataset of a journal (model, dataset index, decision 1/0/-1, what decided
    it, wall and CPU seconds), sorted by model and dataset."""
    rows = [dict(model=m, dataset=i, decision=int(r["decision"]), decided_by=r["decided_by"], seconds=r["seconds"],
                 cpu_seconds=r["cpu_seconds"]) for m, dec in sorted(state.decisions.items()) for i, r in sorted(dec.items())]
    return pd.DataFrame(rows, columns=DECISION_COLUMNS)


def _meta(state: JournalState, n_lines: int, datasets: dict, tab: pd.DataFrame) -> dict:
    """table1_hm.json: the journal's inputs, its runs (with their wall spans), the totals, the build date."""
    sessions, last = [], None
    for rec in state.records:
        if rec["kind"] == "start":
            sessions.append({k: rec.get(k) for k in ("date", "pid", "n_jobs", "load", "command")} | {"wall_s": 0.0})
            last = rec["at"]
        elif rec["kind"] in ("own", "decision") and sessions:
            sessions[-1]["wall_s"] = round(rec["at"] - last, 1)
    _, date = _now()
    return {**state.inputs, "journal": JOURNAL_NAME,
            "journal_lines": n_lines, "sessions": sessions, "wall_s": round(sum(s["wall_s"] for s in sessions), 1),
            "seconds": round(float(tab["seconds"].sum()), 1), "cpu_seconds": round(float(tab["cpu_seconds"].sum()), 1),
            "n_respondents": len(tab), "n_complete": int((tab["n_done"] == tab["n_datasets"]).sum()),
            "n_decided": int(tab["n_done"].sum()), "n_requested": int(tab["n_datasets"].sum()), "date": date,
            "cpus": os.cpu_count()}


def write(df: pd.DataFrame, meta: dict, out_dir=None, decisions: pd.DataFrame | None = None) -> Path:
    """Write ``table1_hm.csv``, ``table1_hm.json`` and (when given) ``table1_hm_decisions.csv.gz`` to ``out_dir``."""
    out = Path(out_dir) if out_dir is not None else default_dir()
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / "table1_hm.csv", index=False)
    if decisions is not None:
        decisions.to_csv(out / "table1_hm_decisions.csv.gz", index=False)
    (out / "table1_hm.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    return out / "table1_hm.csv"


def write_from_journal(journal_path, datasets: dict, out_dir=None) -> tuple[pd.DataFrame, dict]:
    """Build the table from the journal's complete lines (:func:`build`) and :func:`write` it; (table, meta)."""
    state = read_journal(journal_path)
    tab, dec = build(state, datasets)
    meta = _meta(state, len(state.records), datasets, tab)
    write(tab, meta, out_dir, dec)
    return tab, meta


def compute(datasets, n_datasets: int = 1000, seed: int = 0, time_limit: float | None = 600.0, n_jobs: int = 1,
            own_time_limit: float | None = None, journal=None, psm_dir=None, models=None):
    """Table 1's HM column for ``datasets`` (model -> PSMDataset): (table, decisions), see :func:`build`.

    ``journal``: a journal file to continue (or start); default none (kept in memory). ``input_hashes``
    of ``psm_dir`` (when given) are part of the journal's inputs. Same decisions as
    :func:`moralkit.psm.hm_random_choice.hm_random_choice_test` with these arguments.
    """
    n_datasets, seed = check_int(n_datasets, "n_datasets", minimum=1), check_int(seed, "seed", minimum=0)
    inputs = dict(input_sha256=input_hashes(psm_dir) if psm_dir is not None else {}, seed=seed,
                  n_datasets=n_datasets, time_limit_s=time_limit, own_time_limit_s=own_time_limit)
    with Journal(journal, inputs) as j:
        run(datasets, j, models=models, n_jobs=n_jobs)
        return build(j.state, datasets)


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
    return pd.read_csv(f, dtype={"hm_exact": str, "stars_hm": str}, keep_default_na=False,
                       na_values=[""]), meta, None


def beside(tab: pd.DataFrame, hm_tab: pd.DataFrame) -> pd.DataFrame:
    """Table 1's CCEI columns (``tab``: :func:`moralkit.psm.rationality.table1`) with the committed HM
    column beside them, one row per respondent of ``tab`` ("not computed" where the HM table has none), with
    how many of its random datasets are decided and how many of those needed the exact solver."""
    rows = hm_tab.set_index("model")
    out = tab[["model", "label", "alpha"]].rename(columns={"label": "CCEI", "alpha": "alpha (CCEI)"})
    have = out["model"].isin(rows.index)
    out["HM"] = [rows.loc[m, "hm_exact"] if h else "not computed" for m, h in zip(out["model"], have)]
    out["alpha (HM)"] = [alpha_text(rows.loc[m]) if h else "not computed" for m, h in zip(out["model"], have)]
    out["stars (HM)"] = [rows.loc[m, "stars_hm"] if h else "" for m, h in zip(out["model"], have)]
    out["random datasets decided"] = [f"{int(rows.loc[m, 'n_done']):,} of {int(rows.loc[m, 'n_datasets']):,}" if h
                                      else "none" for m, h in zip(out["model"], have)]
    out.insert(out.columns.get_loc("alpha (HM)") + 1, "95 % interval (HM)",
               [_interval_text(rows.loc[m]) if h else "" for m, h in zip(out["model"], have)])
    out["by the exact solver"] = [int(rows.loc[m, "n_exact"]) if h else 0 for m, h in zip(out["model"], have)]
    return out.set_index("model")


def _interval_text(row) -> str:
    """The exact 95 % interval of alpha_HM from the random datasets decided so far ('' before any)."""
    n = int(row.get("n_estimate", 0) or 0)
    return f"{row['alpha_hm_ci_low']:.3f}–{row['alpha_hm_ci_high']:.3f}" if n else ""


def reading(hm_tab: pd.DataFrame, level: float = 0.1) -> str:
    """What the HM column says about random choice, over all respondents whose alpha_HM is exact.

    How many respondents the test rejects at ``level`` (alpha_HM at most ``level``, compared exactly as
    :func:`moralkit.psm.random_choice.rejects` and the stars do), and how likely at least that many would be
    if no respondent differed from uniformly random choice: under that null each alpha_HM is at most
    ``level`` with probability at most ``level`` (the test's p-value), so for independent respondents the count is at
    most Binomial(n, level) in distribution, and its upper tail bounds the chance. A count that chance gives
    with probability 0.05 or more is reported as no evidence that any respondent chooses more consistently
    than at random.

    References
    ----------
    Seror (2025), Section 3.1, eq. (4) (the random-choice test, here with the Houtman–Maks index).
    """
    from scipy.stats import binom

    if not 0 < level < 1:
        raise MoralkitError(f"level must be between 0 and 1, like 0.1; got {level!r}")
    exact = hm_tab[(hm_tab["n_done"] == hm_tab["n_datasets"]) & (hm_tab["n_undecided"] == 0)]
    n, left = len(exact), len(hm_tab) - len(exact)
    if n == 0:
        return "No respondent's alpha_HM is exact yet."
    low = exact[[rejects(r["n_at_least"], r["n_datasets"], level) for _, r in exact.iterrows()]]
    k = len(low)
    pct = f"{100 * level:g} %"
    head = (f"alpha_HM is at most {level:g} for {k} of {n} respondent{'s' if n > 1 else ''} whose alpha_HM is exact"
            + (f" ({left} not complete yet)" if left else ""))
    if k == 0:
        return head + f": none is distinguishable from random choice at the {pct} level."
    names = "; ".join(f"{r['model']}: {r['alpha_hm']:.3f}, 95 % interval {r['alpha_hm_ci_low']:.3f}–"
                      f"{r['alpha_hm_ci_high']:.3f}"
                      for _, r in low.iterrows())
    p = float(binom.sf(k - 1, n, level))
    p_text = f"{p:.2f}" if p >= 0.01 else f"{p:.1e}"
    chance = (f"if none of the {n} differed from random choice (and the tests were independent), at least {k} "
              f"would be at most {level:g} with probability at most {p_text}")
    verdict = ("so together they give no evidence that any respondent chooses more consistently than at random"
               if p >= 0.05 else "so at least one of them chooses more consistently than at random (5 % level)")
    return f"{head} ({names}); {chance}: {verdict}."


def _limit_text(s) -> str:
    return "no time limit" if s is None or (isinstance(s, float) and math.isnan(s)) else f"at most {s:g} s"


def describe(meta: dict) -> str:
    """One sentence on how the committed table was computed: datasets, limits, how much is done, the runs
    (their dates, wall and CPU seconds, load) and when the table was built."""
    ses = meta.get("sessions", [])
    done = (f"all {meta['n_requested']:,} random datasets decided" if meta["n_decided"] == meta["n_requested"]
            else f"{meta['n_decided']:,} of {meta['n_requested']:,} random datasets decided "
                 f"({meta['n_complete']} of {meta['n_respondents']} respondents complete)")
    if ses:
        jobs = sorted({int(x["n_jobs"]) for x in ses})
        loads = [x["load"][0] for x in ses if x.get("load")]
        load = (f"load {min(loads):.1f}–{max(loads):.1f} at their starts" if len(set(loads)) > 1
                else f"load {loads[0]:.1f} at the start" if loads else "load not recorded")
        runs_ = (f" in {len(ses)} run{'s' if len(ses) > 1 else ''} from {ses[0]['date']} to {ses[-1]['date']} "
                 f"(--n-jobs {' or '.join(map(str, jobs))}; the last: `{ses[-1]['command']}`), "
                 f"{meta['wall_s']:,.0f} s wall ({meta['cpu_seconds']:,.0f} s CPU; {load}, "
                 f"{meta.get('cpus', '?')} cores)")
    else:
        runs_ = ""
    return (f"HM column: {meta['n_datasets']:,} random datasets per respondent (seed {meta['seed']}), "
            f"{_limit_text(meta['time_limit_s'])} each; {done}{runs_}; table built {meta['date']}.")


def alpha_text(row) -> str:
    """alpha_HM as printed: exact when every random dataset was decided, else ``[low, high]`` and why."""
    get = row.get
    if "hm_kept" in row and pd.isna(get("hm_kept")):
        return "not computed yet"
    missing, undecided, n = int(get("n_missing", 0) or 0), int(row["n_undecided"]), int(row["n_datasets"])
    if undecided == 0 and missing == 0:
        return f"{row['alpha_hm']:.3f}"
    why = []
    if missing:
        why.append(f"{missing:,} of {n:,} random datasets not computed yet")
    if undecided:
        tl = get("time_limit_s")
        why.append(f"{undecided:,} of {n:,} random datasets undecided"
                   + ("" if tl is None or pd.isna(tl) else f" within {tl:g} s each"))
    if "hm_upper" in row and int(row["hm_upper"]) != int(row["hm_kept"]):
        why.append(f"the respondent's own HM only bounded to [{int(row['hm_kept'])}, {int(row['hm_upper'])}] "
                   f"within {row['own_time_limit_s']:g} s")
    text = f"[{row['alpha_hm_low']:.3f}, {row['alpha_hm_high']:.3f}]: {'; '.join(why)}"
    n_est = int(get("n_estimate", 0) or 0)
    if n_est:
        text += (f"; estimate from the first {n_est:,}: {row['alpha_hm_estimate']:.3f} "
                 f"(95 % CI {row['alpha_hm_ci_low']:.3f}–{row['alpha_hm_ci_high']:.3f})")
    return text


def _seconds_or_none(text: str):
    if text.lower() in ("none", "0", "inf"):
        return None
    v = float(text)
    if not v > 0:
        raise argparse.ArgumentTypeError(f"expected seconds > 0 or 'none', got {text!r}")
    return v


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m moralkit.psm.hm_table1", description=__doc__.split("\n")[0])
    ap.add_argument("--n-datasets", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-limit", type=_seconds_or_none, default=600.0,
                    help="seconds per random dataset ('none': no limit; default 600); one not decided within it "
                         "is journaled as undecided and makes alpha an interval")
    ap.add_argument("--own-time-limit", type=_seconds_or_none, default=None,
                    help="seconds for each respondent's own exact HM (default: none)")
    ap.add_argument("--n-jobs", type=int, default=1, help="worker processes (the results do not depend on it)")
    ap.add_argument("--first", type=int, default=None,
                    help="decide random datasets 0..FIRST-1 of every respondent before the rest, so that each "
                         "respondent has an estimate of alpha early (the results do not depend on it)")
    ap.add_argument("--models", default=None, help="comma-separated respondents to compute (default: all)")
    ap.add_argument("--psm-dir", default=None, help=f"default: {runs.run_dir('psm')}")
    ap.add_argument("--out", default=None, help=f"where the table goes; default: {runs.run_dir('derived')}")
    ap.add_argument("--journal", default=None, help=f"default: OUT/{JOURNAL_NAME}")
    ap.add_argument("--table-only", action="store_true",
                    help="only rebuild the table from the journal (also while a run is writing it)")
    return ap


def main(argv=None):
    args = _parser().parse_args(argv)
    from .dataset import read_psm

    psm_dir = Path(args.psm_dir) if args.psm_dir else runs.run_dir("psm")
    data = {m: ds for m, ds in read_psm(psm_dir).items() if ds.n_obs > 0 and ds.valid().n_obs > 0}
    if not data:
        raise MoralkitError(f"no answered PSM rounds in {psm_dir}")
    out = Path(args.out) if args.out else default_dir()
    jpath = Path(args.journal) if args.journal else out / JOURNAL_NAME
    models = None
    if args.models:
        models = [m.strip() for m in args.models.split(",") if m.strip()]
        unknown = [m for m in models if m not in data]
        if unknown:
            raise MoralkitError(f"--models: no answered PSM data for {unknown} in {psm_dir}; "
                                f"the respondents are {sorted(data)}")
    if not args.table_only:
        inputs = dict(input_sha256=input_hashes(psm_dir), seed=check_int(args.seed, "--seed", minimum=0),
                      n_datasets=check_int(args.n_datasets, "--n-datasets", minimum=1), time_limit_s=args.time_limit,
                      own_time_limit_s=args.own_time_limit)
        with Journal(jpath, inputs) as j:
            at, date = _now()
            cmd = "python -m moralkit.psm.hm_table1 " + " ".join(sys.argv[1:] if argv is None else argv)
            j.append({"kind": "start", "date": date, "at": at, "pid": os.getpid(), "n_jobs": args.n_jobs,
                      "load": [round(x, 2) for x in os.getloadavg()], "command": cmd.strip()})

            def say(text):
                print(f"{_now()[1]} {text}", flush=True)

            run(data, j, models=models, n_jobs=args.n_jobs, progress=say, first=args.first,
                on_done=lambda m: write_from_journal(jpath, data, out))
    elif not jpath.exists():
        raise MoralkitError(f"--table-only: no journal at {jpath}; run the command without --table-only first")
    state = read_journal(jpath)
    if state.inputs["input_sha256"] != input_hashes(psm_dir):
        raise MoralkitError(f"{jpath} was computed on other PSM data than {psm_dir}; re-run the command on a new "
                            "journal (--journal NEW_PATH)")
    tab, meta = write_from_journal(jpath, data, out)
    print(tab.drop(columns=["own_time_limit_s"]).to_string(index=False))
    print(describe(meta))
    print(f"wrote {out / 'table1_hm.csv'}")


if __name__ == "__main__":
    try:
        main()
    except MoralkitError as e:
        sys.exit(f"error: {e}")
