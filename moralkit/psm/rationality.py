"""The random-choice rationality test (Procedure 1, eq. (4)) and Table 1.

For each model ``m`` the test compares the CCEI of its answers,
``CCEI(D^m)``, with the CCEIs of synthetic datasets ``D^m_n`` in which every
answer is drawn uniformly from the same set of (100) alternatives the model
saw in that round (missing rounds excluded):

    alpha = |{n : CCEI(D^m_n) >= CCEI(D^m)}| / N,

and H0 (random answers) is rejected at level ``a`` when ``alpha <= a``
(eq. (4), weakly). Table 1 marks rejections at 1 %, 5 % and 10 % with
``***``, ``**`` and ``*``.

Reproducibility
---------------
The synthetic datasets are drawn by :mod:`moralkit.psm.random_datasets` in seeded chunks of
:data:`~moralkit.psm.random_datasets.CHUNK_SIZE`, keyed by ``seed`` and the model's label. Results
therefore depend only on ``seed``, the model's data and ``n_datasets`` — not on the number of workers,
on how the work is split, nor on which other models are tested alongside. The Houtman–Maks variant of
the test (:mod:`moralkit.psm.hm_random_choice`, ``table1(hm=True)``) uses the same datasets.

Parallelism goes through :mod:`joblib`: threads by default (the compiled
kernels release the GIL, so there is no process start-up), or any backend set
by the caller, e.g. a Dask cluster with
``with joblib.parallel_backend("dask"): table1(datasets, n_jobs=-1)``. Each CCEI is exact (a multiple
of 1/12, see :mod:`moralkit.psm.rp`), so comparisons with the model's CCEI are
exact integer comparisons.

References
----------
Seror, A. (2025). *The Moral Mind(s) of Large Language Models*, Section 2.3
(H0/H1, Definition 4, eq. (4), Procedure 1), Section 3.1 and Table 1.
Cherchye, L., De Rock, B., Smeulders, B., et al. (2023), the approximate
rationality test this procedure adapts.
"""

from __future__ import annotations

import hashlib
import math
import warnings

import numpy as np
import pandas as pd

from ..checks import check_int
from ..errors import MoralkitError
from . import rp
from ._rp_kernels import psm_levels_choices
from .dataset import PSMDataset
from .design import BUDGET
from .hm_random_choice import HMTestResult, hm_random_choice_test
from .indices import convention, critical_efficiencies, critical_efficiency, exact_ratio, option_expenditures
from .random_choice import STANDARD_INDEX, RandomChoiceResult, Table1
from .random_datasets import CHUNK_SIZE as CHUNK_SIZE  # importable here, as before (defined there)
from .random_datasets import answered_part, chunk_choices, chunk_sizes

__all__ = [
    "index_convention",
    "random_choice_test",
    "random_dataset_expenditure",
    "retest",
    "random_choice_tests",
    "table1",
]

# --------------------------------------------------------------------------- work units


def _null_levels(model, corners, prices, options, seed, chunks, sizes, budget):
    """CCEI numerators of the synthetic datasets of the given chunks of one model."""
    T, n_opt = options.shape[0], options.shape[1]
    start, rows = rp.choice_level_lists(corners, prices, options, budget)
    out = []
    for c, m in zip(chunks, sizes):
        C = chunk_choices(seed, model, c, m, T, n_opt)
        if T < 2:
            out.append(np.full(m, budget, dtype=np.int64))
        else:
            out.append(np.minimum(psm_levels_choices(start, rows, C, budget), budget))
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def index_convention(index=STANDARD_INDEX):
    """Resolve an ``index=`` argument: ``None`` for the standard CCEI, else a :class:`moralkit.psm.indices.Convention`.

    Accepted: ``"ccei"`` (the standard CCEI, also ``"corner/e"`` or ``None``), or any convention of
    :mod:`moralkit.psm.indices`, e.g. ``"origin/1-e"`` (the convention that reproduces the printed
    Table 1 best; notebook ``06_audit``).

    Examples
    --------
    >>> index_convention("ccei") is None
    True
    >>> index_convention("origin/1-e").name
    'origin/1-e'
    """
    if index is None or index == STANDARD_INDEX:
        return None
    try:
        c = convention(index)
    except ValueError as ex:
        raise MoralkitError(f"index must be {STANDARD_INDEX!r} (the standard CCEI) or a CCEI convention such as "
                            f"'origin/1-e' (moralkit.psm.indices.CONVENTIONS); got {index!r}: {ex}") from None
    return None if c.is_standard else c


def _null_efficiencies(model, V, coordinates, seed, chunks, sizes):
    """e* (floats) of the synthetic datasets of the given chunks under a non-standard convention.

    The chunks draw the same random choices as the standard test (same seeds), so both indices are
    computed on the same synthetic datasets.
    """
    T, n_opt = V.shape[1], V.shape[2]
    out = []
    for c, m in zip(chunks, sizes):
        C = chunk_choices(seed, model, c, m, T, n_opt)
        out.append(np.ones(m) if T < 2 else critical_efficiencies(V, C, coordinates))
    return np.concatenate(out) if out else np.zeros(0)


def random_dataset_expenditure(dataset, i: int, n_datasets: int = 1000, seed: int = 0) -> np.ndarray:
    """The expenditure matrix of random dataset ``i`` of Table 1's test for this respondent.

    The same draw as :func:`table1` / :func:`random_choice_test` with these ``n_datasets`` and ``seed``
    (and as the committed decisions of :mod:`moralkit.psm.hm_table1`), so that one row of a committed
    table can be recomputed alone.
    """
    v = answered_part(dataset)
    T, n_opt = v.options.shape[0], v.options.shape[1]
    sizes = chunk_sizes(int(n_datasets))
    chunk, pos = divmod(int(i), sizes[0])
    C = chunk_choices(seed, v.model, chunk, sizes[chunk], T, n_opt)
    V = rp.option_expenditures(v.corners, v.prices, v.options).astype(np.int64)
    return V[:, np.arange(T), C[pos]]


def random_choice_tests(datasets, n_datasets: int = 1000, seed: int = 0, n_jobs: int = 1,
                        progress: bool = False, index=STANDARD_INDEX) -> dict[str, RandomChoiceResult]:
    """Run the random-choice rationality test for several models at once (shared worker pool).

    Parameters
    ----------
    datasets : dict {model: PSMDataset} or iterable of PSMDataset
    n_datasets : int, default 1000
        Synthetic datasets per model.
    seed : int, default 0
        Master seed (see the module docstring for how it is split).
    n_jobs : int, default 1
        joblib workers (-1: all cores). Results do not depend on it.
    progress : bool, default False
        Show a tqdm progress bar over work units.
    index : str, default "ccei"
        The rationality index: ``"ccei"``, the standard CCEI (corner coordinates,
        Definition 3 as the supremum of e), or a convention of
        :mod:`moralkit.psm.indices`, e.g. ``"origin/1-e"``, the paper-compatible
        reading of the printed Table 1 (``1 - e*`` in unshifted coordinates; a
        *higher* value is then *less* consistent, and a small ``alpha`` marks data
        less consistent than random choice). The synthetic datasets are the same
        for every index.

    Returns
    -------
    dict {model: RandomChoiceResult}, in input order.

    References
    ----------
    Seror (2025), Section 2.3, eq. (4) and Procedure 1.
    """
    valid = _checked_datasets(datasets, n_datasets, seed)
    sizes = chunk_sizes(int(n_datasets))
    conv = index_convention(index)
    units, parts = _run_units(valid, sizes, conv, int(seed), n_jobs, progress)
    null = {i: [] for i in range(len(valid))}
    for (i, _), p in zip(units, parts):
        null[i].append(p)
    if conv is not None:
        return {v.model: _convention_result(v, np.concatenate(null[i]), conv, int(seed))
                for i, v in enumerate(valid)}
    out = {}
    for i, v in enumerate(valid):
        levels = np.concatenate(null[i])
        own = rp.ccei_exact(rp.psm_expenditure_matrix(v))
        m = own.numerator * (BUDGET // own.denominator)
        n_ge = int((levels >= m).sum())
        out[v.model] = RandomChoiceResult(
            model=v.model, provider=v.provider, index_value=float(own), index_exact=own,
            alpha=n_ge / len(levels), n_at_least=n_ge, null_index=levels / BUDGET,
            n_obs=v.n_obs, n_datasets=len(levels), seed=int(seed), budget=BUDGET, extra_key=_option_key(v),
        )
    return out


def _checked_datasets(datasets, n_datasets, seed) -> list:
    """The valid part of each dataset (missing rounds excluded), after checking the arguments."""
    if isinstance(datasets, PSMDataset):
        datasets = [datasets]
    items = list(datasets.values()) if isinstance(datasets, dict) else list(datasets)
    check_int(n_datasets, "n_datasets", minimum=1)
    check_int(seed, "seed", minimum=0)
    for ds in items:
        if not isinstance(ds, PSMDataset):
            raise MoralkitError(f"expected moralkit.psm.dataset.PSMDataset objects, got {type(ds).__name__}")
    names = [ds.model for ds in items]
    if len(set(names)) != len(names):
        raise MoralkitError("model labels must be unique (they key the random draws)")
    return [answered_part(ds) for ds in items]


def _run_units(valid, sizes, conv, seed: int, n_jobs, progress: bool):
    """Split each model's chunks into a few work units (the split does not affect results) and run them.

    Returns ``(units, parts)``: ``units[k] = (model index, chunks)`` and ``parts[k]`` its null values
    (CCEI numerators for the standard index, e* floats for another convention)."""
    from joblib import Parallel, delayed, effective_n_jobs

    n_chunks = len(sizes)
    workers = effective_n_jobs(n_jobs)
    per_model = 1 if workers == 1 else max(1, min(n_chunks, math.ceil(4 * workers / max(1, len(valid)))))
    units = [(i, [int(c) for c in g]) for i in range(len(valid))
             for g in np.array_split(np.arange(n_chunks), per_model) if len(g)]
    if conv is not None:
        V_conv = [option_expenditures(v, conv.coordinates) for v in valid]

    def task(i, chunks):
        v = valid[i]
        if conv is not None:
            return delayed(_null_efficiencies)(v.model, V_conv[i], conv.coordinates, seed, chunks,
                                               [sizes[c] for c in chunks])
        return delayed(_null_levels)(v.model, v.corners, v.prices, v.options, seed, chunks,
                                     [sizes[c] for c in chunks], BUDGET)

    tasks = [task(i, ch) for i, ch in units]
    if workers == 1:
        parts = (f(*a, **k) for f, a, k in tasks)
    else:
        # the compiled kernels release the GIL, so threads parallelise without process start-up;
        # prefer= is only a hint: an active joblib backend (e.g. dask) takes precedence
        parts = Parallel(n_jobs=n_jobs, prefer="threads", return_as="generator")(tasks)
    if progress:
        from tqdm.auto import tqdm

        parts = tqdm(parts, total=len(tasks), desc="random-choice test")
    return units, list(parts)


def _convention_result(v, null_e, conv, seed) -> RandomChoiceResult:
    own = critical_efficiency(v, conv.coordinates)  # exact Fraction
    # floats of e* are exactly ordered (denominators <= 30), so these comparisons are exact
    if conv.report == "e":
        n_ge, value, null_index = int((null_e >= float(own)).sum()), own, null_e
    else:  # index 1 - e*: "index at least the model's" is "e* at most the model's"
        n_ge, value = int((null_e <= float(own)).sum()), 1 - own
        null_index = np.array([float(1 - exact_ratio(x)) for x in null_e])
    return RandomChoiceResult(
        model=v.model, provider=v.provider, index_value=float(value), index_exact=value, alpha=n_ge / len(null_e),
        n_at_least=n_ge, null_index=null_index, n_obs=v.n_obs, n_datasets=len(null_e), seed=seed, budget=BUDGET,
        index=conv.name,
    )


def retest(result: RandomChoiceResult, dataset: PSMDataset) -> RandomChoiceResult:
    """The random-choice test of another answer vector on the same option sets, reusing ``result``'s null.

    The synthetic datasets of Procedure 1 depend only on the option sets the
    model saw (and on its label and the seed), not on its answers. A dataset with
    the same label, rounds, corners, prices, options and answered rounds as the
    one behind ``result`` therefore has exactly the null distribution of
    ``result``, and this returns what :func:`random_choice_test` would, without
    redrawing it (used when one simulated agent answers the same design at
    several noise levels).

    Raises
    ------
    ValueError
        If the dataset differs in anything but its answers, or the index is not the standard CCEI.

    References
    ----------
    Seror (2025), Section 2.3, eq. (4).
    """
    if result.index != STANDARD_INDEX:
        raise MoralkitError(f"retest reuses standard-CCEI nulls only; got a result for index {result.index!r}")
    v = answered_part(dataset)
    same = (v.model == result.model and v.n_obs == result.n_obs and result.extra_key is not None
            and result.extra_key == _option_key(v))
    if not same:
        raise MoralkitError(f"{dataset.model}: retest needs the same label, rounds and option sets as the tested "
                            "dataset (only the answers may differ); run random_choice_test instead")
    own = rp.ccei_exact(rp.psm_expenditure_matrix(v))
    m = own.numerator * (BUDGET // own.denominator)
    levels = np.rint(result.null_index * BUDGET).astype(np.int64)
    n_ge = int((levels >= m).sum())
    return RandomChoiceResult(
        model=v.model, provider=v.provider, index_value=float(own), index_exact=own, alpha=n_ge / len(levels),
        n_at_least=n_ge, null_index=result.null_index, n_obs=v.n_obs, n_datasets=len(levels), seed=result.seed,
        budget=BUDGET, extra_key=result.extra_key,
    )


def _option_key(v: PSMDataset) -> str:
    h = hashlib.sha256()
    for a in (v.round_index, v.corners, v.prices, v.options.shape):
        h.update(np.ascontiguousarray(a, dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(v.options, dtype=np.uint8).tobytes())  # answers 0..5 (validated): one byte each
    return h.hexdigest()


def random_choice_test(dataset: PSMDataset, n_datasets: int = 1000, seed: int = 0, n_jobs: int = 1,
                       progress: bool = False, index=STANDARD_INDEX) -> RandomChoiceResult:
    """The random-choice rationality test of one model (Procedure 1).

    Draws ``n_datasets`` synthetic datasets whose answers are uniform on the
    alternatives the model saw in each answered round, and reports the share
    ``alpha`` of synthetic CCEIs at least as high as the model's.

    Parameters
    ----------
    dataset : PSMDataset
        One model's answers; missing rounds are excluded.
    n_datasets : int, default 1000
    seed : int, default 0
    n_jobs : int, default 1
        joblib workers; the result does not depend on it.
    progress : bool, default False
    index : str, default "ccei"
        The standard CCEI, or a convention of :mod:`moralkit.psm.indices` such as
        the paper-compatible ``"origin/1-e"`` (see :func:`random_choice_tests`).

    Returns
    -------
    RandomChoiceResult
        ``.index_value``, ``.alpha``, ``.null_index``, ``.n_obs``, ``.stars``, ``.rejects(level)``.

    Raises
    ------
    ValueError
        If the dataset has no answered round or is malformed.

    References
    ----------
    Seror (2025), Section 2.3, eq. (4), Procedure 1; Table 1.
    """
    res = random_choice_tests([dataset], n_datasets=n_datasets, seed=seed, n_jobs=n_jobs, progress=progress,
                              index=index)
    return res[dataset.model]


def table1(datasets, n_datasets: int = 1000, seed: int = 0, n_jobs: int = 1, progress: bool = False,
           min_obs: int = 1, hm: bool = False, hm_time_limit: float = 10.0,
           index=STANDARD_INDEX, hm_own_time_limit: float | None = None) -> Table1:
    """Table 1: the rationality test of every model, sorted by alpha.

    Parameters
    ----------
    datasets : dict {model: PSMDataset}, iterable of PSMDataset, or dict {model: RandomChoiceResult}
        Datasets to test, or results already computed by :func:`random_choice_tests`.
    n_datasets, seed, n_jobs, progress
        As in :func:`random_choice_tests`.
    min_obs : int, default 1
        Models with fewer answered rounds are left out (with a warning naming them).
    hm : bool, default False
        Add the Houtman–Maks index with its own alpha
        (:func:`moralkit.psm.hm_random_choice.hm_random_choice_test`,
        on the same random datasets): columns ``hm``, ``hm_exact``, ``alpha_hm``,
        ``alpha_hm_low``, ``alpha_hm_high``, ``stars_hm`` and ``n_hm_exact`` (random
        datasets the bounds did not decide, so that the branch-and-cut was run).
    hm_time_limit : float, default 10
        Seconds per random dataset for the Houtman–Maks decision (see there).
    hm_own_time_limit : float, optional
        Seconds for each model's own exact HM (default: no limit); see
        :func:`moralkit.psm.hm_random_choice.hm_random_choice_test`.
    index : str, default "ccei"
        The standard CCEI, or a convention of :mod:`moralkit.psm.indices` such as the
        paper-compatible ``"origin/1-e"`` (see :func:`random_choice_tests`). The
        ``ccei`` column then holds that index; ``Table1.index`` names it.

    Returns
    -------
    Table1
        ``.to_frame()``: columns ``provider``, ``model``, ``ccei``, ``ccei_exact`` (e.g. ``"5/12"``),
        ``alpha``, ``stars``, ``label`` (``"0.417***"`` as printed in the paper),
        ``n_obs``; sorted by ``alpha`` (then CCEI descending, then model).
        ``.results`` holds the :class:`~moralkit.psm.random_choice.RandomChoiceResult` objects,
        ``.hm_results`` the Houtman–Maks tests, ``.plot()`` draws the null distributions.

    References
    ----------
    Seror (2025), Section 3.1, Table 1.

    Examples
    --------
    >>> from moralkit.psm.simulate import QuadraticAgent, simulate_quadratic, simulate_random
    >>> agent = QuadraticAgent(a=[0.2] * 5, b=[2.5] * 5)
    >>> data = [simulate_quadratic(agent, 0, model="sim-a"), simulate_random(0, seed=1, model="sim-r")]
    >>> t = table1(data, n_datasets=100, seed=0)
    >>> t.to_frame()[["model", "ccei_exact", "alpha"]]
       model ccei_exact  alpha
    0  sim-a        5/6    0.0
    1  sim-r        1/3    0.5
    >>> t.passing(0.05)  # the random respondent does not pass
    ['sim-a']
    """
    precomputed, results, items = _table1_results(datasets, n_datasets, seed, n_jobs, progress, min_obs, index)
    df = _table1_frame(results)
    if hm:
        if precomputed:
            raise MoralkitError("hm=True needs the datasets themselves, not precomputed results; pass the datasets")
        by_model = {ds.model: ds for ds in items}
        hres: dict[str, HMTestResult] = {m: hm_random_choice_test(by_model[m], n_datasets=n_datasets, seed=seed, n_jobs=n_jobs,
                                         time_limit=hm_time_limit, own_time_limit=hm_own_time_limit)
                for m in results}
        df["hm"] = [float(hres[m].hm) for m in df["model"]]
        df["hm_exact"] = [hres[m].hm_text for m in df["model"]]
        df["alpha_hm"] = [hres[m].alpha for m in df["model"]]
        df["alpha_hm_low"] = [hres[m].alpha_low for m in df["model"]]
        df["alpha_hm_high"] = [hres[m].alpha_high for m in df["model"]]
        df["stars_hm"] = [hres[m].stars for m in df["model"]]
        df["n_hm_exact"] = [hres[m].n_exact for m in df["model"]]
    df = df.sort_values(["alpha", "ccei", "model"], ascending=[True, False, True], kind="mergesort")
    df = df.reset_index(drop=True)
    index = next(iter(results.values())).index if results else STANDARD_INDEX
    return Table1(df, results, index, hres if hm else None)


def _table1_results(datasets, n_datasets, seed, n_jobs, progress, min_obs, index):
    """``(precomputed, results, items)``: the given results, or the tests of the datasets with at least
    ``min_obs`` answered rounds (the others left out with a warning naming them)."""
    if isinstance(datasets, dict) and datasets and all(isinstance(v, RandomChoiceResult) for v in datasets.values()):
        return True, datasets, None
    if isinstance(datasets, PSMDataset):
        datasets = [datasets]
    items = list(datasets.values()) if isinstance(datasets, dict) else list(datasets)
    few = [ds.model for ds in items if ds.n_obs < min_obs]
    if few:
        warnings.warn(f"left out of Table 1 (fewer than {min_obs} answered rounds): {few}", stacklevel=3)
    items = [ds for ds in items if ds.n_obs >= min_obs]
    results = random_choice_tests(items, n_datasets=n_datasets, seed=seed, n_jobs=n_jobs, progress=progress,
                                  index=index)
    return False, results, items


def _table1_frame(results) -> pd.DataFrame:
    rows = [dict(provider=r.provider, model=r.model, ccei=r.index_value, ccei_exact=str(r.index_exact), alpha=r.alpha,
                 stars=r.stars, label=f"{r.index_value:.3f}{r.stars}", n_obs=r.n_obs) for r in results.values()]
    return pd.DataFrame(rows, columns=["provider", "model", "ccei", "ccei_exact", "alpha", "stars", "label", "n_obs"])
