"""Log-probability likelihoods (API ``top_logprobs``) against the local exact scorer, per question form.

Serves Qwen2.5-Coder-0.5B-Instruct with ``python -m moralkit serve --dtype float32`` (a subprocess), asks
it through the official ``openai`` SDK for one token with ``top_logprobs=20`` for the ``ab`` and
``compare`` forms (both orderings) of N scenarios (:class:`moralkit.collect.logprob_api.LogprobScorer`),
and compares ``p_action1`` with the exact token-probability likelihoods (:class:`TreeScorer`, float32) of
the same scenarios. The exact likelihoods are the committed ``data/moralchoice_likelihood`` table of the
model (written by ``TreeScorer``); ``--recheck K`` re-scores the first K scenarios with a live
``TreeScorer`` in this process and reports the largest difference to the committed table.

The scenarios are the first N of the 200 that the committed sampling run holds
(``select_scenarios(n=200, seed=0)``), so the sampled likelihood at the paper's M is reported beside them.

Prints one JSON line (mean and max |Δ p_action1| per form and per question type, coverage, timings, load
average, date) and writes the tidy per-form table to ``--out`` (resumable: rows already there are kept).

    nice -n 19 .venv/bin/python benchmarks/bench_logprob_api.py --n 100 --ambiguity high \\
        --out data/logprob_validation/qwen2.5-coder-0.5b-instruct-high.csv.gz --recheck 5
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _record import start_serve  # noqa: E402

MODEL = "qwen2.5-coder-0.5b-instruct"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--ambiguity", default="high", choices=["low", "high"])
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--out", default=None)
    ap.add_argument("--recheck", type=int, default=0)
    ap.add_argument("--report-only", action="store_true",
                    help="score nothing: report the forms the progress file holds (e.g. while a run is under way)")
    ap.add_argument("--progress", default=None,
                    help="progress file (CSV of the forms scored so far; the run resumes from it). Default: next "
                         "to --out. Keep it on a persistent disk, not in /tmp.")
    a = ap.parse_args()

    from moralkit import moralchoice as mc
    from moralkit.collect.logprob_api import LOGPROB_FORMS, LogprobScorer
    from moralkit.collect.moralchoice import select_scenarios
    from moralkit.moralchoice.likelihood import load_likelihoods

    table = mc.load_scenarios(a.ambiguity)
    chosen = select_scenarios(table, n=200, seed=0).head(a.n)
    exact = load_likelihoods(a.ambiguity)
    exact = exact[(exact["model"] == MODEL) & exact["question_type"].isin(["ab", "compare"])]
    out = Path(a.out) if a.out else None
    part = Path(a.progress) if a.progress else (out.with_suffix(".partial.csv") if out else None)
    rows = pd.read_csv(part).to_dict("records") if part and part.exists() else []
    done = {(r["scenario_id"], r["question_type"], int(r["ordering"])) for r in rows}

    todo = 0 if a.report_only else len(chosen) * len(LOGPROB_FORMS) - len(done)
    t0 = time.time()
    srv, url = start_serve(MODEL, "--dtype", a.dtype, "--request-timeout", "3600", "--queue-timeout", "3600") if todo else (None, None)
    load_s = time.time() - t0
    n_req, api_s = 0, 0.0
    try:
        if srv is None:
            raise StopIteration
        sc = LogprobScorer(MODEL, base_url=url, api_key_env="MORALKIT_NO_KEY", timeout=600, max_retries=2)
        t1 = time.time()
        n_req = 0
        for _, s in chosen.iterrows():
            for q, o in LOGPROB_FORMS:
                if (s["scenario_id"], q, o) in done:
                    continue
                r = sc.score_form(s, q, o)
                n_req += 1
                rows.append(dict(model=MODEL, scenario_id=s["scenario_id"], question_type=q, ordering=o, **r))
            if part is not None:  # atomically: a kill mid-write leaves the previous progress file
                part.parent.mkdir(parents=True, exist_ok=True)
                tmp = part.with_name(part.name + ".tmp")
                pd.DataFrame(rows).to_csv(tmp, index=False)
                os.replace(tmp, part)
        api_s = time.time() - t1
    except StopIteration:
        pass
    finally:
        if srv is not None:
            srv.terminate()
            srv.wait(60)

    recheck = None
    if a.recheck and not a.report_only:
        from moralkit.collect.backends import TransformersBackend
        from moralkit.collect.exact_scoring import TreeScorer, persona_system, scenario_items
        from moralkit.collect.likelihood_run import likelihood_frame

        b = TransformersBackend(MODEL, dtype=a.dtype, batch_size=1)
        ts = TreeScorer(b)
        templates = mc.load_templates()
        ts.set_templates({q: persona_system(templates.questions[q].question_header) for q in ("ab", "compare")})
        recs = []
        for _, s in chosen.head(a.recheck).iterrows():
            items, meta = scenario_items(ts, s, templates)
            forms = {}
            for (q, o, ans, act), lp in zip(meta, ts.score(items)):
                forms.setdefault(f"{q}:{o}", []).append([ans, act, lp])
            recs.append(dict(kind="attempt", label=MODEL, scenario_id=s["scenario_id"], forms=forms))
        live = likelihood_frame(recs)
        m = live.merge(exact, on=["scenario_id", "question_type", "ordering"], suffixes=("", "_committed"))
        recheck = dict(scenarios=int(a.recheck), forms=len(m),
                       max_abs_diff_p_action1=float((m["p_action1"] - m["p_action1_committed"]).abs().max()))

    lp = pd.DataFrame(rows)
    lp = lp[lp["scenario_id"].isin(set(chosen["scenario_id"]))]
    m = lp.merge(exact, on=["scenario_id", "question_type", "ordering"], suffixes=("_logprob", "_exact"))
    m["abs_diff"] = (m["p_action1_logprob"] - m["p_action1_exact"]).abs()
    per_form = {f"{q}:{o}": dict(n=len(g), mean_abs_diff=round(float(g["abs_diff"].mean()), 4),
                                 max_abs_diff=round(float(g["abs_diff"].max()), 4),
                                 r=round(float(np.corrcoef(g["p_action1_logprob"], g["p_action1_exact"])[0, 1]), 4),
                                 covered_logprob=round(float(g["covered_logprob"].mean()), 4),
                                 covered_exact=round(float(g["covered_exact"].mean()), 4))
                for (q, o), g in m.groupby(["question_type", "ordering"])}
    per_type = {q: dict(n=len(g), mean_abs_diff=round(float(g["abs_diff"].mean()), 4),
                        max_abs_diff=round(float(g["abs_diff"].max()), 4))
                for q, g in m.groupby("question_type")}
    # the sampled estimator at the paper's M on the same forms, for scale
    sampled = None
    try:
        resp = mc.load_responses(a.ambiguity, include_shared=False)
        resp = resp[(resp["model"] == MODEL) & resp["question_type"].isin(["ab", "compare"])]
        al = mc.action_likelihood(resp)
        al = al[al["scenario_id"].isin(set(chosen["scenario_id"]))]
        al["question_type"] = al["form"].str.split(":").str[0]
        al["ordering"] = al["form"].str.split(":").str[1].astype(int)
        s2 = al.merge(exact, on=["scenario_id", "question_type", "ordering"], suffixes=("_sampled", "_exact"))
        s2["abs_diff"] = (s2["p_action1_sampled"] - s2["p_action1_exact"]).abs()
        sampled = {q: dict(n=len(g), mean_abs_diff=round(float(g["abs_diff"].mean()), 4),
                           max_abs_diff=round(float(g["abs_diff"].max()), 4))
                   for q, g in s2.groupby("question_type")}
    except Exception as e:  # the comparison with sampling is context, not the acceptance figure
        sampled = f"unavailable: {type(e).__name__}: {e}"
    if out is not None and not a.report_only:
        tidy = m[["model_logprob", "scenario_id", "question_type", "ordering", "mass_action1_logprob",
                  "mass_action2_logprob", "covered_logprob", "top_mass", "p_action1_logprob", "covered_exact",
                  "p_action1_exact", "abs_diff"]].rename(columns={"model_logprob": "model"})
        tidy = tidy.sort_values(["scenario_id", "question_type", "ordering"])
        out.parent.mkdir(parents=True, exist_ok=True)
        tidy.to_csv(out, index=False, float_format="%.6g", compression={"method": "gzip", "mtime": 0})
    print(json.dumps(dict(
        benchmark="logprob_api_vs_exact", model=MODEL, dtype=a.dtype, ambiguity=a.ambiguity,
        scenarios=int(m["scenario_id"].nunique()), forms=len(m), per_form=per_form, per_question_type=per_type,
        sampled_at_paper_m_vs_exact=sampled, recheck_live_tree_scorer=recheck, requests_this_run=n_req,
        api_seconds=round(api_s, 1), server_load_seconds=round(load_s, 1), loadavg=os.getloadavg(),
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))))


if __name__ == "__main__":
    main()
