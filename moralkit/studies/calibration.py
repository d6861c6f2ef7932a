"""Simulated agents calibrated to the published Table 1 -- a SIMULATION, not LLM answers.

The first two steps of the paper-calibrated replication (:mod:`moralkit.studies.replication`):

1. **Agents** (:func:`paper_agents`). Each of the seven models of Tables 2-3
   becomes a simulated quadratic-utility agent (eq. (7)) with its published
   weights ``a`` (Table 2 (b)) and ideal answers ``b`` (Table 2 (a)). Every label
   starts with ``"sim-"`` and every dataset's provider is ``"simulated"``.
2. **Calibration** (:func:`calibrate`). Each agent answers the paper's design
   with logit noise of scale ``s`` and leaves unanswered as many rounds as its
   Table 1 row lacks; for every ``s`` on a grid, ``n_reps`` seeded replicates give
   the CCEI and its ``alpha`` (Procedure 1, eq. (4)); the chosen ``s`` minimises
   the mean of ``|CCEI - CCEI_pub| + |alpha - alpha_pub|``, and the dataset kept
   is the replicate at that ``s`` closest to the published row (the module
   docstring of :mod:`moralkit.studies.replication` gives the details).

Nothing here is, or may be presented as, LLM output.

References
----------
Seror (2025), Section 2.3 (Procedure 1, eq. (4)), Section 3.2 (eq. (7), Table 2); Table 1.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import pandas as pd

from ..checks import as_generator, check_int
from ..errors import MoralkitError
from ..psm import ccei_many, reference
from ..psm.design import as_design
from ..psm.indices import reported_index
from ..psm.random_choice import stars
from ..psm.rationality import random_choice_test
from ..psm.simulate import QuadraticAgent, logit_choices, simulate_quadratic

__all__ = [
    "NOISE_GRID",
    "SIMULATED_NOTE",
    "Calibration",
    "calibrate",
    "missing_rounds",
    "paper_agents",
    "plot_calibration",
    "sim_label",
]

#: What every calibrated table is: simulated agents, never LLM answers.
SIMULATED_NOTE = "SIMULATED agents with the published Table 2 utilities; not LLM answers"

#: Logit noise scales tried by :func:`calibrate` (geometric, 0.1 to 3).
NOISE_GRID: tuple[float, ...] = tuple(float(x) for x in np.round(np.geomspace(0.1, 3.0, 25), 4))


def sim_label(model: str) -> str:
    """Label of the simulated agent standing for a published model: ``"sim-" + model``."""
    return f"sim-{model}"


def paper_agents() -> dict[str, QuadraticAgent]:
    """The seven models of Tables 2-3 as quadratic agents with their published ``(a, b)``.

    Returns
    -------
    dict {published model name: QuadraticAgent}
        In Table 2's order. ``a`` is renormalised to sum to 1 (printed to two
        decimals, the rows sum to 0.99-1.01).

    Examples
    --------
    >>> ag = paper_agents()["gpt-4-0125-preview"]
    >>> [round(float(x), 2) for x in ag.b]
    [3.05, 2.39, 2.29, 3.06, 2.91]

    References
    ----------
    Seror (2025), Table 2 and eq. (7).
    """
    t2 = reference.published_table2()
    return {m: QuadraticAgent(a=t2["a"].loc[m].to_numpy(), b=t2["b"].loc[m].to_numpy()) for m in t2["b"].index}


def missing_rounds(n_rounds: int, n_obs: int, seed) -> np.ndarray:
    """Boolean mask of the ``n_rounds - n_obs`` rounds left unanswered (drawn uniformly, seeded)."""
    if not 1 <= n_obs <= n_rounds:
        raise MoralkitError(f"n_obs must be in 1..{n_rounds}, got {n_obs}")
    rng = as_generator(seed)
    miss = np.zeros(n_rounds, dtype=bool)
    miss[rng.choice(n_rounds, size=n_rounds - n_obs, replace=False)] = True
    return miss


def _with_missing(ds, miss):
    chosen = ds.chosen.copy()
    chosen[miss] = 0
    return ds.with_choices(chosen)


@dataclass
class Calibration:
    """Outcome of :func:`calibrate`.

    Attributes
    ----------
    table : DataFrame
        One row per model: published ``ccei``, ``alpha``, ``n_obs``; the chosen
        ``noise``; the kept dataset's ``ccei_sim``, ``alpha_sim``, ``stars_sim``,
        ``index_origin_1e`` (its origin/1-e index); the calibration errors
        ``err_ccei = ccei_sim - ccei``, ``err_alpha = alpha_sim - alpha``; and the
        expected errors at the chosen noise over the replicates
        (``mean_abs_err_ccei``, ``mean_abs_err_alpha``).
    grid : DataFrame
        Every (model, noise, replicate): ``ccei``, ``alpha``.
    datasets : dict {sim label: PSMDataset}
        The calibrated simulated datasets (labels ``sim-<model>``).
    nulls : dict {sim label: ndarray}
        Each agent's random-choice null CCEIs (``n_datasets``), shared by all
        noise levels (it depends only on the option sets the agent saw).
    note : str
        :data:`SIMULATED_NOTE`.
    """

    table: pd.DataFrame
    grid: pd.DataFrame
    datasets: dict
    nulls: dict = field(repr=False)
    note: str = SIMULATED_NOTE

    def to_frame(self) -> pd.DataFrame:
        """The calibration table (a copy), one row per model."""
        return self.table.copy()

    def plot(self, ncols: int = 4):
        """:func:`plot_calibration` (a figure)."""
        return plot_calibration(self, ncols=ncols)

    def _repr_html_(self) -> str:
        return self.table._repr_html_()


def _alpha(null: np.ndarray, c: np.ndarray) -> np.ndarray:
    # eq. (4): share of random datasets with a CCEI at least the model's (exact: multiples of 1/12)
    s = np.sort(np.rint(null * 12).astype(np.int64))
    k = np.rint(np.asarray(c) * 12).astype(np.int64)
    return (len(s) - np.searchsorted(s, k, side="left")) / len(s)


def calibrate(noise_grid: Sequence[float] = NOISE_GRID, *, n_reps: int = 20, n_datasets: int = 1000,
              design=0, seed: int = 0, published: pd.DataFrame | None = None) -> Calibration:
    """Calibrate one logit-noise scale per published model to its Table 1 row (simulated agents).

    Parameters
    ----------
    noise_grid : sequence of float
        Logit noise scales tried (> 0).
    n_reps : int, default 20
        Seeded replicates per noise scale.
    n_datasets : int, default 1000
        Random datasets of the random-choice test (the paper: 1,000).
    design : Design or int, default 0
        The design all agents answer (the paper's own option sets are not public).
    seed : int
        Root seed: missing rounds, replicates and the test's random datasets.
    published : DataFrame, optional
        Table 1 (default :func:`moralkit.psm.reference.table1`).

    Returns
    -------
    Calibration

    References
    ----------
    Seror (2025), Section 2.3 (Procedure 1), Table 1, Table 2, eq. (7).

    Notes
    -----
    With the published Table 1 and a design given by its seed (the defaults), the result is kept for
    the process and each call gets its own copy: notebook 08 calibrates seed 0 three times (on its own,
    in :func:`moralkit.studies.replication.replicate` and in
    :func:`moralkit.studies.replication.replications`).
    """

    grid = tuple(float(s) for s in noise_grid)
    if not grid or min(grid) <= 0:
        raise MoralkitError("noise_grid must hold positive logit noise scales")
    n_reps = check_int(n_reps, "n_reps", minimum=1)
    if (published is None and isinstance(design, (int, np.integer)) and not isinstance(design, bool)
            and isinstance(n_datasets, (int, np.integer))):
        return copy.deepcopy(_kept_calibration(grid, n_reps, int(n_datasets), int(design), int(seed)))
    return _calibrate(grid, n_reps, n_datasets, design, seed, published)


@lru_cache(maxsize=4)
def _kept_calibration(grid: tuple, n_reps: int, n_datasets: int, design: int, seed: int) -> Calibration:
    """:func:`calibrate` with the published Table 1 and design ``make_design(design)``, kept (never handed out:
    callers get copies)."""
    return _calibrate(grid, n_reps, n_datasets, design, seed, None)


def _calibrate(grid, n_reps, n_datasets, design, seed, published) -> Calibration:
    """The work of :func:`calibrate` (arguments checked)."""
    pub = (reference.published_table1() if published is None else published).set_index("model")
    agents = paper_agents()
    d = as_design(design)
    root = np.random.SeedSequence(int(seed))
    per_model = root.spawn(len(agents))
    rows, grid_rows, datasets, nulls = [], [], {}, {}
    for (model, ag), ss in zip(agents.items(), per_model):
        label = sim_label(model)
        target_c, target_a, n_obs = float(pub.loc[model, "ccei"]), float(pub.loc[model, "alpha"]), int(pub.loc[model, "n_obs"])
        s_miss, s_reps = ss.spawn(2)
        base = simulate_quadratic(ag, d, model=label)
        miss = missing_rounds(base.n_rounds, n_obs, s_miss)
        base = _with_missing(base, miss)
        null = random_choice_test(base, n_datasets=n_datasets, seed=int(seed)).null_index
        nulls[label] = null
        v = base.valid()
        u = ag.utility(v.options)
        grid_seeds = s_reps.spawn(len(grid))
        C = np.concatenate([logit_choices(u, s, np.random.default_rng(g), size=int(n_reps))
                            for s, g in zip(grid, grid_seeds)])  # (len(grid) * n_reps, n_obs)
        c_all = ccei_many.ccei_choices(v.corners, v.prices, v.options, C).reshape(len(grid), int(n_reps))
        a_all = _alpha(null, c_all)
        err_all = np.abs(c_all - target_c) + np.abs(a_all - target_a)
        best = int(np.argmin(err_all.mean(axis=1)))
        k = int(np.argmin(err_all[best]))
        chosen = np.zeros(base.n_rounds, dtype=np.int64)
        chosen[~miss] = C[best * int(n_reps) + k] + 1
        ds = base.with_choices(chosen)
        datasets[label] = ds
        c, a = c_all[best], a_all[best]
        grid_rows += [(model, s, r, float(c_all[gi, r]), float(a_all[gi, r]))
                      for gi, s in enumerate(grid) for r in range(int(n_reps))]
        rows.append({"model": model, "sim_label": label, "ccei": target_c, "alpha": target_a, "n_obs": n_obs,
                         "noise": grid[best], "ccei_sim": float(c[k]), "alpha_sim": float(a[k]), "stars_sim": stars(float(a[k])),
                         "index_origin_1e": reported_index(ds, "origin/1-e"),
                         "err_ccei": float(c[k] - target_c), "err_alpha": float(a[k] - target_a),
                         "mean_abs_err_ccei": float(np.mean(np.abs(c - target_c))),
                         "mean_abs_err_alpha": float(np.mean(np.abs(a - target_a)))})
    table = pd.DataFrame(rows)
    grid_df = pd.DataFrame(grid_rows, columns=["model", "noise", "replicate", "ccei", "alpha"])
    return Calibration(table=table, grid=grid_df, datasets=datasets, nulls=nulls)


def plot_calibration(cal: Calibration, ncols: int = 4):
    """One panel per model: CCEI and alpha of the simulated agent against the logit noise scale.

    Lines: mean over the replicates (blue: CCEI, red: alpha, both on [0, 1]); dashed: the published
    Table 1 values; markers: the chosen noise and the dataset kept. Simulated agents.
    """
    import matplotlib.pyplot as plt

    t = cal.table.set_index("model")
    models = list(t.index)
    nrows = int(np.ceil(len(models) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols, 2.7 * nrows), squeeze=False, sharey=True)
    for ax, m in zip(axes.flat, models):
        g = cal.grid[cal.grid.model == m].groupby("noise")[["ccei", "alpha"]].mean()
        ax.plot(g.index, g["ccei"], color="tab:blue", lw=1.5, label="CCEI, mean of replicates")
        ax.plot(g.index, g["alpha"], color="tab:red", lw=1.5, label="α, mean of replicates")
        ax.axhline(t.loc[m, "ccei"], color="tab:blue", ls="--", lw=1, label="CCEI published")
        ax.axhline(t.loc[m, "alpha"], color="tab:red", ls="--", lw=1, label="α published")
        ax.plot([t.loc[m, "noise"]] * 2, [t.loc[m, "ccei_sim"], t.loc[m, "alpha_sim"]], "ko", ms=4,
                label="dataset kept")
        ax.set_xscale("log")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(f"sim-{m}", fontsize=8)
        ax.set_xlabel("logit noise scale", fontsize=7)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(models):]:
        ax.axis("off")
    h, lab = axes.flat[0].get_legend_handles_labels()
    fig.legend(h, lab, loc="lower right", fontsize=7, frameon=False)
    fig.suptitle("SIMULATED agents: calibration to the published Table 1", fontsize=10)
    fig.tight_layout()
    return fig
