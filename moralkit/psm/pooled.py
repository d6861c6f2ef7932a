"""Pooled observations of several models: the data D^B of Seror (2025), Section 2.4.

Every round keeps its own effective corner and prices, so each observation is
priced in each round's own coordinates (eq. (1) and Definition 1).
:func:`pool` builds the :class:`PooledData` that the exact solver
(:mod:`moralkit.psm.partition`) and the MILP of Proposition 1
(:mod:`moralkit.psm.milp`) both take; :func:`revealed_relations` gives its
relations R0_e and P0_e. :func:`as_datasets` and :func:`check_pooled` are the input checks those modules share; the
rationality level ``e`` is checked once by :func:`moralkit.psm.level.rationality_level`.

References
----------
Seror, A. (2025). *The Moral Mind(s) of Large Language Models*, Section 2.2
(Definition 1) and Section 2.4 (the pooled data D^B).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from ..errors import MoralkitError
from .dataset import PSMDataset
from .level import RationalityLevel, rationality_level
from .rp import expenditure_matrix, relations

__all__ = ["PooledData", "pool", "revealed_relations", "as_datasets", "check_pooled"]


@dataclass
class PooledData:
    """Pooled observations of several models (Section 2.4, data D^B).

    Attributes
    ----------
    models : tuple of str
        Model labels; ``obs_model`` indexes into it.
    obs_model : ndarray (n,) of int
        Model owning each observation.
    corners, prices, choices : ndarray (n, 5) of int
        Effective corner, prices and chosen answer (raw 0..5) of each observation.
    round_id : ndarray (n,) of int
        Nominal round ``corner_index * 5 + price_index`` (-1 when unknown).
    obs_round : ndarray (n,) of int
        Position of the observation in its model's :class:`PSMDataset`.
    E : ndarray (n, n) of int
        ``E[r, k] = p^r . q^k_{o^r}`` (:func:`moralkit.psm.rp.expenditure_matrix`).
    """

    models: tuple
    obs_model: np.ndarray
    corners: np.ndarray
    prices: np.ndarray
    choices: np.ndarray
    round_id: np.ndarray
    obs_round: np.ndarray
    E: np.ndarray

    @property
    def n_obs(self) -> int:
        return len(self.obs_model)

    @property
    def n_models(self) -> int:
        return len(self.models)

    def same_bundle(self) -> np.ndarray:
        """Boolean (n, n): observations ``r`` and ``k`` chose the same raw answer."""
        code = self.choices @ (6 ** np.arange(5))
        return code[:, None] == code[None, :]

    def subset(self, obs) -> "PooledData":
        """The pooled data restricted to observations ``obs`` (mask or indices).

        Model labels are kept (models without observations left stay listed).
        """
        obs = np.asarray(obs)
        if obs.dtype == bool:
            obs = np.nonzero(obs)[0]
        return PooledData(self.models, self.obs_model[obs], self.corners[obs], self.prices[obs],
                          self.choices[obs], self.round_id[obs], self.obs_round[obs],
                          self.E[np.ix_(obs, obs)])

    def restrict_models(self, models) -> "PooledData":
        """The pooled data of the given models only (labels re-indexed)."""
        idx = [self.models.index(m) for m in models]
        keep = np.isin(self.obs_model, idx)
        sub = self.subset(keep)
        remap = {old: new for new, old in enumerate(idx)}
        sub.obs_model = np.array([remap[int(i)] for i in sub.obs_model], dtype=np.int64)
        sub.models = tuple(models)
        return sub


def as_datasets(datasets) -> dict:
    """``{model: PSMDataset}`` from a dict or an iterable of :class:`PSMDataset` (labels must be distinct).

    The input check shared by every function that takes several models' datasets.

    Raises
    ------
    ValueError
        PooledData instead of datasets, an object that is not a PSMDataset, or a label given twice.
    """
    if isinstance(datasets, PooledData):
        raise MoralkitError("expected PSM datasets, got PooledData; pass the PooledData to the solver directly")
    if isinstance(datasets, Mapping):
        out = dict(datasets)
    else:
        out = {}
        for ds in datasets:
            if not isinstance(ds, PSMDataset):
                raise MoralkitError(f"expected PSMDataset objects, got {type(ds).__name__}")
            if ds.model in out:
                raise MoralkitError(f"model {ds.model!r} appears twice; give every dataset a distinct model label")
            out[ds.model] = ds
    for k, ds in out.items():
        if not isinstance(ds, PSMDataset):
            raise MoralkitError(f"{k!r}: expected a PSMDataset, got {type(ds).__name__}")
    return out


def pool(datasets, rounds: Mapping[str, Sequence[int]] | None = None) -> PooledData:
    """Pool the answered constrained rounds of several models.

    Parameters
    ----------
    datasets : dict {model: PSMDataset} or iterable of PSMDataset
        One dataset per model (e.g. :func:`moralkit.psm.dataset.read_psm`).
    rounds : dict {model: indices}, optional
        Positions (into each model's dataset) of the rounds to pool; default all
        answered rounds. Unanswered rounds are rejected.

    Returns
    -------
    PooledData

    References
    ----------
    Seror (2025), Section 2.4 (D^B combines the constrained rounds of all models in B).
    """
    dd = as_datasets(datasets)
    if not dd:
        raise MoralkitError("no datasets to pool; pass at least one PSMDataset")
    parts = []
    for mi, (name, ds) in enumerate(dd.items()):
        if rounds is None:
            idx = np.nonzero(ds.answered)[0]
        else:
            idx = np.asarray(rounds.get(name, []), dtype=np.int64)
            if idx.size and (idx.min() < 0 or idx.max() >= ds.n_rounds):
                raise MoralkitError(f"{name}: round positions must be in 0..{ds.n_rounds - 1}")
            if idx.size and not ds.answered[idx].all():
                raise MoralkitError(f"{name}: some requested rounds are unanswered (chosen = 0); "
                                    "draw only from answered rounds")
        if ds.corner_index is not None and ds.price_index is not None:
            rid = ds.corner_index[idx] * 5 + ds.price_index[idx]
        else:
            rid = np.full(len(idx), -1, dtype=np.int64)
        ch = ds.options[idx, ds.chosen[idx] - 1] if len(idx) else np.zeros((0, 5), np.int64)
        parts.append((np.full(len(idx), mi), ds.corners[idx], ds.prices[idx], ch, rid, idx))
    cat = [np.concatenate([p[j] for p in parts]).astype(np.int64) for j in range(6)]
    cat[1:4] = [a.reshape(-1, 5) for a in cat[1:4]]
    E = expenditure_matrix(cat[1], cat[2], cat[3]) if len(cat[0]) else np.zeros((0, 0), np.int64)
    return PooledData(tuple(dd), cat[0], cat[1], cat[2], cat[3], cat[4], cat[5], np.asarray(E))


def revealed_relations(pooled: PooledData, e: float | RationalityLevel = 1.0):
    """Direct revealed preference relations R0_e and P0_e on pooled observations.

    ``e`` is the rationality level (a float, a Fraction or a
    :class:`~moralkit.psm.level.RationalityLevel`, checked once by
    :func:`~moralkit.psm.level.rationality_level`).

    Computed exactly by :func:`moralkit.psm.rp.relations` (no floating-point rounding in
    ``e E[r, r]`` versus ``E[r, k]``), with the same-bundle clause of Definition 1.

    Returns
    -------
    R0, P0 : ndarray (n, n) of bool
        ``R0[r, k]``: ``e E[r, r] >= E[r, k]`` or same bundle; ``P0[r, k]``:
        ``e E[r, r] > E[r, k]`` (Definition 1 with e^r = e for every round).
    """
    e = rationality_level(e)
    R0, P0 = relations(pooled.E, e, same_bundle=pooled.same_bundle())
    return np.ascontiguousarray(R0), np.ascontiguousarray(P0)


def check_pooled(pooled) -> None:
    """Raise a ValueError unless ``pooled`` is a :class:`PooledData` (from :func:`pool`)."""
    if not isinstance(pooled, PooledData):
        raise MoralkitError(f"expected PooledData (see moralkit.psm.pooled.pool), got {type(pooled).__name__}")
