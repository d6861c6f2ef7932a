# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 02 — Rationality: GARP$_e$, the CCEI and the random-choice test (Table 1)
#
# Seror (2025), *The Moral Mind(s) of Large Language Models*: Section 2.2 (PSM design, notation,
# eqs. (1)–(2), Definitions 1–3), Section 2.3 (the statistical rationality test: H0/H1,
# Definition 4, eq. (4), Procedure 1) and Section 3.1 (results, Table 1).
#
# Every number below is computed by `moralkit` (`moralkit.psm.rp` for GARP$_e$ and the CCEI,
# `moralkit.psm.rationality` for the test); the notebook only calls it. Table 1 is written to
# `02_table1.csv` and the null distributions to `02_null_distributions.png/.svg`.
#
# **The committed data demonstrate the collection pipeline.** They hold 7 PSM respondents
# (`moralkit.respondents`, explained on page 01): three small local models (Qwen2.5-Coder 0.5B and 1.5B,
# SmolLM2-135M), a second sampling seed of the 0.5B model (`-s1`, whose option sets differ in 68 of 160
# rounds), and the 0.5B model under three persona system prompts (`+persona-…`: the same model, not
# others). All answer close to random: no test below rejects random choice. The published Table 1 is
# shown beside this run's for comparison. Notebook 08 runs the paper's analysis on simulated agents
# calibrated to the published tables.

# %% tags=["parameters"]
quick = False  # quick mode: 100 random datasets per model instead of 1,000
seed = 0  # master seed of the random datasets (results do not depend on n_jobs)
n_datasets = 1000  # random datasets per model (Procedure 1)
data_path = None  # None: the committed data, moralkit.paths.data_dir() / "psm"
n_jobs = 1  # joblib workers
n_datasets_paper_index = 1000  # random datasets for the paper-compatible index column (origin/1-e)

# %%
from fractions import Fraction

import matplotlib.pyplot as plt
import pandas as pd

from moralkit.figures import relative_path, save, show
from moralkit.psm import reference, rp
from moralkit.psm.dataset import data_summary, load_psm
from moralkit.psm.design import BUDGET, CORNERS, PRICES, budget_set, make_design
from moralkit.psm.random_choice import plot_null_distributions
from moralkit.psm.rationality import random_choice_tests, table1
from moralkit.respondents import legend, short_label

pd.set_option("display.width", 160)
# Table 1's headers as the paper prints them (CCEI with its stars, α, number of observations)
table1_headers = {"provider": "Provider", "model": "Model", "label": "CCEI", "ccei_exact": "CCEI (exact)",
                  "alpha": "α", "n_obs": "Number of Obs."}

# %%
if quick:
    n_datasets = min(n_datasets, 100)
    n_datasets_paper_index = min(n_datasets_paper_index, 50)
path, datasets = load_psm(data_path)
print(f"data: {relative_path(path)}")
summary = data_summary(datasets)
datasets = {m: ds for m, ds in datasets.items() if ds.n_obs > 0}
ready = len(datasets) > 0
if not ready:
    print("No model with answered constrained rounds: collect answers first (notebook 01) and re-run.")
show(summary, "02_data_summary")

# %% [markdown]
# ## §2.2 — The PSM design and the expenditure matrix
#
# Each model answers five statements on a 0–5 scale, $X=\{0,\dots,5\}^5$. In each of 160 rounds
# (one per corner $\mathbf o\in\{0,5\}^5$ and price vector $\mathbf p_j$ of eq. (2)) it picks one of
# 100 answers drawn from the budget line of eq. (1), $\mathbf p^r\cdot\mathbf q^r_{\mathbf o^r}=12$,
# where $\mathbf q_{\mathbf o}=|\mathbf q-\mathbf o|$ is the answer measured from the corner. When
# the model's unconstrained answer $\mathbf q^0$ lies in the comprehensive set
# ($\mathbf p^r\cdot\mathbf q^0_{\mathbf o^r}\le 12$; the paper prints "$\le 1$"), the corner is
# flipped to $(5,\dots,5)-\mathbf o^r$.
#
# Definitions 1–3 compare round $k$'s answer with round $r$'s budget in round $r$'s coordinates:
# $$E_{rk}=\mathbf p^r\cdot\mathbf q^k_{\mathbf o^r},\qquad E_{rr}=12 .$$
# $r\,R^0_e\,k$ iff $e\,E_{rr}\ge E_{rk}$ (or the same answer); $r\,P^0_e\,k$ iff $e\,E_{rr}>E_{rk}$
# (the paper's "or $\mathbf q_o=\mathbf q^r_o$" in the strict relation is a typo: a bundle is not
# strictly preferred to itself). GARP$_e$ (Definition 2): $r\,R^*_e\,k \Rightarrow$ not
# $k\,P^0_e\,r$. The CCEI (Definition 3) is $\sup\{e\in(0,1]:\ \text{GARP}_e\}$ — the standard
# Afriat index (the paper prints $\inf 1-e$). It is one of the ratios $E_{rk}/E_{rr}$ or 1; here
# every ratio is a multiple of $1/12$, so `moralkit.psm.rp` computes it **exactly**: the smallest
# level $m$ at which the graph $\{E_{rk}\le m\}$ has a cycle gives CCEI $=m/12$.

# %%
design = make_design(seed)
print(f"{len(CORNERS)} corners x {len(PRICES)} price vectors = {len(design)} rounds; "
      f"budget {BUDGET}; {len(budget_set(PRICES[0]))} integer answers on each budget line; "
      f"{design[0].options_y.shape[0]} shown per round")
if ready:
    name = next(iter(datasets))
    ds = datasets[name].valid()
    E = rp.psm_expenditure_matrix(ds)
    c = rp.ccei_exact(E)
    print(f"{name}: T = {len(E)} answered rounds, E[:5, :5] =\n{E[:5, :5]}")
    print(f"CCEI = {c} = {float(c):.4f}; GARP_1 holds: {rp.garp(E)}")
    if c < 1:
        # the supremum: GARP_e holds just below, fails just above (weak preferences count)
        print(f"GARP_e at e = CCEI - 1/24: {rp.garp(E, c - Fraction(1, 24))}; "
              f"at e = CCEI + 1/24: {rp.garp(E, c + Fraction(1, 24))}")

# %% [markdown]
# ## §2.3 — The random-choice rationality test (Procedure 1, eq. (4))
#
# H0: the answers are random; H1: they come from an $\mathbf e$-approximate utility maximiser
# (Definition 4). For each model $m$, draw $N$ random datasets $\mathcal D^m_n$ whose answer in each
# answered round is uniform on the same 100 alternatives the model saw (missing rounds excluded),
# and compute
# $$\alpha_m=\frac{|\{n:\ CCEI(\mathcal D^m_n)\ge CCEI(\mathcal D^m)\}|}{N}.$$
# H0 is rejected at level $\alpha$ when $\alpha_m\le\alpha$ (eq. (4), "weakly smaller"). Because the
# PSM CCEI takes few values, ties with the model's CCEI count against it and the test is
# conservative. Random datasets are seeded per model and per chunk, so the results do not depend
# on the number of workers.

# %%
results = random_choice_tests(datasets, n_datasets=n_datasets, seed=seed, n_jobs=n_jobs) if ready else {}
print(f"{len(results)} models, {n_datasets} random datasets each")

# %% [markdown]
# ## §3.1 — Table 1: rationality test
#
# CCEI of each model, $\alpha$, and stars: \*\*\* $\alpha\le 1\%$, \*\* $\le 5\%$, \* $\le 10\%$;
# sorted by $\alpha$ as in the paper; "n_obs" is the number of answered constrained rounds.

# %%
if ready:
    tab = table1(results)
    for level, s in ((0.01, "***"), (0.05, "**"), (0.10, "*")):
        print(f"reject H0 at {level:.0%}: {int((tab['alpha'] <= level).sum())} of {len(tab)} models")
    display_cols = ["provider", "model", "label", "ccei_exact", "alpha", "n_obs"]
    show(tab[display_cols].rename(columns=table1_headers), "02_table1", full=tab, fit=True,
         caption="This run: Table 1 (standard CCEI; stars: *** α ≤ 1 %, ** ≤ 5 %, * ≤ 10 %)")

# %% [markdown]
# ### Two indices: the standard CCEI and the paper-compatible one
#
# The CCEI defined in §2.2 is a multiple of 1/12 in corner coordinates. The paper's printed values
# (0.385 = 5/13, 0.353 = 6/17, …) are not. Of the eight conventions examined in notebook 06, the
# published (CCEI, $\alpha$) pairs are best reproduced by `origin/1-e`: $1-e^*$ with expenditures in
# unshifted coordinates. `table1(..., index="origin/1-e")` computes it on the **same** random datasets.
# Read it with care:
# - a *higher* `origin/1-e` is *less* consistent;
# - its $\alpha$ (eq. (4) applied literally: the share of random datasets with an index at least the
#   model's) is small for data *less* consistent than random choice.
#
# The standard CCEI stays the default everywhere.

# %%
if ready:
    tab_paper = table1(datasets, n_datasets=n_datasets_paper_index, seed=seed, n_jobs=n_jobs, index="origin/1-e")
    both = tab[["model", "provider", "label", "alpha", "n_obs"]].merge(
        tab_paper[["model", "label", "alpha"]], on="model", suffixes=(" (CCEI)", " (origin/1-e)")).set_index("model")
    show(both.rename(index=short_label, columns={"provider": "Provider", "n_obs": "obs.", "label (CCEI)": "CCEI",
                                                  "alpha (CCEI)": "α (CCEI)",
                                                  "label (origin/1-e)": "origin/1-e", "alpha (origin/1-e)": "α (origin/1-e)"}),
         "02_table1_two_indices", full=both,
         caption=f"This run: both indices ({n_datasets} and {n_datasets_paper_index} random datasets per model); "
                 "short labels: see the legend below")
    show(legend(both.index).set_index("short"), caption="Legend: short label → respondent")

# %% [markdown]
# ### The Houtman–Maks index beside the CCEI
#
# The Houtman–Maks index (HM) is the largest share of rounds that satisfy GARP together, every round
# in its own corner coordinates; Seror's later theory of the PSM scores a respondent this way.
# `moralkit.psm.houtman_maks` computes it exactly (one branch-and-cut, every kept subset re-checked
# exactly). $\alpha_{HM}$ is eq. (4) with HM in place of the CCEI, on the **same** random datasets
# as the CCEI's $\alpha$: the share whose HM is at least the respondent's. Each random dataset is
# decided by bounds first and exactly only where they do not decide; one not decided within the
# time limit makes $\alpha_{HM}$ an interval.
#
# On near-random answers deciding one random dataset takes from a fraction of a second to many
# seconds, so 1,000 per respondent take hours: too slow for this notebook's run. The column is
# computed by `.venv/bin/python -m moralkit.psm.hm_table1`, which journals every decided random
# dataset and resumes where it stopped, and is committed with the SHA-256 of every data file
# (`data/derived/table1_hm.csv`, `.json` and the journal); it is shown only when these match the
# data analysed here. A respondent whose random datasets are not all decided yet gets an interval
# for $\alpha_{HM}$ (every missing one counted on either side) and the number still missing, and
# beside it an estimate from the random datasets decided so far (the first $n$: independent draws,
# decided in index order) with its exact 95 % binomial (Clopper–Pearson) interval. The sentence
# above the table says when and how the committed part was computed; the one below it counts the
# respondents whose $\alpha_{HM}$ is at most 0.1 and asks how often chance alone would give that many
# (`hm_table1.reading`): several respondents tested at 10 % each will show some low $\alpha$ by chance.

# %%
from moralkit.psm import hm_table1

if ready:
    hm_tab, hm_meta, hm_why = hm_table1.load(psm_dir=path)
    if hm_tab is not None and hm_meta["seed"] != seed:
        hm_tab, hm_why = None, f"the committed HM table used seed {hm_meta['seed']}, this run seed {seed}"
    if hm_tab is None:
        print(f"HM column not shown: {hm_why}")
    else:
        print(hm_table1.describe(hm_meta))
        show(hm_table1.beside(tab, hm_tab), "02_table1_hm", fit=True,
             caption="This run's CCEI and the committed Houtman–Maks column (stars: ? when the interval spans a level)")

# %%
if ready and hm_tab is not None:
    print(hm_table1.reading(hm_tab))

# %% [markdown]
# ### The published Table 1 (Seror 2025), for comparison
#
# 37 rows as printed, from `moralkit.reference`. The paper's models are not the ones of this run: the
# two tables sit side by side, they are not matched row by row.

# %%
published1 = reference.published_table1()
published1 = published1.assign(CCEI=published1["ccei"].map("{:.3f}".format) + published1["stars"])[
    ["provider", "model", "CCEI", "alpha", "n_obs"]].rename(columns=table1_headers)
show(published1, caption="published (Seror 2025, Table 1), with the same headers")

# %% [markdown]
# ### Null distributions
#
# For each model, the share of random datasets at each CCEI value (bars; red: at or above the
# model's CCEI, these make up $\alpha$) and the model's CCEI (vertical line).

# %%
if ready:
    fig = plot_null_distributions(tab, ncols=4)
    save(fig, "02_null_distributions")
    plt.show()

# %% [markdown]
# ## Running the test on a cluster
#
# `random_choice_tests` and `table1` parallelise through joblib (threads by default: the compiled
# kernels release the GIL). Any joblib backend can be used instead, e.g. a Dask cluster:
#
# ```python
# import joblib
# from dask.distributed import Client
# from moralkit.psm.rationality import table1
#
# client = Client("scheduler-address:8786")   # or Client() for a local cluster
# with joblib.parallel_backend("dask"):
#     tab = table1(datasets, n_datasets=1000, seed=0, n_jobs=-1)
# ```
#
# The random datasets are seeded per model and per chunk of 100, so the table is identical
# whatever the backend or the number of workers.
