"""The documented PRNG and routings (docs/golden-format.md, section 3) in
numpy, shared by the scripts that rebuild golden cases from the docs alone.

Written from the page, not from the generator: counter-based SplitMix64,
below(d, b) = ((d >> 32) * b) >> 32, and the identity / reverse / random /
routed sorted_indices.  The caller imports numpy first (and skips without
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


def sorted_indices(T, K, seed, recipe):
    """The sorted_indices of a case's routing recipe."""
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
    return inverse_stable_argsort(routed_ids(T, K, seed, recipe["num_experts"],
                                             recipe["hot_percent"]))
