"""The random datasets of Procedure 1: how they are seeded, split into chunks and drawn.

The random-choice test (:mod:`moralkit.psm.rationality`, the CCEI) and its Houtman–Maks variant
(:mod:`moralkit.psm.hm_random_choice`) compare a model with the *same* synthetic datasets ``D^m_n``:
in each answered round an answer drawn uniformly from the alternatives the model saw there. Both
draw them here, so that the two indices are computed on identical data.

The synthetic datasets of model ``m`` are drawn in fixed chunks of :data:`CHUNK_SIZE`; chunk ``c``
uses the generator ``SeedSequence([seed, key(m)], spawn_key=(c,))`` where ``key(m)`` is
:func:`moralkit.psm.dataset.model_key` of the model's label (SHA-256). The draws therefore depend
only on ``seed``, the model's data and ``n_datasets``: not on the number of workers, on how the
work is split, nor on which other models are tested alongside.

References
----------
Seror, A. (2025). *The Moral Mind(s) of Large Language Models*, Section 2.3 (Procedure 1, eq. (4)).

Examples
--------
>>> chunk_sizes(250)
[100, 100, 50]
>>> int(chunk_rng(0, "sim-a", 1).integers(0, 100)) == int(chunk_rng(0, "sim-a", 1).integers(0, 100))
True
"""

from __future__ import annotations

import numpy as np

from ..errors import MoralkitError
from .dataset import PSMDataset, model_key

__all__ = ["CHUNK_SIZE", "chunk_rng", "chunk_sizes", "chunk_choices", "answered_part"]

#: Synthetic datasets per seeded chunk (fixed: changing it changes the draws).
CHUNK_SIZE: int = 100


def chunk_rng(seed: int, model: str, chunk: int) -> np.random.Generator:
    """The generator of chunk ``chunk`` of model ``model``'s synthetic datasets (see the module docstring)."""
    ss = np.random.SeedSequence([int(seed), model_key(model)], spawn_key=(int(chunk),))
    return np.random.default_rng(ss)


def chunk_sizes(n_datasets: int) -> list[int]:
    """The sizes of the chunks that hold ``n_datasets`` synthetic datasets: full chunks, then the rest."""
    n_full, rest = divmod(n_datasets, CHUNK_SIZE)
    return [CHUNK_SIZE] * n_full + ([rest] if rest else [])


def chunk_choices(seed: int, model: str, chunk: int, size: int, n_rounds: int, n_options: int) -> np.ndarray:
    """The answers of the ``size`` synthetic datasets of one chunk: ``(size, n_rounds)`` option indices.

    Each is uniform on ``0 .. n_options - 1``, the alternatives the model saw in that round.
    """
    return chunk_rng(seed, model, chunk).integers(0, n_options, size=(size, n_rounds))


def answered_part(ds: PSMDataset) -> PSMDataset:
    """The answered rounds of ``ds`` (missing rounds excluded), the data Procedure 1 tests.

    Raises
    ------
    MoralkitError
        ``ds`` is not a :class:`~moralkit.psm.dataset.PSMDataset`, or it has no answered constrained round.
    """
    if not isinstance(ds, PSMDataset):
        raise MoralkitError(f"expected a moralkit.psm.dataset.PSMDataset, got {type(ds).__name__}")
    v = ds.valid()
    if v.n_obs == 0:
        raise MoralkitError(f"{ds.model}: no answered constrained round; the test needs at least one "
                            "(drop the model or collect its answers)")
    return v
