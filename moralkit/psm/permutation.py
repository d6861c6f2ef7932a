"""The permutation approach: the draws and the similarity matrix G (eq. (6)).

T synthetic datasets are drawn; each takes rho answered rounds from every
model, *without replacement across models* (a round -- a nominal (corner,
price) pair -- drawn for one model is not drawn for another in the same
dataset). Procedure 2 partitions the models of each synthetic dataset into
types (:func:`moralkit.psm.partition.partition_types`), and::

    G[m, w] = (1/T) sum_t delta^t_{m,w}                                   (6)

is the share of datasets in which m and w share a type. The networks
``H^alpha``, Table 3 and Figures 3-4 are drawn from G by
:mod:`moralkit.psm.networks` (also through :class:`PermutationResult`'s
methods).

Reproducibility: draw ``t`` uses its own generator
``numpy.random.default_rng(SeedSequence(seed).spawn(T)[t])`` for both the rounds
it samples and the tie-breaking of Procedure 2, so G does not depend on how the
draws are split between workers (``n_jobs``) or machines.

Running the draws on a Dask cluster
-----------------------------------
The draws go through :class:`joblib.Parallel`, so any joblib backend works::

    from dask.distributed import Client
    import joblib
    client = Client("tcp://scheduler:8786")          # or Client() for a local cluster
    with joblib.parallel_backend("dask"):
        res = permutation_study(datasets, e=0.333, T=500, rho=20, n_jobs=-1)

Results are identical to ``n_jobs=1`` (per-draw seeds). Workers need
``moralkit`` installed (``pip install -e .``) and ``dask[distributed]``.

References
----------
Seror, A. (2025). *The Moral Mind(s) of Large Language Models*, Section 2.4
(permutation approach, eq. (6), H^alpha), Section 3.3 (parameters T = 500,
rho = 20, e = 0.333; Table 3; Figures 3-4).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ..checks import as_generator, check_int
from ..errors import MoralkitError
from ._replay import SERIAL_CHUNK, replay_draws
from .level import rationality_level
from .milp_solvers import SOLVERS, get_solver
from .networks import PAPER_ALPHAS, plot_similarity, similarity_graph, similarity_summary, table3, threshold_graph
from .partition import MILPLS, ExactLS, procedure2
from .pooled import as_datasets, pool, revealed_relations
from .random_choice import STANDARD_INDEX, Table1

__all__ = [
    "PAPER_T",
    "PAPER_RHO",
    "PAPER_E",
    "default_e",
    "e_below_ccei",
    "describe_e",
    "max_rho",
    "E_BELOW_CCEI",
    "passing_models",
    "study_setup",
    "draw_rounds",
    "permutation_study",
    "PermutationResult",
]

#: Paper defaults (Section 3.3); the precision levels of H^alpha are :data:`moralkit.psm.networks.PAPER_ALPHAS`.
PAPER_T = 500
PAPER_RHO = 20
PAPER_E = 0.333


# --------------------------------------------------------------------------- parameters


def _col(df: pd.DataFrame, names, what):
    for n in names:
        if n in df.columns:
            return n
    raise MoralkitError(f"Table 1 needs a {what} column (one of {list(names)}); got columns {list(df.columns)}")


def _table1_frame(table1) -> pd.DataFrame:
    """The table of a :class:`~moralkit.psm.random_choice.Table1`, or a DataFrame as it is."""
    if isinstance(table1, Table1):
        return table1.to_frame()
    if not isinstance(table1, pd.DataFrame):
        raise MoralkitError(f"table1 must be Table 1 (a Table1 or a pandas DataFrame), got {type(table1).__name__}")
    return table1


def passing_models(table1, level: float = 0.05) -> list:
    """Models passing the rationality test at ``level`` (``alpha <= level``, Procedure 1).

    ``table1`` is a :class:`~moralkit.psm.random_choice.Table1`, or a DataFrame with a model column
    (``model``/``Model``) and the fraction of random datasets with a CCEI at least as high
    (``alpha``/``α``/``p_value``), as in Table 1 (e.g. the published one).
    """
    table1 = _table1_frame(table1)
    mcol = _col(table1, ("model", "Model"), "model")
    acol = _col(table1, ("alpha", "α", "$\\alpha$", "p_value", "pvalue"), "alpha (p-value)")
    return [str(m) for m in table1.loc[table1[acol].astype(float) <= level, mcol]]


#: How far below the smallest CCEI :func:`default_e` sets e (see there).
E_BELOW_CCEI = 1e-9


def default_e(table1, level: float = 0.05, *, below: float = E_BELOW_CCEI) -> float:
    """The paper's rationality level: the smallest CCEI among models passing at ``level``.

    Section 3.3 sets e = 0.333, "the minimum CCEI value among the models that
    passed the 5% rationality test in Table 1", so the cross-model constraint is
    at least as restrictive as the weakest within-model one.

    The CCEI is a *supremum* (Definition 3): a model satisfies GARP_e for every
    e below its CCEI but, in general, not at e = CCEI itself (the cycle that
    sets the CCEI becomes a violation there). The value returned is therefore
    ``min CCEI - below`` (default 1e-9), so every passing model is consistent on
    its own. With integer PSM expenditures (ratios are multiples of 1/12) this
    gives the same relations as any e in (min CCEI - 1/12, min CCEI); in
    particular the same as the paper's 0.333 for a CCEI of 1/3 (0.333 < 1/3).
    Pass ``below=0`` for the minimum itself.

    Raises
    ------
    ValueError
        When no model passes (then choose ``e`` yourself, e.g. :data:`PAPER_E`).
    """
    table1 = _table1_frame(table1)
    passing = passing_models(table1, level)
    if not passing:
        raise MoralkitError(f"no model passes the rationality test at {level:.0%}; pass e explicitly "
                            f"(the paper's value is e = {PAPER_E})")
    mcol = _col(table1, ("model", "Model"), "model")
    ccol = _col(table1, ("CCEI", "ccei"), "CCEI")
    return e_below_ccei(table1.loc[table1[mcol].astype(str).isin(passing), ccol].astype(float), below=below)


def e_below_ccei(cceis, *, below: float = E_BELOW_CCEI) -> float:
    """The rule of Section 3.3 for e: just below the smallest CCEI of the models compared.

    Used by :func:`default_e` (on the models passing the rationality test) and by
    :func:`moralkit.studies.crossmethod.psm_similarity` (on the models compared). The CCEI is a
    supremum, so e is ``min(cceis) - below`` (see :func:`default_e`).

    Examples
    --------
    >>> e_below_ccei([1 / 3, 1 / 4, 5 / 12]) == 1 / 4 - E_BELOW_CCEI
    True
    """
    if not 0 <= below < 1 / 12:
        raise MoralkitError(f"below must be in [0, 1/12), got {below}")
    values = [float(c) for c in cceis]
    if not values:
        raise MoralkitError("no CCEI given: e is set from the CCEIs of the models compared")
    return max(0.0, min(values) - below)


def describe_e(e: float, *, below: float = E_BELOW_CCEI, max_denominator: int = 60) -> str:
    """The rationality level e as a reader would write it: ``"e = 1/4"``, ``"e just below 1/4"``.

    :func:`e_below_ccei` sets e a hair (``below``) under a CCEI that is a ratio
    of small integers (a multiple of 1/12 for the PSM), so printing the float
    shows ``0.249999999``. This names the ratio instead.

    Parameters
    ----------
    e : float
        A rationality level in [0, 1].
    below : float, default :data:`E_BELOW_CCEI`
        The offset :func:`e_below_ccei` used.
    max_denominator : int, default 60
        Largest denominator recognised as a ratio.

    Returns
    -------
    str
        ``"e = 1/4"`` when e is that ratio (to float precision), ``"e just below
        1/4"`` when e is a ratio minus ``below``, otherwise e to 4 significant
        digits (e.g. the paper's ``"e = 0.333"``).

    Examples
    --------
    >>> describe_e(e_below_ccei([1 / 4, 1 / 3]))
    'e just below 1/4'
    >>> describe_e(2 / 3), describe_e(0.333)
    ('e = 2/3', 'e = 0.333')
    """
    from fractions import Fraction

    e = rationality_level(e).value
    for target, fmt in ((e, "e = {f}"), (e + below, "e just below {f}")):
        f = Fraction(target).limit_denominator(max_denominator)
        if f.denominator > 1 and abs(float(f) - target) <= 4 * np.finfo(float).eps:
            return fmt.format(f=f)
    return f"e = {e:.4g}"


def max_rho(datasets) -> int:
    """The largest rho the draws allow for these models.

    Every model needs rho answered rounds, and rounds are drawn without replacement across
    models, so the number of models times rho cannot exceed the distinct (corner, price) rounds
    they answered (160 with the full design). Notebook 04 and
    :func:`moralkit.studies.crossmethod.psm_similarity` cap rho with it.

    References
    ----------
    Seror (2025), Section 2.4 (the permutation approach) and Section 3.3 (rho = 20).
    """
    ri = _round_index(as_datasets(datasets))
    if not ri.models:
        raise MoralkitError("no datasets given")
    return min(min(len(p) for p in ri.positions), _distinct_rounds(ri) // len(ri.models))


def study_setup(datasets, table1: Table1 | pd.DataFrame | None = None, e: float | None = None, level: float = 0.05,
                min_models: int = 2):
    """Models and rationality level of the permutation study, following Section 3.3.

    * models: those passing the rationality test at ``level`` in ``table1``
      (the paper: 7 models at 5 %); when fewer than ``min_models`` pass (or no
      Table 1 is given), every model in ``datasets``;
    * e: the given ``e``; else the smallest CCEI among the models passing at
      ``level`` (:func:`default_e`); else the paper's value :data:`PAPER_E`.

    **Scale of e.** Procedure 2 compares pooled answers through the relations
    of Definitions 1-2 in each round's corner coordinates, the relations that
    define the standard CCEI; e is on that scale. A Table 1 computed with
    another index (``table1(..., index="origin/1-e")``, the paper-compatible
    reading of the printed values) is refused: its numbers are on another scale.

    Returns
    -------
    models : list of str
    e : float
    notes : list of str
        Human-readable explanations of every fallback taken (print them).
    """
    dd = as_datasets(datasets)
    notes = []
    if isinstance(table1, Table1) and table1.index != STANDARD_INDEX:
        raise MoralkitError(f"Table 1 was computed with index={table1.index!r}; Procedure 2 takes e on the "
                         "standard-CCEI scale (its relations are those of Definitions 1-2 in corner coordinates), "
                         "so pass a Table 1 computed with the standard index (table1(..., index='ccei'))")
    passing = passing_models(table1, level) if table1 is not None else []
    passing = [m for m in passing if m in dd]
    if len(passing) >= min_models:
        models = passing
        notes.append(f"{len(models)} models pass the rationality test at {level:.0%} (Table 1): {models}")
    else:
        models = list(dd)
        why = "no Table 1 was given" if table1 is None else f"only {len(passing)} model(s) pass at {level:.0%}"
        notes.append(f"{why}; the study uses all {len(models)} models in the data")
    if e is not None:
        e = rationality_level(e).value
        notes.append(f"e = {e:g} (given)")
    elif passing:
        t = _table1_frame(table1)
        e = default_e(t[t[_col(t, ("model", "Model"), "model")].astype(str).isin(passing)], level)
        notes.append(f"e = {e:.10g}: just below the smallest CCEI among the models passing at {level:.0%} "
                     "(Section 3.3; the CCEI is a supremum, see default_e)")
    else:
        e = PAPER_E
        notes.append(f"e = {PAPER_E} (the paper's value): no model passes at {level:.0%}, so the data-based "
                     "rule of Section 3.3 cannot be applied")
    return models, e, notes


# --------------------------------------------------------------------------- drawing rounds


@dataclass
class _RoundIndex:
    models: tuple
    positions: list  # per model: answered positions in its dataset
    round_ids: list  # per model: nominal round id of each answered position
    n_ids: int


def _round_index(dd: dict) -> _RoundIndex:
    pos, rid = [], []
    for name, ds in dd.items():
        if ds.corner_index is None or ds.price_index is None:
            raise MoralkitError(f"{name}: corner_index and price_index are needed to identify a round across "
                                "models (draws are without replacement across models); read the data with "
                                "moralkit.psm.dataset.read_psm or set them on the PSMDataset")
        p = np.nonzero(ds.answered)[0]
        r = ds.corner_index[p] * 5 + ds.price_index[p]
        if len(np.unique(r)) != len(r):
            raise MoralkitError(f"{name}: the same (corner, price) round is answered more than once")
        pos.append(p)
        rid.append(r)
    n_ids = int(max((r.max() for r in rid if len(r)), default=-1)) + 1
    return _RoundIndex(tuple(dd), pos, rid, n_ids)


def _distinct_rounds(ri: _RoundIndex) -> int:
    return len(np.unique(np.concatenate(ri.round_ids))) if ri.round_ids else 0


def _check_draw_params(ri: _RoundIndex, rho) -> int:
    """``rho`` as an int, checked to be at least 1 and at most every model's answered rounds."""
    rho = check_int(rho, "rho (rounds per model)", minimum=1)
    for name, p in zip(ri.models, ri.positions):
        if len(p) < rho:
            raise MoralkitError(f"{name}: rho = {rho} is larger than its {len(p)} answered rounds; "
                                "lower rho or drop the model")
    distinct = _distinct_rounds(ri)
    if len(ri.models) * rho > distinct:
        raise MoralkitError(f"{len(ri.models)} models x rho = {rho} rounds exceed the {distinct} distinct rounds "
                            "available (rounds are drawn without replacement across models); lower rho")
    return rho


def _draw(ri: _RoundIndex, rho: int, rng, max_attempts: int = 1000) -> list:
    """One synthetic dataset: per model, rho answered positions; no round shared."""
    M = len(ri.models)
    for _ in range(max_attempts):
        taken = np.zeros(ri.n_ids, dtype=bool)
        out = [None] * M
        for m in rng.permutation(M):
            free = np.nonzero(~taken[ri.round_ids[m]])[0]
            if len(free) < rho:
                break
            pick = np.sort(rng.choice(free, size=rho, replace=False))
            taken[ri.round_ids[m][pick]] = True
            out[m] = ri.positions[m][pick]
        else:
            return out
    raise MoralkitError(f"could not draw rho = {rho} distinct rounds per model without sharing rounds after "
                        f"{max_attempts} attempts (models answer too few common rounds); lower rho")


def draw_rounds(datasets, rho: int = PAPER_RHO, seed=None) -> dict:
    """Draw one synthetic dataset: ``{model: positions}`` of rho answered rounds per model.

    Models are visited in a random order; each draws rho of its answered rounds
    uniformly without replacement among the rounds (nominal corner, price) not yet
    drawn for another model (redrawn if a model runs out).

    References
    ----------
    Seror (2025), Section 3.3 ("draw rho rounds per model without replacement").
    """
    dd = as_datasets(datasets)
    ri = _round_index(dd)
    rho = _check_draw_params(ri, rho)
    rng = as_generator(seed)
    return dict(zip(ri.models, _draw(ri, rho, rng)))


# --------------------------------------------------------------------------- the study


@dataclass
class PermutationResult:
    """Outcome of :func:`permutation_study`.

    Attributes
    ----------
    G : DataFrame (M, M)
        Similarity matrix, eq. (6).
    labels : ndarray (T, M) of int
        Type number of each model in each synthetic dataset.
    n_types : ndarray (T,) of int
    models : tuple of str
    T, rho, e, seed, solver : parameters of the run
    """

    G: pd.DataFrame
    labels: np.ndarray
    n_types: np.ndarray
    models: tuple
    T: int
    rho: int
    e: float
    seed: int
    solver: str
    wall_s: float = 0.0
    extra: dict = field(default_factory=dict)

    def H(self, alpha: float):
        """The network H^alpha (networkx Graph)."""
        return threshold_graph(self.G, alpha)

    def graph(self):
        """G as a weighted networkx Graph."""
        return similarity_graph(self.G)

    def summary(self, alphas: Sequence[float] = PAPER_ALPHAS) -> dict:
        return similarity_summary(self.G, alphas)

    def table3(self, short_names: Mapping[str, str] | None = None) -> pd.DataFrame:
        return table3(self.G, short_names)

    def to_frame(self) -> pd.DataFrame:
        """G (a copy): ``G[m, w]``, the share of synthetic datasets where m and w are of one type (eq. (6))."""
        return self.G.copy()

    def plot(self, title: str | None = None):
        """Figure 3: G as a heat map and as a weighted graph (:func:`moralkit.psm.networks.plot_similarity`)."""
        return plot_similarity(self.G, title=title)

    def _repr_html_(self) -> str:
        return self.G._repr_html_()

    def __repr__(self) -> str:
        return (f"<PermutationResult: G of {len(self.models)} models, T = {self.T}, rho = {self.rho}, "
                f"{describe_e(self.e)}, solver {self.solver!r}>")


def _types_to_labels(type_masks, left, M):
    lab = np.full(M, -1, dtype=np.int64)
    for k, c in enumerate(type_masks):
        for m in range(M):
            if (c >> m) & 1:
                lab[m] = k
    k = len(type_masks)
    for m in range(M):
        if lab[m] < 0:  # self-inconsistent model: its own type
            lab[m] = k
            k += 1
    return lab


def _run_draws(ts, seeds, ri, RP, obs_of, owner_full, rho, solver, full, e, time_limit, formulation="cuts"):
    """Draws ``ts`` (with their SeedSequences); returns labels (len(ts), M). ``RP``: R0 + 2 P0 of the full pool."""
    M = len(ri.models)
    out = np.empty((len(ts), M), dtype=np.int64)
    draws = replay_draws(ri.round_ids, ri.positions, ri.n_ids, rho, seeds, lambda rng: _draw(ri, rho, rng))
    for j, (picks, rng) in enumerate(draws):  # _draw(ri, rho, rng) and rng, for rng = default_rng(ss)
        obs = np.concatenate([obs_of[m][p] for m, p in enumerate(picks)])
        if solver == "exact":  # the relations of the draw are those of the full pool, restricted
            # rows, then columns (one C-ordered submatrix for both relations, R0[np.ix_(obs, obs)] is slower)
            sub = RP.take(obs, axis=0).take(obs, axis=1)
            ls = ExactLS((sub & 1).view(bool), (sub >> 1).view(bool), owner_full[obs], M)
        else:
            ls = MILPLS(full.subset(obs), e, solver=solver, time_limit=time_limit, formulation=formulation)
        masks, _, left = procedure2(ls, (1 << M) - 1, rng)
        out[j] = _types_to_labels(masks, left, M)
    return out


def permutation_study(datasets, e: float = PAPER_E, *, T: int = PAPER_T, rho: int = PAPER_RHO, seed: int = 0,
                      solver: str = "exact", n_jobs: int = 1, progress: bool = True,
                      time_limit: float | None = None, models: Sequence[str] | None = None,
                      chunk_size: int | None = None, formulation: str = "cuts") -> PermutationResult:
    """Similarity matrix G of the permutation approach (Section 2.4, eq. (6)).

    Parameters
    ----------
    datasets : dict {model: PSMDataset} or iterable of PSMDataset
        The models W (the paper: the 7 passing the rationality test at 5 %).
    e : float in [0, 1], default 0.333
        Rationality level of Procedure 2, on the standard-CCEI scale (GARP_e with
        the relations of Definitions 1-2 in corner coordinates; the paper: the
        smallest CCEI among the models passing at 5 %; see :func:`default_e`).
    T : int, default 500
        Number of synthetic datasets.
    rho : int, default 20
        Rounds drawn per model (without replacement across models).
    seed : int, default 0
        Root of the per-draw seeds (``SeedSequence(seed).spawn(T)``).
    solver : {"exact", "highs", "glpk", "gurobi", "cbc"}, default "exact"
        LS(e) solver. A MILP solver enumerates every maximum subset and breaks
        ties with the same random draw as the exact solver, so G is identical
        (``benchmarks/bench_partition.py`` measures both).
    n_jobs : int, default 1
        joblib workers (``-1``: all cores). Results do not depend on it.
    progress : bool
        tqdm progress bar over the T draws, when the output is a terminal.
    formulation : {"cuts", "prop1"}, default "cuts"
        MILP formulation (MILP solvers only; :func:`moralkit.psm.milp.solve_ls_milp`).
    time_limit : float, optional
        Seconds per MILP (MILP solvers only).
    models : sequence of str, optional
        Use only these models of ``datasets``.
    chunk_size : int, optional
        Draws per joblib task (default: about 8 tasks per worker; with ``n_jobs=1``, ``_replay.SERIAL_CHUNK``).

    Returns
    -------
    PermutationResult

    References
    ----------
    Seror (2025), Section 2.4 (eq. (6)) and Section 3.3.

    Examples
    --------
    >>> from moralkit.psm.simulate import QuadraticAgent, simulate_quadratic, simulate_random
    >>> near = [QuadraticAgent(a=[0.2] * 5, b=[b] * 5) for b in (2.5, 2.6)]
    >>> data = {"sim-a": simulate_quadratic(near[0], 0, model="sim-a"),
    ...         "sim-b": simulate_quadratic(near[1], 1, model="sim-b"),
    ...         "sim-r": simulate_random(0, seed=1, model="sim-r")}
    >>> res = permutation_study(data, e=0.8, T=20, rho=20, seed=0, progress=False)
    >>> res.G
           sim-a  sim-b  sim-r
    sim-a    1.0    1.0    0.0
    sim-b    1.0    1.0    0.0
    sim-r    0.0    0.0    1.0
    """
    import time

    t0 = time.perf_counter()
    dd = _study_models(datasets, models)
    lv = rationality_level(e)
    _check_study_args(T, seed, solver)
    ri = _round_index(dd)
    rho = _check_draw_params(ri, rho)
    full = pool(dd)
    R0, P0 = revealed_relations(full, lv)
    RP = R0.view(np.uint8) | (P0.view(np.uint8) << 1)  # R0 + 2 P0: a draw gathers one submatrix for both
    args = (ri, RP, _observation_lookup(ri), full.obs_model, rho, solver, None if solver == "exact" else full, lv,
            time_limit, formulation)
    labels = _run_all_draws(args, int(T), int(seed), n_jobs, chunk_size, progress, len(dd))
    same = labels[:, :, None] == labels[:, None, :]
    G = pd.DataFrame(same.mean(axis=0), index=list(dd), columns=list(dd))
    n_types = labels.max(axis=1) + 1
    return PermutationResult(G=G, labels=labels, n_types=n_types, models=tuple(dd), T=int(T), rho=int(rho),
                             e=lv.value, seed=int(seed), solver=solver, wall_s=time.perf_counter() - t0)


def _study_models(datasets, models) -> dict:
    """The models W of the study: ``datasets`` (or the ``models`` of it), at least two."""
    dd = as_datasets(datasets)
    if models is not None:
        missing = [m for m in models if m not in dd]
        if missing:
            raise MoralkitError(f"models {missing} are not in the datasets ({list(dd)})")
        dd = {m: dd[m] for m in models}
    if len(dd) < 2:
        raise MoralkitError(f"the permutation approach needs at least 2 models, got {len(dd)}; "
                            "collect or add more models")
    return dd


def _check_study_args(T, seed, solver) -> None:
    check_int(T, "T (number of synthetic datasets)", minimum=1)
    check_int(seed, "seed", minimum=0)
    if solver != "exact":
        if solver not in SOLVERS:
            raise MoralkitError(f"unknown solver {solver!r}; choose 'exact' or one of {SOLVERS}")
        get_solver(solver)  # fail early when missing


def _observation_lookup(ri) -> list:
    """For each model, the observation index in the full pool of each of its dataset positions (-1: none)."""
    obs_of, start = [], 0
    for p in ri.positions:
        lut = np.full(max(int(p.max()) + 1 if len(p) else 0, 1), -1, dtype=np.int64)
        lut[p] = np.arange(start, start + len(p))
        obs_of.append(lut)
        start += len(p)
    return obs_of


def _run_all_draws(args, T: int, seed: int, n_jobs, chunk_size, progress: bool, M: int) -> np.ndarray:
    """Labels (T, M) of every draw, in chunks of draws (joblib workers when ``n_jobs != 1``).

    Each draw t has its own SeedSequence (``SeedSequence(seed).spawn(T)[t]``), so the labels do not
    depend on the chunks or the workers."""
    from joblib import Parallel, delayed
    from tqdm import tqdm

    seeds = np.random.SeedSequence(seed).spawn(T)
    if n_jobs == 1:
        chunk = chunk_size or SERIAL_CHUNK
    else:
        from joblib import effective_n_jobs

        chunk = chunk_size or max(1, int(np.ceil(T / (8 * max(1, effective_n_jobs(n_jobs))))))
    chunks = [list(range(i, min(T, i + chunk))) for i in range(0, T, chunk)]
    # disable=None: a bar on a terminal only, never as stderr text on a notebook page
    bar = tqdm(total=T, desc="synthetic datasets", disable=None if progress else True)
    parts = []
    if n_jobs == 1:
        for ts in chunks:
            parts.append(_run_draws(ts, [seeds[t] for t in ts], *args))
            bar.update(len(ts))
    else:
        gen = Parallel(n_jobs=n_jobs, return_as="generator")(
            delayed(_run_draws)(ts, [seeds[t] for t in ts], *args) for ts in chunks)
        for ts, lab in zip(chunks, gen):
            parts.append(lab)
            bar.update(len(ts))
    bar.close()
    return np.concatenate(parts) if parts else np.zeros((0, M), np.int64)
