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
# # Audit: simulation study and convention audit against the published tables
#
# Companion to Seror (2025), *The Moral Mind(s) of Large Language Models*, §2.2–2.4, §3.1–3.3,
# Tables 1–3.
#
# **Every agent in this notebook is simulated** (model labels `sim-…`): quadratic single-peaked
# utility agents (eq. 7) answering a `moralkit.psm.design.make_design` design, with or without logit
# noise, and uniformly random respondents (the null hypothesis H0 of §2.3). The published figures
# (Tables 1–3) enter as reference data from `moralkit.psm.reference`, cited to the paper. Nothing here
# is LLM output. Figures go to `moralkit.paths.figures_dir()` and tables to
# `moralkit.paths.tables_dir()`, prefixed `06_`.

# %% tags=["parameters"]
quick = False  # small samples for a fast check
seed = 0
n_agents = 100  # simulated quadratic agents per noise level (power)
n_random = 200  # simulated uniformly random agents (size)
n_null = 1000  # synthetic datasets per agent in the rationality test (Procedure 1)
noise_levels = [0.0, 0.1, 0.3, 0.5, 1.0, 2.0, 3.0, 5.0]  # logit noise scales
n_convention_null = 1000  # simulated random respondents per convention (convention audit)
n_envelope = 150  # per round-0 answer, for the alpha envelope
n_jobs = 1

# %%
import matplotlib.pyplot as plt
import pandas as pd

from moralkit.figures import save, show
from moralkit.psm import reference
from moralkit.psm.indices import CONVENTIONS
from moralkit.studies import audit
from moralkit.studies import conventions as cv

if quick:
    n_agents, n_random, n_null = 6, 12, 100
    noise_levels = [0.0, 0.3, 1.0, 3.0]
    n_convention_null, n_envelope = 15, 6
pd.set_option("display.width", 160)


# %% [markdown]
# ## §2.3 — Power and size of the random-choice rationality test
#
# Procedure 1 rejects H0 ("random answers") at level α when at most a share α of 1,000 synthetic
# datasets, drawn uniformly from the option sets the respondent saw, reach its CCEI (eq. 4).
# Simulated quadratic agents u = −½ Σ a_s (q_s − b_s)² (eq. 7; `a` Dirichlet, `b` uniform on
# [0.5, 4.5]) choose option j with probability ∝ exp(u_j / scale); scale 0 = the best option.
# Uniformly random agents give the size. The CCEI is the standard one (corner coordinates, a
# multiple of 1/12), so the test is discrete: the 5 % and 10 % columns often coincide.

# %%
power = audit.power_study(noise_levels, n_agents=n_agents, n_random=n_random, n_datasets=n_null,
                          seed=seed, n_jobs=n_jobs)
power_tab = audit.power_table(power)
show(power_tab, "06_power")

# %%
fig, ax = plt.subplots(figsize=(6.5, 4))
audit.plot_power(power_tab, ax)
save(fig, "06_power_curve")
plt.show()

# %% [markdown]
# ## §2.2, Definition 3 and Table 1 — which CCEI convention produced the published values?
#
# In corner coordinates every chosen answer costs exactly 12 (eq. 1), so the standard CCEI — the
# supremum of e with GARP_e (Definitions 1–3) — is a multiple of 1/12. Table 1 prints 0.385, 0.400,
# 0.353, … which are not. Below: which fractions k/m (m ≤ 30) print as each published value, and
# which conventions of `moralkit.studies.conventions` can produce them at all:
#
# * `corner/e` — the standard CCEI (the package default);
# * `origin/…` — expenditures in unshifted (raw, "consumer") coordinates; own expenditure 1–30;
# * `origin_budget/…` — raw-coordinate expenditures compared with the nominal budget 12 instead of the
#   chosen answer's own raw expenditure;
# * `nominal/…` — nominal corners, i.e. the flip rule ignored in the analysis (own expenditure 12 or 18);
# * `…/1-e` — the index reported as 1 − e*, as Definition 3 literally prints ("inf 1 − e").

# %%
t1 = reference.published_table1()
vals = sorted(set(t1["ccei"]))
support = pd.DataFrame({
    "printed": vals,
    "fractions_m<=30": [", ".join(f"{f.numerator}/{f.denominator}" for f in cv.matching_fractions(v)) for v in vals],
    **{c.name: cv.in_support(vals, c) for c in CONVENTIONS},
})
show(support, "06_printed_values_support", fit=True,
     view=lambda d: d.set_index("printed").rename(columns={"fractions_m<=30": "fractions k/m, m ≤ 30"}).rename(
         columns=lambda c: c.replace("/", "/\u200b").replace("_", "_\u200b")))

# %% [markdown]
# The supports of `x/e` and `x/1-e` are mirror images (a/b ↔ (b−a)/b), so the printed values alone
# cannot tell e from 1 − e. What can is the *location* of the random-choice null distribution:
# Procedure 1 compares each model with simulated random respondents in the same design. For each
# convention we simulate uniformly random respondents (random round-0 answer → corner flips;
# 10 designs; one null per published number of observations) and compute the α it predicts for every
# published CCEI (share of null indices ≥ the printed value). The paper's own option sets and
# round-0 answers are not public, so we also report an envelope over six round-0 answers.

# %%
null, predicted = audit.convention_audit(t1, n_datasets=n_convention_null, seed=seed, n_jobs=n_jobs)
envelope = audit.alpha_envelope(t1, n_datasets=n_envelope, seed=seed, n_jobs=n_jobs,
                                q0s=None if not quick else [(0, 0, 0, 0, 0), (5, 5, 5, 5, 5), (2, 2, 2, 2, 2)])
summary = audit.convention_summary(predicted, null, envelope)
show(summary, "06_convention_summary", fit=True, float_format="{:.3f}".format,
     view=lambda d: d.rename(columns=lambda c: c.replace("_", " ")))
show(predicted.merge(envelope[["model", "convention", "alpha_min", "alpha_max"]], on=["model", "convention"]),
     "06_convention_predicted_alpha", caption="Predicted alpha per published model and convention", fit=True,
     float_format="{:.3f}".format, view=lambda d: d.rename(columns=lambda c: c.replace("_", " ")))

# %% [markdown]
# How each convention treats simulated utility maximisers (best of the 100 options, and best of the
# whole integer budget set, 521 options) compared with random respondents. Under the standard
# convention rational agents score far above random ones (1 would need GARP on the restricted,
# integer option sets); a `1-e` convention reverses the scale (0 = consistent).

# %%
rational = audit.rational_agent_indices(n_agents=3 if quick else 100, seed=seed)
rat_tab = rational.groupby(["convention", "agent_kind"])["index"].describe()[["mean", "min", "max"]]
show(rat_tab, "06_convention_rational_agents")

# %%
fig = audit.plot_convention_nulls(null, t1, rational)
save(fig, "06_convention_nulls")
plt.show()
fig = audit.plot_alpha_fit(predicted, envelope)
save(fig, "06_convention_alpha_fit")
plt.show()

# %%
best = summary.sort_values("mae_alpha").index[0]
print("convention with the smallest alpha error:", best)
print(summary[["in_support", "null_range", "mae_alpha", "spearman", "in_envelope"]].round(3).to_string())
r = rational.groupby(["convention", "agent_kind"])["index"].mean().unstack()
print("\nmean index, rational (best of 100) vs random agents:\n", r.round(3).to_string())

# %% [markdown]
# **What the evidence supports (read with the numbers above; the full run is the reference).** The
# headline numbers (the best convention and its Spearman correlation, the power at noise 0 / 0.3 / 1
# and the size) are pinned at seeded sizes by `tests/studies/test_audit.py`.
#
# * The standard convention (`corner/e`) cannot have produced Table 1: 27 of the 37 printed values
#   (e.g. 0.385 = 5/13, 0.353 = 6/17, 0.400 = 2/5) are not multiples of 1/12. The nominal-corner
#   variant fails similarly. Only expenditures in **unshifted (origin) coordinates** — whose own
#   expenditures vary between rounds — can produce every printed value (100 % support).
# * Between `origin/e` and `origin/1-e`, the random-choice null decides: in origin coordinates random
#   respondents have e* ≈ 0.6–0.77, far above every printed value, so `origin/e` predicts α ≈ 1 for
#   all 37 models. Reported as **1 − e***, the null covers exactly the printed range (≈ 0.2–0.45) and
#   the predicted α track the published ones (smallest α error, highest rank correlation, most
#   published α inside the round-0 envelope).
# * If that reading is right, Table 1's "CCEI" is 1 − e* in origin coordinates and eq. (4) counts
#   random datasets with 1 − e* at least as high: a small α then marks data **less** consistent than
#   random choice (in origin coordinates), and simulated utility maximisers — whose 1 − e* lies
#   *below* the random range — would get α near 1. The models at the bottom of Table 1 (0.167–0.20)
#   sit where our simulated maximisers sit.
# * How strong is this? The support argument against the standard convention is exact. The case for
#   `origin/1-e` is circumstantial: it is the only convention examined that fits both the printed
#   values and the (CCEI, α) pairs, but the fit is approximate: the paper's option sets and round-0
#   answers are unknown; published α for equal CCEIs differ across models more than Monte-Carlo
#   error allows, which model-specific option sets explain only in part; in the middle and bottom
#   of Table 1 the published α are systematically *lower* than this null predicts (the paper's null
#   sits at somewhat lower 1 − e* than ours, e.g. for printed 0.29–0.31); 0.187 needs 3/16 = 0.1875
#   to have been rounded down (e.g. a bisection or truncation), and conventions not examined here
#   could fit too. Only the raw answers could settle it. The package keeps the standard CCEI.

# %% [markdown]
# ## §3.2 — NLLS: eqs. (9)–(10) vs the exact maximiser
#
# The predicted answer printed in eqs. (9)–(10) coincides with the true maximiser of (7) under (8)
# only when all a_s are equal (as printed it is not even on the budget line otherwise). First, the
# misspecification bias in its purest form: simulated agents answer every round with the real-valued
# predicted answer of one form ("generated"), and NLLS (eq. 11, `moralkit.psm.nlls.fit_answers`) fits
# them with each form ("fitted"). The diagonal recovers (a, b) exactly; the off-diagonal cells are the
# bias of using the wrong form.

# %%
cross = audit.nlls_cross_forms(n_agents=2 if quick else 40, seed=seed)
show(cross.pivot_table(index="param", columns=["generated", "fitted"], values=["bias", "rmse"]).round(3),
     "06_nlls_cross_forms", full=cross)

# %% [markdown]
# Second, recovery from the PSM's discrete choices: simulated agents with known (a, b) pick from the
# design's 100 options (noiseless, and with logit noise 0.3); each dataset is fitted under both forms
# (`moralkit.psm.nlls.fit_utility`). Bias and RMSE per parameter:

# %%
nlls_tab = audit.nlls_recovery(n_agents=2 if quick else 40, noise_levels=(0.0, 0.3), seed=seed)
show(nlls_tab.pivot_table(index=["noise", "param"], columns="form", values=["bias", "rmse"]).round(3),
     "06_nlls_recovery", full=nlls_tab)

# %% [markdown]
# ## §2.4 and §3.3 — Partition sanity: does the permutation approach recover known groups?
#
# Three groups of two simulated agents; the agents of a group share one utility (ideal points
# (1,…,1), (4,…,4) and (1,4,1,4,1)), each answers its own design. For each (ρ, e) the permutation
# study (T draws, Procedure 2 with the exact LS(e) solver) labels types; a pair is correctly
# co-classified when "same type" ⇔ "same group". With e small GARP_e is trivially satisfied and
# every agent lands in one type (only the 3 within-group pairs of 15 are right); as e rises the
# groups separate, until at e = 1 even agents with the same utility, choosing from different
# 100-option sets, start to conflict.

# %%
part = audit.partition_recovery(rhos=(10, 20) if quick else (5, 10, 20),
                                es=(0.333, 0.8, 1.0) if quick else (0.2, 0.333, 0.5, 0.667, 0.8, 0.9, 1.0),
                                T=10 if quick else 200, seed=seed)
show(part, "06_partition_recovery")

# %%
fig, ax = plt.subplots(figsize=(6, 4))
audit.plot_partition_recovery(part, ax)
save(fig, "06_partition_recovery")
plt.show()

# %% [markdown]
# The paper's e = 0.333 (the smallest CCEI among the models passing at 5 %) sits where, for these
# simulated groups, Procedure 2 puts everyone in the same type; whether that transfers to the LLM
# data depends on the convention question above (0.333 is also one of the printed values that the
# standard convention can produce).
