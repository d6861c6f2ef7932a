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
# # 03 — Parametric utility estimation
#
# Seror (2025), *The Moral Mind(s) of Large Language Models*, Section 3.2 (eqs. (7)–(11)), Table 2 and
# Figures 1–2, with the notation of Section 2.2 (corner coordinates).
#
# Each model is summarised by a single-peaked quadratic utility over the five answers,
#
# $$u^m(\mathbf q) = -\tfrac12 \sum_{s\in\mathcal S} a^m_s\,(q_s - b^m_s)^2, \qquad (7)$$
#
# where $b^m_s\in\mathbb R$ is the **ideal answer** to question $s$ and $a^m_s>0$ its **weight**
# (normalised, $\sum_s a^m_s = 1$). The paper fits it to the models passing the rationality test at
# 5 % (Table 1) and stresses that the exercise is *secondary*: the models are not GARP$_1$-rational,
# which a utility representation would require. All computations are in `moralkit.psm.nlls`.
#
# **The committed data demonstrate the collection pipeline.** Its 7 PSM respondents (three small local
# models, a second sampling seed and three persona-prompted runs of the 0.5B model; `moralkit.respondents`,
# page 01) answer close to random, so their fitted utilities mean little. The published Table 2 and its Figure 1 are shown
# beside this run's. Notebook 08 uses the published utilities to simulate calibrated agents.

# %% tags=["parameters"]
quick = False
seed = 0
data_path = None  # None: the committed data, moralkit.paths.data_dir() / "psm"
form = "exact"  # predicted answer: "exact" (maximiser of (7) under (8)) or "paper" (eqs. (9)-(10) as printed)
n_starts = 5  # NLLS starting points per model
n_boot = 200  # bootstrap replicates over rounds (percentile intervals)
only_passing = False  # True: fit only the models passing the rationality test at 5 % (as the paper)
n_null = 1000  # random datasets per model for Table 1 (Procedure 1)
n_jobs = 1

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from moralkit.figures import relative_path, save, show
from moralkit.psm import nlls, reference
from moralkit.psm.dataset import load_psm
from moralkit.psm.design import CORNERS, PRICES
from moralkit.psm.rationality import table1 as make_table1
from moralkit.respondents import legend, short_label

pd.set_option("display.width", 160)
TABLE1_HEADERS = {"provider": "Provider", "model": "Model", "label": "CCEI", "alpha": "α",
                  "n_obs": "Number of Obs."}  # the published Table 1's headers

# %%
if quick:
    n_boot, n_null, n_starts = min(n_boot, 20), min(n_null, 100), min(n_starts, 3)
other_form = {"exact": "paper", "paper": "exact"}[form]
path, datasets = load_psm(data_path)
print(f"data: {relative_path(path)}")
for m, ds in datasets.items():
    sim = "  [SIMULATED]" if ds.backend == "simulated" or m.startswith("sim-") else ""
    print(f"  {m:40s} backend={ds.backend:12s} answered rounds={ds.n_obs:3d}/{ds.n_rounds}{sim}")
datasets = {m: ds for m, ds in datasets.items() if ds.n_obs >= nlls.MIN_ROUNDS}
ready = len(datasets) >= 1
if not ready:
    print("No model has enough answered rounds to fit eq. (7); collect answers (notebook 01) and re-run.")

# %% [markdown]
# ## The choice problem in corner coordinates (Section 2.2, eqs. (8)–(10))
#
# Round $r$ has a corner $\mathbf o^r\in\{0,5\}^5$ and prices $\mathbf p^r$; answers are measured from
# the corner, $q_{o,s} = q_s$ where $o_s = 0$ and $5-q_s$ where $o_s = 5$. The ideal point moves the same
# way, $b_{o,s} = b_s$ or $5-b_s$, so $u$ keeps its form. A rational model answering on the budget line
# solves
#
# $$\mathbf q^r = \arg\max u^m(\mathbf q)\ \text{ s.t. }\ \mathbf q_{\mathbf o^r}\cdot\mathbf p^r = 12. \qquad (8)$$
#
# Two forms of the predicted answer are available (`form=`):
#
# * **`"paper"`** — eqs. (9)–(10) as printed:
#   $\hat q_{z,o} = \alpha_z b_{z,o} + (1-\alpha_z)\,\frac{12-\sum_s p_s b_{s,o}}{p_z}$,
#   $\alpha_z = 1 - \frac{a_z/p_z^2}{\sum_s a_s/p_s^2}$;
# * **`"exact"`** — the maximiser of (7) under (8) (Lagrange):
#   $\hat q_{z,o} = b_{z,o} + \left(12-\mathbf p\cdot\mathbf b_o\right)\frac{p_z/a_z}{\sum_s p_s^2/a_s}$.
#
# They are **not** the same function, even with equal weights: the printed prediction is generally off
# the budget line. (It becomes the maximiser with $1-\alpha_z = \frac{p_z^2/a_z}{\sum_s p_s^2/a_s}$ and
# $\sum_{s\neq z}$ in the numerator.) Below, both on all 160 (corner, price) pairs with equal weights.

# %%
corners160, prices160 = np.repeat(CORNERS, 5, axis=0), np.tile(PRICES, (32, 1))
a_eq, b_mid = np.full(5, 0.2), np.full(5, 2.5)
y_exact = nlls.predict_answers(a_eq, b_mid, corners160, prices160, "exact", coords="corner")
y_paper = nlls.predict_answers(a_eq, b_mid, corners160, prices160, "paper", coords="corner")
print(f"equal weights, b = 2.5: |exact - paper| mean {np.abs(y_exact - y_paper).mean():.3f}, "
      f"max {np.abs(y_exact - y_paper).max():.3f} (answer units)")
print(f"p . q_o: exact {np.unique((prices160 * y_exact).sum(1).round(9))}, "
      f"paper {np.unique((prices160 * y_paper).sum(1).round(9))} (budget 12)")

# %% [markdown]
# ## Which models (Table 1, Section 3.1)
#
# The paper fits the 7 models that pass the random-choice rationality test at 5 %. With few local
# models the default here fits **all** models and marks those passing (`only_passing = True` restricts
# the fit to them, as in the paper). Table 1 is recomputed with `moralkit.psm.rationality.table1`.

# %%
table1 = None
if ready:
    table1 = make_table1(datasets, n_datasets=n_null, seed=seed, n_jobs=n_jobs)
    show(table1[["provider", "model", "label", "alpha", "n_obs"]].rename(columns=TABLE1_HEADERS),
         caption="Table 1, recomputed: which models pass")
    if quick:
        print(f"(quick mode: Table 1 from {n_null} random datasets per model)")
    passing = [] if table1 is None else table1.loc[table1["alpha"] <= 0.05, "model"].tolist()
    print(f"passing at 5 %: {passing or 'none'}")
    models = [m for m in datasets if m in passing] if only_passing else list(datasets)
    if only_passing and not models:
        print("no model passes at 5 %: fitting all models instead (only_passing ignored)")
        models = list(datasets)
    print(f"fitting {len(models)} model(s): {models}")

# %% [markdown]
# ## Non-linear least squares (eq. (11))
#
# $$\min_{\{a_s, b_s\}} \sum_{r\in\mathcal R^m}\sum_{z\in\mathcal S}\left(q^r_{z,o^r} - \hat q^r_{z,o^r}\right)^2 \qquad (11)$$
#
# with residuals in each round's corner coordinates (the same sum of squares as in raw answers: the
# corner map is an isometry per coordinate). Unanswered rounds are left out. The weights are
# $\mathbf a = \operatorname{softmax}(0, \eta_1,\dots,\eta_4)$, so $a_s>0$ and $\sum_s a_s=1$ without
# clipping; $\mathbf b$ is free. `scipy.optimize.least_squares` runs from `n_starts` seeded starts
# (the first: equal weights, $\mathbf b = 2.5$). Uncertainty: delta-method standard errors clustered by
# round (statsmodels), and percentile intervals from a bootstrap over rounds (`n_boot` replicates,
# seeded per model; identical for any `n_jobs`).

# %%
if ready:
    fits = nlls.fit_models({m: datasets[m] for m in models}, form=form, n_starts=n_starts, seed=seed,
                           n_boot=n_boot, n_jobs=n_jobs, errors="warn")
    conv = nlls.convergence_table(fits)
    show(conv[nlls.CONVERGENCE_COLUMNS].round(4).rename(index=short_label, columns=lambda c: c.replace("_", " ")).T,
         fit=True, caption="Convergence of every fit, one column per model (short labels: see the legend below "
                           "Table 2)")
    notes = nlls.convergence_notes(conv)  # fits not converged, or at a boundary or flat optimum
    print(*notes, sep="\n", end="\n" if notes else "")
    ready = len(fits) > 0

# %% [markdown]
# ## Table 2: utility parameters
#
# Panel (a): ideal answers $b_s$; panel (b): weights $a_s$ ($\sum_s a_s = 1$). The paper reports, for its
# 7 models, $b_s$ between 2.2 and 3.06 and balanced weights (0.14–0.25). Delta-method standard errors
# are in the `s.e.` columns; the CSV files also hold the bootstrap interval bounds.

# %%
if ready:
    t2a, t2b = nlls.table2(fits, uncertainty="se", table1=table1)
    ci_a, ci_b = nlls.table2(fits, uncertainty="ci" if n_boot else None, table1=table1)
    show(nlls.table2_view(t2a).rename(index=short_label), "03_table2a",
         full=pd.concat([t2a, ci_a.filter(regex="low|high")], axis=1),
         caption="This run: (a) Parameters b_1 to b_5, standard errors in brackets (rows: short labels, see the legend)")
    show(nlls.table2_view(t2b).rename(index=short_label), "03_table2b",
         full=pd.concat([t2b, ci_b.filter(regex="low|high")], axis=1),
         caption="This run: (b) Parameters a_1 to a_5")
    show(legend(t2a.index).set_index("short"), caption="Legend: short label → respondent")
pub2 = reference.published_table2()
show(pub2["b"], caption="published (Seror 2025, Table 2): (a) Parameters b_1 to b_5")
show(pub2["a"], caption="published (Seror 2025, Table 2): (b) Parameters a_1 to a_5")

# %% [markdown]
# ## Figure 1: utility parameters
#
# Panel (a): weights $a^m_s$; panel (b): ideal answers $b^m_s$; one line per model across the five
# dimensions, with bootstrap 95 % percentile intervals (delta-method intervals when `n_boot = 0`).
# Then the published Table 2 drawn by the same function (point estimates only: the paper prints no
# standard errors).

# %%
if ready:
    fig1 = nlls.plot_parameters(fits)
    save(fig1, "03_fig1_parameters")
    plt.show()
fig1p = nlls.plot_parameters(nlls.published_fits(pub2), title="published (Seror 2025, Table 2)")
save(fig1p, "03_fig1_published")
plt.show()

# %% [markdown]
# ## Figure 2: unconstrained answer minus ideal answer
#
# For each dimension $s$ and model $m$, $q^{0,m}_s - b^m_s$: the round-0 answer given without any
# constraint, minus the ideal answer revealed by the constrained rounds. Negative values mean the model
# *under-reports* agreement when asked directly (the paper finds this for Consent, Autonomy and Machine).

# %%
if ready:
    ax2 = nlls.plot_q0_minus_b(fits)
    save(ax2.figure, "03_fig2_q0_minus_b")
    plt.show()
    d = pd.DataFrame({m: f.q0 - f.b for m, f in fits.items() if f.q0 is not None},
                     index=[c.split(" ")[1].strip("()") for c in t2a.columns[:5]]).T
    show(d.round(2), caption="Figure 2's bars: q0 - b per model and statement")

# %% [markdown]
# ## How much the form of the predicted answer matters
#
# The same models fitted with the other form; `difference` is paper − exact. Different estimates (and
# residual sums of squares) show how much Table 2 depends on the printed eqs. (9)–(10) not being the
# maximiser of (7)–(8).

# %%
if ready:
    fits_other = nlls.fit_models({m: datasets[m] for m in fits}, form=other_form, n_starts=n_starts,
                                 seed=seed, n_boot=0, errors="warn")
    by_form = {form: fits, other_form: fits_other}
    cmp = nlls.compare_forms(by_form["exact"], by_form["paper"])
    summ = cmp.assign(abs_diff=cmp["difference"].abs()).groupby(
        ["model", cmp["parameter"].str[0]])["abs_diff"].agg(["mean", "max"]).unstack()
    show(summ.round(3), "03_paper_vs_exact", full=cmp, caption="|paper - exact| per model and parameter")
    ssr = cmp.groupby("model")[["ssr_exact", "ssr_paper"]].first()
    show(ssr.round(2), caption="Residual sum of squares of each form")
    print(f"mean |paper - exact|: b {cmp.loc[cmp.parameter.str[0] == 'b', 'difference'].abs().mean():.3f}, "
          f"a {cmp.loc[cmp.parameter.str[0] == 'a', 'difference'].abs().mean():.3f}")
