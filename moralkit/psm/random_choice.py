"""What the random-choice rationality test returns: one model's result, Table 1, their plot.

:func:`moralkit.psm.rationality.random_choice_tests` computes a :class:`RandomChoiceResult` per
model and :func:`moralkit.psm.rationality.table1` gathers them in a :class:`Table1` (a result object
in the statsmodels manner: ``to_frame()``, ``plot()``, and the table itself on a notebook page).
:func:`stars` marks the significance levels of Table 1.

References
----------
Seror, A. (2025). *The Moral Mind(s) of Large Language Models*, Section 2.3 (eq. (4),
Procedure 1), Section 3.1 and Table 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import pandas as pd

from ..errors import MoralkitError
from .design import BUDGET

__all__ = [
    "STANDARD_INDEX",
    "SIGNIFICANCE_LEVELS",
    "stars",
    "RandomChoiceResult",
    "Table1",
    "plot_null_distributions",
]

#: Name of the standard index: the CCEI in corner coordinates (Definition 3 as the supremum of e).
STANDARD_INDEX: str = "ccei"

#: Significance levels of Table 1 and their stars.
SIGNIFICANCE_LEVELS: tuple[tuple[float, str], ...] = ((0.01, "***"), (0.05, "**"), (0.10, "*"))


def stars(alpha: float) -> str:
    """Table 1 stars for a p-value ``alpha``: ``***`` if alpha <= 1 %, ``**`` <= 5 %, ``*`` <= 10 %.

    The comparison is weak, as in Procedure 1 ("weakly smaller than alpha").
    Exact for alphas computed as ``count / N``: levels are compared as
    fractions.
    """
    a = Fraction(alpha).limit_denominator(10**9) if not isinstance(alpha, Fraction) else alpha
    for level, s in SIGNIFICANCE_LEVELS:
        if a <= Fraction(level).limit_denominator(1000):
            return s
    return ""


def rejects(n_at_least: int, n_datasets: int, level: float) -> bool:
    """phi_level(D^m) of eq. (4): True when alpha = ``n_at_least / n_datasets`` is at most ``level``, compared
    exactly (as fractions), the weak comparison of Procedure 1 that :func:`stars` also uses."""
    return Fraction(int(n_at_least), int(n_datasets)) <= Fraction(level).limit_denominator(10**6)


@dataclass(frozen=True)
class RandomChoiceResult:
    """Outcome of the random-choice rationality test for one model.

    Attributes
    ----------
    model, provider : str
    index_value : float
        The model's value of the index ``index`` (missing rounds excluded): the CCEI under the
        standard convention, else the index of convention ``index`` (e.g. ``1 - e*`` in origin
        coordinates under ``"origin/1-e"``, which is not a CCEI).
    index_exact : fractions.Fraction
        The same, exactly (a multiple of ``1 / budget`` for the standard CCEI).
    alpha : float
        Share of synthetic datasets whose index is >= the model's (eq. (4)).
    n_at_least : int
        Their number.
    null_index : ndarray (n_datasets,)
        The index of each synthetic dataset (floats; exact multiples of 1/budget for the CCEI).
    n_obs : int
        Number of answered constrained rounds (Table 1, "Number of Obs.").
    n_datasets : int
    seed : int
    budget : int
    index : str
        The index convention (:data:`STANDARD_INDEX` or a :mod:`moralkit.psm.indices` name).
    extra_key : str or None
        Fingerprint of the option sets tested (lets :func:`retest` reuse the null).
    """

    model: str
    provider: str
    index_value: float
    index_exact: Fraction
    alpha: float
    n_at_least: int
    null_index: np.ndarray = field(repr=False)
    n_obs: int
    n_datasets: int
    seed: int
    budget: int = BUDGET
    index: str = STANDARD_INDEX
    extra_key: str | None = field(default=None, repr=False, compare=False)

    @property
    def stars(self) -> str:
        """``***``, ``**``, ``*`` or ``""`` (Table 1)."""
        return stars(Fraction(self.n_at_least, self.n_datasets))

    def rejects(self, level: float) -> bool:
        """phi_level(D^m) of eq. (4): True when H0 is rejected at ``level`` (alpha <= level)."""
        return rejects(self.n_at_least, self.n_datasets, level)


class Table1:
    """Table 1 (Section 3.1): the random-choice test of every model, sorted by alpha.

    Returned by :func:`moralkit.psm.rationality.table1`. On a notebook page it shows as its table.

    Attributes
    ----------
    results : dict {model: RandomChoiceResult}
        Each model's test, in the order the models were given.
    index : str
        The index convention: :data:`STANDARD_INDEX` (the CCEI) or a :mod:`moralkit.psm.indices`
        name such as ``"origin/1-e"``; the ``ccei`` column holds that index.
    hm_results : dict {model: HMTestResult} or None
        The Houtman–Maks tests (``table1(..., hm=True)``).

    Methods
    -------
    to_frame()
        The table: columns ``provider``, ``model``, ``ccei``, ``ccei_exact`` (e.g. ``"5/12"``),
        ``alpha``, ``stars``, ``label`` (``"0.417***"``), ``n_obs`` (and the HM columns).
    plot(**kw)
        :func:`plot_null_distributions` in Table 1 order (a figure).
    passing(level=0.05)
        The models whose test rejects random choice at ``level`` (eq. (4)).

    Column access and the read-only DataFrame methods (``t["alpha"]``, ``t.set_index("model")``,
    ``len(t)``) act on :meth:`to_frame`.
    """

    def __init__(self, frame: pd.DataFrame, results: dict, index: str = STANDARD_INDEX,
                 hm_results: dict | None = None):
        self._frame = frame
        self.results = dict(results)
        self.index = index
        self.hm_results = None if hm_results is None else dict(hm_results)

    def to_frame(self) -> pd.DataFrame:
        """The table as a new DataFrame (sorted by alpha, then the index descending, then model)."""
        return self._frame.copy()

    def passing(self, level: float = 0.05) -> list:
        """Models whose test rejects H0 (random choice) at ``level``, in Table 1 order (eq. (4), weakly)."""
        return [m for m in self._frame["model"] if self.results[m].rejects(level)]

    def plot(self, ncols: int = 4, max_models: int | None = None, figsize=None):
        """Each model's null distribution and its own index (:func:`plot_null_distributions`); a figure."""
        return plot_null_distributions(self, ncols=ncols, max_models=max_models, figsize=figsize)

    def __len__(self) -> int:
        return len(self._frame)

    def __getitem__(self, key):
        return self._frame[key]

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._frame, name)

    def _repr_html_(self) -> str:
        return self._frame._repr_html_()

    def __repr__(self) -> str:
        n_ds = sorted({r.n_datasets for r in self.results.values()})
        hm = ", with the Houtman–Maks index" if self.hm_results is not None else ""
        return (f"<Table1: {len(self._frame)} models, index {self.index!r}, "
                f"{'/'.join(map(str, n_ds)) or 0} random datasets each, {len(self.passing(0.05))} pass at 5 %{hm}>")


def plot_null_distributions(results, ncols: int = 4, max_models: int | None = None, figsize=None):
    """Small multiples: each model's null distribution of synthetic CCEIs and its own CCEI.

    Bars show the share of synthetic datasets at each CCEI value (a multiple of
    1/12); bars at or above the model's CCEI (they make up alpha) are shaded;
    the vertical line is the model's CCEI.

    Parameters
    ----------
    results : Table1, dict {model: RandomChoiceResult} or a list of them
        Plotted in the given order (Table 1 order for a :class:`Table1`).
    ncols : int, default 4
    max_models : int, optional
        Plot only the first ``max_models``.
    figsize : (float, float), optional

    Returns
    -------
    matplotlib.figure.Figure

    References
    ----------
    Seror (2025), Section 2.3 (eq. (4)) and Section 3.1.
    """
    import matplotlib.pyplot as plt

    if isinstance(results, Table1):
        results = [results.results[m] for m in results.to_frame()["model"]]
    elif isinstance(results, pd.DataFrame):
        raise MoralkitError("a DataFrame carries no null distributions; pass the Table1 that table1() returns "
                            "(or its .results)")
    elif isinstance(results, dict):
        results = list(results.values())
    elif isinstance(results, RandomChoiceResult):
        results = [results]
    results = list(results)
    if max_models is not None:
        results = results[:max_models]
    if not results:
        raise MoralkitError("no results to plot")
    n = len(results)
    ncols = max(1, min(ncols, n))
    nrows = math.ceil(n / ncols)
    if figsize is None:
        figsize = (3.0 * ncols, 2.3 * nrows)
    fig, axes = plt.subplots(nrows, ncols, figsize=figsize, squeeze=False)
    for ax, r in zip(axes.flat, results):
        own = float(r.index_value)
        name = "CCEI" if r.index == STANDARD_INDEX else r.index
        if r.index == STANDARD_INDEX:
            levels = np.rint(r.null_index * r.budget).astype(int)
            counts = np.bincount(levels, minlength=r.budget + 1) / len(levels)
            x = np.arange(r.budget + 1) / r.budget
            width = 0.8 / r.budget
        else:  # other conventions: the values are ratios with denominators up to 30
            x, cnt = np.unique(np.round(r.null_index, 9), return_counts=True)
            counts = cnt / len(r.null_index)
            width = 0.8 / 30
        colors = np.where(x >= own - 1e-9, "tab:red", "tab:gray")
        ax.bar(x, counts, width=width, color=colors, alpha=0.8)
        ax.axvline(own, color="k", lw=1.2)
        ax.set_title(f"{r.model}\n{name} {own:.3f}{r.stars}, α = {r.alpha:.3f}", fontsize=8)
        ax.set_xlim(-0.5 / r.budget, 1 + 0.5 / r.budget)
        ax.tick_params(labelsize=7)
        ax.set_xlabel(name, fontsize=7)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("share of random datasets", fontsize=7)
    fig.tight_layout()
    return fig
