#!/usr/bin/env python3
"""Rebuilds the MoeTokenPermute, MoeTokenUnpermute and MoeTokenUnpermuteGrad
cases of a golden corpus with numpy, from docs/golden-format.md alone.

Every input tensor is re-created bit for bit from section 3 of that page
(the counter-based SplitMix64, the routings, the sentinels, every value
kind: the permute-grad kinds on each tensor and the kinds made together
across tokens, probs and gradient), and compared with the case's file.  The
outputs that need no reduction model are then computed here, independently
of libmoeperm, and compared too:

  MoeTokenPermute        sorted_indices (the inverse of a stable argsort)
                         and permuted_tokens (a copy), bit for bit;
  MoeTokenUnpermute      unpermuted_tokens: fp32 products x*p with numpy's
                         float32 multiply, added in k order to a sum that
                         starts from slot 0's product (or +0.0 when slot 0 is
                         left out), zero probs and dropped rows left out, one
                         round-to-nearest-even narrowing (numpy for fp16,
                         integer arithmetic for bf16); NaN-aware;
  MoeTokenUnpermuteGrad  permuted_tokens_grad: narrow(fl(g * p)) into the
                         slot's row, or g's bits unchanged without probs.

If the page and the generator drift apart, this fails.

usage: numpy_rebuild_family.py GOLDEN_DIR    (exit 77, "skipped", without numpy)
"""
import json
import os
import sys

try:
    import numpy as np
except ImportError:
    print("numpy is not available: skipped")
    sys.exit(77)

np.seterr(all="ignore")
from numpy_routing import (U, below, draw, inverse_stable_argsort,  # noqa: E402
                           owners, routed_ids, sorted_indices, stream_key)

# ---------------------------------------------------------------------------
# Formats


class Format:
    def __init__(self, name):
        self.name = name
        if name == "float32":
            self.m, self.emax, self.sign, self.inf, self.max, self.one, self.qnan = \
                23, 127, 0x80000000, 0x7F800000, 0x7F7FFFFF, 0x3F800000, 0x7FC00000
            self.raw = np.uint32
        elif name == "float16":
            self.m, self.emax, self.sign, self.inf, self.max, self.one, self.qnan = \
                10, 15, 0x8000, 0x7C00, 0x7BFF, 0x3C00, 0x7E00
            self.raw = np.uint16
        elif name == "bf16":
            self.m, self.emax, self.sign, self.inf, self.max, self.one, self.qnan = \
                7, 127, 0x8000, 0x7F80, 0x7F7F, 0x3F80, 0x7FC0
            self.raw = np.uint16
        else:
            self.raw = np.uint8 if name == "int8" else None

    def narrow(self, f32):
        f32 = np.asarray(f32, dtype=np.float32)
        if self.name == "float32":
            return f32.view(np.uint32).astype(U)
        if self.name == "float16":
            return f32.astype(np.float16).view(np.uint16).astype(U)
        b = f32.view(np.uint32).astype(U)
        nan = (b & U(0x7FFFFFFF)) > U(0x7F800000)
        rounded = ((b + U(0x7FFF) + ((b >> U(16)) & U(1))) >> U(16)) & U(0xFFFF)
        return np.where(nan, (b >> U(16)) | U(0x40), rounded)

    def widen(self, bits):
        bits = np.asarray(bits)
        if self.name == "float32":
            return bits.astype(np.uint32).view(np.float32)
        if self.name == "float16":
            return bits.astype(np.uint16).view(np.float16).astype(np.float32)
        return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)

    def is_nan(self, bits):
        bits = np.asarray(bits).astype(U)
        return (bits & U(self.sign - 1)) > U(self.inf)

    def pow2(self, e):
        return self.narrow(np.float32(2.0 ** e))

    def compose(self, negative, e, mant):
        """sign | (e + bias) << m | mant, for normal exponents e."""
        e = np.asarray(e, dtype=np.int64)
        return (np.where(negative, U(self.sign), U(0)) |
                ((e + self.emax).astype(U) << U(self.m)) | mant)

    def mantissa_of(self, d):
        return (d >> U(40)) & U((1 << self.m) - 1)


# ---------------------------------------------------------------------------
# Values (section 3)


class Tensor:
    """How one tensor's elements are numbered and what they are.

    role: "permuted" (element (t, k, h) of a permuted tensor), "tokens"
    (MoeTokenPermute's tokens), "grad" (unpermuted_tokens_grad) or "probs".
    A plain tensor [rows, cols] numbers its draws as a permuted one with
    top_k 1 and hidden cols.
    """

    def __init__(self, case, fmt, kind, role, stream):
        self.c, self.f, self.kind, self.role = case, fmt, kind, role
        self.key = stream_key(case.seed, stream)
        if role == "permuted":
            self.nk, self.nh = case.K, case.H
        elif role == "probs":
            self.nk, self.nh = 1, case.K
        else:
            self.nk, self.nh = 1, case.H

    def draws(self, t, k, h):
        n = ((t * U(self.nk) + k) * U(self.nh) + h) * U(2)
        return draw(self.key, n), draw(self.key, n + U(1))


def normal_f32(d0, d1):
    m24 = U(0xFFFFFF)
    s = (d0 & m24) + ((d0 >> U(24)) & m24) + (d1 & m24) + ((d1 >> U(24)) & m24)
    e = (d1 >> U(61)).astype(np.int64)
    exact = (s.astype(np.int64) - 2**25).astype(np.float64) * np.exp2(-(25 + e).astype(np.float64))
    return exact


def picks(dp, K):
    p = below(dp, K).astype(np.int64)
    if K == 1:
        return p, p, p
    low = (dp & U(0xFFFFFFFF)) << U(32)
    q = (p + 1 + below(low, K - 1).astype(np.int64)) % K
    r = (q + 1) % K
    r = np.where(r == p, (r + 1) % K, r)
    return p, q, r


def quiet_nan(f, d):
    return (np.where(d & U(1), U(f.sign), U(0)) | U(f.qnan) |
            ((d >> U(32)) & U((1 << (f.m - 1)) - 1)))


def signalling_nan(f, d):
    return (np.where(d & U(1), U(f.sign), U(0)) | U(f.inf) |
            (((d >> U(32)) & U((1 << (f.m - 1)) - 1)) | U(1)))


def random_subnormal(f, d):
    return np.where(d & U(1), U(f.sign), U(0)) | (U(1) + below(d, (1 << f.m) - 1))


def sum_kind(f, kind, k, K, h, d0, dp, N):
    """The permute-grad kinds nan-inf, subnormal, overflow, rounding."""
    S = {"nan-inf": 8, "subnormal": 6, "overflow": 6, "rounding": 11}[kind]
    sc = h % U(S)
    p, q, r = picks(dp, K)
    k = np.asarray(k, dtype=np.int64)
    at_p = k == p
    at_q = (k == q) & (K > 1)
    at_r = (k == r) & (K > 2)
    zero = U(0)
    sign, inf, mx, one = U(f.sign), U(f.inf), U(f.max), U(f.one)
    choices = []
    if kind == "nan-inf":
        choices = [
            N,
            np.where(at_p, quiet_nan(f, d0), N),
            np.where(at_p, inf, N),
            np.where(at_p, sign | inf, N),
            np.where(at_p, inf, np.where(at_q, sign | inf, N)),
            np.where(at_p | at_q, inf, N),
            np.where(at_p, signalling_nan(f, d0), N),
            quiet_nan(f, d0),
        ]
    elif kind == "subnormal":
        mn = U(1 << f.m)
        sgn = np.where(dp & U(1), sign, zero)
        one_sub = below(dp, (1 << f.m) - 1) + U(1)
        choices = [
            random_subnormal(f, d0),
            np.where(at_p, sgn | mn, random_subnormal(f, d0)),
            np.where(at_p, mn | (mn >> U(1)), np.where(at_q, sign | mn, zero)),
            one_sub + np.zeros_like(N),
            np.where(at_p, N, random_subnormal(f, d0)),
            np.where(k & 1, sign, zero) | one_sub,
        ]
    elif kind == "overflow":
        max_k = np.where(K > 2, 2, 1)
        case4 = np.where((k == 0) | ((k == 1) & (K > 2)), mx,
                         np.where(k == max_k, sign | mx, zero))
        choices = [
            np.where(at_p | at_q, mx, N),
            np.where(at_p | at_q, sign | mx, N),
            np.where(at_p, mx, np.where(at_q, f.pow2(f.emax - f.m - 2), zero)),
            np.where(at_p, mx, np.where(at_q, f.pow2(f.emax - f.m - 1), zero)),
            case4 + np.zeros_like(N),
            np.where(d0 & U(1), sign, zero) | U(f.max - (1 << f.m)),
        ]
    else:
        sgn = np.where(dp & U(1), sign, zero)
        mant = (dp >> U(40)) & U((1 << f.m) - 1)
        half = f.pow2(-f.m - 1)
        quarter = f.pow2(-f.m - 2)
        even = sgn | one | (mant & ~U(1))
        odd = sgn | one | (mant | U(1))
        eb = 10 if f.name == "float16" else 24
        c3 = np.where(k == 0, sgn | f.pow2(eb),
                      np.where(k == K - 1, (sgn ^ sign) | f.pow2(eb), sgn | f.pow2(eb - 24)))
        choices = [
            np.where(at_p, even, np.where(at_q, sgn | half, zero)),
            np.where(at_p, odd, np.where(at_q, sgn | half, zero)),
            np.where(at_p, even, np.where(at_q, sgn | half, np.where(at_r, sgn | quarter, zero))),
            c3,
            sign + np.zeros_like(N),
            np.zeros_like(N),
            np.where(k == 0, sign, zero) + np.zeros_like(N),
            np.where(k == 0, N, np.where(k == 1, N ^ sign, sign)),
            np.where(k == 1, N, np.where(k == 2, N ^ sign, sign)),
            np.where(k == 0, one | U(1), np.where(k == 1, sign | one, sign)) + np.zeros_like(N),
            N,
        ]
    out = np.zeros(np.broadcast(sc, N).shape, dtype=U)
    for i, ch in enumerate(choices):
        out = np.where(sc == U(i), np.broadcast_to(ch, out.shape), out)
    return out


class Case:
    def __init__(self, m):
        self.m = m
        self.seed = m["seed"]
        self.recipe = m["recipe"]
        t = m["tensors"]
        self.op = m["op"]
        if self.op == "MoeTokenPermute":
            # Tokens of rank 3 or more: a token is the product of the
            # dims after the first, in row-major order.
            dims = t["tokens"]["shape"]
            self.T, self.H = dims[0], int(np.prod(dims[1:], dtype=np.int64))
            ids = t["indices"]["shape"]
            self.K = ids[1] if len(ids) > 1 else 1
            self.tokens = Format(t["tokens"]["dtype"])
            self.probs = self.tokens
        else:
            self.R, self.H = t["permuted_tokens"]["shape"]
            out = "unpermuted_tokens" if self.op == "MoeTokenUnpermute" else "unpermuted_tokens_grad"
            self.T = t[out]["shape"][0]
            self.K = t["probs"]["shape"][1] if "probs" in t else 1
            self.tokens = Format(t["permuted_tokens"]["dtype"])
            self.probs = Format(t["probs"]["dtype"]) if "probs" in t else self.tokens
            # sorted_indices may be longer than T*K: the rest is never read.
            self.extra = t["sorted_indices"]["shape"][0] - self.T * self.K
        self.slot_key = stream_key(self.seed, 6)
        self.pick_key = stream_key(self.seed, 3)

    def slot_draw(self, t, k):
        return draw(self.slot_key, t * U(self.K) + np.asarray(k, dtype=U))

    def pick_draw(self, t, h):
        return draw(self.pick_key, t * U(self.H) + h)


def values(case, tensor, t, k, h):
    """Raw bits of the elements (t, k, h) (uint64 arrays, broadcast);
    for probs k is the column and h is unused, for tokens and the gradient
    k is 0."""
    f, kind, role, c = tensor.f, tensor.kind, tensor.role, case
    if role == "probs":
        d0, d1 = tensor.draws(t, U(0), k)
    else:
        d0, d1 = tensor.draws(t, k, h)
    if f.name == "int8":
        return d0 & U(0xFF)
    N = f.narrow(normal_f32(d0, d1).astype(np.float32))
    if kind == "normal":
        return N
    if kind == "negzero":
        return np.full(N.shape, f.sign, dtype=U)
    if kind == "bits":
        return d0 & (U(0xFFFFFFFF) if f.name == "float32" else U(0xFFFF))
    if kind in ("nan-inf", "subnormal", "overflow", "rounding"):
        # A plain tensor is a permuted one with top_k 1 and hidden = its
        # columns: the picks number (row, column).
        if role == "permuted":
            dp = draw(c.pick_key, t * U(tensor.nh) + h)
            return sum_kind(f, kind, k, c.K, h, d0, dp, N)
        col = k if role == "probs" else h
        dp = draw(c.pick_key, t * U(tensor.nh) + col)
        return sum_kind(f, kind, np.zeros_like(N, dtype=np.int64), 1, col, d0, dp, N)
    return coordinated(case, tensor, t, k, h, d0, d1, N)


def poisoned(f, h, d0, N):
    sc = h % U(4)
    return np.where(sc == 0, U(f.inf), np.where(sc == 1, U(f.sign | f.inf),
                    np.where(sc == 2, quiet_nan(f, d0), N)))


def product_d(c, t, k):
    hi = min(22, c.probs.m)
    lo = max(2, 24 - c.tokens.m)
    if lo > hi:
        lo = 2
    return lo + below(c.slot_draw(t, k), hi - lo + 1).astype(np.int64)


def subnormal_jp(c, t, k):
    base = 14 if c.probs.name == "float16" else 122 if c.tokens.name == "float16" else 40
    return base + below(c.slot_draw(t, k), 8).astype(np.int64)


def overflow_jp(c, t, k):
    return 1 + below(c.slot_draw(t, k), 4).astype(np.int64)


def coordinated(c, tensor, t, k, h, d0, d1, N):
    f, kind, role = tensor.f, tensor.kind, tensor.role
    zero = U(0)
    if role == "probs":
        if kind == "masking":
            ds = c.slot_draw(t, k)
            return np.where((ds & U(3)) == 0, np.where(ds & U(4), U(f.sign), zero), N)
        if kind == "product-rounding":
            return U(f.one) | (U(1) << (f.m - product_d(c, t, k)).astype(U))
        if kind == "product-subnormal":
            return f.narrow(np.ldexp(np.float32(1), -subnormal_jp(c, t, k)).astype(np.float32))
        if kind == "product-overflow":
            return f.narrow(np.ldexp(np.float32(1), overflow_jp(c, t, k)).astype(np.float32))
        if kind == "one":
            return np.full(N.shape, f.one, dtype=U)
        return N
    if role == "tokens":
        return N
    if kind == "masking":
        if role != "permuted":
            return N
        masked = (c.slot_draw(t, k) & U(3)) == 0
        return np.where(masked, poisoned(f, h, d0, N), N)
    if kind == "grad-inf":
        if role != "grad":
            return N
        return np.where(np.broadcast_to(t & U(1), N.shape) == 1, poisoned(f, h, d0, N), N)
    if kind == "cancel":
        if role == "grad":
            big = 14 if f.name == "float16" else 24
            e = big * (((h >> U(1)) % U(3)).astype(np.int64) - 1)
            return (np.where(h & U(1), U(f.sign), zero) |
                    f.narrow(np.ldexp(np.float32(1), e).astype(np.float32)))
        return f.narrow((1.0 + normal_f32(d0, d1) / 4).astype(np.float32))
    if kind == "tiny":
        return f.compose(d0 & U(1), -14 if f.name == "float16" else -70, f.mantissa_of(d0))
    if kind not in ("product-rounding", "product-subnormal", "product-overflow"):
        return N
    dp = c.pick_draw(t, h)
    p, q, _ = picks(dp, c.K)
    grad = role == "grad"
    kk = np.asarray(k, dtype=np.int64)
    at_p = np.ones(N.shape, bool) if grad else (kk == p)
    at_q = np.zeros(N.shape, bool) if grad else ((kk == q) & (c.K > 1))
    sgn = np.where(dp & U(1), U(f.sign), zero)
    sign = U(f.sign)
    if kind == "product-rounding":
        sc = h % U(6)
        d = product_d(c, t, p)
        cc = np.minimum(24 - d, f.m)
        tie = sgn | U(f.one) | (U(1) << (f.m - cc).astype(U))
        up = tie | (U(1) << (f.m - cc + 1).astype(U))
        x = np.where(sc & U(1), up, tie)
        if grad:
            return np.where(sc >= U(4), N, x)
        # scenario 4: slot p's own value N, its negation at q
        dp0, dp1 = tensor.draws(t, p.astype(U), h)
        Np = f.narrow(normal_f32(dp0, dp1).astype(np.float32))
        out = np.where(at_p, x, np.where((sc >= U(2)) & at_q, x ^ sign, zero))
        out = np.where(sc == U(4), np.where(at_p, N, np.where(at_q, Np ^ sign, zero)), out)
        return np.where(sc == U(5), N, out)
    if kind == "product-subnormal":
        sc = h % U(3)
        jp = subnormal_jp(c, t, p if grad else kk)
        te = -127 - below(dp, 23).astype(np.int64)
        e = np.maximum(te + jp, 1 - f.emax)
        v = f.compose(d0 & U(1), e, f.mantissa_of(d0))
        out = np.where((sc == 0) | at_p, v, zero)
        return np.where(sc == U(2), N, out)
    sc = h % U(4)
    mx = U(f.max)
    scaled = sgn | (mx - (overflow_jp(c, t, p).astype(U) << U(f.m)))
    out = np.where(sc == 0, sgn | mx,
                   np.where(sc == 1, np.where(at_p, sgn | mx, np.where(at_q, (sgn ^ sign) | mx, zero)),
                            np.where(sc == 2, np.where(at_p, scaled, zero), N)))
    return out


# ---------------------------------------------------------------------------
# Rebuilding a case


def read(case_dir, m, name):
    t = m["tensors"][name]
    dtype = {"float32": "<u4", "float16": "<u2", "bf16": "<u2", "int8": "u1",
             "int32": "<i4", "int64": "<i8", "float64": "<f8"}[t["dtype"]]
    return np.fromfile(os.path.join(case_dir, t["file"]), dtype=dtype)


def first_difference(a, b, what):
    a, b = np.asarray(a).reshape(-1), np.asarray(b).reshape(-1)
    if a.shape != b.shape:
        return "%s: %d elements rebuilt, %d in the file" % (what, a.size, b.size)
    diff = np.nonzero(a != b)[0]
    if diff.size:
        i = int(diff[0])
        return "%s differs at element %d: numpy 0x%x, file 0x%x" % (what, i, int(a[i]), int(b[i]))
    return None


def nan_aware(f, a, b, what):
    a, b = np.asarray(a).astype(U).reshape(-1), np.asarray(b).astype(U).reshape(-1)
    same = (a == b) | (f.is_nan(a) & f.is_nan(b))
    if not same.all():
        i = int(np.argmax(~same))
        return "%s differs at element %d: numpy 0x%x, file 0x%x" % (what, i, int(a[i]), int(b[i]))
    return None


def rebuild_permuted(c, kind, R, idx):
    """Rows [R, H]: element (t, k, h) in row sorted_indices[t*K + k] (the
    last slot naming a row, when several do); a row no slot names holds
    the values of flat slot T*K + r."""
    tensor = Tensor(c, c.tokens, kind, "permuted", 0)
    flat = owners(idx, c.T, c.K, R).astype(U)
    t = (flat // U(c.K))[:, None]
    k = (flat % U(c.K))[:, None]
    h = np.arange(c.H, dtype=U)[None, :]
    return np.broadcast_to(values(c, tensor, t, k, h), (R, c.H))


def rebuild_plain(c, fmt, kind, role, stream, rows, cols):
    tensor = Tensor(c, fmt, kind, role, stream)
    t = np.arange(rows, dtype=U)[:, None]
    col = np.arange(cols, dtype=U)[None, :]
    if role == "probs":
        return values(c, tensor, t, col, U(0))
    return values(c, tensor, t, U(0), col)


def check_permute(case_dir, m, c):
    r = c.recipe
    tokens = rebuild_plain(c, c.tokens, r["values"], "tokens", 0, c.T, c.H)
    err = first_difference(tokens.astype(c.tokens.raw), read(case_dir, m, "tokens"), "tokens")
    if err:
        return err
    ids = routed_ids(c.T, c.K, c.seed, r["num_experts"], r["hot_percent"])
    int64 = m["tensors"]["indices"]["dtype"] == "int64"
    if r.get("sentinels"):
        lo, hi = (np.iinfo(np.int64) if int64 else np.iinfo(np.int32)).min, \
            (np.iinfo(np.int64) if int64 else np.iinfo(np.int32)).max
        i = np.arange(ids.size)
        ids = np.where(i % 7 == 3, np.where((i // 7) % 2 == 0, lo, hi), ids)
    err = first_difference(ids.astype(np.int64 if int64 else np.int32),
                           read(case_dir, m, "indices"), "indices")
    if err:
        return err
    slots = c.T * c.K
    n = m["attrs"]["num_out_tokens"]
    if n <= 0:
        n += slots
    n = min(max(n, 0), slots)
    idx = inverse_stable_argsort(ids)
    err = first_difference(idx, read(case_dir, m, "sorted_indices"), "sorted_indices")
    if err:
        return err
    out = np.zeros((n, c.H), dtype=c.tokens.raw)
    keep = idx < n
    out[idx[keep]] = tokens.astype(c.tokens.raw)[np.arange(slots)[keep] // c.K]
    return first_difference(out, read(case_dir, m, "permuted_tokens"), "permuted_tokens")


def unpermute_model(c, x_bits, idx, p_bits):
    """The sum of section 1 of docs/operators.md, in numpy float32."""
    x = c.tokens.widen(x_bits.astype(c.tokens.raw)).reshape(c.R, c.H)
    idx = idx[:c.T * c.K]
    acc = np.zeros((c.T, c.H), np.float32)
    for k in range(c.K):
        rows = idx[k::c.K]
        ok = rows < c.R
        if p_bits is not None:
            p = c.probs.widen(p_bits[:, k].astype(c.probs.raw))
            ok = ok & (p != 0)
        vals = np.zeros((c.T, c.H), np.float32)
        vals[ok] = x[rows[ok]]
        prod = vals * p[:, None] if p_bits is not None else vals
        acc = np.where(ok[:, None], prod if k == 0 else acc + prod, acc)
    return c.tokens.narrow(acc)


def check_unpermute_family(case_dir, m, c):
    r = c.recipe
    idx = sorted_indices(c.T, c.K, c.seed, r, c.R, c.extra)
    err = first_difference(idx, read(case_dir, m, "sorted_indices"), "sorted_indices")
    if err:
        return err
    x = rebuild_permuted(c, r["values"], c.R, idx)
    err = first_difference(x.astype(c.tokens.raw), read(case_dir, m, "permuted_tokens"),
                           "permuted_tokens")
    if err:
        return err
    p = None
    if "probs" in m["tensors"]:
        p = rebuild_plain(c, c.probs, r["probs_values"], "probs", 4, c.T, c.K)
        err = first_difference(p.astype(c.probs.raw), read(case_dir, m, "probs"), "probs")
        if err:
            return err
    if c.op == "MoeTokenUnpermute":
        out = unpermute_model(c, x, idx, p)
        return nan_aware(c.tokens, out, read(case_dir, m, "unpermuted_tokens"),
                         "unpermuted_tokens")
    g = rebuild_plain(c, c.tokens, r["values"], "grad", 5, c.T, c.H)
    err = first_difference(g.astype(c.tokens.raw), read(case_dir, m, "unpermuted_tokens_grad"),
                           "unpermuted_tokens_grad")
    if err:
        return err
    # Rows no slot names are left as the caller had them: zeros here, as
    # the golden output has them.
    want = np.zeros((c.R, c.H), dtype=U)
    slots = np.arange(c.T * c.K)
    idx = idx[:c.T * c.K]
    keep = idx < c.R
    if p is None:
        want[idx[keep]] = g[slots[keep] // c.K]
        return first_difference(want.astype(c.tokens.raw),
                                read(case_dir, m, "permuted_tokens_grad"), "permuted_tokens_grad")
    gw = c.tokens.widen(g.astype(c.tokens.raw))
    pw = c.probs.widen(p.astype(c.probs.raw)).reshape(-1)
    prod = gw[slots // c.K] * pw[slots][:, None]
    want[idx[keep]] = c.tokens.narrow(prod[keep])
    return nan_aware(c.tokens, want, read(case_dir, m, "permuted_tokens_grad"),
                     "permuted_tokens_grad")


OPS = ("MoeTokenPermute", "MoeTokenUnpermute", "MoeTokenUnpermuteGrad")
EDGES = {"repeats", "sparse", "huge", "unread entries", "padded_mode", "rows no slot names",
         "tokens of rank 3"}


def domain_edges(m):
    """The edges of the input domain case ``m`` reaches."""
    t, r = m["tensors"], m["recipe"]
    edges = set()
    if r["routing"] in ("repeats", "sparse"):
        edges.add(r["routing"])
    if r.get("huge_indices"):
        edges.add("huge")
    if m["attrs"]["padded_mode"]:
        edges.add("padded_mode")
    if m["op"] == "MoeTokenPermute":
        if len(t["tokens"]["shape"]) > 2:
            edges.add("tokens of rank 3")
        return edges
    c = Case(m)
    if c.extra:
        edges.add("unread entries")
    if c.R > c.T * c.K:
        edges.add("rows no slot names")
    return edges


def check(case_dir):
    with open(os.path.join(case_dir, "case.json")) as f:
        m = json.load(f)
    if m.get("op") not in OPS or m.get("format") != "moeperm-golden/2" or "recipe" not in m:
        return None
    c = Case(m)
    if c.T * c.K * c.H > 8_000_000:
        return None
    if c.op == "MoeTokenPermute":
        return check_permute(case_dir, m, c) or "ok"
    return check_unpermute_family(case_dir, m, c) or "ok"


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: numpy_rebuild_family.py GOLDEN_DIR")
    counts = {op: 0 for op in OPS}
    kinds = set()
    edges = set()
    failures = 0
    for dirpath, dirs, files in os.walk(sys.argv[1]):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if "case.json" not in files:
            continue
        result = check(dirpath)
        if result is None:
            continue
        with open(os.path.join(dirpath, "case.json")) as f:
            m = json.load(f)
        counts[m["op"]] += 1
        kinds.add(m["recipe"]["values"])
        kinds.add(m["recipe"].get("probs_values", "normal"))
        edges.update(domain_edges(m))
        if result != "ok":
            failures += 1
            print("FAIL %s: %s" % (dirpath, result))
    print("rebuilt from the documentation: %s; value kinds %s; the domain's edge: %s; %d "
          "failed" % (", ".join("%d %s" % (n, op) for op, n in counts.items()),
                      ", ".join(sorted(kinds)), ", ".join(sorted(edges)), failures))
    # A corpus that lost an operator, a kind or an edge of the input domain
    # must not pass by checking less.
    if failures or min(counts.values()) == 0 or len(kinds) < 15 or edges != EDGES:
        if edges != EDGES:
            print("FAIL: no case of %s" % ", ".join(sorted(EDGES - edges)))
        sys.exit(1)


main()
