"""Numba kernels of :mod:`moralkit.psm.partition`: violating cycles in pooled data.

Validated input assumed: these functions check nothing. Call them through
:mod:`moralkit.psm.partition`, whose public functions validate their arguments once.
The strongly connected components come from :func:`moralkit.psm._rp_kernels.scc_labels`,
the package's one SCC routine.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._rp_kernels import scc_labels


@njit(cache=True)
def path01(R, comp, owner, src, dst):
    """Path src -> dst in R inside one SCC, minimising changes of model (0-1 BFS
    by levels: each level is the zero-cost closure of the previous one)."""
    n = R.shape[0]
    c = comp[src]
    INF = n + 1
    dist = np.full(n, INF, np.int64)
    prev = np.full(n, -1, np.int64)
    cur = np.empty(n, np.int64)
    nxt = np.empty(n, np.int64)
    stack = np.empty(n, np.int64)
    level = np.empty(n, np.int64)
    dist[src] = 0
    cur[0] = src
    ncur = 1
    d = 0
    while ncur > 0:
        sp = 0
        for i in range(ncur):
            stack[sp] = cur[i]
            sp += 1
        nl = 0
        while sp > 0:
            sp -= 1
            v = stack[sp]
            level[nl] = v
            nl += 1
            for w in range(n):
                if dist[w] > d and comp[w] == c and R[v, w] and owner[w] == owner[v]:
                    dist[w] = d
                    prev[w] = v
                    stack[sp] = w
                    sp += 1
        if dist[dst] <= d:
            break
        nn = 0
        for i in range(nl):
            v = level[i]
            for w in range(n):
                if dist[w] == INF and comp[w] == c and R[v, w]:
                    dist[w] = d + 1
                    prev[w] = v
                    nxt[nn] = w
                    nn += 1
        for i in range(nn):
            cur[i] = nxt[i]
        ncur = nn
        d += 1
    out = np.empty(n, np.int64)
    k = 0
    v = dst
    while v != -1:
        out[k] = v
        k += 1
        if v == src:
            break
        v = prev[v]
    return out[:k][::-1].copy()


@njit(cache=True)
def violation_models(R, P, owner, mask, max_tries):
    """Bit mask of the models on a GARP_e-violating cycle among the observations
    of the models in ``mask`` (0 when GARP_e holds). Among the first
    ``max_tries`` strict edges inside an SCC, the cycle with fewest models wins."""
    n = R.shape[0]
    inc = np.zeros(n, np.bool_)
    for i in range(n):
        if (mask >> owner[i]) & 1:
            inc[i] = True
    comp = scc_labels(R, inc)
    best = 0
    best_count = 1 << 30
    tries = 0
    for u in range(n):
        if not inc[u]:
            continue
        for v in range(n):
            if inc[v] and v != u and P[u, v] and comp[u] == comp[v]:
                # u P0 v and v R* u: the cycle u -> v -> ... -> u
                path = path01(R, comp, owner, v, u)
                bits = np.int64(1) << owner[u]
                for w in path:
                    bits |= np.int64(1) << owner[w]
                cnt = 0
                b = bits
                while b:
                    cnt += b & 1
                    b >>= 1
                if cnt < best_count:
                    best_count = cnt
                    best = bits
                tries += 1
                if tries >= max_tries or best_count == 1:
                    return best
    return best


@njit(cache=True)
def violating_cycle_obs(R, P, inc):
    """Observations of one GARP_e-violating cycle (empty when GARP_e holds)."""
    n = R.shape[0]
    comp = scc_labels(R, inc)
    owner = np.zeros(n, np.int64)
    for u in range(n):
        if not inc[u]:
            continue
        for v in range(n):
            if inc[v] and v != u and P[u, v] and comp[u] == comp[v]:
                return path01(R, comp, owner, v, u)
    return np.empty(0, np.int64)


@njit(cache=True)
def max_subsets(R, P, owner, masks, size, feasible, consistent, within, max_tries):
    """Every maximum subset of the models in the bit mask ``within`` whose pooled observations
    satisfy GARP_e, in increasing bit-mask order (``[0]`` when none is consistent on its own), and the
    number of :func:`violation_models` checks made.

    The loop of :meth:`moralkit.psm.partition.ExactLS.max_subsets`, compiled: ``feasible`` (no cut
    found so far excludes the mask) and ``consistent`` (known GARP_e-consistent) are updated in place,
    so the state carries over to the next call. The candidates of size ``k`` are listed before any
    of them is checked, and a cut found meanwhile removes the candidates it covers, as in the loop
    it replaces; the answer (all consistent subsets of maximum size) does not depend on that order.
    """
    nm = masks.shape[0]
    good = np.empty(nm, np.int64)
    cands = np.empty(nm, np.int64)
    n_checks = 0
    while True:
        k = 0
        for x in range(nm):
            if feasible[x] and (masks[x] & ~within) == 0 and size[x] > k:
                k = size[x]
        if k == 0:
            good[0] = 0
            return good[:1].copy(), n_checks
        nc = 0
        for x in range(nm):
            if feasible[x] and (masks[x] & ~within) == 0 and size[x] == k:
                cands[nc] = masks[x]
                nc += 1
        ng = 0
        for i in range(nc):
            c = cands[i]
            if not feasible[c]:
                continue  # cut by a cycle found meanwhile
            if consistent[c]:
                good[ng] = c
                ng += 1
                continue
            S = violation_models(R, P, owner, c, max_tries)
            n_checks += 1
            if S == 0:
                for x in range(nm):
                    if (masks[x] & ~c) == 0:
                        consistent[x] = True  # subsets of c
                good[ng] = c
                ng += 1
            else:
                for x in range(nm):
                    if (masks[x] & S) == S:
                        feasible[x] = False
        if ng > 0:
            return good[:ng].copy(), n_checks


# the shipped compiled cache of these kernels (moralkit.psm.kernel_cache): installed into numba's cache if absent
from .kernel_cache import install as _install_compiled  # noqa: E402

_install_compiled(globals())
