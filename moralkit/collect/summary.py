"""Data-quality summaries of collection runs (tables and one figure), for notebooks and reports.

References
----------
Seror (2025), Section 2.1 (refusals, notes, three attempts, rounds marked empty);
Scherrer et al. (2023), Section 3.3 and Appendix D.1 (invalid and refusing answers).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .. import runs as project_runs
from .cost import price_for, records_usage
from .store import read_records

__all__ = ["find_runs", "runs_table", "runs_markdown", "psm_quality_table", "status_table", "moralchoice_quality_table",
           "plot_psm_quality"]


def find_runs(root=None, survey=None) -> list[Path]:
    """Run directories (holding ``manifest.json``) under ``root`` (default the project's collector runs,
    :func:`moralkit.runs.run_dir` ``("raw")``), optionally of one survey."""
    import json

    root = Path(root) if root is not None else project_runs.run_dir("raw")
    if not root.is_dir():
        return []
    out = []
    for m in sorted(root.glob("*/manifest.json")):
        if survey is None or json.loads(m.read_text()).get("survey") == survey:
            out.append(m.parent)
    return out


#: Records already read, by run directory: ``(stamp of its record files, tuple of records)`` (see :func:`_records`).
_READ: dict = {}


def _records(run) -> tuple:
    """``read_records(run)`` as a tuple, memoised while the run's record files keep their size and modification
    time. The tables of notebook 01 read each run two to six times (:func:`runs_table`, :func:`psm_quality_table`,
    :func:`status_table`, :func:`plot_psm_quality`, :func:`moralchoice_quality_table`); the functions of this
    module only read the records, never change them."""
    from .record_files import RECORDS, RECORDS_GZ

    run = Path(run)
    if not run.is_dir():
        return tuple(read_records(run))
    stamp = []
    for f in (run / RECORDS, run / RECORDS_GZ):
        try:
            st = f.stat()
        except OSError:
            continue
        stamp.append((f.name, st.st_mtime_ns, st.st_size))
    key, stamp = run.resolve(), tuple(stamp)
    hit = _READ.get(key)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    recs = tuple(read_records(run))
    if len(_READ) >= 256:
        _READ.clear()
    _READ[key] = (stamp, recs)
    return recs


def _attempts(run):
    return [r for r in _records(run) if r.get("kind", "attempt") == "attempt"]


def psm_quality_table(runs) -> pd.DataFrame:
    """One row per PSM run: rounds completed, answered, missing, requests, answered rounds by the attempt
    that gave the valid answer (``rounds_<k>_attempts``; with ``missing`` they add up to ``rounds``),
    refusals, other invalid answers, round-0 answer, mean seconds per request, model, temperature, seed."""
    import json

    rows = []
    for run in runs:
        run = Path(run)
        m = json.loads((run / "manifest.json").read_text())
        att = _attempts(run)
        by = {}
        for r in att:
            by.setdefault(r["task"], []).append(r)
        max_att = int(m.get("max_attempts", 3))
        cons = {t: v for t, v in by.items() if t != "r000"}
        done = {t: v for t, v in cons.items() if any(a["status"] == "ok" for a in v) or len(v) >= max_att}
        ans = sum(any(a["status"] == "ok" for a in v) for v in done.values())
        r0 = [a for a in by.get("r000", []) if a["status"] == "ok"]
        # answered rounds by the attempt that gave the valid answer (a missing round is counted apart)
        first_ok = pd.Series([next(k for k, a in enumerate(sorted(v, key=lambda a: int(a["attempt"])), 1)
                                   if a["status"] == "ok") for v in done.values()
                              if any(a["status"] == "ok" for a in v)], dtype=int)
        rows.append(dict(
            run=run.name, model=m["label"], backend=m["backend"], temperature=m["sampling"]["temperature"],
            seed=m["seed"], rounds=len(done), answered=ans, missing=len(done) - ans, requests=len(att),
            **{f"rounds_{k}_attempts": int((first_ok == k).sum()) for k in range(1, max_att + 1)},
            refusals=sum(a["status"] == "refusal" for a in att),
            invalid=sum(a["status"] not in ("ok", "refusal") for a in att),
            q0="".join(map(str, r0[0]["parsed"])) if r0 else "",
            s_per_request=float(np.mean([a["latency_s"] for a in att])) if att else np.nan,
        ))
    return pd.DataFrame(rows)


def status_table(runs) -> pd.DataFrame:
    """Counts of parse statuses (``ok``, ``no_option``, ``out_of_range``, ``ambiguous``, ``refusal``,
    ``empty`` for the PSM; decisions for MoralChoice) per run, over all requests."""
    out = {}
    for run in runs:
        out[Path(run).name] = pd.Series([a["status"] for a in _attempts(run)]).value_counts()
    return pd.DataFrame(out).fillna(0).astype(int).T


def moralchoice_quality_table(runs) -> pd.DataFrame:
    """One row per (MoralChoice run, question type): answers and shares of action1/action2/refusal/invalid."""
    rows = []
    for run in runs:
        att = _attempts(run)
        df = pd.DataFrame([(a["label"], a["ambiguity"], a["question_type"], a["parsed"]) for a in att],
                          columns=["model", "ambiguity", "question_type", "decision"])
        for (mo, amb, qt), g in df.groupby(["model", "ambiguity", "question_type"]):
            share = g["decision"].value_counts(normalize=True)
            rows.append(dict(run=Path(run).name, model=mo, ambiguity=amb, question_type=qt, answers=len(g),
                             scenarios=None, **{d: float(share.get(d, 0.0)) for d in
                                                ("action1", "action2", "refusal", "invalid")}))
    return pd.DataFrame(rows).drop(columns="scenarios") if rows else pd.DataFrame()


def plot_psm_quality(runs, axes=None):
    """Two panels: rounds by the attempt that gave the valid answer (missing = no valid answer in the
    allowed attempts), and parse statuses over all requests; one horizontal stacked bar per run, named
    on the left, each panel with its legend below it."""
    import matplotlib.pyplot as plt

    q = psm_quality_table(runs)
    st = status_table(runs)
    if axes is None:
        n = len(q)
        _, axes = plt.subplots(1, 2, figsize=(12, 2.2 + 0.45 * n), sharey=True)
    ax = axes[0]
    cols = [c for c in q.columns if c.startswith("rounds_") and c.endswith("_attempts")]
    data = q.set_index("model")[cols].rename(columns=lambda c: f"answered at attempt {c.split('_')[1]}")
    data["missing"] = q.set_index("model")["missing"]
    colours = [plt.get_cmap("Blues")(x) for x in np.linspace(0.85, 0.35, len(cols))] + ["#d62728"]
    data.iloc[::-1].plot.barh(ax=ax, stacked=True, width=0.6, color=colours)
    ax.set_xlabel("constrained rounds")
    ax.set_ylabel("")
    ax.set_title("Rounds by the attempt that answered them (Seror 2025, §2.1)", fontsize=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.6 / max(len(q) + 3, 1)), ncol=2,
              frameon=False, fontsize=8)
    ax = axes[1]
    st = st.copy()
    st.index = q["model"].values
    palette = {"ok": "#2ca02c", "no_option": "#7f7f7f", "out_of_range": "#bcbd22", "ambiguous": "#17becf",
               "refusal": "#e377c2", "empty": "#8c564b"}
    st.iloc[::-1].plot.barh(ax=ax, stacked=True, width=0.6,
                            color=[palette.get(c, "#9467bd") for c in st.columns])
    ax.set_xlabel("requests (all attempts)")
    ax.set_title("Parse status of every request", fontsize=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.6 / max(len(q) + 3, 1)), ncol=3,
              frameon=False, fontsize=8)
    ax.figure.tight_layout()
    return axes


def _moralchoice_completed(att) -> str:
    """``200 scenarios, 4800 answers; M = 5 on 137, M = 1 on 63``: answers per form (M) by scenario."""
    if not att:
        return "0 scenarios, 0 answers"
    n = pd.DataFrame([(a["scenario_id"], a["question_type"], a["ordering"]) for a in att],
                     columns=["s", "q", "o"]).groupby(["s", "q", "o"]).size().groupby("s").min()
    ms = n.value_counts().sort_index(ascending=False)
    return (f"{len(n)} scenarios, {len(att)} answers; "
            + ", ".join(f"M = {m} on {k}" for m, k in ms.items()))


def _cell(v) -> str:
    """A table cell as Markdown text: ``""`` for a missing value (``None``, NaN), else ``str(v)``.

    Examples
    --------
    >>> [_cell(None), _cell(float("nan")), _cell(1.0), _cell("MIT")]
    ['', '', '1.0', 'MIT']
    """
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return ""
    return str(v)


def runs_markdown(runs) -> str:
    """:func:`runs_table` as a Markdown table (the one in ``data/README.md``; ``python -m moralkit runs``)."""
    t = runs_table(runs)
    if not len(t):
        return "(no runs)"
    # cell by cell: under pandas 3, ``astype(str)`` keeps a missing value (an API model's licence) as NaN
    cells = t.map(_cell).map(lambda v: v.replace("|", "\\|"))
    cells["command"] = "`" + cells["command"] + "`"
    lines = ["| " + " | ".join(t.columns) + " |", "|" + "---|" * len(t.columns)]
    lines += ["| " + " | ".join(row) + " |" for row in cells.itertuples(index=False)]
    return "\n".join(lines)


def runs_table(runs) -> pd.DataFrame:
    """One row per run (any survey): model, licence, sampling, seeds, dates, size, the tokens the server counted
    (``input_tokens``, ``output_tokens``) and, for an API model in the genai-prices table, their cost in
    dollars at today's list price (``cost_usd``; empty for local models), and the exact command
    of its latest session (``python -m moralkit ...``; re-running it resumes the run), read from the manifests and records."""
    import json
    import shlex

    rows = []
    for run in runs:
        run = Path(run)
        m = json.loads((run / "manifest.json").read_text())
        recs = _records(run)
        att = [r for r in recs if r.get("kind", "attempt") == "attempt"]
        sess = m.get("sessions", [])
        argv = sess[-1]["argv"] if sess else []
        if argv and argv[0].endswith("__main__.py"):
            argv = ["python", "-m", "moralkit"] + argv[1:]
        if m["survey"] == "psm":
            done = psm_quality_table([run]).iloc[0]
            what = f"{done['rounds']}/160 rounds ({done['answered']} answered)"
        elif m["survey"] == "moralchoice-likelihood":
            n_forms = sum(len(a.get("forms", {})) for a in att)
            what = f"{len(att)} scenarios, {n_forms} forms (exact likelihoods, persona {m.get('persona')})"
        else:
            what = _moralchoice_completed(att)
        finished = max((a.get("finished") or "" for a in att), default="")
        tin, tout, _ = records_usage(recs)
        price = None
        if m.get("backend") not in (None, "transformers", "simulated"):
            info = m.get("backend_info") or {}
            price = price_for(info.get("remote_model") or m.get("model"), m.get("provider"))
        rows.append(dict(
            run=run.name, survey=m["survey"], model=m["label"], licence=m.get("backend_info", {}).get("licence"),
            temperature=m.get("sampling", {}).get("temperature", ""), seed=m.get("seed", ""),
            design_seed=m.get("design_seed", ""), ambiguity=m.get("ambiguity", ""), completed=what,
            requests=len(att), input_tokens=tin, output_tokens=tout,
            cost_usd="" if price is None else round(price.cost(tin, tout), 4), collected=f"{m.get('created', '')[:16]} – {finished[:16]}",
            command=" ".join(shlex.quote(x) for x in argv),
        ))
    return pd.DataFrame(rows)
