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
# # MoralChoice: action likelihoods, question-form consistency and model agreement
#
# Companion to Scherrer, Shi, Feder and Blei (2023), *Evaluating the Moral Beliefs Encoded in LLMs*
# (NeurIPS 2023), Sections 2-4 and Appendices A-D.
#
# Data: the MoralChoice survey files and the frontier-model responses of the `jacksondean17/moralchoice`
# fork (the shared MoralChoice folder, `MORALKIT_MORALCHOICE_DIR`, or the Hugging Face dataset
# `ninoscherrer/moralchoice`), plus the project's own runs in `data/moralchoice` (sampled answers) and
# `data/moralchoice_likelihood` (exact likelihoods from token probabilities). Everything below calls
# `moralkit.moralchoice`; what the paper publishes is transcribed in `moralkit.moralchoice.reference`.
# Figures and tables are saved with the prefix `05_`.
#
# ## Summary: Scherrer et al. (2023) beside this run
#
# Written at the end of the run from the tables of the section "The paper beside this run".

# %% tags=["remove-input"]
from IPython.display import Markdown, display

summary_box = display(Markdown("*The summary is written when the notebook has run to its end.*"),
                      display_id=True)

# %% tags=["parameters"]
quick = False  # subsample scenarios for a fast check
seed = 0  # seed of the quick-mode subsample
moralchoice_dir = None  # None: MORALKIT_MORALCHOICE_DIR, ../shared/moralchoice, or the HF hub
own_data_path = None  # None: the committed runs (moralkit.runs) when present; False: none

# %%

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import HTML, Markdown, display

from moralkit import moralchoice as mc
from moralkit import respondents, runs
from moralkit.figures import relative_path, save, show, show_head, table_html
from moralkit.moralchoice import beside, levels, plots, prompts
from moralkit.moralchoice import reference as paper_ref

# %%
source = mc.survey_source(moralchoice_dir)
own = runs.own_runs("responses", own_data_path, name="own_data_path")
print("survey files:", relative_path(source.label))
print("own runs:", relative_path(own) if own else "none")
short = respondents.short_label
rule_short = paper_ref.short_rule


def legend(labels):
    """The legend of a table whose headers are short respondent labels."""
    show(respondents.legend(labels).set_index("short"),
         caption="Legend: short label → respondent")


# %% [markdown]
# ## The respondents
#
# Every label on this page is one respondent of `moralkit.respondents` (the registry every page uses).
# They are not all different models:
#
# - **real model**: an LLM's own answers. Three small local models (Qwen2.5-Coder 0.5B and 1.5B,
#   SmolLM2-135M) were sampled at temperature 1 (`data/moralchoice`), and their token probabilities
#   give exact likelihoods (`data/moralchoice_likelihood`, suffix **ex**). Five frontier models answered
#   through their APIs in the shared data (see their limits below).
# - **persona-prompted** (`+persona-<name>`): Qwen2.5-Coder-0.5B under a short system prompt naming a
#   moral theory (`moralkit.collect.personas`): the same model, not another one.
# - **second sampling seed** (`-s<k>`): the same model asked again with another sampling seed; it occurs
#   only in the PSM data (pages 02-04).
# - **simulated** (`sim-…`): drawn by `moralkit.psm.simulate`; none on this page.
#
# **The frontier-model responses are real data with narrow limits.** claude-3.5-haiku, gpt-4o-mini,
# gemini-1.5-flash-8b, Llama-3.1-8B-Instruct and DeepSeek-V3 answered the 680 high-ambiguity scenarios
# in February 2025 (a fork of the authors' repository, not the paper's 28 models): **high ambiguity only,
# the A/B template only (2 of the 6 question forms), one sample per ordering** (M = 1; the paper uses
# M = 10). So each marginal likelihood is 0, ½ or 1, QF-E is 0 by construction (certainty is not
# measured), and QF-C measures only order consistency.

# %%
mc_labels = [*respondents.REGISTRY]
show(respondents.legend([m for m in mc_labels if respondents.kind(m) != "second sampling seed"], what=True).set_index(
    "short"),
     caption="Respondents of the MoralChoice data (short label, full id, kind)", fit=True)

# %% [markdown]
# ## §3.2 and Appendix A — the survey
#
# 687 low-ambiguity scenarios (action 1 follows the rules, action 2 violates one) and 680
# high-ambiguity scenarios (both actions may violate rules), each labelled with the rules of Gert's
# common morality each action violates; plus a 20-scenario "controversial" subset of the high table
# (from the jacksondean17/moralchoice fork). Scenario `G_530` of the high table offers the same action
# twice and is excluded (with a warning) from everything below.

# %%
scenarios, notes = levels.load_all_scenarios(source)
print(*notes, sep="\n", end="\n" if notes else "")  # e.g. the degenerate scenario left out
survey = levels.survey_table(scenarios)
show(survey, "05_survey")

# %%
rules = levels.rule_table(scenarios)
show(rules, "05_rule_labels")

# %% [markdown]
# ## §3.3 and Appendix B.1 — six question forms per scenario
#
# Three templates (A/B, Repeat, Compare; Table 12) with their system instructions (Table 13), each
# asked with the two orderings of the actions. `build_prompt` rebuilds the exact text sent to the
# models (checked byte for byte against recorded prompts in the tests).

# %%
example = scenarios["high"].set_index("scenario_id").loc["H_002"]
print(*prompts.prompt_examples(example, mc.load_templates(source)), sep="\n")

# %% [markdown]
# ## §2.3, §3.3 and Appendix B.2 — from answers to actions
#
# Each answer is mapped to an action by the rule-based g: exact match with the expanded answer set of
# the response templates, then a Porter-stemmed match, the form-specific rules, refusals, else invalid;
# the ordering is undone so that the result refers to the scenario's action 1 / action 2. The shared
# files carry the mapping of their authors (`stored_decision`); our re-mapping (`decision`) agrees with it as follows.

# %%
# responses_all: every scenario (the scenarios the paper prints are read from it in quick mode too)
responses, responses_all, lines = levels.load_levels(source, own, scenarios, quick=quick, seed=seed)
print(*lines, sep="\n")

agreement = levels.mapping_agreement(responses)
mapping = agreement.set_index(["set", "model", "question_type", "ordering"])
show(mapping.rename(index=short, level="model"), "05_mapping_agreement", full=mapping, float_format="{:.3f}".format)

# %% [markdown]
# ## Appendix D.1 — refusals and invalid answers (Figures 6-8)
#
# Shares of all answers per model; the red dotted line marks 1 %.

# %%
rates = {a: mc.answer_rates(r) for a, r in responses.items() if len(r)}
answer_rates = pd.concat(rates, names=["set", "model"])
show(answer_rates.rename(index=short, level="model"), "05_answer_rates", full=answer_rates,
     caption="Shares of answers per respondent (short labels: see the legend above)")

# %%
for a, rt in rates.items():
    for kind in ("invalid", "refusal"):
        fig = plots.plot_answer_rates(rt, kind, title=f"{kind} answers, {a}-ambiguity scenarios")
        save(fig, f"05_fig6-8_{kind}_{a}")
        plt.show()

# %% [markdown]
# ## §2.1-2.3 — action likelihoods, entropies, QF-C and QF-E (Definitions 1-6, eqs. 7-8)
#
# Per model and scenario: the Monte Carlo action likelihood of each question form (eq. 7; a form with
# no valid answer counts 0.5), the marginal action likelihood (uniform over forms, eq. 8), the
# marginal action entropy (eq. 4), the question-form consistency QF-C = 1 − generalised JSD (eq. 5) and
# the average form-specific entropy QF-E (eq. 6). A question form is a (template, ordering) pair.
# **Forms missing from a data set are left out** and the averages are taken over the forms present:
# the column `forms` says which were used. Entropies are in **bits** (the paper's thresholds —
# QF-E 0.7 ≈ an 80/20 split — only make sense in bits).

# %%
metrics, summaries = levels.metrics_by_level(responses)
model_summary = pd.concat(summaries, names=["set", "model"])
show(levels.summary_view(model_summary, short), "05_model_summary", full=model_summary, float_format="{:.3f}".format,
     caption="Per model (averaged over scenarios); H marg. = marginal action entropy (bits), p(a1) = mean marginal "
             "likelihood of action 1, m_min = fewest answers per form")
legend(model_summary.index.get_level_values("model").unique())
for a, m in metrics.items():
    show_head(m, f"05_scenario_metrics_{a}", n=8, view=lambda h: levels.scenario_metrics_view(h, short),
              caption=f"Per model and scenario, {a} ambiguity", float_format="{:.3f}".format)

# %% [markdown]
# ### How many samples per question form (M)
#
# The paper samples M = 5 answers per form for low- and M = 10 for high-ambiguity scenarios (§3.3).
# With M = 1 a form's likelihood is 0 or 1, so QF-E is 0 by construction (except forms with no valid
# answer) and says nothing about certainty. The shared high-ambiguity files hold one A/B answer per
# ordering (M = 1, two forms). The project's own runs were extended to the paper's M in a seeded
# random order of scenarios, so a run may hold some scenarios at the paper's M and the rest at M = 1:
# `scenarios_M<k>` counts the scenarios whose every form holds at least k answers.

# %%
m_per_form = levels.samples_per_form_table(responses)
show(m_per_form.rename(index=short, level="model"), "05_samples_per_form", full=m_per_form,
     caption="Samples per question form (M) of every run")
at_paper_m = levels.at_paper_m(responses)
print(*levels.paper_m_lines(at_paper_m, short), sep="\n", end="\n" if at_paper_m else "")  # nothing for no level

# %% [markdown]
# ### Definition 1 without sampling: token probabilities
#
# A local model also gives its token probabilities, so Definition 1 can be computed instead of
# sampled: the probability of each canonical answer of a form (followed by end of turn), summed per
# action (`moralkit.moralchoice.likelihood`). `covered` is the probability mass those answers hold;
# the rest (other spellings, refusals, invalid answers) is reported, not guessed. Such a table goes
# into `scenario_metrics` in place of sampled answers (its `estimator` column says which was used);
# below, these respondents carry the suffix **(exact)** (short label **ex**). Respondents named
# `+persona-<name>` are **the same model under a system prompt** (`moralkit.collect.personas`), not
# other models.

# %%
from moralkit.moralchoice import published

exact, exact_all = levels.load_exact(scenarios, quick=quick, seed=seed)  # exact_all: every scenario
if not exact:
    print("No exact likelihoods in", relative_path(runs.run_dir("likelihoods")),
          "- run `python -m moralkit likelihood ...` (data/README.md).")
else:
    coverage = levels.coverage_table(exact, scenarios)
    show(coverage.rename(index=short, level="model"), "05_exact_coverage", full=coverage,
         float_format="{:.3f}".format, caption="Probability mass of the canonical answers, by template")
exact_metrics = levels.exact_metrics(exact)

# %% [markdown]
# ## §4.1 — marginal action likelihoods (Figure 3)
#
# Distribution over scenarios of each model's marginal likelihood of action 1 (in the low-ambiguity
# set, the commonsense action): sampled answers (any M: the marginal likelihood is unbiased at any M,
# only noisier at small M), then the exact likelihoods. The shared data hold no low-ambiguity answers.

# %%
fig3_metrics = levels.stack(metrics, exact_metrics)
fig = plots.plot_marginal_likelihoods({"low": fig3_metrics.get("low"), "high": fig3_metrics.get("high")})
save(fig, "05_fig3_marginal_likelihood")
plt.show()

# %% [markdown]
# ## §4.2 — consistency and certainty (Figure 4)
#
# QF-E (x, uncertainty) against 1 − QF-C (y, inconsistency), averaged over scenarios. Dotted lines:
# certainty threshold QF-E = 0.7 and consistency threshold QF-C = 0.6; grey: consistent and certain
# models; black dot: a model choosing at random. **Only data where QF-E can be non-zero are drawn:**
# sampled runs on the scenarios they answered at the paper's M (filled markers), and exact likelihoods
# (hollow markers). Runs with one answer per form are left out (listed below the figure).

# %%
fig4_metrics = levels.stack({a: mc.scenario_metrics(r) for a, r in at_paper_m.items() if len(r)}, exact_metrics)
fig4_summaries = {a: mc.model_summary(m) for a, m in fig4_metrics.items()}
if fig4_summaries:
    fig4_points = pd.concat(fig4_summaries, names=["set", "model"])
    show(levels.summary_view(fig4_points, short), "05_fig4_points", full=fig4_points, fit=True,
         float_format="{:.3f}".format, caption="The points of Figure 4 (sampled at the paper's M, or exact)")
fig = plots.plot_consistency_certainty({"low": fig4_summaries.get("low"), "high": fig4_summaries.get("high")})
save(fig, "05_fig4_consistency_certainty")
plt.show()
print(*levels.left_out_lines(summaries, fig4_summaries, short), sep="\n")

# %%
selected = {a: mc.consistent_and_certain(s) for a, s in fig4_summaries.items()}
print(*levels.grey_region_lines(selected, short), sep="\n", end="\n" if selected else "")

# %% [markdown]
# ## §4.3 — agreement among consistent and certain models (Figure 5)
#
# Pearson correlations of the marginal likelihoods on the high-ambiguity scenarios among the models of
# the grey region of Figure 4b, clustered hierarchically (average linkage on 1 − ρ) with optimal leaf
# ordering (`moralkit.moralchoice.agreement_selection`). **Who enters, and why:**
#
# - a respondent with exact likelihoods is judged on them, not on its sampled answers: the entropy of a
#   few samples is biased towards certainty (section "Agreement of the two estimators" below);
# - a sampled run with more than 10 % invalid answers or refusals is not judged: a form without a valid
#   answer counts ½, so its QF-E and QF-C describe the answer mapping, not the model (the paper's models
#   stay near 1 %, Appendix D.1). Both rules keep out SmolLM2's sampled run, certain on its sampled
#   answers but mostly invalid (Figures 6-8) and not certain on its exact likelihoods;
# - a model answered once per form (the frontier models: M = 1) has no measured certainty; it enters
#   when it is consistent (QF-C > 0.6), and the caption says so.

# %%
invalid_share = (rates["high"]["invalid"] + rates["high"]["refusal"]) if "high" in rates else None
cluster, per_dissenter = None, None
pick = mc.agreement_selection(fig4_summaries.get("high"), summaries.get("high"), invalid_share=invalid_share)
fig5_models = pick["models"]
fig5_metrics = levels.figure5_metrics(fig4_metrics, metrics, pick)
fig5_title = (f"{len(pick['certain'])} consistent and certain, {len(pick['consistent_unmeasured'])} consistent "
              "with certainty not measured (M = 1)")
display(Markdown("\n".join(levels.selection_lines(pick))))

# %%
if len(fig5_models) >= 2:
    corr, notes = levels.correlations_with_notes(fig5_metrics, fig5_models)
    print(*notes, sep="\n", end="\n" if notes else "")
    cluster = mc.cluster_models(corr)
    show(cluster["corr"].rename(index=short, columns=short), "05_fig5_correlations", full=cluster["corr"],
         float_format="{:.2f}".format, caption=f"Pearson correlations ({fig5_title})")
    n_common = len(mc.likelihood_matrix(fig5_metrics, fig5_models).dropna())  # the scenarios correlated
    fig = plots.plot_agreement_clustering(cluster, title=f"high ambiguity, {n_common} scenarios")
    save(fig, "05_fig5_agreement_clustering")
    plt.show()
else:
    print(f"{len(fig5_models)} model(s) qualify on high-ambiguity scenarios (two are needed): no Figure 5")

# %% [markdown]
# ## Appendix D.2 — strong rule violations in low-ambiguity scenarios (Table 17)
#
# Number of low-ambiguity scenarios where a consistent and certain model has marginal likelihood
# ≥ 0.75 on the unfavourable action 2, per rule action 2 violates (n: scenarios violating the rule).
#
# The table can only count models that are consistent and certain on the low-ambiguity scenarios
# (the grey region of Figure 4a). Which ones are on this data, and so why the table may be empty:

# %%
if "low" in fig4_summaries:
    # the selection rule of Figure 5: exact likelihoods first, sampled runs with <= 10 % invalid answers
    low_pick = mc.agreement_selection(fig4_summaries["low"], invalid_share=(rates["low"]["invalid"]
                                                                          + rates["low"]["refusal"]))
    table17 = mc.strong_rule_violations(fig4_metrics["low"], scenarios["low"], models=low_pick["certain"])
    display(Markdown("\n".join(levels.table17_lines(fig4_summaries["low"], low_pick, table17))))
    show(table17.rename(index=short, columns=rule_short), "05_table17_rule_violations", full=table17, fit=True)
else:
    print("no low-ambiguity data where QF-E can be non-zero (sampled at M = 5, or exact likelihoods): no Table 17")

# %% [markdown]
# ## Appendix D.3 — strong agreement and disagreement (Tables 18-19)
#
# Strong agreement: all models have marginal likelihood ≥ 0.75 on the same action. Table 19: scenarios
# where all but one of the models strongly agree and the remaining one strongly prefers the other
# action. Among the models of Figure 5:

# %%
if len(fig5_models) >= 2:
    table18 = mc.strong_agreement(fig5_metrics, fig5_models, scenarios["high"])
    print(f"{len(table18)} of {fig5_metrics['scenario_id'].nunique()} scenarios with strong agreement "
          f"among {len(fig5_models)} models")
    t18 = table18.set_index("scenario_id")
    if len(t18):
        show_head(t18, "05_table18_strong_agreement", n=10, float_format="{:.2f}".format, fit=True,
                  view=lambda h: levels.agreement_table_view(h, fig5_models, short),
                  caption=f"Table 18 ({fig5_title}); columns: marginal likelihood of action 1")
    else:
        display(Markdown(levels.empty_table_note(18, fig5_metrics["scenario_id"].nunique(), len(fig5_models))))
        show(t18, "05_table18_strong_agreement")
else:
    print(f"Table 18 needs two models of Figure 5; {len(fig5_models)} qualify (see above).")

# %%
if len(fig5_models) >= 3:
    table19 = mc.dissent_table(fig5_metrics, fig5_models, scenarios["high"])
    per_dissenter = table19.groupby("dissenter").size().reindex(fig5_models, fill_value=0).rename("scenarios")
    show(per_dissenter.rename(index=short), caption="Scenarios per dissenting model (every model of Figure 5, "
                                                    "zeros included)")
    if len(table19):
        show_head(table19.set_index("scenario_id"), "05_table19_strong_disagreement", n=10, fit=True,
                  view=lambda h: levels.agreement_table_view(h, fig5_models, short, dissenter=True),
                  float_format="{:.2f}".format,
                  caption=f"Table 19 ({fig5_title}); preferred: the action of all but the dissenter")
    else:
        display(Markdown(levels.empty_table_note(19, fig5_metrics["scenario_id"].nunique(), len(fig5_models))))
        show(table19.set_index("scenario_id"), "05_table19_strong_disagreement")
else:
    print(f"Table 19 needs three models of Figure 5 (a dissenter and two that agree); {len(fig5_models)} qualify.")

# %%
pairs = mc.pairwise_strong_agreement(fig3_metrics["high"]) if "high" in fig3_metrics else None
if pairs is not None:
    for kind in ("agree", "disagree"):
        show(pairs[kind], f"05_pairwise_strong_{kind}ment", fit=True,
             view=lambda d: levels.numbered_view(d, short),
             caption=f"Pairwise strong {kind}ment (every model; counts of high-ambiguity scenarios; "
                     "column k is the model of row k)")
    legend(pairs["agree"].index)

# %% [markdown]
# ## The controversial subset
#
# The 20 controversial scenarios of the fork were asked with all three templates to two models (five
# samples per form), so their QF-E and QF-C use up to six forms (see `forms`).

# %%
if "controversial" in summaries:
    show(summaries["controversial"].drop(columns=["forms"]).rename(index=short, columns=levels.SUMMARY_HEADERS),
         float_format="{:.3f}".format, caption="Per model, controversial subset (forms used: see the CSV of the "
                                               "per-scenario metrics)")

# %% [markdown]
# ## Agreement of the two estimators
#
# On the scenarios both cover: correlation and mean |Δ| of the marginal likelihoods, Spearman
# correlations of QF-C and QF-E (do the two estimators rank the scenarios alike?), next to the band the
# same statistics would have from sampling noise alone (answers redrawn from the exact likelihoods at
# the run's M). `M` says which sampled answers were compared: the paper's M where a run has it, else
# every answer (M = 1, where QF-E cannot agree).

# %%
if exact:
    rows, agreement, view = levels.estimator_agreement(exact, responses, seed=seed)
    if rows:
        show(levels.agreement_view(view, short), "05_estimator_agreement", full=agreement, fit=True,
             caption="Exact likelihoods against sampling: observed [95 % range from sampling noise alone]; "
                     "exp. = expected; samples per form: in the CSV")
    else:
        print("no respondent has both exact likelihoods and sampled answers")

# %% [markdown]
# **The sampling estimator understates uncertainty.** The entropy of M sampled answers (a plug-in
# estimate) is biased low: with M = 5 a form whose exact likelihood is 0.7 shows five equal answers
# in 17 % of draws (QF-E 0) and never its own 0.88 bits. The bias is predictable: `expected` is the mean
# sampled QF-E when the answers are drawn from the exact likelihoods. When `sampled` ≈ `expected`, the
# whole gap to `exact` is this bias, and a model can fall inside Figure 4's "certain" region (QF-E < 0.7)
# on sampled answers alone while its own probabilities say it is uncertain.

# %%
if exact and rows:
    display(Markdown("\n".join(levels.bias_lines(rows, short))))

# %% [markdown]
# ## The paper beside this run
#
# What Scherrer et al. (2023) print, transcribed in `moralkit.moralchoice.reference` with the section and
# table each item comes from, next to this run's respondents. Each respondent is represented by its best
# estimate: exact likelihoods where it has them (the local models, suffix **ex**), else its sampled
# answers (the frontier models: M = 1, A/B form only, high ambiguity only). The scenarios the paper prints
# are read from every answer, also in quick mode.
#
# ### The scenarios of Tables 2, 3, 18 and 19
#
# Table 2 (§4.1): low-ambiguity scenarios where at least 7 of the 28 LLMs strongly prefer the
# unfavourable action 2. Table 3 (§4.3) and Table 18 (Appendix D.3): high-ambiguity scenarios where the
# four models of sub-cluster A (gpt-4, claude-v1.3, claude-instant-v1.1, text-bison-001) strongly agree;
# `G_460` is in both. Table 19 (Appendix D.3): gpt-4 strongly disagrees with the three others; the paper
# marks the sides with logos that the text of the paper does not keep, so the sides are not transcribed.

# %%
printed = paper_ref.published_scenarios()
printed_view = printed.assign(preferred=printed["preferred"].fillna("not recoverable")).set_index(
    ["table", "scenario_id"])[["preferred", "context", "action1", "action2"]]
show(printed_view, "05_paper_printed_scenarios", full=printed, fit=True,
     caption="The paper's printed scenarios, with the survey's id and the action it marks ✓")

# %%
printed_metrics = levels.metrics_of_scenarios(responses_all, exact_all, set(printed["scenario_id"]))
prefs, order = beside.printed_preferences(printed, printed_metrics)

# %%
beside_view = beside.preference_view(prefs, short).fillna("–").rename(
    index=lambda v: {"not recoverable": "?"}.get(v, v.removeprefix("Table ")))
show(beside_view.rename(columns=lambda c: c.replace("+", "+\u200b")).rename_axis(index={"scenario_id": "scenario"}),
     "05_paper_scenarios_beside", full=prefs, fit=True,
     caption="Each respondent's marginal likelihood of the paper's ✓ action (Table 19, whose ✓ is not "
             "recoverable (?): of action 1); "
             "* = strong (≥ 0.75 on one action); – = not in its data (the frontier models answered high "
             "ambiguity only)")
legend(order)

# %% [markdown]
# ### Table 17: strong rule violations, published beside this run
#
# The paper counts the consistent and certain models only and omits those with no violation. Here every
# local respondent is counted on its exact likelihoods (so the counts are comparable in size, not in
# selection); the frontier models have no low-ambiguity answers.

# %%
paper17 = paper_ref.published_table17()
show(paper17.rename(columns=rule_short), "05_paper_table17", full=paper17, fit=True,
     caption="Published Table 17 (Appendix D.2), strong violations per model and rule")
best = runs.best_estimate(metrics, exact_metrics)
if "low" in best:
    ours17 = mc.strong_rule_violations(best["low"], scenarios["low"], drop_zero=False)
    ours17.columns = [c.split(" (n=")[0] for c in ours17.columns]
    show(ours17.rename(index=short, columns=rule_short), "05_table17_this_run", full=ours17, fit=True,
         caption=f"This run, every local respondent, {best['low']['scenario_id'].nunique()} low-ambiguity scenarios")
else:
    print("No low-ambiguity answers in this run: nothing to count beside Table 17.")

# %% [markdown]
# ### Which of the paper's statements hold for each respondent

# %%
check_metrics = levels.fill_scenarios(best, printed_metrics)  # the printed scenarios a quick run left out
checks = beside.statement_checks(check_metrics, {a: r for a, r in rates.items() if a in ("low", "high")},
                                 scenarios)
show(checks.assign(model=checks["model"].map(short)).set_index(["statement", "model"])[["computed", "holds"]],
     "05_paper_statements_checked", full=checks, fit=True,
     caption="Per statement and respondent: the computed value and whether the statement holds")
stated = paper_ref.stated_numbers()
show(stated, "05_paper_stated_numbers", fit=True,
     caption="Numbers the paper states (moralkit.moralchoice.reference.STATED)")
show(paper_ref.published_groups().set_index("group"), "05_paper_groups", fit=True,
     caption="Model groups the paper names (moralkit.moralchoice.reference.GROUPS)")

# %% [markdown]
# ## The original study's 28 models: their raw responses
#
# Everything above compares with what the paper prints. The paper's raw response files (M = 5 / 10,
# 28 models) are in the authors' repository; `moralkit.moralchoice.published` downloads them once, at a
# pinned commit, with sha256 checks (this needs the network). When they are in the cache, Figures 3 and 4
# are drawn from them here.

# %%
paper = levels.load_published_levels()
if not paper:
    print(levels.no_published_note(relative_path(published.published_cache_dir())))
else:
    paper_metrics, paper_summaries = levels.metrics_by_level(paper)
    show(pd.concat(paper_summaries, names=["set", "model"]), "05_paper_model_summary")
    fig = plots.plot_marginal_likelihoods({"low": paper_metrics.get("low"), "high": paper_metrics.get("high")})
    save(fig, "05_fig3_paper")
    plt.show()
    fig = plots.plot_consistency_certainty({"low": paper_summaries.get("low"), "high": paper_summaries.get("high")})
    save(fig, "05_fig4_paper")
    plt.show()

# %% [markdown]
# ## The summary at the top of the page
#
# Written from the tables above (`moralkit.moralchoice.beside.summary_table`), plus the agreement of
# Figure 5 and the dissent of Table 19.

# %%
extra = beside.figure5_rows(cluster, per_dissenter, fig5_title, short)
summary = pd.concat([beside.summary_table(checks, short), pd.DataFrame(extra)], ignore_index=True)
save(summary, "05_summary")
intro = beside.summary_intro(order, paper_ref.N_MODELS, short)
if summary_box is not None:  # None outside a kernel (plain python)
    summary_box.update(HTML(intro + table_html(summary.set_index("finding"), name="05_summary", fit=True)))
display(HTML(intro + table_html(summary.set_index("finding"), name="05_summary", fit=True)))
