"""Numba kernels of :mod:`moralkit.psm.rp`: exact comparisons, bitset cycle searches, CCEI levels.

Validated input assumed: these functions check nothing. Call them through
:mod:`moralkit.psm.rp`, whose public functions validate their arguments
(shapes, integer dtypes, the budget, ``e`` in [0, 1]) once, at the boundary.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# =========================================================================== exact arithmetic

SPLITTER = 134217729.0  # 2**27 + 1 (Veltkamp split)


@njit(cache=True, inline="always")
def two_prod(a, b):
    """p, err with p + err == a * b exactly (no overflow/underflow)."""
    p = a * b
    c = SPLITTER * a
    ah = c - (c - a)
    al = a - ah
    c = SPLITTER * b
    bh = c - (c - b)
    bl = b - bh
    err = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, err


@njit(cache=True)
def cmp_prod(a, b, c, d):
    """Exact sign of a*b - c*d."""
    p1, e1 = two_prod(a, b)
    p2, e2 = two_prod(c, d)
    if p1 < p2:
        return -1
    if p1 > p2:
        return 1
    if e1 < e2:
        return -1
    if e1 > e2:
        return 1
    return 0


@njit(cache=True)
def relation_signs(E, num, den):
    """S[r, k] = sign(num_r / den_r * E[r, r] - E[r, k]) exactly."""
    T = E.shape[0]
    S = np.empty((T, T), dtype=np.int8)
    for r in range(T):
        for k in range(T):
            S[r, k] = cmp_prod(num[r], E[r, r], den[r], E[r, k])
    return S


# =========================================================================== cycle kernels (bitsets)

DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
DEBRUIJN_TABLE = np.array(
    [0, 1, 48, 2, 57, 49, 28, 3, 61, 58, 50, 42, 38, 29, 17, 4, 62, 55, 59, 36, 53, 51, 43, 22, 45, 39, 33, 30, 24,
     18, 12, 5, 63, 47, 56, 27, 60, 41, 37, 16, 54, 35, 52, 21, 44, 32, 23, 11, 46, 26, 40, 15, 34, 20, 31, 10, 25,
     14, 19, 9, 13, 8, 7, 6], dtype=np.int64)


@njit(cache=True, inline="always")
def ctz(x):
    lsb = x & (~x + np.uint64(1))
    return DEBRUIJN_TABLE[np.int64((lsb * DEBRUIJN) >> np.uint64(58))]


@njit(cache=True)
def has_cycle(adj, T, white, onstack, stack):
    """True iff the digraph with bitset rows ``adj`` (T, W) has a directed cycle (iterative DFS)."""
    W = adj.shape[1]
    one = np.uint64(1)
    for w in range(W):
        white[w] = 0
        onstack[w] = 0
    for i in range(T):
        white[i >> 6] |= one << np.uint64(i & 63)
    for s in range(T):
        if (white[s >> 6] >> np.uint64(s & 63)) & one == 0:
            continue
        white[s >> 6] &= ~(one << np.uint64(s & 63))
        onstack[s >> 6] |= one << np.uint64(s & 63)
        top = 0
        stack[0] = s
        while top >= 0:
            i = stack[top]
            nxt = -1
            for w in range(W):
                a = adj[i, w]
                if a & onstack[w]:
                    return True
                if nxt < 0:
                    m = a & white[w]
                    if m:
                        nxt = w * 64 + ctz(m)
            if nxt >= 0:
                white[nxt >> 6] &= ~(one << np.uint64(nxt & 63))
                onstack[nxt >> 6] |= one << np.uint64(nxt & 63)
                top += 1
                stack[top] = nxt
            else:
                onstack[i >> 6] &= ~(one << np.uint64(i & 63))
                top -= 1
    return False


@njit(cache=True)
def min_cycle_level_bits(bits, T, white, onstack, stack):
    """Smallest level L with a cycle among nested bitset graphs bits[0] <= ... <= bits[n-1]; n if none."""
    n = bits.shape[0]
    if n == 0 or not has_cycle(bits[n - 1], T, white, onstack, stack):
        return n
    lo, hi = 0, n - 1  # cycle at hi
    while lo < hi:
        mid = (lo + hi) // 2
        if has_cycle(bits[mid], T, white, onstack, stack):
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(cache=True)
def psm_level(E, n_levels, bits, white, onstack, stack):
    """Smallest integer level L < n_levels such that {E[r, k] <= L, r != k} has a cycle; n_levels if none."""
    T = E.shape[0]
    one = np.uint64(1)
    bits[:] = 0
    for r in range(T):
        for k in range(T):
            # branch-free: levels >= n_levels land in the spare slot bits[n_levels]
            v = min(max(np.int64(E[r, k]), 0), n_levels)
            bits[v, r, k >> 6] |= one << np.uint64(k & 63)
    return finish_levels(bits, T, n_levels, white, onstack, stack)


@njit(cache=True)
def finish_levels(bits, T, n_levels, white, onstack, stack):
    one = np.uint64(1)
    W = bits.shape[2]
    for r in range(T):  # no self-loops
        for L in range(n_levels):
            bits[L, r, r >> 6] &= ~(one << np.uint64(r & 63))
    # level L holds every edge of the levels below it. Written as loops, not ``bits[L] |= bits[L - 1]``:
    # numba compiles that array expression in about 5 s (a fresh clone's first run pays it in every
    # notebook that computes a CCEI level), the loops in a fraction of a second; the same bits result.
    for L in range(1, n_levels):
        for r in range(T):
            for w in range(W):
                bits[L, r, w] |= bits[L - 1, r, w]
    return min_cycle_level_bits(bits[:n_levels], T, white, onstack, stack)


@njit(cache=True, nogil=True)
def psm_levels_batch(Es, n_levels):
    N, T = Es.shape[0], Es.shape[1]
    W = max(1, (T + 63) // 64)
    bits = np.zeros((n_levels + 1, T, W), dtype=np.uint64)
    white = np.zeros(W, dtype=np.uint64)
    onstack = np.zeros(W, dtype=np.uint64)
    stack = np.zeros(T + 1, dtype=np.int64)
    out = np.empty(N, dtype=np.int64)
    for b in range(N):
        out[b] = psm_level(Es[b], n_levels, bits, white, onstack, stack)
    return out


@njit(cache=True, nogil=True)
def distinct_answers(options):
    """``(uid, reps, n_u)``: one id per distinct raw answer among the options (T, n, 5): ``uid[k, j]``
    is option j of round k's, ``reps[u]`` the answer of id u (answers 0..5: a base-6 code; anything
    else gets its own id), in order of first appearance."""
    T, n = options.shape[0], options.shape[1]
    first = np.full(6 ** 5, -1, dtype=np.int64)
    uid = np.empty((T, n), dtype=np.int64)
    reps = np.empty((T * n, 5), dtype=np.int64)
    n_u = 0
    for k in range(T):
        for j in range(n):
            code = 0
            ok = True
            for s in range(4, -1, -1):
                q = options[k, j, s]
                if q < 0 or q > 5:
                    ok = False
                code = code * 6 + q
            if ok and first[code] >= 0:
                uid[k, j] = first[code]
                continue
            if ok:
                first[code] = n_u
            for s in range(5):
                reps[n_u, s] = options[k, j, s]
            uid[k, j] = n_u
            n_u += 1
    return uid, reps, n_u


@njit(cache=True, nogil=True)
def level_lists_direct(A, b, options, n_levels, budget):
    """Sparse, level-sorted transposed option expenditures, from the affine form of the expenditures.

    For round ``k`` and option ``j``, ``rows[start[k, j, L]:start[k, j, L + 1]]`` lists the
    rounds ``r != k`` at which option ``j`` of round ``k`` costs ``L`` (levels ``< n_levels``;
    negative values count as level 0), in increasing order. Only about a quarter of all entries
    are below the PSM budget, and far fewer below typical CCEI levels. The package's one
    level-list kernel.

    ``p^r . |q - o^r| = A[r] . q + b[r]`` with ``A[r] = p^r * (+1 where o^r = 0, -1
    where o^r = 5)`` and ``b[r] = 5 * sum of p^r over the statements where o^r = 5``.
    The costs depend on the raw answer ``q`` only, so options with the same raw answer (about
    60 % of a design's) share one list; a round never lists itself because its own options cost
    the budget and ``n_levels <= budget`` (an option off the budget is reported, and its lists are
    then meaningless). Returns ``(start, rows, bad)`` where ``bad = (k, j, cost)`` locates the
    first alternative off the budget (``k = -1`` if none).
    """
    T, n = options.shape[0], options.shape[1]
    At = np.ascontiguousarray(A.T)  # one contiguous row per statement: the cost loop over r vectorises
    a0, a1, a2, a3, a4 = At[0], At[1], At[2], At[3], At[4]
    bad = np.full(3, -1, dtype=np.int64)
    uid, reps, n_u = distinct_answers(options)
    # level lists of every distinct answer
    ustart = np.empty((n_u, n_levels + 1), dtype=np.int64)
    rows = np.empty(n_u * T, dtype=np.int32)
    vbuf = np.empty(T, dtype=np.int64)
    cnt = np.zeros(n_levels + 1, dtype=np.int64)
    pos = 0
    for u in range(n_u):
        q0 = reps[u, 0]
        q1 = reps[u, 1]
        q2 = reps[u, 2]
        q3 = reps[u, 3]
        q4 = reps[u, 4]
        for r in range(T):
            v = b[r] + a0[r] * q0 + a1[r] * q1 + a2[r] * q2 + a3[r] * q3 + a4[r] * q4
            vbuf[r] = min(max(v, 0), n_levels)
        cnt[:] = 0
        for r in range(T):
            cnt[vbuf[r]] += 1
        acc = pos
        for L in range(n_levels):
            ustart[u, L] = acc
            c = cnt[L]
            cnt[L] = acc
            acc += c
        ustart[u, n_levels] = acc
        for r in range(T):
            v = vbuf[r]
            if v < n_levels:
                rows[cnt[v]] = r
                cnt[v] += 1
        pos = acc
    # every option points at its answer's lists; the first option off the budget is reported
    start = np.empty((T, n, n_levels + 1), dtype=np.int64)
    for k in range(T):
        for j in range(n):
            u = uid[k, j]
            for L in range(n_levels + 1):
                start[k, j, L] = ustart[u, L]
            own = b[k] + a0[k] * options[k, j, 0] + a1[k] * options[k, j, 1] + a2[k] * options[k, j, 2] \
                + a3[k] * options[k, j, 3] + a4[k] * options[k, j, 4]
            if own != budget and bad[0] < 0:
                bad[0] = k
                bad[1] = j
                bad[2] = own
    return start, rows[:pos], bad


@njit(cache=True, nogil=True)
def psm_levels_choices(start, rows, C, n_levels):
    """CCEI levels of many choice vectors (``C[b, k]``: 0-based option of round k).

    Adds the edges of level 0, 1, 2, ... to one graph (transposed: reversing every
    edge keeps the cycles) and stops at the first level with a cycle, so a dataset
    costs about (its level + 1) sparse cycle tests instead of reading all T^2 entries.
    """
    N, T = C.shape
    W = max(1, (T + 63) // 64)
    adj = np.zeros((T, W), dtype=np.uint64)
    white = np.zeros(W, dtype=np.uint64)
    onstack = np.zeros(W, dtype=np.uint64)
    stack = np.zeros(T + 1, dtype=np.int64)
    out = np.empty(N, dtype=np.int64)
    one = np.uint64(1)
    for b in range(N):
        adj[:] = 0
        res = n_levels
        for L in range(n_levels):
            added = False
            for k in range(T):
                j = C[b, k]
                for e in range(start[k, j, L], start[k, j, L + 1]):
                    r = rows[e]
                    adj[k, r >> 6] |= one << np.uint64(r & 63)
                    added = True
            if added and has_cycle(adj, T, white, onstack, stack):
                res = L
                break
        out[b] = res
    return out


@njit(cache=True)
def build_threshold(R, t, adj):
    """adj <- bitset graph of the edges r -> k (r != k) with R[r, k] <= t."""
    T = R.shape[0]
    one = np.uint64(1)
    adj[:] = 0
    for r in range(T):
        for k in range(T):
            if k != r and R[r, k] <= t:
                adj[r, k >> 6] |= one << np.uint64(k & 63)


@njit(cache=True)
def min_cycle_threshold(R, cand):
    """Index of the smallest threshold cand[i] such that {R[r, k] <= cand[i]} has a cycle; len(cand) if none.

    ``cand`` must be sorted ascending.
    """
    T = R.shape[0]
    n = cand.shape[0]
    Wd = max(1, (T + 63) // 64)
    adj = np.zeros((T, Wd), dtype=np.uint64)
    white = np.zeros(Wd, dtype=np.uint64)
    onstack = np.zeros(Wd, dtype=np.uint64)
    stack = np.zeros(T + 1, dtype=np.int64)
    if n == 0:
        return 0
    build_threshold(R, cand[n - 1], adj)
    if not has_cycle(adj, T, white, onstack, stack):
        return n
    lo, hi = 0, n - 1
    while lo < hi:
        mid = (lo + hi) // 2
        build_threshold(R, cand[mid], adj)
        if has_cycle(adj, T, white, onstack, stack):
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(cache=True, inline="always")
def _bounded_ratios(R):
    """(buf, n): the off-diagonal ratios ``R[r, k]`` at most ``U`` in ``buf[:n]`` (row-major order), where
    ``U`` is the best 2-cycle bound ``min over r < k of max(R[r, k], R[k, r])``, capped at 1."""
    T = R.shape[0]
    U = 1.0
    for r in range(T):
        for k in range(r + 1, T):
            m = max(R[r, k], R[k, r])
            if m < U:
                U = m
    buf = np.empty(T * T, dtype=np.float64)
    n = 0
    for r in range(T):
        for k in range(T):
            v = R[r, k]
            if k != r and v <= U:  # U <= 1
                buf[n] = v
                n += 1
    return buf, n


@njit(cache=True)
def candidates(R):
    """Sorted distinct off-diagonal float ratios that can matter: <= 1 and <= the best 2-cycle bound.

    (Ratios whose float is exactly 1.0 are kept: the exact ratio may lie just below 1.)
    """
    buf, n = _bounded_ratios(R)
    out = np.sort(buf[:n])
    m = 0
    for i in range(n):
        if m == 0 or out[i] != out[m - 1]:
            out[m] = out[i]
            m += 1
    return out[:m]


@njit(cache=True)
def min_cycle_ratio(R):
    """``cand[min_cycle_threshold(R, cand)]`` for ``cand = candidates(R)``, or 2.0 when no threshold has
    a cycle, found by selection instead of a sort.

    The answer is the smallest candidate ratio ``t`` such that ``{R[r, k] <= t}`` has a cycle, which is
    unique, so any exact search finds the same float. Here each step tests a pivot (the median of up to
    9 evenly spaced remaining candidates) and keeps only the candidates below it (a cycle: the pivot is
    the best so far) or above it (no cycle: nothing at or below it has one), without sorting them all.
    """
    T = R.shape[0]
    buf, n = _bounded_ratios(R)
    hi = -1.0
    for i in range(n):
        hi = max(hi, buf[i])
    if n == 0:
        return 2.0
    Wd = max(1, (T + 63) // 64)
    adj = np.zeros((T, Wd), dtype=np.uint64)
    white = np.zeros(Wd, dtype=np.uint64)
    onstack = np.zeros(Wd, dtype=np.uint64)
    stack = np.zeros(T + 1, dtype=np.int64)
    build_threshold(R, hi, adj)
    if not has_cycle(adj, T, white, onstack, stack):
        return 2.0
    best = hi
    sample = np.empty(9, dtype=np.float64)
    m = 0
    for i in range(n):
        if buf[i] < best:
            buf[m] = buf[i]
            m += 1
    while m > 0:
        ns = min(m, 9)
        for j in range(ns):
            sample[j] = buf[(j * m) // ns]
        # sorted in place by insertion: for fewer than 16 values this is what np.sort does in numba (the
        # same order), without compiling numba's quicksort (about 1.5 s of a fresh clone's first run)
        for j in range(1, ns):
            v = sample[j]
            i = j
            while i > 0 and v < sample[i - 1]:
                sample[i] = sample[i - 1]
                i -= 1
            sample[i] = v
        pivot = sample[ns // 2]
        build_threshold(R, pivot, adj)
        below = has_cycle(adj, T, white, onstack, stack)
        if below:
            best = pivot
        n, m = m, 0
        for i in range(n):
            if (buf[i] < pivot) if below else (buf[i] > pivot):
                buf[m] = buf[i]
                m += 1
    return best


@njit(cache=True, nogil=True)
def ccei_float_choices(V, C, own, max_levels):
    """Float CCEI of many choice vectors over the same rounds: ``(out, done)``.

    Row ``i`` has ``E[r, k] = V[r, k, C[i, k]]`` (the diagonal set to ``own`` when ``own > 0``) and
    ``out[i]`` is :func:`moralkit.psm._rp_exact.ccei_float` of it: the same ratios ``R = E / diag(E)``
    in floats, and the same threshold (:func:`min_cycle_ratio`). Rows that path does not handle
    (fewer than 2 rounds, a non-positive own expenditure, or a constant diagonal ``<= max_levels``,
    which takes the integer-level path) have ``done[i] = False`` and are left to the caller.
    """
    N, T = C.shape[0], V.shape[0]
    out = np.ones(N)
    done = np.zeros(N, dtype=np.bool_)
    E = np.empty((T, T), dtype=np.int64)
    R = np.empty((T, T), dtype=np.float64)
    if T < 2:
        return out, done
    for i in range(N):
        for r in range(T):
            for k in range(T):
                E[r, k] = V[r, k, C[i, k]]
            if own > 0:
                E[r, r] = own
        B = E[0, 0]
        constant, positive = True, True
        for r in range(T):
            constant = constant and E[r, r] == B
            positive = positive and E[r, r] > 0
        if not positive or (constant and 0 < B <= max_levels):
            continue
        for r in range(T):
            d = np.float64(E[r, r])
            for k in range(T):
                R[r, k] = np.float64(E[r, k]) / d
        t = min_cycle_ratio(R)
        if t <= 1.0:
            out[i] = max(0.0, t)
        done[i] = True
    return out, done


@njit(cache=True)
def has_cycle_dense(A):
    """Cycle test for a dense boolean adjacency matrix (diagonal ignored)."""
    T = A.shape[0]
    Wd = max(1, (T + 63) // 64)
    adj = np.zeros((T, Wd), dtype=np.uint64)
    one = np.uint64(1)
    for r in range(T):
        for k in range(T):
            if k != r and A[r, k]:
                adj[r, k >> 6] |= one << np.uint64(k & 63)
    return has_cycle(adj, T, np.zeros(Wd, dtype=np.uint64), np.zeros(Wd, dtype=np.uint64),
                      np.zeros(T + 1, dtype=np.int64))


# =========================================================================== strongly connected components


@njit(cache=True)
def scc_labels(R, inc):
    """Tarjan's strongly connected components of the graph ``R`` induced on the nodes ``inc``.

    The one SCC routine of the package: :func:`moralkit.psm.rp.garp` (GARP_e fails iff an SCC
    of R0_e holds a P0_e edge) and the pooled GARP checks of :mod:`moralkit.psm.partition` use it.
    Iterative (no recursion), O(n^2) on the dense boolean matrix ``R``; returns the component
    label of each node (-1 outside ``inc``).
    """
    n = R.shape[0]
    index = np.full(n, -1, np.int64)
    low = np.zeros(n, np.int64)
    onstack = np.zeros(n, np.bool_)
    comp = np.full(n, -1, np.int64)
    stack = np.empty(n, np.int64)
    cs_node = np.empty(n, np.int64)
    cs_edge = np.empty(n, np.int64)
    sp = 0
    idx = 0
    nc = 0
    for s in range(n):
        if not inc[s] or index[s] >= 0:
            continue
        index[s] = idx
        low[s] = idx
        idx += 1
        stack[sp] = s
        sp += 1
        onstack[s] = True
        cs_node[0] = s
        cs_edge[0] = 0
        csp = 1
        while csp > 0:
            v = cs_node[csp - 1]
            j = cs_edge[csp - 1]
            advanced = False
            while j < n:
                if inc[j] and R[v, j] and j != v:
                    if index[j] < 0:
                        cs_edge[csp - 1] = j + 1
                        index[j] = idx
                        low[j] = idx
                        idx += 1
                        stack[sp] = j
                        sp += 1
                        onstack[j] = True
                        cs_node[csp] = j
                        cs_edge[csp] = 0
                        csp += 1
                        advanced = True
                        break
                    elif onstack[j] and index[j] < low[v]:
                        low[v] = index[j]
                j += 1
            if advanced:
                continue
            csp -= 1
            if low[v] == index[v]:
                while True:
                    sp -= 1
                    w = stack[sp]
                    onstack[w] = False
                    comp[w] = nc
                    if w == v:
                        break
                nc += 1
            if csp > 0:
                u = cs_node[csp - 1]
                if low[v] < low[u]:
                    low[u] = low[v]
    return comp


# the shipped compiled cache of these kernels (moralkit.psm.kernel_cache): installed into numba's cache if absent
from .kernel_cache import install as _install_compiled  # noqa: E402

_install_compiled(globals())
