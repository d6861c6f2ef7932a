"""The API log-probability estimator against sampling at the paper's M, in the existing agreement bands.

Issue 27's second validation: on the same model (Qwen2.5-Coder-0.5B-Instruct) and the same scenarios, how
do the ``top_logprobs`` likelihoods (measured by ``benchmarks/bench_logprob_api.py`` through
``moralkit serve``) agree with the committed **sampled** answers at the paper's M (M = 10, high ambiguity),
and is that agreement inside the band that sampling noise alone allows
(:func:`moralkit.moralchoice.comparison.compare_at_paper_m`, :func:`agreement_summary`)? The exact
likelihoods of the committed ``data/moralchoice_likelihood`` table are compared with the same answers on
the same scenarios and forms, as the reference row.

Only the ``ab`` and ``compare`` forms are compared (the ``repeat`` form has no ``top_logprobs`` estimate: a
collection samples it); the sampled answers and the exact likelihoods are restricted to those four forms too.
No model runs here: it reads the validation table and the committed data (a few seconds of CPU).

    .venv/bin/python benchmarks/bench_logprob_vs_sampling.py \\
        --table data/logprob_validation/qwen2.5-coder-0.5b-instruct-high.csv.gz

Prints one JSON line: per estimator, the observed statistics, their noise bands, whether each lies inside,
and the load average and date.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODEL = "qwen2.5-coder-0.5b-instruct"
FORMS = ("ab", "compare")


def logprob_table(path) -> pd.DataFrame:
    """The ``top_logprobs`` likelihoods from bench_logprob_api's output (tidy validation layout) or its
    progress file (one row per form, the likelihood-table keys)."""
    from moralkit.moralchoice.likelihood import likelihood_table

    t = pd.read_csv(path)
    if "p_action1_logprob" in t.columns:  # the validation layout: logprob and exact side by side
        t = t.rename(columns={"mass_action1_logprob": "mass_action1", "mass_action2_logprob": "mass_action2",
                              "covered_logprob": "covered", "p_action1_logprob": "p_action1"})
    t["estimator"] = "top_logprobs"
    t["n_answers"] = t.get("n_answers", 0)
    return likelihood_table(t[["model", "scenario_id", "question_type", "ordering", "mass_action1", "mass_action2",
                               "covered", "p_action1", "n_answers", "estimator"]].to_dict("records"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--table", required=True, help="bench_logprob_api.py's --out table or its --progress file")
    ap.add_argument("--ambiguity", default="high", choices=["low", "high"])
    ap.add_argument("--n-sim", type=int, default=2000)
    a = ap.parse_args()

    from moralkit import moralchoice as mc
    from moralkit.moralchoice.comparison import agreement_summary, compare_at_paper_m
    from moralkit.moralchoice.likelihood import load_likelihoods

    lp = logprob_table(a.table)
    ids = set(lp["scenario_id"])
    exact = load_likelihoods(a.ambiguity)
    exact = exact[(exact["model"] == MODEL) & exact["question_type"].isin(FORMS) & exact["scenario_id"].isin(ids)]
    resp = mc.load_responses(a.ambiguity, include_shared=False)
    resp = resp[(resp["model"] == MODEL) & resp["question_type"].isin(FORMS) & resp["scenario_id"].isin(ids)]
    out = {}
    for name, table in (("top_logprobs", lp), ("token_probability", exact)):
        c = compare_at_paper_m(table, resp, a.ambiguity, n_sim=a.n_sim, fallback=False).to_frame()
        if not len(c):
            out[name] = "no scenario answered at the paper's M in every compared form"
            continue
        r = c.iloc[0]
        inside = {s: bool(r[f"{s}_sim_lo"] <= r[s] <= r[f"{s}_sim_hi"])
                  for s in ("r_p", "mad_p", "rho_qfc", "rho_qfe") if pd.notna(r.get(f"{s}_sim_lo"))}
        out[name] = dict(
            n_scenarios=int(r["n_scenarios"]), M=int(r["M"]), samples_per_form=float(r["samples_per_form"]),
            summary=agreement_summary(c).iloc[0].astype(str).to_dict(), inside_band=inside,
            brier=round(float(r["brier"]), 4), brier_expected=round(float(r["brier_expected"]), 4),
            brier_z=round(float(r["brier_z"]), 2), covered=round(float(r["covered"]), 4))
    print(json.dumps(dict(benchmark="logprob_vs_sampling_at_paper_m", model=MODEL, ambiguity=a.ambiguity,
                          forms=list(FORMS), table=str(a.table), comparisons=out, loadavg=os.getloadavg(),
                          date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))))


if __name__ == "__main__":
    main()
