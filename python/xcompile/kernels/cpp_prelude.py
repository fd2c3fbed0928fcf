"""The C++ text every generated kernel starts with: scalar helpers with torch's semantics
(NaN-propagating max/min, Python-style floor division and remainder, half and bfloat16
conversions), inline branch-free float exp/tanh/sigmoid and GELU's erf (faster than libmvec's calls:
they vectorize in place) and libm declarations that let g++ vectorize other math calls
through libmvec."""
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


# float versions written out below (inline, vectorizable, no libmvec call)
INLINE_FLOAT = ("exp", "tanh")


def _scalar_only() -> str:
    """``xc_<f>_s``: the libm call under another name, so g++ never swaps in a libmvec vector
    variant (which may differ from the scalar result in the last ulp). A kernel that computes
    a value in two loops (a reduction, then a loop that compares against its result, as
    ``x == x.max()`` does) uses these, so both loops see the same bits."""
    out = ['extern "C" {']
    for f in MVEC_FUNCS:
        out.append(f'float xcs_{f}f(float) __asm__("{f}f"); double xcs_{f}(double) __asm__("{f}");')
    for f in MVEC_FUNCS2:
        out.append(f'float xcs_{f}f(float, float) __asm__("{f}f"); '
                   f'double xcs_{f}(double, double) __asm__("{f}");')
    out.append("}")
    for f in MVEC_FUNCS:
        # the inline float versions are plain arithmetic: the same bits in any loop
        fl = f"xc_{f}(a)" if f in INLINE_FLOAT else f"xcs_{f}f(a)"
        out.append(f"static inline float xc_{f}_s(float a) {{ return {fl}; }} "
                   f"static inline double xc_{f}_s(double a) {{ return xcs_{f}(a); }}")
    for f in MVEC_FUNCS2:
        out.append(f"static inline float xc_{f}_s(float a, float b) {{ return xcs_{f}f(a, b); }} "
                   f"static inline double xc_{f}_s(double a, double b) {{ return xcs_{f}(a, b); }}")
    return "\n".join(out)


# calls a kernel rewrites to their scalar-only versions (see _scalar_only)
SCALAR_ONLY = MVEC_FUNCS + MVEC_FUNCS2


def _wrappers() -> str:
    out = []
    for f in MVEC_FUNCS + PLAIN_FUNCS:
        if f not in INLINE_FLOAT:
            out.append(f"static inline float xc_{f}(float a) {{ return {f}f(a); }} ")
        out.append(f"static inline double xc_{f}(double a) {{ return {f}(a); }}")
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
static inline float xc_bits2f(int32_t i) { float f; __builtin_memcpy(&f, &i, 4); return f; }
static inline int32_t xc_f2bits(float f) { int32_t i; __builtin_memcpy(&i, &f, 4); return i; }
// exp: x = n ln2 + r with |r| <= ln2/2 (n rounded by the 1.5 * 2^23 shifter, whose low mantissa
// bits are then n), exp(r) by Cephes' degree-6 polynomial, 2^n added to the exponent bits.
// Results that are subnormal take 2^(n+25) * 2^-25 (one rounding); overflow gives inf, below
// the smallest subnormal 0, NaN stays NaN. Within 1 ulp; branch-free, so loops vectorize.
static inline float xc_exp(float x) {
  const float shifter = 12582912.0f;
  float t = __builtin_fmaf(x, 1.44269504088896341f, shifter);
  float n = t - shifter;
  int32_t ni = xc_f2bits(t) - 0x4b400000;
  float r = __builtin_fmaf(n, -0.693145751953125f, x);
  r = __builtin_fmaf(n, -1.428606765330187045e-06f, r);
  float p = 1.9875691500e-4f;
  p = __builtin_fmaf(p, r, 1.3981999507e-3f);
  p = __builtin_fmaf(p, r, 8.3334519073e-3f);
  p = __builtin_fmaf(p, r, 4.1665795894e-2f);
  p = __builtin_fmaf(p, r, 1.6666665459e-1f);
  p = __builtin_fmaf(p, r, 5.0000001201e-1f);
  p = __builtin_fmaf(p, r * r, r) + 1.0f;
  bool tiny = ni < -125;
  float y = xc_bits2f(xc_f2bits(p) + ((tiny ? ni + 25 : ni) << 23));
  y = tiny ? y * 2.98023223876953125e-8f : y;
  y = x >= 88.72283935546875f ? __builtin_inff() : y;   // exp of it rounds to inf
  y = x < -103.972084045410f ? 0.0f : y;
  return x != x ? x : y;
}
// erf for GELU (ops.erf_approx): x * P(x^2) / Q(x^2) on [-4, 4] (Eigen's rational), +-1 beyond
// 3.92 (where erf rounds to 1): within 6 ulp, no exp -- 2x faster than libmvec's erff. Eager's
// GELU uses an Abramowitz-Stegun erf (off by up to 5e-7); torch.erf keeps libmvec's (1 ulp).
static inline double xc_erf_approx(double a) { return erf(a); }
static inline float xc_erf_approx(float a) {
  float x = a < -4.f ? -4.f : (a > 4.f ? 4.f : a);
  float x2 = x * x;
  float p = __builtin_fmaf(x2, -2.72614225801306e-10f, 2.77068142495902e-08f);
  p = __builtin_fmaf(x2, p, -2.10102402082508e-06f);
  p = __builtin_fmaf(x2, p, -5.69250639462346e-05f);
  p = __builtin_fmaf(x2, p, -7.34990630326855e-04f);
  p = __builtin_fmaf(x2, p, -2.95459980854025e-03f);
  p = __builtin_fmaf(x2, p, -1.60960333262415e-02f);
  float q = __builtin_fmaf(x2, -1.45660718464996e-05f, -2.13374055278905e-04f);
  q = __builtin_fmaf(x2, q, -1.68282697438203e-03f);
  q = __builtin_fmaf(x2, q, -7.37332916720468e-03f);
  q = __builtin_fmaf(x2, q, -1.42647390514189e-02f);
  float y = x * (p / q);
  y = __builtin_fabsf(a) >= 3.92f ? __builtin_copysignf(1.0f, a) : y;
  return a != a ? a : y;
}
// tanh: Cephes' odd polynomial below |x| = 0.625, else sign(x) (1 - 2 / (exp(2|x|) + 1)).
static inline float xc_tanh(float a) {
  float z = a * a;
  float s = __builtin_fmaf(-5.70498872745e-3f, z, 2.06390887954e-2f);
  s = __builtin_fmaf(s, z, -5.37397155531e-2f);
  s = __builtin_fmaf(s, z, 1.33314422036e-1f);
  s = __builtin_fmaf(s, z, -3.33332819422e-1f);
  s = __builtin_copysignf(__builtin_fmaf(s * z, a, a), a);
  float b = __builtin_fabsf(a);
  float l = __builtin_copysignf(1.0f - 2.0f / (xc_exp(2.0f * b) + 1.0f), a);
  return b < 0.625f ? s : l;
}
static inline float xc_sigmoid(float a) { return 1.0f / (1.0f + xc_exp(-a)); }
static inline double xc_sigmoid(double a) { return 1.0 / (1.0 + exp(-a)); }
template <typename T> static inline T xc_reciprocal(T a) { return (T)1 / a; }
template <typename T> static inline T xc_relu(T a) { return a < 0 ? (T)0 : a; }
static inline bool xc_relu(bool a) { return a; }
template <typename T> static inline T xc_maximum(T a, T b) { return (a != a || a > b) ? a : b; }
template <typename T> static inline T xc_minimum(T a, T b) { return (a != a || a < b) ? a : b; }
// eager's sign: NaN -> 0 (neither comparison holds), -0.0 -> 0
template <typename T> static inline T xc_sign(T a) { return (T)((a > 0) - (a < 0)); }
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
  if (n == 0) { mean = mb; m2 = m2b; n = nb; return; }  // (an empty side: d * d * 0 is NaN for huge d)
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
            _wrappers() + _HELPERS + "\n" + _scalar_only() + "\n")
