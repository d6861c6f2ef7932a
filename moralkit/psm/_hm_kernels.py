"""Numba kernels of :mod:`moralkit.psm.houtman_maks` (validated input assumed: they check nothing).

``R`` and ``P`` are the boolean relations ``R0_e`` and ``P0_e`` of one strongly connected
component (``R[a, b]``: round a is revealed preferred to round b). A GARP_e-violating cycle
is a strict edge ``u P0 v`` closed by an ``R0`` path from v back to u.
"""

from __future__ import annotations

import time

import numpy as np
from numba import njit, objmode


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
def _adjacency(R, act):
    """The R0 edges among the rounds ``act`` as adjacency lists: (adj, deg), a's are ``adj[a, :deg[a]]``."""
    n = R.shape[0]
    adj = np.empty((n, n), np.int64)
    deg = np.zeros(n, np.int64)
    for a in range(n):
        if act[a]:
            for b in range(n):
                if act[b] and R[a, b]:
                    adj[a, deg[a]] = b
                    deg[a] += 1
    return adj, deg


@njit(cache=True)
def _heap_less(hd, hi, i, j):
    return hd[i] < hd[j] or (hd[i] == hd[j] and hi[i] < hi[j])


@njit(cache=True)
def _heap_push(hd, hi, hn, d, a):
    """Push (d, a) on the binary min-heap ``hd``/``hi`` of ``hn`` entries (ordered by distance, then
    round); returns the new size."""
    i = hn
    hd[i] = d
    hi[i] = a
    while i > 0:
        p = (i - 1) >> 1
        if not _heap_less(hd, hi, i, p):
            break
        hd[i], hd[p] = hd[p], hd[i]
        hi[i], hi[p] = hi[p], hi[i]
        i = p
    return hn + 1


@njit(cache=True)
def _heap_pop(hd, hi, hn):
    """Remove the heap's top entry (read it from ``hd[0]``/``hi[0]`` first); returns the new size."""
    hn -= 1
    hd[0] = hd[hn]
    hi[0] = hi[hn]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= hn:
            break
        if c + 1 < hn and _heap_less(hd, hi, c + 1, c):
            c += 1
        if not _heap_less(hd, hi, c, i):
            break
        hd[i], hd[c] = hd[c], hd[i]
        hi[i], hi[c] = hi[c], hi[i]
        i = c
    return hn


@njit(cache=True)
def _dijkstra(v, w, adj, deg, P, threshold, all_edges, dist, prev, done, touched, hd, hi):
    """Dijkstra from v over R0 edges (``adj``/``deg``) with node weights ``w``, on the heap ``hd``/``hi``,
    stopped at the threshold (ties: lowest index) and, unless ``all_edges``, once the lightest round u
    with ``u P0 v`` is settled. Returns (number of touched rounds, that u or -1, its distance)."""
    dist[v] = w[v]
    prev[v] = -1
    touched[0] = v
    nt = 1
    hn = _heap_push(hd, hi, 0, w[v], v)
    bu = -1
    bw = threshold
    while hn > 0:  # Dijkstra over the touched rounds, stopped at the threshold (ties: lowest index)
        da = hd[0]
        a = hi[0]
        if not all_edges and da > bw:  # every round settled from here on is farther than the
            break  # lightest closing round found: the lightest cycle through v is known
        hn = _heap_pop(hd, hi, hn)
        if done[a] or da != dist[a]:  # a stale entry: a was settled, or reached more cheaply since
            continue
        done[a] = True
        if a != v and P[a, v] and (da < bw or (da == bw and a < bu)):
            bw = da
            bu = a
        for k in range(deg[a]):
            b = adj[a, k]
            if not done[b]:
                d = dist[a] + w[b]
                if d < dist[b] and d < threshold:
                    if dist[b] == np.inf:
                        touched[nt] = b
                        nt += 1
                    dist[b] = d
                    prev[b] = a
                    hn = _heap_push(hd, hi, hn, d, b)
    return nt, bu, bw


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
    adj, deg = _adjacency(R, act)  # a Dijkstra step scans a's neighbours only
    dist = np.full(n, np.inf)
    prev = np.empty(n, np.int64)
    done = np.zeros(n, np.bool_)
    touched = np.empty(n, np.int64)  # rounds given a finite distance (below the threshold) from v
    hd = np.empty(n * n + 1)  # a binary heap of (distance, round), lazy: at most one entry per relaxation
    hi = np.empty(n * n + 1, np.int64)
    flat = np.empty(4 * n, np.int64)
    m = n * n if all_edges else n
    starts = np.zeros(m + 1, np.int64)
    weights = np.empty(m)
    nc = 0
    pos = 0
    for v in range(n):
        if not act[v]:
            continue
        closes = False  # a strict edge u P0 v from an active round
        for u in range(n):
            if act[u] and u != v and P[u, v]:
                closes = True
                break
        if not closes:
            continue
        nt, bu, bw = _dijkstra(v, w, adj, deg, P, threshold, all_edges, dist, prev, done, touched, hd, hi)
        # the lightest cycle through v and each strict edge u P0 v closing it (only the lightest one,
        # bu, unless all_edges)
        if all_edges:
            for u in range(n):
                if u != v and done[u] and P[u, v] and dist[u] < threshold:
                    pos, nc, flat = _push_path(flat, starts, weights, pos, nc, prev, u, dist[u])
        elif bu >= 0:
            pos, nc, flat = _push_path(flat, starts, weights, pos, nc, prev, bu, bw)
        for t in range(nt):
            dist[touched[t]] = np.inf
            done[touched[t]] = False
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


# --------------------------------------------------------------------------- combinatorial branch-and-bound
# Bitsets: a set of rounds of one component is a row of ``W = (n + 63) // 64`` uint64 words.


@njit(cache=True)
def _bits(M):
    """Rows of the boolean matrix ``M`` as bitsets."""
    n = M.shape[0]
    W = (M.shape[1] + 63) // 64
    out = np.zeros((n, W), np.uint64)
    for i in range(n):
        for j in range(M.shape[1]):
            if M[i, j]:
                out[i, j >> 6] |= np.uint64(1) << np.uint64(j & 63)
    return out


@njit(cache=True)
def _has(bs, j):
    return (bs[j >> 6] >> np.uint64(j & 63)) & np.uint64(1) != np.uint64(0)


@njit(cache=True)
def _consistent_with(c, sel, depth, R, P_bits, fwd, bwd, into, outof):
    """Whether round c can join the kept rounds ``sel[:depth]`` (closure ``fwd``/``bwd``) without
    closing a GARP_e-violating cycle; leaves c's in/out closure sets in ``into``/``outof``."""
    W = into.shape[0]
    for w in range(W):
        into[w] = np.uint64(0)
        outof[w] = np.uint64(0)
    into[c >> 6] |= np.uint64(1) << np.uint64(c & 63)
    outof[c >> 6] |= np.uint64(1) << np.uint64(c & 63)
    for t in range(depth):
        s = sel[t]
        if R[s, c]:
            for w in range(W):
                into[w] |= bwd[s, w]
        if R[c, s]:
            for w in range(W):
                outof[w] |= fwd[s, w]
    for w in range(W):  # a path a ->* c ->* b with b P0 a closes a violating cycle
        word = outof[w]
        while word != np.uint64(0):
            low = word & (~word + np.uint64(1))
            b = w * 64 + _bitpos(low)
            word ^= low
            for w2 in range(W):
                if P_bits[b, w2] & into[w2] != np.uint64(0):
                    return False
    return True


@njit(cache=True)
def _bitpos(low):
    k = 0
    while low > np.uint64(1):
        low >>= np.uint64(1)
        k += 1
    return k


@njit(cache=True)
def _color_sort(cands, m, conflict_bits, ord_out, col_out, W):
    """Greedy sequential colouring of ``cands[:m]`` into classes of pairwise conflicting rounds (a
    consistent subset holds at most one round of each class); ``ord_out``/``col_out`` list the
    rounds by class (1, 2, ...). Returns the number of classes."""
    n_cls = 0
    allowed = np.empty((m, W), np.uint64)  # rounds in conflict with every member of class k
    cls = np.empty(m, np.int64)
    for i in range(m):
        v = cands[i]
        k = 0
        while k < n_cls and not _has(allowed[k], v):
            k += 1
        if k == n_cls:
            for w in range(W):
                allowed[k, w] = conflict_bits[v, w]
            n_cls += 1
        else:
            for w in range(W):
                allowed[k, w] &= conflict_bits[v, w]
        cls[i] = k
    pos = 0
    for k in range(n_cls):
        for i in range(m):
            if cls[i] == k:
                ord_out[pos] = cands[i]
                col_out[pos] = k + 1
                pos += 1
    return n_cls


@njit(cache=True)
def _extend_closure(sel, d, v, fwd, bwd, fwd_out, bwd_out, into, outof):
    """The closure of R0 over ``sel[:d]`` plus v (``into``/``outof``: v's sets from
    :func:`_consistent_with`), written to ``fwd_out``/``bwd_out``."""
    W = into.shape[0]
    for t in range(d):
        s = sel[t]
        for w in range(W):
            fwd_out[s, w] = fwd[s, w]
            bwd_out[s, w] = bwd[s, w]
    for w in range(W):
        fwd_out[v, w] = outof[w]
        bwd_out[v, w] = into[w]
    for t in range(d):
        s = sel[t]
        if _has(into, s):
            for w in range(W):
                fwd_out[s, w] |= outof[w]
        if _has(outof, s):
            for w in range(W):
                bwd_out[s, w] |= into[w]


@njit(cache=True)
def _candidates_after(ords, i, v, sel, depth, R, P_bits, conflict_bits, fwd, bwd, into, outof, cand):
    """The rounds ``ords[:i]`` compatible with v and consistent with ``sel[:depth]`` (which holds v),
    written to ``cand``; returns how many."""
    m = 0
    for j in range(i):
        c = ords[j]
        if not _has(conflict_bits[v], c) and _consistent_with(c, sel, depth, R, P_bits, fwd, bwd, into, outof):
            cand[m] = c
            m += 1
    return m


@njit(cache=True)
def max_consistent_bnb(R, P, order, init_best, init_kept, stop_at, deadline_s, max_nodes):
    """The largest GARP_e-consistent subset of one component, by a combinatorial branch-and-bound.

    In the spirit of Tomita and Seki's MCQ clique search: a node holds the kept rounds S (with the
    closure of R0 over S) and the candidates that can join S without closing a violating cycle of any
    length (checked exactly); its bound is ``|S|`` + the classes of a greedy colouring of the
    candidates into sets of pairwise violating 2-cycles. Only subsets larger than ``init_best``
    (``init_kept``) are searched for; ``stop_at`` > 0 stops at one that size, ``deadline_s`` > 0 and
    ``max_nodes`` > 0 after that many seconds or nodes. Returns (kept, n_kept, upper, finished,
    nodes); ``upper`` is a proven bound (``n_kept`` when finished).
    """
    n = R.shape[0]
    W = (n + 63) // 64
    conflict_bits = _bits((P & R.T) | (P.T & R))  # violating 2-cycles
    P_bits = _bits(P)
    fwd = np.zeros((n + 1, n, W), np.uint64)  # per depth: closure over S (row s: rounds of S s reaches)
    bwd = np.zeros((n + 1, n, W), np.uint64)
    ords = np.empty((n + 1, n), np.int64)
    cols = np.empty((n + 1, n), np.int64)
    cnt = np.zeros(n + 1, np.int64)
    pos = np.zeros(n + 1, np.int64)
    sel = np.empty(n + 1, np.int64)
    into = np.empty(W, np.uint64)
    outof = np.empty(W, np.uint64)
    cand = np.empty(n, np.int64)
    best = init_best
    kept = init_kept.copy()
    _color_sort(order, n, conflict_bits, ords[0], cols[0], W)
    cnt[0] = n
    pos[0] = n - 1
    d = 0
    nodes = 0
    finished = True
    with objmode(t0="f8"):
        t0 = time.perf_counter()
    while d >= 0:
        i = pos[d]
        if i < 0 or d + cols[d, i] <= best:
            d -= 1
            continue
        pos[d] = i - 1
        v = ords[d, i]
        if not _consistent_with(v, sel, d, R, P_bits, fwd[d], bwd[d], into, outof):
            continue  # cannot happen for candidates filtered below; the root's are unfiltered
        nodes += 1
        if max_nodes > 0 and nodes >= max_nodes:
            finished = False
            break
        if deadline_s > 0 and (nodes & 1023) == 0:
            with objmode(el="f8"):
                el = time.perf_counter() - t0
            if el > deadline_s:
                finished = False
                break
        sel[d] = v
        _extend_closure(sel, d, v, fwd[d], bwd[d], fwd[d + 1], bwd[d + 1], into, outof)
        m = _candidates_after(ords[d], i, v, sel, d + 1, R, P_bits, conflict_bits, fwd[d + 1], bwd[d + 1], into,
                              outof, cand)
        if m == 0:
            if d + 1 > best:
                best = d + 1
                kept[:] = False
                for t in range(d + 1):
                    kept[sel[t]] = True
                if stop_at > 0 and best >= stop_at:
                    finished = False
                    break
            continue
        _color_sort(cand, m, conflict_bits, ords[d + 1], cols[d + 1], W)
        cnt[d + 1] = m
        pos[d + 1] = m - 1
        d += 1
    upper = best
    if not finished:  # the root branches above pos[0] + 1 are done; the rest is bounded by its colour
        j = pos[0] + 1
        if j < n and cols[0, j] > upper:
            upper = cols[0, j]
        if stop_at > 0 and best >= stop_at:
            upper = max(upper, best)
    return kept, best, upper, finished, nodes


@njit(cache=True)
def local_conflicts(R, P, fixed, frac):
    """Pairs of the rounds ``frac`` that cannot both join the rounds ``fixed`` (kept by the branching)
    without closing a GARP_e-violating cycle of any length: a boolean matrix over positions in
    ``frac`` (symmetric, zero diagonal). A round of ``frac`` that cannot join ``fixed`` alone is in
    conflict with every other one. Each pair is checked exactly against the closure of R0 over
    ``fixed`` plus one round (:func:`_consistent_with`, as in :func:`max_consistent_bnb`)."""
    n = R.shape[0]
    W = (n + 63) // 64
    P_bits = _bits(P)
    m = fixed.shape[0]
    sel = np.empty(m + 2, np.int64)
    fwd = np.zeros((3, n, W), np.uint64)
    bwd = np.zeros((3, n, W), np.uint64)
    into = np.empty(W, np.uint64)
    outof = np.empty(W, np.uint64)
    d = 0
    for t in range(m):  # the closure over the fixed rounds (consistent: they are an LP point's 1s)
        v = fixed[t]
        _consistent_with(v, sel, d, R, P_bits, fwd[0], bwd[0], into, outof)
        sel[d] = v
        _extend_closure(sel, d, v, fwd[0], bwd[0], fwd[1], bwd[1], into, outof)
        fwd[0, :, :] = fwd[1]
        bwd[0, :, :] = bwd[1]
        d += 1
    k = frac.shape[0]
    out = np.zeros((k, k), np.bool_)
    for a in range(k):
        v = frac[a]
        if not _consistent_with(v, sel, d, R, P_bits, fwd[0], bwd[0], into, outof):
            for b in range(k):
                if b != a:
                    out[a, b] = True
                    out[b, a] = True
            continue
        sel[d] = v
        _extend_closure(sel, d, v, fwd[0], bwd[0], fwd[1], bwd[1], into, outof)
        for b in range(a + 1, k):
            if not out[a, b] and not _consistent_with(frac[b], sel, d + 1, R, P_bits, fwd[1], bwd[1], into, outof):
                out[a, b] = True
                out[b, a] = True
    return out


@njit(cache=True)
def greedy_cliques(conf, w, min_weight):
    """Cliques of the boolean matrix ``conf`` heavier than ``min_weight`` under the weights ``w``: from
    each vertex (heaviest first) one clique, grown greedily by the heaviest common neighbour. Returns
    (flat, starts) over vertex positions; duplicates are possible."""
    k = conf.shape[0]
    order = np.argsort(-w, kind="mergesort")
    cand = np.empty(k, np.bool_)
    flat = np.empty(k * k, np.int64)
    starts = np.zeros(k + 1, np.int64)
    nc = 0
    pos = 0
    q = np.empty(k, np.int64)
    for a in order:
        for b in range(k):
            cand[b] = conf[a, b]
        q[0] = a
        m = 1
        tot = w[a]
        while True:
            best = -1
            for b in range(k):
                if cand[b] and (best < 0 or w[b] > w[best]):
                    best = b
            if best < 0:
                break
            q[m] = best
            m += 1
            tot += w[best]
            for b in range(k):
                cand[b] = cand[b] and conf[best, b]
        if tot > min_weight:
            for t in range(m):
                flat[pos] = q[t]
                pos += 1
            nc += 1
            starts[nc] = pos
    return flat[:pos].copy(), starts[:nc + 1].copy()


# the shipped compiled cache of these kernels (moralkit.psm.kernel_cache): installed into numba's cache if absent
from .kernel_cache import install as _install_compiled  # noqa: E402

_install_compiled(globals())
