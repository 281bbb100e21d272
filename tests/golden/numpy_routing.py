"""The documented PRNG and routings (docs/golden-format.md, section 3) in
numpy, shared by the scripts that rebuild golden cases from the docs alone.

Written from the page, not from the generator: counter-based SplitMix64,
below(d, b) = ((d >> 32) * b) >> 32, and the identity / reverse / random /
routed / repeats / sparse sorted_indices with their huge and unread
entries, and which slot's values each row of a permuted tensor holds.  The caller imports numpy first (and skips without
it).
"""
import numpy as np

U = np.uint64
G = U(0x9E3779B97F4A7C15)


def mix64(z):
    z = (z ^ (z >> U(30))) * U(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> U(27))) * U(0x94D049BB133111EB)
    return z ^ (z >> U(31))


def draw(key, n):
    return mix64(U(key) + (np.asarray(n, dtype=U) + U(1)) * G)


def stream_key(seed, s):
    return int(draw(U(seed), U(s)))


def below(d, b):
    """below(d, b) on arrays: ((d >> 32) * b) >> 32, b <= 2^32."""
    return ((np.asarray(d, dtype=U) >> U(32)) * U(b)) >> U(32)


def routed_ids(T, K, seed, E, P):
    """Each token's K distinct experts, drawn with P% of the draws among the
    E/8 hot experts."""
    hot = max(1, E // 8)
    key = stream_key(seed, 1)
    ids = np.empty(T * K, dtype=np.int64)
    for t in range(T):
        tk = int(draw(key, t))
        chosen, a = [], 0
        while len(chosen) < K:
            d = int(draw(tk, a))
            a += 1
            is_hot = (((d & 0xFFFFFFFF) * 100) >> 32) < P
            e = (((d >> 32) * (hot if is_hot else E)) >> 32)
            if e not in chosen:
                chosen.append(e)
        ids[t * K:(t + 1) * K] = chosen
    return ids


def inverse_stable_argsort(ids):
    return np.argsort(np.argsort(ids, kind="stable"), kind="stable").astype(np.int32)


def routed_rows(T, K, seed, recipe, R):
    """The T*K slots' rows of a case's routing recipe."""
    n = T * K
    kind = recipe["routing"]
    if kind == "identity":
        return np.arange(n, dtype=np.int32)
    if kind == "reverse":
        return np.arange(n - 1, -1, -1, dtype=np.int32)
    if kind == "random":
        key = stream_key(seed, 2)
        idx = list(range(n))
        ds = draw(key, np.arange(n, dtype=U)) if n else []
        for i in range(n - 1, 0, -1):
            j = int(below(ds[i], i + 1))
            idx[i], idx[j] = idx[j], idx[i]
        return np.array(idx, dtype=np.int32)
    if kind == "repeats":
        return below(draw(stream_key(seed, 7), np.arange(n, dtype=U)), R).astype(np.int32)
    if kind == "sparse":
        deck = np.arange(R, dtype=np.int64)
        ds = draw(stream_key(seed, 7), np.arange(n, dtype=U)) if n else []
        for i in range(n):
            j = i + int(below(ds[i], R - i))
            deck[i], deck[j] = deck[j], deck[i]
        return deck[:n].astype(np.int32)
    return inverse_stable_argsort(routed_ids(T, K, seed, recipe["num_experts"],
                                             recipe["hot_percent"]))


# huge_indices: slot i = 1, 4, 7, ... gets HUGE[(i // 3) % 5], R standing
# for the None.
HUGE = (1065353216, 2**31 - 1, None, 2139095040, 16777216)


def sorted_indices(T, K, seed, recipe, R=None, extra=0):
    """The sorted_indices of a case's recipe: the routing's T*K rows (R of
    them in the permuted tensor, T*K when None), the huge entries, then
    extra entries past T*K, rows drawn from [0, R) (0 when R is 0)."""
    n = T * K
    R = n if R is None else R
    idx = routed_rows(T, K, seed, recipe, R).astype(np.int64)
    if recipe.get("huge_indices"):
        for i in range(1, n, 3):
            v = HUGE[(i // 3) % len(HUGE)]
            idx[i] = R if v is None else v
    j = np.arange(n, n + extra, dtype=U)
    tail = below(draw(stream_key(seed, 7), j), R) if R > 0 and extra else np.zeros(extra, U)
    return np.concatenate([idx, tail.astype(np.int64)]).astype(np.int32)


def owners(idx, T, K, R):
    """The flat slot whose values each of the R rows holds: the last of the
    T*K slots naming it, else T*K + r (values no slot reads)."""
    slots = np.arange(T * K, dtype=np.int64)
    head = idx[:T * K].astype(np.int64)
    keep = head < R
    mark = np.full(R, -1, dtype=np.int64)
    np.maximum.at(mark, head[keep], slots[keep])
    return np.where(mark >= 0, mark, T * K + np.arange(R, dtype=np.int64))
