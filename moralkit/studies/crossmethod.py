"""Cross-method study: do the PSM similarity network and MoralChoice agreement tell the same story?

The same models answer both surveys. Two pairwise similarity structures are compared:

* **PSM**: the permutation similarity matrix ``G`` (Seror 2025, eq. (6);
  :func:`moralkit.psm.permutation.permutation_study`) -- how often two models fall
  in the same GARP_e-consistent type;
* **MoralChoice**: the Pearson correlation of the models' marginal action
  likelihoods over the high-ambiguity scenarios (Scherrer et al. 2023,
  Section 4.3; :func:`moralkit.moralchoice.agreement_correlations`).

Their agreement is measured by a **Mantel test** (:func:`mantel_test`): the
rank (Spearman) correlation between the upper triangles of the two matrices,
with a permutation p-value obtained by relabelling the models of one matrix.
With ``n`` models there are only ``n!`` relabellings, so the smallest
attainable p-value is ``1/n!``: 1/2 for 2 models (and then a single pair: no
correlation at all), 1/6 for 3, 1/24 ~ 0.042 for 4, 1/120 for 5. **A Mantel
test needs at least 4 models to be able to reach the 5 % level**, and many
more to have useful power; for ``n! <= exact_max`` every relabelling is
enumerated exactly.

References
----------
Seror (2025), Section 2.4 (eq. (6)), Section 3.3, Table 3. Scherrer et al.
(2023), Section 4.3 (agreement), eq. 8 (marginal action likelihood). Mantel,
N. (1967), The detection of disease clustering and a generalized regression
approach, *Cancer Research* 27(2), 209-220.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .. import runs
from ..checks import as_generator, check_choice, check_int
from ..errors import MoralkitError

__all__ = [
    "MantelResult",
    "mantel_test",
    "min_pvalue",
    "match_models",
    "PSMSimilarity",
    "psm_similarity",
    "moralchoice_agreement",
    "CrossMethodResult",
    "cross_method",
    "load_own_runs",
    "cross_method_from_data",
    "underlying_model",
]


@dataclass(frozen=True)
class MantelResult:
    """Outcome of :func:`mantel_test`.

    Attributes
    ----------
    statistic : float
        Correlation between the upper triangles (Spearman by default).
    pvalue : float
        Permutation p-value for the chosen alternative.
    n : int
        Number of objects (models); ``n (n - 1) / 2`` pairs.
    n_permutations : int
        Relabellings used (``n!`` when exact, identity included).
    exact : bool
        Whether every relabelling was enumerated.
    min_pvalue : float
        Smallest p-value attainable with this ``n`` (``1/n!`` exact).
    method, alternative : str
    """

    statistic: float
    pvalue: float
    n: int
    n_permutations: int
    exact: bool
    min_pvalue: float
    method: str = "spearman"
    alternative: str = "greater"
    null: np.ndarray = field(default=None, repr=False)

    def describe(self) -> str:
        """One line: the statistic, the p-value, how it was computed and the smallest attainable p."""
        how = f"exact over {self.n_permutations} relabellings" if self.exact else "Monte Carlo"
        return (f"Mantel ({self.method}): r = {self.statistic:.3f}, p = {self.pvalue:.3f} ({how}; "
                f"smallest attainable p = {self.min_pvalue:.3f})")


def min_pvalue(n: int) -> float:
    """Smallest p-value an exact Mantel test on ``n`` objects can give: ``1/n!``."""
    return 1.0 / math.factorial(check_int(n, "n", minimum=1))


def _as_square(M, name):
    if isinstance(M, pd.DataFrame):
        if list(M.index) != list(M.columns):
            raise MoralkitError(f"{name} must have the same labels on rows and columns")
        arr = M.to_numpy(dtype=float)
    else:
        arr = np.asarray(M, dtype=float)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise MoralkitError(f"{name} must be a square matrix, got shape {arr.shape}")
    if not np.isfinite(arr[np.triu_indices(len(arr), 1)]).all():
        raise MoralkitError(f"{name} has non-finite off-diagonal entries; drop the models concerned")
    if not np.allclose(arr, arr.T, equal_nan=True):
        raise MoralkitError(f"{name} must be symmetric (a similarity or distance matrix)")
    return arr


def _rank_rows(X):
    """Average ranks along the last axis (ties get their mean rank), vectorised."""
    from scipy.stats import rankdata

    return rankdata(X, axis=-1)


def _corr_rows(x, Y):
    """Pearson correlation of vector x with each row of Y."""
    xc = x - x.mean()
    Yc = Y - Y.mean(axis=1, keepdims=True)
    den = np.sqrt((xc ** 2).sum()) * np.sqrt((Yc ** 2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return (Yc @ xc) / den


def mantel_test(A, B, *, method: str = "spearman", alternative: str = "greater", n_permutations: int = 9999,
                exact_max: int = 40320, seed=0) -> MantelResult:
    """Mantel test between two symmetric similarity (or distance) matrices.

    The statistic is the correlation between the upper triangles of ``A`` and
    ``B`` (Spearman rank correlation by default). Its null distribution is
    obtained by applying the same permutation to the rows and columns of
    ``B`` (relabelling the objects), which keeps each matrix's internal
    dependence. When ``n! <= exact_max`` (``n <= 8`` by default) every
    permutation is enumerated and ``p = #{stat_pi >= stat} / n!`` exactly;
    otherwise ``n_permutations`` random ones give
    ``p = (1 + #{stat_pi >= stat}) / (1 + n_permutations)``.

    Parameters
    ----------
    A, B : array_like or DataFrame (n, n)
        Symmetric matrices; DataFrames are aligned on their labels (same set required).
    method : {"spearman", "pearson"}
    alternative : {"greater", "less", "two-sided"}
        "greater": the structures agree (positive association). Use "less"
        when one matrix is a similarity and the other a distance.
    n_permutations : int
        Monte Carlo permutations when not exact.
    exact_max : int
        Enumerate exactly when ``n!`` is at most this.
    seed : int or Generator

    Returns
    -------
    MantelResult

    Raises
    ------
    ValueError
        Fewer than 3 objects (one pair has no correlation), shapes or labels
        that differ, asymmetric or non-finite matrices, or constant upper
        triangles.

    References
    ----------
    Mantel (1967); Legendre & Legendre (2012), *Numerical Ecology*, Section 10.5.1.

    Examples
    --------
    >>> import numpy as np
    >>> A = np.abs(np.subtract.outer(np.arange(4.0), np.arange(4.0)))  # distances on a line
    >>> res = mantel_test(A, A ** 2)  # a monotone transform: Spearman 1
    >>> round(res.statistic, 12), res.pvalue, res.exact  # exact: 4! relabellings, p >= 2/24
    (1.0, 0.08333333333333333, True)
    """
    check_choice(method, ("spearman", "pearson"), "method")
    check_choice(alternative, ("greater", "less", "two-sided"), "alternative")
    a, b = _mantel_matrices(A, B)
    n = len(a)
    exact = math.factorial(n) <= int(exact_max)
    perms = _relabellings(n, exact, n_permutations, seed)
    obs, null = _mantel_null(a, b, perms, method)
    tol = 1e-12
    if alternative == "greater":
        hits = null >= obs - tol
    elif alternative == "less":
        hits = null <= obs + tol
    else:
        hits = np.abs(null) >= abs(obs) - tol
    k = int(np.nansum(hits))
    if exact:
        p = k / len(perms)
        pmin = 1.0 / len(perms)
    else:
        p = (1 + k) / (1 + len(perms))
        pmin = 1.0 / (1 + len(perms))
    return MantelResult(statistic=obs, pvalue=float(p), n=n, n_permutations=len(perms), exact=exact,
                        min_pvalue=pmin, method=method, alternative=alternative, null=null)


def _mantel_matrices(A, B):
    """``A`` and ``B`` of :func:`mantel_test` as square float arrays in the same order of objects, checked
    (DataFrames aligned on their labels; same shape, at least 3 objects, non-constant upper triangles)."""
    if isinstance(A, pd.DataFrame) and isinstance(B, pd.DataFrame):
        if set(A.index) != set(B.index):
            raise MoralkitError(f"A and B must describe the same objects; got {sorted(A.index)} and {sorted(B.index)}")
        B = B.loc[list(A.index), list(A.index)]
    a, b = _as_square(A, "A"), _as_square(B, "B")
    if a.shape != b.shape:
        raise MoralkitError(f"A and B must have the same shape, got {a.shape} and {b.shape}")
    n = len(a)
    if n < 3:
        raise MoralkitError(f"a Mantel test needs at least 3 objects (got {n}): with 2 there is a single pair and "
                            "no correlation; at least 4 are needed to reach p <= 0.05 (minimum p = 1/n!)")
    iu = np.triu_indices(n, 1)
    if np.ptp(a[iu]) == 0 or np.ptp(b[iu]) == 0:
        raise MoralkitError("an upper triangle is constant: the correlation is undefined")
    return a, b


def _relabellings(n: int, exact: bool, n_permutations: int, seed) -> np.ndarray:
    """The relabellings of :func:`mantel_test`, one per row: all ``n!`` when ``exact``, else
    ``n_permutations`` random ones drawn from ``seed``."""
    if exact:
        return np.array(list(itertools.permutations(range(n))), dtype=np.int64)
    rng = as_generator(seed)
    return np.array([rng.permutation(n) for _ in range(int(n_permutations))], dtype=np.int64)


def _mantel_null(a, b, perms, method: str):
    """``(observed, null)``: the correlation of the upper triangles of ``a`` and ``b``, and its value under
    each relabelling of ``b`` (rows of ``perms``)."""
    iu = np.triu_indices(len(a), 1)
    x = a[iu]
    # permuted upper triangles of B: b[p[i], p[j]] for (i, j) in iu. A relabelling permutes the entries
    # of the triangle, so it permutes their (average) ranks too: rank once, then permute the ranks.
    if method == "spearman":
        rb = np.zeros_like(b, dtype=float)
        rb[iu] = _rank_rows(b[iu][None])[0]
        rb = rb + rb.T
        x_, Y_ = _rank_rows(x[None])[0], rb[perms[:, iu[0]], perms[:, iu[1]]]
    else:
        x_, Y_ = x, b[perms[:, iu[0]], perms[:, iu[1]]]
    obs = float(_corr_rows(x_, (_rank_rows(b[iu][None]) if method == "spearman" else b[iu][None]))[0])
    return obs, _corr_rows(x_, Y_)


# --------------------------------------------------------------------------- the two structures


def match_models(psm_models, mc_models, name_map: dict | None = None) -> dict:
    """Pair PSM model labels with MoralChoice model ids.

    Both collectors write the respondent's label (the PSM export's ``model``, the MoralChoice
    export's ``model_id``), so a model pairs with the id equal to its label. ``name_map``
    ({psm label: MoralChoice id}) pairs models whose names differ, e.g. the shared response
    files' ``"langchain/openai/gpt-4o-mini"``. Returns {psm label: MoralChoice id} for the
    models found in both.

    Examples
    --------
    >>> match_models(["qwen-0.5b", "qwen-1.5b", "sim-1"], ["qwen-0.5b", "qwen-1.5b", "langchain/openai/gpt-4o"])
    {'qwen-0.5b': 'qwen-0.5b', 'qwen-1.5b': 'qwen-1.5b'}
    >>> match_models(["gpt-4o"], ["langchain/openai/gpt-4o"], name_map={"gpt-4o": "langchain/openai/gpt-4o"})
    {'gpt-4o': 'langchain/openai/gpt-4o'}
    """
    mc = list(mc_models)
    out = {}
    for p in psm_models:
        if name_map and p in name_map:
            if name_map[p] not in mc:
                raise MoralkitError(f"name_map maps {p!r} to {name_map[p]!r}, which has no MoralChoice answers")
            out[p] = name_map[p]
        elif p in mc:
            out[p] = p
    return out


@dataclass
class PSMSimilarity:
    """G of :func:`psm_similarity` and the parameters it was drawn with.

    Attributes
    ----------
    G : DataFrame
        models x models, the share of draws in which two models fall in the same type (eq. (6)).
    e : float
        The efficiency level of the GARP_e partitions.
    T, rho : int
        Draws, and rounds per model and draw (after the cap of :func:`moralkit.psm.permutation.max_rho`).
    """

    G: pd.DataFrame
    e: float
    T: int
    rho: int

    def to_frame(self) -> pd.DataFrame:
        """G (a copy)."""
        return self.G.copy()

    def _repr_html_(self) -> str:
        return f"<p>G (e = {self.e:.4g}, T = {self.T}, ρ = {self.rho})</p>" + self.G._repr_html_()


def psm_similarity(datasets, *, e: float | None = None, T: int = 500, rho: int = 20, seed: int = 0,
                   n_jobs: int = 1, progress: bool = False) -> PSMSimilarity:
    """The PSM permutation similarity matrix G of the given models (eq. (6)), with the e, T and rho it used.

    ``e`` defaults to just below the smallest standard CCEI among the models
    (:func:`moralkit.psm.permutation.e_below_ccei`, the rule of Section 3.3 applied to the
    models compared: the paper applies it to the models passing at 5 %, and with the few
    models of a local collection none may pass). ``rho`` is capped by
    :func:`moralkit.psm.permutation.max_rho` so that the models' rounds can be drawn without
    replacement across models.

    References
    ----------
    Seror (2025), Section 2.4, eq. (6); Section 3.3.
    """
    from ..psm import rp
    from ..psm.permutation import e_below_ccei, max_rho, permutation_study

    dd = dict(datasets) if isinstance(datasets, dict) else {d.model: d for d in datasets}
    if len(dd) < 2:
        raise MoralkitError(f"G needs at least 2 models, got {len(dd)}")
    if e is None:
        e = e_below_ccei(rp.ccei(rp.psm_expenditure_matrix(d)) for d in dd.values())
    rho = int(min(rho, max_rho(dd)))
    res = permutation_study(dd, e=float(e), T=int(T), rho=rho, seed=int(seed), n_jobs=n_jobs, progress=progress)
    return PSMSimilarity(G=res.G.copy(), e=float(e), T=int(T), rho=rho)


def moralchoice_agreement(metrics: pd.DataFrame, models=None) -> pd.DataFrame:
    """Correlation of marginal action likelihoods between models (Scherrer et al. 2023, Section 4.3).

    A thin wrapper of :func:`moralkit.moralchoice.agreement_correlations` (the
    input is :func:`moralkit.moralchoice.scenario_metrics` output, normally on
    the high-ambiguity scenarios).
    """
    from ..moralchoice import agreement_correlations

    return agreement_correlations(metrics, models)


@dataclass
class CrossMethodResult:
    """Both similarity structures on the common models, and their Mantel test.

    ``mantel`` is None when fewer than 3 models are common to both surveys;
    ``note`` then says why.
    """

    G: pd.DataFrame
    C: pd.DataFrame
    models: list
    mantel: MantelResult | None
    note: str = ""
    #: respondents that are one model (persona prompts, other seeds), by :func:`underlying_model`
    same_model: dict = field(default_factory=dict)
    #: the same comparison on one respondent per distinct model (None when all are distinct or fewer than 3)
    distinct: "CrossMethodResult | None" = None
    #: the parameters G was drawn with (:class:`PSMSimilarity`), when it was drawn by :func:`cross_method_from_data`
    e: float | None = None
    T: int | None = None
    rho: int | None = None

    def pairs(self) -> pd.DataFrame:
        """One row per model pair: ``psm_G``, ``moralchoice_corr``."""
        n = len(self.models)
        rows = [(self.models[i], self.models[j], float(self.G.iloc[i, j]), float(self.C.iloc[i, j]))
                for i in range(n) for j in range(i + 1, n)]
        return pd.DataFrame(rows, columns=["model_1", "model_2", "psm_G", "moralchoice_corr"])


def _note(n: int) -> str:
    if n < 2:
        return f"{n} model(s) answered both surveys: no pair to compare."
    if n == 2:
        return "2 models answered both surveys: one pair, so no correlation and no Mantel test."
    if n == 3:
        return ("3 models answered both surveys: 3 pairs and 3! = 6 relabellings, so the smallest attainable "
                "p-value is 1/6 -- the test cannot reject at 5 %; read the statistic descriptively.")
    if n == 4:
        return ("4 models: 24 relabellings, smallest p = 1/24 ~ 0.042; only a perfect rank agreement can "
                "reach 5 %.")
    return f"{n} models: {math.factorial(n)} relabellings, smallest p = 1/{math.factorial(n)}."


def cross_method(G: pd.DataFrame, C: pd.DataFrame, *, name_map: dict | None = None, method: str = "spearman",
                 seed: int = 0) -> CrossMethodResult:
    """Compare a PSM similarity matrix ``G`` with a MoralChoice agreement matrix ``C``.

    Models are matched with :func:`match_models` (``G`` labels to ``C``
    labels); both matrices are restricted to the common models, in ``G``'s
    order and relabelled with ``G``'s labels. The Mantel test (one-sided,
    "the structures agree") runs when at least 3 models are common; with
    fewer, ``mantel`` is None and ``note`` explains.

    References
    ----------
    Seror (2025), eq. (6); Scherrer et al. (2023), Section 4.3; Mantel (1967).
    """
    for M, nm in ((G, "G"), (C, "C")):
        if not isinstance(M, pd.DataFrame) or list(M.index) != list(M.columns):
            raise MoralkitError(f"{nm} must be a square DataFrame labelled by model on rows and columns")
    pairs = match_models(list(G.index), list(C.index), name_map)
    models = [m for m in G.index if m in pairs]
    Gs = G.loc[models, models]
    Cs = C.loc[[pairs[m] for m in models], [pairs[m] for m in models]].copy()
    Cs.index = Cs.columns = models
    n = len(models)
    mantel = None
    note = _note(n)
    if n >= 3:
        try:
            mantel = mantel_test(Gs, Cs, method=method, seed=seed)
        except ValueError as exc:  # e.g. constant G
            note += f" Mantel test not computed: {exc}."
    return CrossMethodResult(G=Gs, C=Cs, models=models, mantel=mantel, note=note)


# --------------------------------------------------------------------------- the project's own runs


def load_own_runs(psm_path=None, moralchoice_path=None, *, ambiguity: str = "high", source=None,
                  likelihood_path=None):
    """The project's own collection runs of both surveys, tolerant of missing data.

    Parameters
    ----------
    psm_path : path, optional
        PSM data (file or directory of ``*.csv.gz``); default the committed runs
        (:func:`moralkit.runs.run_dir` ``("psm")``).
    moralchoice_path : path, optional
        MoralChoice response files; default the committed runs (:func:`moralkit.runs.run_dir` ``("responses")``).
    ambiguity : str, default "high"
        Scenario set for the agreement correlations (the paper's Section 4.3 uses high ambiguity).
    source : optional
        MoralChoice survey source (:func:`moralkit.moralchoice.survey_source`).
    likelihood_path : path or False, optional
        Exact token-probability likelihoods (:func:`moralkit.moralchoice.likelihood.load_likelihoods`);
        default the committed runs (:func:`moralkit.runs.run_dir` ``("likelihoods")``) when ``moralchoice_path`` is also the default,
        none when ``moralchoice_path`` is given; ``False``: none. A respondent with both sampled answers
        and exact likelihoods is represented by the exact ones once they cover every sampled scenario
        (:func:`moralkit.runs.prefer_exact`; column ``estimator``).

    Returns
    -------
    psm : dict {model: PSMDataset}
        Empty, with a warning, when there is no PSM data (:func:`moralkit.psm.dataset.load_psm`).
    metrics : DataFrame
        :func:`moralkit.moralchoice.scenario_metrics` of the own runs (empty when none).
    messages : list of str
        What was found or missing.
    """
    from ..figures import relative_path
    from ..psm.dataset import load_psm

    p, psm = load_psm(psm_path)
    msgs = [f"PSM: {len(psm)} model(s) in {relative_path(p)}: {sorted(psm)}" if psm
            else f"PSM: no data in {relative_path(p)}"]
    from .. import moralchoice as mc

    mpath = (runs.own_runs("responses", moralchoice_path, name="moralchoice_path") if moralchoice_path is not None
             else runs.run_dir("responses"))
    metrics = pd.DataFrame()
    if mpath.exists() and mc.responses.response_files(mpath):
        try:
            resp = mc.load_responses(ambiguity, source, own_data=mpath, include_shared=False)
        except mc.MoralChoiceDataError as exc:
            msgs.append(f"MoralChoice: survey files unavailable ({exc})")
            resp = pd.DataFrame()
        if len(resp):
            metrics = mc.scenario_metrics(resp)
            msgs.append(f"MoralChoice: {metrics['model'].nunique()} model(s) in {relative_path(mpath)}: "
                        f"{sorted(metrics['model'].unique())}")
        else:
            msgs.append(f"MoralChoice: no {ambiguity}-ambiguity answers in {relative_path(mpath)}")
    else:
        msgs.append(f"MoralChoice: no own runs in {relative_path(mpath)}")
    if likelihood_path is None and moralchoice_path is not None:
        likelihood_path = False  # explicit MoralChoice data: only what was asked for
    if likelihood_path is not False:
        from ..moralchoice.likelihood import load_likelihoods

        lpath = Path(likelihood_path) if likelihood_path is not None else runs.run_dir("likelihoods")
        lik = load_likelihoods(ambiguity, lpath)
        if len(lik):
            lm = mc.scenario_metrics(lik)
            exact = sorted(lm["model"].unique())
            msgs.append(f"MoralChoice exact likelihoods: {len(exact)} respondent(s) in {relative_path(lpath)}: {exact}")
            metrics, notes = runs.prefer_exact(metrics, lm)
            msgs += notes
    return psm, metrics, msgs


def underlying_model(label: str) -> str:
    """The model behind a respondent label: without a ``+persona-<name>`` suffix or a ``-s<seed>`` suffix.

    Examples
    --------
    >>> underlying_model("qwen2.5-coder-0.5b-instruct+persona-care"), underlying_model("qwen2.5-coder-0.5b-instruct-s1")
    ('qwen2.5-coder-0.5b-instruct', 'qwen2.5-coder-0.5b-instruct')
    """
    import re

    return re.sub(r"-s\d+$", "", str(label).split("+persona-", 1)[0])


def cross_method_from_data(psm: dict, metrics: pd.DataFrame, *, name_map: dict | None = None, e: float | None = None,
                           T: int = 500, rho: int = 20, seed: int = 0, n_jobs: int = 1,
                           _cceis: dict | None = None) -> CrossMethodResult | None:
    """G and the MoralChoice correlation on the models present in both, then :func:`cross_method`.

    Returns None (nothing to compare) when fewer than 2 models answered both surveys. ``e`` None: just below
    the smallest CCEI of the models compared, as in :func:`psm_similarity` (``_cceis`` holds the CCEIs
    already computed, by label, so that the comparison on one respondent per distinct model does not
    compute them again).
    """
    if not psm or metrics is None or not len(metrics):
        return None
    pairs = match_models(list(psm), list(metrics["model"].unique()), name_map)
    if len(pairs) < 2:
        return None
    C = moralchoice_agreement(metrics, [pairs[m] for m in pairs])
    inv = {v: k for k, v in pairs.items()}
    C = C.rename(index=inv, columns=inv)
    common = [m for m in pairs if m in C.index]
    if len(common) < 2:
        return None
    cceis = {} if _cceis is None else _cceis
    e_used = e
    if e is None:  # psm_similarity's default e, with each respondent's CCEI computed once
        from ..psm import rp
        from ..psm.permutation import e_below_ccei

        for m in common:
            if m not in cceis:
                cceis[m] = rp.ccei(rp.psm_expenditure_matrix(psm[m]))
        e_used = e_below_ccei(cceis[m] for m in common)
    sim = psm_similarity({m: psm[m] for m in common}, e=e_used, T=T, rho=rho, seed=seed, n_jobs=n_jobs)
    res = cross_method(sim.G, C.loc[common, common], seed=seed)
    res.e, res.T, res.rho = sim.e, sim.T, sim.rho
    groups: dict = {}
    for m in res.models:
        groups.setdefault(underlying_model(m), []).append(m)
    res.same_model = {k: v for k, v in groups.items() if len(v) > 1}
    if res.same_model:
        # one respondent per model: the one without a persona or seed suffix when present
        keep = [k if k in v else v[0] for k, v in groups.items()]
        for k, v in res.same_model.items():
            res.note += (f" {len(v)} of the {len(res.models)} respondents are one model ({k}"
                         + (f" and {len(v) - 1} persona or seed variants" if k in v else "") + "): "
                         f"{len(v) * (len(v) - 1) // 2} of the {len(res.models) * (len(res.models) - 1) // 2} pairs "
                         "compare the model with itself, so the relabelling null, which treats every respondent "
                         "as exchangeable, does not hold, and a correlation can come from telling those pairs "
                         "apart from the others rather than from similarity between models.")
        if len(keep) >= 3:
            sub_names = {m: (name_map or {}).get(m, m) for m in keep}
            sub_metrics = metrics[metrics["model"].isin(set(sub_names.values()))]
            res.distinct = cross_method_from_data({m: psm[m] for m in keep}, sub_metrics, name_map=name_map, e=e,
                                                  T=T, rho=rho, seed=seed, n_jobs=n_jobs, _cceis=cceis)
    return res
