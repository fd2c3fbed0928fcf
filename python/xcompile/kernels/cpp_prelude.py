"""The C++ text every generated kernel starts with: scalar helpers with torch's semantics
(NaN-propagating max/min, Python-style floor division and remainder, half and bfloat16
conversions) and libm declarations that let g++ vectorize math calls through libmvec."""
from __future__ import annotations

import ctypes.util

# libm functions with vector variants in glibc's libmvec (glibc >= 2.35 for most of them).
MVEC_FUNCS = ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin",
              "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc")
MVEC_FUNCS2 = ("pow", "atan2", "hypot")
PLAIN_FUNCS = ("lgamma",)
PLAIN_FUNCS2 = ("fmod",)


def have_libmvec() -> bool:
    return ctypes.util.find_library("mvec") is not None


def _decls(simd: bool) -> str:
    attr = '__attribute__((simd("notinbranch"))) ' if simd else ""
    out = []
    for f in MVEC_FUNCS:
        out.append(f"{attr}float {f}f(float); {attr}double {f}(double);")
    for f in MVEC_FUNCS2:
        out.append(f"{attr}float {f}f(float, float); {attr}double {f}(double, double);")
    for f in PLAIN_FUNCS:
        out.append(f"float {f}f(float); double {f}(double);")
    for f in PLAIN_FUNCS2:
        out.append(f"float {f}f(float, float); double {f}(double, double);")
    return "\n".join(out)


def _wrappers() -> str:
    out = []
    for f in MVEC_FUNCS + PLAIN_FUNCS:
        out.append(f"static inline float xc_{f}(float a) {{ return {f}f(a); }} "
                   f"static inline double xc_{f}(double a) {{ return {f}(a); }}")
    for f in MVEC_FUNCS2 + PLAIN_FUNCS2:
        out.append(f"static inline float xc_{f}(float a, float b) {{ return {f}f(a, b); }} "
                   f"static inline double xc_{f}(double a, double b) {{ return {f}(a, b); }}")
    return "\n".join(out)


_HELPERS = r"""
static inline float xc_sqrt(float a) { return __builtin_sqrtf(a); }
static inline double xc_sqrt(double a) { return __builtin_sqrt(a); }
static inline float xc_rsqrt(float a) { return 1.0f / __builtin_sqrtf(a); }
static inline double xc_rsqrt(double a) { return 1.0 / __builtin_sqrt(a); }
static inline float xc_floor(float a) { return __builtin_floorf(a); }
static inline double xc_floor(double a) { return __builtin_floor(a); }
static inline float xc_ceil(float a) { return __builtin_ceilf(a); }
static inline double xc_ceil(double a) { return __builtin_ceil(a); }
static inline float xc_trunc(float a) { return __builtin_truncf(a); }
static inline double xc_trunc(double a) { return __builtin_trunc(a); }
static inline float xc_round(float a) { return __builtin_rintf(a); }
static inline double xc_round(double a) { return __builtin_rint(a); }
template <typename T> static inline T xc_floor(T a) { return a; }
template <typename T> static inline T xc_ceil(T a) { return a; }
template <typename T> static inline T xc_trunc(T a) { return a; }
template <typename T> static inline T xc_round(T a) { return a; }
static inline float xc_abs(float a) { return __builtin_fabsf(a); }
static inline double xc_abs(double a) { return __builtin_fabs(a); }
template <typename T> static inline T xc_abs(T a) { return a < 0 ? (T)-a : a; }
static inline bool xc_abs(bool a) { return a; }
static inline float xc_copysign(float a, float b) { return __builtin_copysignf(a, b); }
static inline double xc_copysign(double a, double b) { return __builtin_copysign(a, b); }
static inline float xc_sigmoid(float a) { return 1.0f / (1.0f + expf(-a)); }
static inline double xc_sigmoid(double a) { return 1.0 / (1.0 + exp(-a)); }
template <typename T> static inline T xc_reciprocal(T a) { return (T)1 / a; }
template <typename T> static inline T xc_relu(T a) { return a < 0 ? (T)0 : a; }
static inline bool xc_relu(bool a) { return a; }
template <typename T> static inline T xc_maximum(T a, T b) { return (a != a || a > b) ? a : b; }
template <typename T> static inline T xc_minimum(T a, T b) { return (a != a || a < b) ? a : b; }
template <typename T> static inline T xc_sign(T a) { return a != a ? a : (T)((a > 0) - (a < 0)); }
static inline bool xc_sign(bool a) { return a; }
template <typename T> static inline bool xc_isinf(T a) { return a == (T)__builtin_inf() || a == -(T)__builtin_inf(); }
static inline bool xc_signbit(float a) { return __builtin_signbitf(a); }
static inline bool xc_signbit(double a) { return __builtin_signbit(a); }
template <typename T> static inline bool xc_signbit(T a) { return a < 0; }
template <typename T> static inline T xc_truncdiv(T a, T b) { return b == 0 ? (T)0 : (T)(a / b); }
template <typename T> static inline T xc_floordiv(T a, T b) {
  if (b == 0) return (T)0;
  T q = a / b; if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1; return q;
}
template <typename F> static inline F xc_floordiv_f(F a, F b) {
  if (b == 0) return a / b;
  F mod = xc_fmod(a, b); F div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
  F fl;
  if (div != 0) { fl = xc_floor(div); if (div - fl > (F)0.5) fl += 1; }
  else fl = xc_copysign((F)0, a / b);
  return fl;
}
static inline float xc_floordiv(float a, float b) { return xc_floordiv_f(a, b); }
static inline double xc_floordiv(double a, double b) { return xc_floordiv_f(a, b); }
template <typename T> static inline T xc_remainder(T a, T b) {
  if (b == 0) return (T)0;
  T r = a % b; if (r != 0 && ((r < 0) != (b < 0))) r += b; return r;
}
template <typename F> static inline F xc_remainder_f(F a, F b) {
  F r = xc_fmod(a, b); if (r != 0 && ((r < 0) != (b < 0))) r += b; return r;
}
static inline float xc_remainder(float a, float b) { return xc_remainder_f(a, b); }
static inline double xc_remainder(double a, double b) { return xc_remainder_f(a, b); }
template <typename T> static inline T xc_fmod(T a, T b) { return b == 0 ? (T)0 : (T)(a % b); }
template <typename T> static inline T xc_lshift(T a, T b) {
  return (b < 0 || b >= (T)(8 * sizeof(T))) ? (T)0 : (T)(a << b);
}
template <typename T> static inline T xc_rshift(T a, T b) {
  return (b < 0 || b >= (T)(8 * sizeof(T))) ? (T)(a < 0 ? -1 : 0) : (T)(a >> b);
}
static inline int64_t xc_imin(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t xc_imax(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t xc_index(int64_t i, int64_t n) {
  i = i < 0 ? i + n : i; return i < 0 ? 0 : (i >= n ? n - 1 : i);
}
static inline float xc_h2f(_Float16 h) { return (float)h; }
static inline float xc_round_h(float f) { return (float)(_Float16)f; }
static inline float xc_bf2f(uint16_t h) {
  uint32_t u = ((uint32_t)h) << 16; float f; __builtin_memcpy(&f, &u, 4); return f;
}
static inline uint16_t xc_f2bf(float f) {
  uint32_t u; __builtin_memcpy(&u, &f, 4);
  if (f != f) return (uint16_t)0x7fc0;
  u += 0x7fff + ((u >> 16) & 1); return (uint16_t)(u >> 16);
}
static inline float xc_round_bf(float f) { return xc_bf2f(xc_f2bf(f)); }
template <typename T> static inline void xc_welford_merge(T& mean, T& m2, T& n, T mb, T m2b, T nb) {
  if (nb == 0) return;
  T nn = n + nb; T d = mb - mean;
  mean = mean + d * (nb / nn); m2 = m2 + m2b + d * d * (n * nb / nn); n = nn;
}
template <typename T> static inline void xc_argmax_merge(T& a, int64_t& ai, T b, int64_t bi) {
  bool an = a != a, bn = b != b;
  bool take = an ? (bn && bi < ai) : (bn || b > a || (b == a && bi < ai));
  if (take) { a = b; ai = bi; }
}
template <typename T> static inline void xc_argmin_merge(T& a, int64_t& ai, T b, int64_t bi) {
  bool an = a != a, bn = b != b;
  bool take = an ? (bn && bi < ai) : (bn || b < a || (b == a && bi < ai));
  if (take) { a = b; ai = bi; }
}
"""


def prelude(simd_math: bool) -> str:
    return ("#include <cstdint>\n#include <limits>\nextern \"C\" {\n" + _decls(simd_math) + "\n}\n" +
            _wrappers() + _HELPERS)
