"""Numba kernels of :func:`moralkit.psm.ccei_many.ccei_subsets`: the CCEI of many subsets of one matrix.

The ratios ``E[r, k] / E[r, r]`` and their ranks are shared by every subset; each subset's CCEI is
the smallest ratio level whose graph on the subset has a cycle (bitset search of
:mod:`moralkit.psm._rp_kernels`). Validated input assumed: these functions check nothing.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._rp_kernels import has_cycle


@njit(cache=True, nogil=True)
def ratio_levels(R):
    """The distinct off-diagonal values ``<= 1`` of ``R`` (sorted) and each entry's rank among them.

    ``levels[r, k]`` is the index of ``R[r, k]`` in ``vals`` (``len(vals)`` for values above 1 and on
    the diagonal), so ``R[r, k] <= vals[L]`` iff ``levels[r, k] <= L`` for every ``L``.
    """
    T = R.shape[0]
    buf = np.empty(T * T, dtype=np.float64)
    n = 0
    for r in range(T):
        for k in range(T):
            if k != r and R[r, k] <= 1.0:
                buf[n] = R[r, k]
                n += 1
    srt = np.sort(buf[:n])
    m = 0
    for i in range(n):
        if m == 0 or srt[i] != srt[m - 1]:
            srt[m] = srt[i]
            m += 1
    vals = srt[:m].copy()
    levels = np.full((T, T), m, dtype=np.int64)
    for r in range(T):
        for k in range(T):
            if k != r and R[r, k] <= 1.0:
                levels[r, k] = np.searchsorted(vals, R[r, k])
    return vals, levels


@njit(cache=True, nogil=True)
def heap_argsort(x):
    """Indices that sort ``x`` ascending (heapsort; the order among equal values is unspecified, as for
    ``np.argsort``). Written out because numba's ``np.argsort`` compiles its generic quicksort, about 1.5 s
    of a fresh clone's first run, for a sort of at most a few thousand values."""
    n = x.shape[0]
    idx = np.arange(n)
    for start in range(n // 2 - 1, -1, -1):
        _sift_down(x, idx, start, n)
    for end in range(n - 1, 0, -1):
        t = idx[0]
        idx[0] = idx[end]
        idx[end] = t
        _sift_down(x, idx, 0, end)
    return idx


@njit(cache=True, inline="always")
def _sift_down(x, idx, root, end):
    """Restore the max-heap order of ``x[idx[root:end]]`` below ``root``."""
    while True:
        child = 2 * root + 1
        if child >= end:
            return
        if child + 1 < end and x[idx[child]] < x[idx[child + 1]]:
            child += 1
        if x[idx[root]] < x[idx[child]]:
            t = idx[root]
            idx[root] = idx[child]
            idx[child] = t
            root = child
        else:
            return


@njit(cache=True, nogil=True)
def int_ratio_levels(E, amax):
    """:func:`ratio_levels` of ``E[r, k] / E[r, r]`` for an integer ``E`` with entries in ``0..amax``.

    The same floats (``float(E[r, k]) / float(E[r, r])``) and ranks, found through a table of the
    (numerator, denominator) pairs that occur instead of sorting all ``T^2`` ratios. Branch-free
    inner loops: a numerator above its denominator (a ratio above 1) goes to a spare row.
    """
    T = E.shape[0]
    spare = amax + 1
    seen = np.zeros((amax + 2, amax + 1), dtype=np.bool_)
    for r in range(T):
        d = E[r, r]
        for k in range(r):
            a = E[r, k]
            seen[a if a <= d else spare, d] = True
        for k in range(r + 1, T):
            a = E[r, k]
            seen[a if a <= d else spare, d] = True
    na = 0
    for a in range(amax + 1):
        for d in range(1, amax + 1):
            if seen[a, d]:
                na += 1
    num = np.empty(na, dtype=np.int64)
    den = np.empty(na, dtype=np.int64)
    x = np.empty(na, dtype=np.float64)
    j = 0
    for a in range(amax + 1):
        for d in range(1, amax + 1):
            if seen[a, d]:
                num[j] = a
                den[j] = d
                x[j] = np.float64(a) / np.float64(d)
                j += 1
    order = heap_argsort(x)  # ties get one rank below, so their order does not matter
    vals = np.empty(na, dtype=np.float64)
    rank = np.zeros((amax + 2, amax + 1), dtype=np.int64)
    m = 0
    for i in range(na):
        v = x[order[i]]
        if m == 0 or v != vals[m - 1]:
            vals[m] = v
            m += 1
        rank[num[order[i]], den[order[i]]] = m - 1
    rank[spare, :] = m
    levels = np.empty((T, T), dtype=np.int64)
    for r in range(T):
        d = E[r, r]
        for k in range(T):
            a = E[r, k]
            levels[r, k] = rank[a if a <= d else spare, d]
        levels[r, r] = m
    return vals[:m].copy(), levels


@njit(cache=True)
def build_level_graph(lv, m, L, adj):
    """adj <- bitset graph of the edges a -> b with ``lv[a, b] <= L`` (a, b < m), without branches."""
    W = adj.shape[1]
    for a in range(m):
        for w in range(W):
            word = np.uint64(0)
            b0 = w * 64
            for t in range(min(64, max(m - b0, 0))):
                word |= np.uint64(lv[a, b0 + t] <= L) << np.uint64(t)
            adj[a, w] = word


@njit(cache=True, nogil=True)
def subset_levels(levels, n_levels, subsets, sizes):
    """For each subset ``subsets[i, :sizes[i]]`` of observations: the smallest level with a cycle.

    The graph of level ``L`` on a subset has the edges ``a -> b`` (``a != b`` in the subset) with
    ``levels[a, b] <= L``; returns ``n_levels`` for a subset without a cycle at any level (and for
    subsets of fewer than two observations). A subset of the previous subset has a level at least
    the previous one (its graphs are induced subgraphs), often exactly that one: it is tried first.
    Otherwise a binary search up to the cheapest 2-cycle (a level with a cycle).
    """
    T = levels.shape[0]
    W = max(1, (T + 63) // 64)
    adj = np.zeros((T, W), dtype=np.uint64)
    white = np.zeros(W, dtype=np.uint64)
    onstack = np.zeros(W, dtype=np.uint64)
    stack = np.zeros(T + 1, dtype=np.int64)
    prev = np.zeros(T, dtype=np.bool_)  # members of the previous subset
    lv = np.empty((T, T), dtype=np.int64)  # the subset's levels, contiguous
    out = np.empty(sizes.shape[0], dtype=np.int64)
    for i in range(sizes.shape[0]):
        m = sizes[i]
        sub = subsets[i]
        lo = 0
        nested = False
        if i > 0:
            nested = True
            for a in range(m):
                if not prev[sub[a]]:
                    nested = False
                    break
            if nested:
                lo = out[i - 1]
            prev[:] = False
        for a in range(m):
            prev[sub[a]] = True
        if m < 2 or n_levels == 0 or lo >= n_levels:
            out[i] = n_levels
            continue
        for a in range(m):
            r = sub[a]
            for b in range(m):
                lv[a, b] = levels[r, sub[b]]
            lv[a, a] = n_levels  # no self-loop
        if nested:
            build_level_graph(lv, m, lo, adj)
            if has_cycle(adj, m, white, onstack, stack):
                out[i] = lo
                continue
            lo += 1
            if lo >= n_levels:
                out[i] = n_levels
                continue
        hi = n_levels  # the cheapest 2-cycle: a cycle at level hi
        for a in range(m):
            for b in range(a + 1, m):
                v = max(lv[a, b], lv[b, a])
                if v < hi:
                    hi = v
        if hi == n_levels:
            hi = n_levels - 1
            build_level_graph(lv, m, hi, adj)
            if not has_cycle(adj, m, white, onstack, stack):
                out[i] = n_levels
                continue
        while lo < hi:  # no cycle below lo, a cycle at hi
            mid = (lo + hi) // 2
            build_level_graph(lv, m, mid, adj)
            if has_cycle(adj, m, white, onstack, stack):
                hi = mid
            else:
                lo = mid + 1
        out[i] = hi
    return out


# the shipped compiled cache of these kernels (moralkit.psm.kernel_cache): installed into numba's cache if absent
from .kernel_cache import install as _install_compiled  # noqa: E402

_install_compiled(globals())
