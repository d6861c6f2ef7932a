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
# # Cross-method study: PSM similarity network vs MoralChoice agreement on the same models
#
# The same models answer both surveys in the project's own collection runs
# (`data/psm/*.csv.gz`, `data/moralchoice/`). Two pairwise similarity structures are compared:
#
# * **PSM** (Seror 2025, §2.4, eq. 6; Table 3): G[m, w] = share of permutation draws in which models
#   m and w fall in the same GARP_e-consistent type (Procedure 2);
# * **MoralChoice** (Scherrer et al. 2023, §4.3, eq. 8): the Pearson correlation of the models'
#   marginal action likelihoods over the high-ambiguity scenarios.
#
# Their agreement is measured by a **Mantel test**: the Spearman correlation between the two upper
# triangles, with a p-value from relabelling the models of one matrix. Figures and tables are
# prefixed `07_`.

# %% tags=["parameters"]
quick = False
seed = 0
data_path = None  # PSM data (file or directory); None: the committed runs (moralkit.runs)
moralchoice_path = None  # own MoralChoice runs; None: the committed runs (moralkit.runs)
name_map = None  # {PSM model label: MoralChoice model id} when the labels differ
T = 500  # permutation draws for G (the paper: 500)
rho = 20  # rounds per model and draw (the paper: 20; capped by permutation.max_rho)
e = None  # None: just below the smallest standard CCEI among the compared models (as in notebook 04)

# %%
import math

import matplotlib.pyplot as plt
import pandas as pd

from moralkit.figures import save, show
from moralkit.psm import permutation as perm
from moralkit.respondents import legend, shorten
from moralkit.studies import crossmethod as xm
from moralkit.studies import crossplots as xplots

if quick:
    T = 50
psm, metrics, messages = xm.load_own_runs(data_path, moralchoice_path)
print("\n".join(messages))

# %% [markdown]
# ## How many models does a Mantel test need?
#
# With n models there are n(n−1)/2 pairs and only n! relabellings, so an exact permutation test can
# never give a p-value below 1/n!. Two models give a single pair (no correlation at all); three give
# p ≥ 1/6 whatever the data; four reach 1/24 ≈ 0.042 only if the two rankings agree perfectly.
# **At least 4 models are needed for the test to have any power at 5 %**, and in practice 6 or more.
# Below 9 models every relabelling is enumerated (exact p-value).

# %%
power_note = pd.DataFrame({"models": range(2, 10)})
power_note["pairs"] = power_note["models"] * (power_note["models"] - 1) // 2
power_note["relabellings"] = [math.factorial(n) for n in power_note["models"]]
power_note["smallest_p"] = 1 / power_note["relabellings"]
show(power_note, "07_mantel_min_pvalue", float_format="{:.3g}".format)
fig, ax = plt.subplots(figsize=(5, 3.5))
xplots.plot_min_pvalue(ax=ax)
save(fig, "07_mantel_min_pvalue")
plt.show()

# %% [markdown]
# ## §2.4 (eq. 6) and Scherrer et al. §4.3 — the two structures on the common models

# %%
res = xm.cross_method_from_data(psm, metrics, name_map=name_map, e=e, T=T, rho=rho, seed=seed)
if res is None:
    print("Fewer than 2 models answered both surveys: nothing to compare yet. Run the collection "
          "(`python -m moralkit collect psm|moralchoice ...`) for at least 4 models to make the Mantel test informative.")
else:
    print(res.note)
    print(f"{perm.describe_e(res.e)}, rho = {res.rho}, T = {res.T}")
    show(res.pairs(), "07_pairs", view=shorten)
    show(legend(res.models).set_index("short"), caption="Legend: short label → respondent")
    if res.mantel is not None:
        print(res.mantel.describe())

# %%
if res is not None:
    if res.distinct is not None and res.distinct.mantel is not None:
        md = res.distinct.mantel
        print(f"On one respondent per distinct model ({', '.join(res.distinct.models)}): Mantel r = {md.statistic:.3f}, "
              f"p = {md.pvalue:.3f} over {md.n_permutations} relabellings (smallest attainable p = {md.min_pvalue:.3f})")
        same = {m for v in res.same_model.values() for m in v}
        within = res.pairs().assign(same_model=lambda d: d["model_1"].isin(same) & d["model_2"].isin(same))
        show(within.groupby("same_model")[["psm_G", "moralchoice_corr"]].agg(["mean", "count"]),
             "07_pairs_same_model", caption="Pairs of one model (persona variants) against pairs of distinct models")

# %%
if res is not None:
    fig = xplots.plot_cross_method(res, title="Same models, two instruments (own collection runs)")
    save(fig, "07_cross_method")
    plt.show()

# %% [markdown]
# ## Reading the result
#
# * **Four of the six respondents are one model.** Qwen2.5-Coder-0.5B-Instruct answers both surveys
#   as itself and under three persona prompts, so 6 of the 15 pairs compare the model with itself.
#   The Mantel test's null relabels the respondents as if they were exchangeable, which these are
#   not: a correlation can come from both instruments telling the same-model pairs from the others,
#   not from similarity between models. The test on one respondent per distinct model (above) has 3
#   models, 3 pairs and 3! = 6 relabellings: its smallest attainable p is 1/6 ≈ 0.17, so it cannot
#   reach 5 % whatever the data. On these runs the cross-method question has no power.
#
# * **When they agree** (positive rank correlation, small p with enough models): pairs of models
#   that the PSM places in the same revealed-preference type also tend to pick the same actions in
#   MoralChoice's ambiguous dilemmas. The two instruments then measure a common structure of moral
#   similarity, which supports reading G as more than an artefact of the PSM's option sets.
# * **When they do not** (correlation near zero or negative): this is not by itself a contradiction.
#   G measures *joint rationalisability* — two models can choose differently and still be
#   GARP_e-compatible (Seror 2025, §2.4 "Discussion") — while the MoralChoice correlation measures
#   similarity of *choices* across everyday dilemmas. Disagreement says the two notions of similarity
#   diverge for these models; it may also reflect noise (few models, T draws, few scenarios, models
#   with near-constant likelihoods dropped by the correlation).
# * **With 2–3 models** the statistic is descriptive only: the smallest attainable p-value (table
#   above) is too large for any conclusion.

# %% [markdown]
# ## Steerability: one model under persona system prompts
#
# Persona-respondents are **Qwen2.5-Coder-0.5B-Instruct under a short system prompt**
# (`moralkit.collect.personas`: utilitarian, deontological, care; sources cited there), not other
# models. Each is compared with the same model without a persona (`moralkit.studies.steerability`):
# on MoralChoice, the mean change of the marginal likelihood of action 1 and the change towards the
# action that violates fewer of the rules the persona's theory weighs (bootstrap intervals over
# scenarios, one-sided sign-flip p-values); on the PSM, the change of the NLLS ideal points b,
# against directions written down before the runs finished.
#
# **Placebos.** In the low-ambiguity scenarios the rules favour action 1 in nearly every signed
# scenario (`share_plus` below), so "towards the rules" there is the same as "towards action 1". Two
# placebos test whether an effect is about the rules: the persona's signs shuffled over the scenarios
# (`p_specific`), and the same changes signed by the *other* personas' rules (`placebo_p`; a small p
# there means the placebo works as well). An effect is called "towards its rules" only when its own
# p-value, `p_specific` and `p_beats_placebos` (paired bootstrap: the effect exceeds every
# placebo's) are all at most 0.05 (`verdict`).
#
# **Paired bootstrap on the PSM.** Each persona-respondent answered exactly the baseline's option
# sets (same design, same round-0 answer), so each bootstrap replicate draws one set of rounds and
# refits both on it (`steerability.psm_paired_effects`); the unpaired intervals are shown beside.
# The `-s1` run is the same model with a second sampling seed: its round-0 answer differs, and with
# it the option sets of 68 of the 160 rounds (`rounds_options_differ`). It is not the same design
# answered twice, so it is compared unpaired, and the b it moves mixes sampling noise with other
# option sets.

# %%
import warnings

from moralkit.moralchoice import load_scenarios
from moralkit.studies import personas, steerability

BASE = "qwen2.5-coder-0.5b-instruct"
with warnings.catch_warnings(record=True) as caught:  # a note on the page, not an stderr block
    warnings.simplefilter("always")
    levels = {"low": xm.load_own_runs(data_path, moralchoice_path, ambiguity="low")[1], "high": metrics}
    level_scenarios = {a: load_scenarios(a) for a in levels}
for w in caught:
    print("note:", w.message)
persona = personas.persona_study(psm, levels, level_scenarios, BASE, n_boot=500 if quick else 2000,
                                 n_perm=999 if quick else 9999, psm_boot=30 if quick else 200, seed=seed)
for note in persona.notes:
    print(note)
psm_personas = personas.persona_labels(psm, BASE)

# %%
if len(persona.moralchoice):
    show(persona.moralchoice.set_index(["ambiguity", "respondent"]), "07_persona_effects_moralchoice",
         view=lambda d: shorten(d).T, fit=True,
         caption="Persona effects on the marginal likelihood of action 1, with the placebos (in low ambiguity, "
                 "action 1 is the rule-following action)")
    show(persona.placebos.set_index(["ambiguity", "respondent", "rules"]), "07_persona_placebos", view=shorten,
         caption="Each persona's changes signed by every rule set (own: the persona's rules)")

# %%
if len(persona.psm):
    effects_psm, summary_psm = persona.psm, persona.psm_summary
    show(effects_psm, "07_persona_effects_psm", index=False, fit=True,
         view=lambda d: shorten(d).rename(columns=lambda c: c.replace("_", " ")),
         caption="Persona effects on the ideal points b: paired bootstrap where the option sets are the baseline's "
                 "(delta_lo/delta_hi), unpaired beside")
    show(summary_psm, "07_persona_effects_psm_summary", index=False, fit=True,
         view=lambda d: shorten(d).rename(columns=lambda c: c.replace("_", " ")),
         caption="Shifts of b per respondent: intervals that exclude 0, on the expected or the opposite side")
    print(personas.psm_shift_sentence(effects_psm, summary_psm))

# %% [markdown]
# ### Rationality under a persona (Table 1's CCEI and α)
#
# A persona could also change how consistent the answers are. The standard CCEI (exact fraction) and the
# random-choice test's α (Seror 2025, §3.1, Table 1) of each persona-respondent beside the baseline's.

# %%
if BASE in psm and psm_personas:
    from moralkit.psm import rationality

    others = [m for m in (f"{BASE}-s1", *psm_personas) if m in psm]
    t1 = rationality.table1({m: psm[m] for m in [BASE, *others]}, n_datasets=200 if quick else 1000, seed=seed)
    show(steerability.rationality_effects(t1, BASE), "07_persona_rationality", index=False, view=shorten,
         caption="CCEI and alpha under each persona (baseline: the model without a persona)")
