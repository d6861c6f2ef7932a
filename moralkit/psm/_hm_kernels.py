"""Numba kernels of :mod:`moralkit.psm.houtman_maks` (validated input assumed: they check nothing).

``R`` and ``P`` are the boolean relations ``R0_e`` and ``P0_e`` of one strongly connected
component (``R[a, b]``: round a is revealed preferred to round b). A GARP_e-violating cycle
is a strict edge ``u P0 v`` closed by an ``R0`` path from v back to u.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def shortest_violating_cycles(R, P, inc):
    """For every strict edge ``u P0 v`` between included rounds that lies on a cycle within
    ``inc``: a shortest such cycle (u -> v, then a shortest R0 path back from v to u).

    Returns (flat, starts): the rounds of cycle c are ``flat[starts[c]:starts[c + 1]]``.
    """
    n = R.shape[0]
    dist = np.empty(n, np.int64)
    prev = np.empty(n, np.int64)
    queue = np.empty(n, np.int64)
    flat = np.empty(n * n, np.int64)
    starts = np.zeros(n + 1, np.int64)
    nc = 0
    pos = 0
    for v in range(n):
        if not inc[v]:
            continue
        for i in range(n):
            dist[i] = -1
        dist[v] = 0
        prev[v] = -1
        head = 0
        tail = 1
        queue[0] = v
        while head < tail:
            a = queue[head]
            head += 1
            for b in range(n):
                if inc[b] and dist[b] < 0 and R[a, b]:
                    dist[b] = dist[a] + 1
                    prev[b] = a
                    queue[tail] = b
                    tail += 1
        for u in range(n):
            if inc[u] and u != v and P[u, v] and dist[u] >= 0:
                if pos + dist[u] + 1 > flat.shape[0]:  # grow the buffer
                    bigger = np.empty(2 * flat.shape[0] + n, np.int64)
                    bigger[:pos] = flat[:pos]
                    flat = bigger
                if nc + 2 > starts.shape[0]:
                    s2 = np.zeros(2 * starts.shape[0], np.int64)
                    s2[:nc + 1] = starts[:nc + 1]
                    starts = s2
                w = u
                while w != -1:
                    flat[pos] = w
                    pos += 1
                    w = prev[w]
                nc += 1
                starts[nc] = pos
    return flat[:pos].copy(), starts[:nc + 1].copy()


@njit(cache=True)
def _push_path(flat, starts, weights, pos, nc, prev, u, weight):
    length = 0
    x = u
    while x != -1:
        length += 1
        x = prev[x]
    if pos + length > flat.shape[0]:
        bigger = np.empty(2 * flat.shape[0] + length, np.int64)
        bigger[:pos] = flat[:pos]
        flat = bigger
    x = u
    while x != -1:
        flat[pos] = x
        pos += 1
        x = prev[x]
    weights[nc] = weight
    nc += 1
    starts[nc] = pos
    return pos, nc, flat


@njit(cache=True)
def lightest_violating_cycles(R, P, y, threshold, all_edges):
    """Cycle cuts at a fractional point ``y`` in [0, 1]^n.

    A violating cycle C gives the valid inequality ``sum_{i in C} y_i <= |C| - 1``, violated at
    ``y`` iff ``sum_{i in C} (1 - y_i) < 1``. For every round v, Dijkstra from v over R0 edges
    with node weights ``1 - y`` finds, for each strict edge ``u P0 v``, the lightest cycle
    through it; cycles lighter than ``threshold`` (< 1) are returned as (flat, starts, weights).
    Rounds with ``y`` ~ 0 cannot lie on a violated cycle and are skipped.
    """
    n = R.shape[0]
    w = np.empty(n)
    for i in range(n):
        w[i] = 1.0 - y[i]
        if w[i] < 0.0:
            w[i] = 0.0
    act = w < threshold
    dist = np.empty(n)
    prev = np.empty(n, np.int64)
    done = np.zeros(n, np.bool_)
    flat = np.empty(4 * n, np.int64)
    starts = np.zeros(n * n + 1, np.int64)
    weights = np.empty(n * n)
    nc = 0
    pos = 0
    for v in range(n):
        if not act[v]:
            continue
        for i in range(n):
            dist[i] = np.inf
            done[i] = False
        dist[v] = w[v]
        prev[v] = -1
        while True:  # dense Dijkstra, stopped at the threshold
            a = -1
            best = threshold
            for i in range(n):
                if not done[i] and dist[i] < best:
                    best = dist[i]
                    a = i
            if a < 0:
                break
            done[a] = True
            for b in range(n):
                if act[b] and not done[b] and R[a, b]:
                    d = dist[a] + w[b]
                    if d < dist[b]:
                        dist[b] = d
                        prev[b] = a
        # the lightest cycle through v and each strict edge u P0 v closing it (only the lightest one
        # unless all_edges)
        bu = -1
        bw = threshold
        for u in range(n):
            if u != v and done[u] and P[u, v] and dist[u] < threshold:
                if all_edges:
                    pos, nc, flat = _push_path(flat, starts, weights, pos, nc, prev, u, dist[u])
                elif dist[u] < bw:
                    bw = dist[u]
                    bu = u
        if bu >= 0:
            pos, nc, flat = _push_path(flat, starts, weights, pos, nc, prev, bu, bw)
    return flat[:pos].copy(), starts[:nc + 1].copy(), weights[:nc].copy()


@njit(cache=True)
def greedy_consistent(R, P, order):
    """A GARP_e-consistent subset built greedily: the rounds in ``order``, each kept if it closes no
    violating cycle with those kept before (transitive closure of R0 maintained incrementally)."""
    n = R.shape[0]
    reach = np.zeros((n, n), np.bool_)  # reach[a, b]: a R0* b among the kept rounds (a reaches a)
    kept = np.zeros(n, np.bool_)
    into = np.zeros(n, np.bool_)
    outof = np.zeros(n, np.bool_)
    for x in order:
        for i in range(n):
            into[i] = False
            outof[i] = False
        into[x] = True
        outof[x] = True
        for a in range(n):
            if kept[a]:
                if R[a, x]:
                    for c in range(n):
                        if kept[c] and reach[c, a]:
                            into[c] = True
                if R[x, a]:
                    for c in range(n):
                        if kept[c] and reach[a, c]:
                            outof[c] = True
        ok = True
        for b in range(n):  # a new path a ->* x ->* b is violating if b P0 a
            if outof[b]:
                for a in range(n):
                    if into[a] and P[b, a]:
                        ok = False
                        break
            if not ok:
                break
        if not ok:
            continue
        kept[x] = True
        reach[x, x] = True
        for a in range(n):
            if into[a]:
                for b in range(n):
                    if outof[b]:
                        reach[a, b] = True
    return kept
