"""Table 2, the comparison of the two forms, and Figures 1-2 of the NLLS fits.

Entry points: :func:`table2`, :func:`compare_forms`, :func:`plot_parameters` (Figure 1),
:func:`plot_q0_minus_b` (Figure 2). They take :class:`~moralkit.psm.nlls.fit.UtilityFit`
results.

References
----------
Seror (2025), Section 3.2, Table 2, Figures 1-2.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd

from ...errors import MoralkitError
from ..design import DIMENSIONS
from .result import UtilityFit

__all__ = ["table2", "table2_view", "compare_forms", "plot_parameters", "plot_q0_minus_b", "published_fits",
           "convergence_table", "convergence_notes", "CONVERGENCE_COLUMNS"]


# --------------------------------------------------------------------------- tables


def table2_view(panel: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """A panel of :func:`table2` as a page shows it: one column per statement, headed by its name, each cell
    the estimate with its standard error in brackets (``"2.675 (0.140)"``), as regression tables print them.

    Columns without a ``s.e.`` partner keep the estimate alone; the other columns (fit diagnostics) are left to
    the CSV.

    Examples
    --------
    >>> panel = pd.DataFrame({"b_1 (Truth)": [2.6749], "s.e. b_1": [0.1402], "form": ["exact"]}, index=["m"])
    >>> table2_view(panel)
               Truth
    m  2.675 (0.140)
    """
    out = {}
    for col in panel.columns:
        m = re.fullmatch(r"([ab]_\d) \((.+)\)", str(col))
        if not m:
            continue
        se = panel.get(f"s.e. {m.group(1)}")
        out[m.group(2)] = [f"{v:.{digits}f}" + ("" if se is None or pd.isna(s) else f" ({s:.{digits}f})")
                           for v, s in zip(panel[col], se if se is not None else [None] * len(panel))]
    return pd.DataFrame(out, index=panel.index)


def _as_fits(results) -> list[UtilityFit]:
    if isinstance(results, UtilityFit):
        return [results]
    fits = list(results.values()) if isinstance(results, dict) else list(results)
    if not fits:
        raise MoralkitError("no fitted model: nothing to tabulate (fit_models returned no result)")
    if not all(isinstance(f, UtilityFit) for f in fits):
        raise MoralkitError("expected UtilityFit results (from fit_utility or fit_models)")
    return fits


def table2(results, uncertainty: str | None = None, table1: pd.DataFrame | None = None,
           level: float = 0.05) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Table 2: panel (a) the ideal answers b, panel (b) the weights a, one row per model.

    Parameters
    ----------
    results : dict {model: UtilityFit} or iterable of UtilityFit
    uncertainty : {None, "se", "ci"}
        Add delta-method standard errors (``"s.e. b_1"``...) or bootstrap
        interval bounds (``"b_1 low"``, ``"b_1 high"``...) after the estimates.
    table1 : DataFrame, optional
        Table 1 from :func:`moralkit.psm.rationality.table1`: adds the columns
        ``CCEI`` (label with stars) and ``passes`` (H0 rejected at ``level``).
    level : float, default 0.05

    Returns
    -------
    (panel_a, panel_b) : DataFrames indexed by ``Model``, columns
        ``b_1 (Truth)`` ... ``b_5 (Autonomy)`` and ``a_1 (Truth)`` ...
        ``a_5 (Autonomy)`` as in the paper, then ``form``, ``n_obs``, ``ssr``
        and ``converged``.

    Raises
    ------
    ValueError
        No results, non-finite estimates, or ``uncertainty="ci"`` for a fit
        without bootstrap.

    References
    ----------
    Seror (2025), Section 3.2, Table 2.
    """
    if uncertainty not in (None, "se", "ci"):
        raise MoralkitError(f"uncertainty must be None, 'se' or 'ci', got {uncertainty!r}")
    fits = _as_fits(results)
    bad = [f.model for f in fits if not (np.isfinite(f.a).all() and np.isfinite(f.b).all())]
    if bad:
        raise MoralkitError(f"non-finite estimates for {bad}; refit them")
    if uncertainty == "ci":
        nob = [f.model for f in fits if f.ci_a is None]
        if nob:
            raise MoralkitError(f"no bootstrap intervals for {nob}: fit with n_boot > 0 or use uncertainty='se'")
    if uncertainty == "se":
        nan = [f.model for f in fits if not (np.isfinite(f.se_a).all() and np.isfinite(f.se_b).all())]
        if nan:
            warnings.warn(f"delta-method standard errors are not finite for {nan} (shown as NaN)", stacklevel=2)
    passes = {}
    if table1 is not None:
        from ..random_choice import RandomChoiceResult, Table1

        res1, frame = (table1.results, table1.to_frame()) if isinstance(table1, Table1) else ({}, table1)
        for _, row in frame.iterrows():
            r = res1.get(row["model"])
            ok = r.rejects(level) if isinstance(r, RandomChoiceResult) else bool(row["alpha"] <= level)
            passes[row["model"]] = (row["label"], ok)

    panels = []
    for name, est_of, se_of, ci_of in (("b", lambda f: f.b, lambda f: f.se_b, lambda f: f.ci_b),
                                       ("a", lambda f: f.a, lambda f: f.se_a, lambda f: f.ci_a)):
        rows = []
        for f in fits:
            row = {"Model": f.model}
            for s, dim in enumerate(DIMENSIONS):
                row[f"{name}_{s + 1} ({dim})"] = float(est_of(f)[s])
            if uncertainty == "se":
                for s in range(5):
                    row[f"s.e. {name}_{s + 1}"] = float(se_of(f)[s])
            elif uncertainty == "ci":
                for s in range(5):
                    row[f"{name}_{s + 1} low"] = float(ci_of(f)[s, 0])
                    row[f"{name}_{s + 1} high"] = float(ci_of(f)[s, 1])
            row.update(form=f.form, n_obs=f.n_obs, ssr=f.ssr, converged=f.converged)
            if table1 is not None:
                lab, ok = passes.get(f.model, ("", False))
                row.update(CCEI=lab, passes=ok)
            rows.append(row)
        panels.append(pd.DataFrame(rows).set_index("Model"))
    return panels[0], panels[1]


def compare_forms(exact, paper) -> pd.DataFrame:
    """Estimates under the exact and the printed (paper) predicted answer, side by side.

    Parameters
    ----------
    exact, paper : dict {model: UtilityFit}
        Fits of the same models with ``form="exact"`` and ``form="paper"``.

    Returns
    -------
    DataFrame
        One row per (model, parameter): ``exact``, ``paper``, ``difference``
        (paper - exact), and each fit's residual sum of squares.

    References
    ----------
    Seror (2025), Section 3.2, eqs. (8)-(10).
    """
    ex, pa = {f.model: f for f in _as_fits(exact)}, {f.model: f for f in _as_fits(paper)}
    if any(f.form != "exact" for f in ex.values()) or any(f.form != "paper" for f in pa.values()):
        raise MoralkitError("compare_forms(exact, paper): pass the form='exact' fits first, then the form='paper' fits")
    rows = []
    for m in ex:
        if m not in pa:
            continue
        for name in ("a", "b"):
            for s, dim in enumerate(DIMENSIONS):
                e_, p_ = float(getattr(ex[m], name)[s]), float(getattr(pa[m], name)[s])
                rows.append(dict(model=m, parameter=f"{name}_{s + 1}", dimension=dim, exact=e_, paper=p_,
                                 difference=p_ - e_, ssr_exact=ex[m].ssr, ssr_paper=pa[m].ssr))
    if not rows:
        raise MoralkitError("no model was fitted under both forms")
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- figures


def _intervals(f: UtilityFit, name: str, interval: str):
    est = getattr(f, name)
    if interval == "ci" and getattr(f, f"ci_{name}") is not None:
        ci = getattr(f, f"ci_{name}")
        return np.vstack([est - ci[:, 0], ci[:, 1] - est]).clip(min=0)
    if interval in ("ci", "se"):
        from scipy.stats import norm

        z = norm.ppf(0.5 + f.level / 2)
        se = getattr(f, f"se_{name}")
        if not np.isfinite(se).all():
            return None  # boundary solution without bootstrap: no interval (said in the legend)
        return np.vstack([z * se, z * se])
    return None


def published_fits(table2: dict | None = None) -> list[UtilityFit]:
    """The published Table 2 as :class:`UtilityFit` objects (``form="published"``), for the plotting functions.

    Only ``model``, ``a`` and ``b`` carry information; every fit statistic is NaN or 0, so
    :func:`plot_parameters` draws them without intervals.

    Parameters
    ----------
    table2 : dict {"a": DataFrame, "b": DataFrame}, optional
        Default :func:`moralkit.psm.reference.published_table2` (Seror 2025, Table 2).

    Examples
    --------
    >>> [f.model for f in published_fits()][:2]
    ['gpt-4-0125-preview', 'claude-3-sonnet-20240229']

    References
    ----------
    Seror (2025), Table 2 and Figure 1.
    """
    if table2 is None:
        from ..reference import published_table2

        table2 = published_table2()
    nan5 = np.full(5, np.nan)
    return [UtilityFit(model=str(m), form="published", a=table2["a"].loc[m].to_numpy(dtype=float),
                       b=table2["b"].loc[m].to_numpy(dtype=float), se_a=nan5, se_b=nan5,
                       cov=np.full((10, 10), np.nan), ssr=np.nan, n_obs=0, n_excluded=0, n_starts=0, n_agree=0,
                       status=0, message="published", optimality=np.nan, converged=True, regular=False,
                       cov_type="none", seed=0) for m in table2["b"].index]


def plot_parameters(results, interval: str = "ci", figsize=None, title: str | None = None):
    """Figure 1: the weights a (panel a) and ideal answers b (panel b) across the five dimensions.

    One line per model, with error bars: bootstrap percentile intervals when
    available (``interval="ci"``), else normal intervals from the delta-method
    standard errors at the fit's ``level``; ``interval=None`` draws none.
    ``results`` may be :func:`published_fits` (the paper's Table 2; drawn
    without intervals). ``title`` replaces the default figure title.

    Returns
    -------
    matplotlib.figure.Figure

    References
    ----------
    Seror (2025), Figure 1 and Table 2.
    """
    import matplotlib.pyplot as plt

    if interval not in (None, "ci", "se"):
        raise MoralkitError(f"interval must be None, 'ci' or 'se', got {interval!r}")
    fits = _as_fits(results)
    if all(f.form == "published" for f in fits):
        interval = None  # published point estimates: no interval to draw
    fig, axes = plt.subplots(1, 2, figsize=figsize or (11, 4.2))
    x = np.arange(5)
    n = len(fits)
    offs = (np.arange(n) - (n - 1) / 2) * min(0.06, 0.4 / max(n, 1))
    for ax, name, panel_title in ((axes[0], "a", "(a) weights $a_s$ (normalised: $\\Sigma_s\\, a_s = 1$)"),
                                  (axes[1], "b", "(b) ideal answers $b_s$")):
        for i, f in enumerate(fits):
            err = _intervals(f, name, interval) if interval else None
            lab = f.model + (" (no interval: boundary optimum)" if interval and err is None else "")
            ax.errorbar(x + offs[i], getattr(f, name), yerr=err, marker="o", ms=4, lw=1.5, capsize=3,
                        label=lab)
        ax.set_xticks(x, DIMENSIONS)
        ax.set_title(panel_title)
        ax.grid(alpha=0.3)
    axes[0].axhline(0.2, color="0.5", ls=":", lw=1)
    axes[1].axhline(2.5, color="0.5", ls=":", lw=1)
    axes[0].set_ylabel("$a_s$")
    axes[1].set_ylabel("$b_s$ (0-5 scale)")
    lev = f"{100 * fits[0].level:g} %"
    n_ci = sum(f.ci_a is not None for f in fits)
    if interval is None:
        what = "no intervals"
    elif interval == "se" or n_ci == 0:
        what = f"{lev} delta-method intervals"
    elif n_ci == len(fits):
        what = f"{lev} bootstrap percentile intervals"
    else:
        what = f"{lev} bootstrap percentile intervals (delta-method for models without bootstrap)"

    fig.suptitle(title or f"Utility parameters, eq. (7), NLLS form={fits[0].form!r}; {what}", fontsize=10)
    axes[1].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    fig.tight_layout()
    return fig


def plot_q0_minus_b(results, interval: str = "ci", figsize=None, ax=None):
    """Figure 2: unconstrained answer minus ideal answer, ``q0_s - b_s``, per dimension and model.

    Grouped bars (one per model) for each dimension; error bars from the
    uncertainty of ``b`` (``q0`` is observed). Models without a valid round-0
    answer are left out (named in the title). A single panel: drawn on ``ax``
    (default: a new figure of size ``figsize``).

    Returns
    -------
    matplotlib.axes.Axes

    References
    ----------
    Seror (2025), Figure 2.
    """
    import matplotlib.pyplot as plt

    if interval not in (None, "ci", "se"):
        raise MoralkitError(f"interval must be None, 'ci' or 'se', got {interval!r}")
    fits = _as_fits(results)
    have = [f for f in fits if f.q0 is not None]
    skipped = [f.model for f in fits if f.q0 is None]
    if ax is None:
        _, ax = plt.subplots(figsize=figsize or (10, 4.2))
    x = np.arange(5)
    n = max(len(have), 1)
    width = 0.8 / n
    for i, f in enumerate(have):
        d = f.q0 - f.b
        err = _intervals(f, "b", interval) if interval else None
        if err is not None:
            err = err[::-1]  # q0 - b: the upper error of b is the lower error of the difference
        lab = f.model + (" (no interval: boundary optimum)" if interval and err is None else "")
        ax.bar(x - 0.4 + width * (i + 0.5), d, width, yerr=err, capsize=2, label=lab,
               error_kw=dict(lw=0.8))
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(x, DIMENSIONS)
    ax.set_ylabel("$q^0_s - b_s$")
    title = "Unconstrained answer minus ideal answer (Figure 2)"
    if skipped:
        title += f"; no round-0 answer: {', '.join(skipped)}"
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    if have:
        ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    ax.figure.tight_layout()
    return ax


#: The columns of :func:`convergence_table` notebook 03 shows.
CONVERGENCE_COLUMNS = ["form", "converged", "regular", "status", "ssr", "rmse", "optimality", "n_starts", "n_agree",
                       "n_obs", "n_excluded", "n_boot", "n_boot_failed"]


def convergence_table(fits: dict) -> pd.DataFrame:
    """One row per fit (index ``model``): :meth:`UtilityFit.convergence` of each, in the order of ``fits``."""
    return pd.DataFrame([f.convergence() for f in fits.values()]).set_index("model")


def convergence_notes(conv: pd.DataFrame) -> list[str]:
    """The warnings to print under :func:`convergence_table`: the fits that did not converge, and those at a
    boundary or flat optimum (whose delta-method standard errors are undefined; §3.2's bootstrap still holds).

    Examples
    --------
    >>> conv = pd.DataFrame({"converged": [True, False], "regular": [True, True]}, index=["m1", "m2"])
    >>> convergence_notes(conv)
    ["NOT converged (read with care): ['m2']"]
    """
    notes = []
    not_conv = conv.index[~conv["converged"]].tolist()
    if not_conv:
        notes.append(f"NOT converged (read with care): {not_conv}")
    irregular = conv.index[~conv["regular"]].tolist()
    if irregular:
        notes.append(f"boundary or flat optimum, delta-method s.e. undefined (see the bootstrap intervals): {irregular}")
    return notes
