"""The draws of the permutation approach side by side: ``rng.permutation`` and ``rng.choice`` replayed in arrays.

:func:`moralkit.psm.permutation.permutation_study` makes each synthetic dataset with its own generator
``default_rng(ss)``: the models in the order ``rng.permutation(M)``, and for each the sorted
``rng.choice(free, rho, replace=False)`` of its rounds not yet taken. Tens of thousands of such draws cost
more in calls than in arithmetic (issue 30), so :func:`replay_draws` reads each generator's 64-bit outputs
once and replays both calls for a whole chunk of draws in arrays, with the same results:

- a new PCG64 generator hands out 32-bit words as the low then the high half of each 64-bit output
  (``random_raw``), keeping an unused high half for the next 32-bit word;
- ``permutation(M)`` shuffles ``arange(M)``: for ``i`` from M - 1 down to 1, a word ``& mask`` (the
  smallest all-ones mask covering ``i``) is redrawn while above ``i``, and positions ``i`` and that value swap;
- ``choice(free, rho, replace=False)`` (at most 10,000 free rounds) runs Floyd's algorithm: for
  ``j = n - rho, ..., n - 1`` a bounded integer in ``[0, j]`` by Lemire's method (``(w * (j + 1)) >> 32``
  unless the low half of the product is below ``j + 1``), ``j`` itself when that value is already taken;
  then it shuffles its rho values with rho - 1 more bounded integers, whose values do not matter here (the
  picks are sorted).

A draw this cannot follow exactly -- another bit generator, a big-endian machine, a possible Lemire
rejection (probability below 1e-5 per draw), more rejections in the permutation than the spare words
cover, a model with at most rho free rounds -- is made by the caller's own draw function instead. Each
chunk's first replayed draw is also made by that function and compared, picks and generator state: a NumPy
whose Generator no longer draws this way (it promises no stream compatibility between versions) gets every
draw from the caller's function.
``tests/psm/test_permutation.py`` pins the two against each other, generator state included.
"""

from __future__ import annotations

import numpy as np

__all__ = ["PERM_SPARE", "SERIAL_CHUNK", "ReplayedRng", "replay_draws", "stream_state"]

#: Draws per chunk of ``permutation_study(n_jobs=1)``: replayed side by side, 2.5x less CPU per draw than
#: one by one (64 draws: 2x); the progress bar moves once per chunk.
SERIAL_CHUNK = 256
#: 64-bit words read beyond the fewest a draw can use (for rejections in the permutation).
PERM_SPARE = 3
_U32 = np.uint64(0xFFFFFFFF)


class ReplayedRng:
    """The generator ``default_rng(ss)`` after ``n_words`` 64-bit outputs (``odd``: with the high half of the
    last one kept for the next 32-bit word, as ``next_uint32`` leaves it), built when first used: Procedure 2
    draws from it only to break a tie."""

    __slots__ = ("ss", "n_words", "odd", "_rng")

    def __init__(self, ss, n_words: int, odd: bool):
        self.ss, self.n_words, self.odd, self._rng = ss, n_words, odd, None

    def _get(self):
        if self._rng is None:
            rng = np.random.default_rng(self.ss)
            bg = rng.bit_generator
            last = bg.random_raw(self.n_words)
            if self.odd:
                st = bg.state
                st["has_uint32"], st["uinteger"] = 1, int(last[-1] >> np.uint64(32))
                bg.state = st
            self._rng = rng
        return self._rng

    def integers(self, *args, **kwargs):
        return self._get().integers(*args, **kwargs)


def _permutations(U: np.ndarray, M: int, limit: int, ok: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``rng.permutation(M)`` of every draw (rows of the 32-bit words ``U``) and the words it used; a draw
    needing more than ``limit`` words is marked in ``ok``."""
    B = len(U)
    rows = np.arange(B)
    order = np.tile(np.arange(M), (B, 1))
    pos = np.zeros(B, dtype=np.int64)
    for i in range(M - 1, 0, -1):
        mask = np.uint64((1 << i.bit_length()) - 1)
        todo = rows.copy()
        v = np.zeros(B, dtype=np.int64)
        while len(todo):
            ok[todo[pos[todo] >= limit]] = False
            todo = todo[pos[todo] < limit]
            w = (U[todo, pos[todo]] & mask).astype(np.int64)
            pos[todo] += 1
            done = w <= i
            v[todo[done]] = w[done]
            todo = todo[~done]
        vi = order[rows, v]
        order[rows, v] = order[:, i]
        order[:, i] = vi
    return order, pos


def _floyd(x: np.ndarray, n: np.ndarray, rho: int, width: int) -> np.ndarray:
    """Floyd's picks (k, rho) among the ``n`` free rounds of each row, in increasing order, from the Lemire
    products ``x`` (k, rho)."""
    k = len(x)
    v = (x >> np.uint64(32)).astype(np.int64)
    chosen = np.zeros((k, width), dtype=bool)
    rk = np.arange(k)
    for i in range(rho):  # j = n - rho + i drawn in [0, j]; j itself when the value is already taken
        vi = np.where(chosen[rk, v[:, i]], n - rho + i, v[:, i])
        chosen[rk, vi] = True
    return np.nonzero(chosen)[1].reshape(k, rho)


def _one(draw, ss) -> tuple:
    rng = np.random.default_rng(ss)
    return draw(rng), rng


def replay_draws(round_ids, positions, n_ids: int, rho: int, seeds, draw) -> list:
    """``[(draw(rng), rng) for rng = default_rng(ss) of seeds]``, where ``draw(rng)`` is one draw (per model,
    the sorted positions of its rho picked rounds), made here side by side (see the module docstring). Each
    generator returned is at the state ``draw`` leaves (a :class:`ReplayedRng` when the draw was replayed).

    Parameters
    ----------
    round_ids, positions : list of ndarray
        Per model, the nominal round id and the dataset position of each answered round.
    n_ids : int
        Number of round ids.
    """
    seeds = list(seeds)
    B, M = len(seeds), len(round_ids)
    if B == 0:
        return []
    L = max(len(r) for r in round_ids)
    rngs = [np.random.default_rng(ss) for ss in seeds]
    if type(rngs[0].bit_generator) is not np.random.PCG64 or not np.little_endian or rho < 1 or L > 10000:
        return [_one(draw, ss) for ss in seeds]
    per = 2 * rho - 1
    n_words = (M - 1 + M * per + 1) // 2 + PERM_SPARE
    U = np.stack([r.bit_generator.random_raw(n_words) for r in rngs]).view(np.uint32).astype(np.uint64)
    ok = np.ones(B, dtype=bool)
    order, pos = _permutations(U, M, U.shape[1] - M * per, ok)
    R = np.full((M, L), n_ids, dtype=np.int64)  # padded; column n_ids of ``taken`` is never free
    P = np.zeros((M, L), dtype=np.int64)
    for m, (r, p) in enumerate(zip(round_ids, positions)):
        R[m, :len(r)], P[m, :len(p)] = r, p
    taken = np.zeros((B, n_ids + 1), dtype=bool)
    taken[:, n_ids] = True
    out = np.zeros((B, M, rho), dtype=np.int64)
    steps, shuffle_excl = np.arange(1, rho + 1, dtype=np.uint64), np.arange(rho, 1, -1, dtype=np.uint64)
    for slot in range(M):
        sel = np.nonzero(ok)[0]
        models = order[sel, slot]
        rid = R[models]
        free = ~taken[sel[:, None], rid]
        n = free.sum(axis=1)
        words = U[sel[:, None], (pos[sel] + slot * per)[:, None] + np.arange(per)]
        e = np.maximum(n - rho, 0).astype(np.uint64)[:, None] + steps
        x = words[:, :rho] * e
        good = ((n > rho) & ~((x & _U32) < e).any(axis=1)  # n == rho: j = 0 draws no word
                & ~(((words[:, rho:] * shuffle_excl) & _U32) < shuffle_excl).any(axis=1))
        ok[sel[~good]] = False
        if not good.any():
            continue
        sel, models, rid, free = sel[good], models[good], rid[good], free[good]
        c = _floyd(x[good], n[good], rho, L)
        cols = np.take_along_axis(np.argsort(~free, axis=1, kind="stable"), c, axis=1)  # the c-th free round
        taken[sel[:, None], np.take_along_axis(rid, cols, axis=1)] = True
        out[sel, models] = P[models[:, None], cols]
    total = pos + M * per  # 32-bit words used
    res = [(list(out[t]), ReplayedRng(ss, int((total[t] + 1) // 2), bool(total[t] % 2))) if ok[t]
           else _one(draw, ss) for t, ss in enumerate(seeds)]
    if ok.any() and not _agrees(res[int(np.argmax(ok))], _one(draw, seeds[int(np.argmax(ok))])):
        # NumPy's Generator may change its algorithms between versions (it promises no stream
        # compatibility): where the replay no longer follows ``draw``, every draw is made by ``draw``
        return [_one(draw, ss) for ss in seeds]
    return res


def stream_state(bit_generator) -> dict:
    """The state of a bit generator as far as its next outputs depend on it.

    ``bit_generator.state`` also holds ``uinteger``, the high half of the last 64-bit output split into
    32-bit words; once that half has been used (``has_uint32`` 0), the value left there is never read
    again. A generator that used it and one that never split an output then give the same stream but
    different ``state`` dicts, so the unused value is set to 0 here.
    """
    st = bit_generator.state
    if "has_uint32" in st and not st["has_uint32"]:
        st = {**st, "uinteger": 0}
    return st


def _agrees(replayed, made) -> bool:
    """Whether a replayed draw equals the one ``draw`` made: the picks and the generator's state after them
    (:func:`stream_state`: a replayed generator never holds the spent half-word that ``draw``'s may)."""
    (picks, rng), (ref_picks, ref_rng) = replayed, made
    return (len(picks) == len(ref_picks) and all(np.array_equal(a, b) for a, b in zip(picks, ref_picks))
            and stream_state(rng._get().bit_generator) == stream_state(ref_rng.bit_generator))
