// The recurrent layers' hot loops on AVX-512 (kernels.h: DeltaRuleStep, ConvRows), giving the
// bits of the plain C++ in recurrent_ops.cc:
// - the delta rule: LaneDot's 16 lanes are one zmm (element i in lane i % 16), its pairwise tree
//   is Tree below; a state row is decayed, dotted with k, stored, then updated, dotted with q and
//   stored again while still in L1, so the head's state crosses memory once each way. Four state
//   rows go side by side, so the four dependency chains of their sums overlap.
// - the convolution: 16 channels per zmm, summed over the taps in order from +0; SiLU's expf is
//   the C library's, one element at a time (a vector exp would give other bits), and its add and
//   division are vector operations, rounded as the scalar ones.
// Every product is rounded before its sum (Rounded): the file is compiled with FMA enabled and
// -ffp-contract=fast, and the plain twin has no FMA.
//
// Everything is in an anonymous namespace but the two entry points, and only intrinsics are used
// (no inline helpers from shared headers), so no AVX-512 code can leak into other translation
// units through COMDAT folding.
#include <math.h>  // expf, as the plain twin's std::exp(float)

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/immintrin_avx512.h"
#include "kernels/cpu/recurrent_rows.h"

namespace kvserve::avx512 {

namespace {

constexpr int kLanes = 16;
constexpr int kRowsAtOnce = 4;  // state rows side by side
constexpr int kMaxKernel = 8;   // longer convolutions take the plain twin

// v as rounded floats: keeps GCC from fusing the product with the sum that follows.
inline __m512 Rounded(__m512 v) {
  asm("" : "+v"(v));
  return v;
}

// LaneDot's tree: lane l += lane l + 8, then + 4, + 2, + 1; returns lane 0.
inline float Tree(__m512 acc) {
  const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1));
  __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  b = _mm_add_ps(b, _mm_movehl_ps(b, b));
  b = _mm_add_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}

inline __mmask16 FirstLanes(int n) {
  return n >= kLanes ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
}

// State rows j0 .. j0 + R - 1 of the step.
template <int R>
void DeltaRows(const DeltaRuleStep& s, int j0) {
  const int hd = s.head_dim;
  const int full = hd / kLanes * kLanes;
  const __mmask16 tail = FirstLanes(hd - full);
  const __m512 decay = _mm512_set1_ps(s.decay);
  const __m512 zero = _mm512_setzero_ps();
  float* m[R];
  const float* src[R];
  for (int r = 0; r < R; ++r) {
    m[r] = s.state + static_cast<size_t>(j0 + r) * hd;
    src[r] = s.src != nullptr ? s.src + static_cast<size_t>(j0 + r) * hd : nullptr;
  }
  // m = src * decay, stored; acc = LaneDot(m, k).
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = zero;
  int i = 0;
  for (; i < full; i += kLanes) {
    const __m512 k = _mm512_loadu_ps(s.k + i);
    for (int r = 0; r < R; ++r) {
      const __m512 x = _mm512_mul_ps(src[r] != nullptr ? _mm512_loadu_ps(src[r] + i) : zero, decay);
      _mm512_storeu_ps(m[r] + i, x);
      acc[r] = _mm512_add_ps(acc[r], Rounded(_mm512_mul_ps(x, k)));
    }
  }
  if (tail != 0) {
    const __m512 k = _mm512_maskz_loadu_ps(tail, s.k + i);
    for (int r = 0; r < R; ++r) {
      const __m512 x =
          _mm512_mul_ps(src[r] != nullptr ? _mm512_maskz_loadu_ps(tail, src[r] + i) : zero, decay);
      _mm512_mask_storeu_ps(m[r] + i, tail, x);
      acc[r] = _mm512_mask_add_ps(acc[r], tail, acc[r], Rounded(_mm512_mul_ps(x, k)));
    }
  }
  // m += d * k, stored; acc = LaneDot(m, q).
  __m512 d[R];
  for (int r = 0; r < R; ++r) {
    d[r] = _mm512_set1_ps((s.v[j0 + r] - Tree(acc[r])) * s.beta);
    acc[r] = zero;
  }
  for (i = 0; i < full; i += kLanes) {
    const __m512 k = _mm512_loadu_ps(s.k + i);
    const __m512 q = _mm512_loadu_ps(s.q + i);
    for (int r = 0; r < R; ++r) {
      const __m512 x = _mm512_add_ps(_mm512_loadu_ps(m[r] + i), Rounded(_mm512_mul_ps(d[r], k)));
      _mm512_storeu_ps(m[r] + i, x);
      acc[r] = _mm512_add_ps(acc[r], Rounded(_mm512_mul_ps(x, q)));
    }
  }
  if (tail != 0) {
    const __m512 k = _mm512_maskz_loadu_ps(tail, s.k + i);
    const __m512 q = _mm512_maskz_loadu_ps(tail, s.q + i);
    for (int r = 0; r < R; ++r) {
      const __m512 x =
          _mm512_add_ps(_mm512_maskz_loadu_ps(tail, m[r] + i), Rounded(_mm512_mul_ps(d[r], k)));
      _mm512_mask_storeu_ps(m[r] + i, tail, x);
      acc[r] = _mm512_mask_add_ps(acc[r], tail, acc[r], Rounded(_mm512_mul_ps(x, q)));
    }
  }
  for (int r = 0; r < R; ++r) s.out[j0 + r] = Tree(acc[r]) * s.scale;
}

// DeltaRows for head_dim = 16 NV: the rows stay in registers between the two passes, so each is
// stored once.
template <int R, int NV>
void DeltaRowsInRegisters(const DeltaRuleStep& s, int j0) {
  constexpr int hd = NV * kLanes;
  const __m512 decay = _mm512_set1_ps(s.decay);
  const __m512 zero = _mm512_setzero_ps();
  __m512 x[R][NV];
  __m512 acc[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = zero;
    const float* src = s.src != nullptr ? s.src + static_cast<size_t>(j0 + r) * hd : nullptr;
    for (int b = 0; b < NV; ++b) {
      x[r][b] = _mm512_mul_ps(src != nullptr ? _mm512_loadu_ps(src + b * kLanes) : zero, decay);
      acc[r] =
          _mm512_add_ps(acc[r], Rounded(_mm512_mul_ps(x[r][b], _mm512_loadu_ps(s.k + b * kLanes))));
    }
  }
  for (int r = 0; r < R; ++r) {
    const __m512 d = _mm512_set1_ps((s.v[j0 + r] - Tree(acc[r])) * s.beta);
    float* m = s.state + static_cast<size_t>(j0 + r) * hd;
    acc[r] = zero;
    for (int b = 0; b < NV; ++b) {
      x[r][b] =
          _mm512_add_ps(x[r][b], Rounded(_mm512_mul_ps(d, _mm512_loadu_ps(s.k + b * kLanes))));
      _mm512_storeu_ps(m + b * kLanes, x[r][b]);
      acc[r] =
          _mm512_add_ps(acc[r], Rounded(_mm512_mul_ps(x[r][b], _mm512_loadu_ps(s.q + b * kLanes))));
    }
    s.out[j0 + r] = Tree(acc[r]) * s.scale;
  }
}

}  // namespace

void DeltaRule(const DeltaRuleStep& step) {
  int j = step.j_begin;
  if (step.head_dim == 128) {
    for (; j + 2 <= step.j_end; j += 2) DeltaRowsInRegisters<2, 8>(step, j);
  }
  for (; j + kRowsAtOnce <= step.j_end; j += kRowsAtOnce) DeltaRows<kRowsAtOnce>(step, j);
  for (; j < step.j_end; ++j) DeltaRows<1>(step, j);
}

void ShortConvRows(const ConvRows& a) {
  if (a.kernel > kMaxKernel || a.width > kMaxConvWidth) return scalar::ShortConvRows(a);
  static constexpr float kZeros[kMaxConvWidth] = {};
  const int hist = a.kernel - 1;
  // The weights as [kernel][channel] (read under masks: nothing past width).
  alignas(64) float wt[kMaxKernel][kMaxConvWidth];
  for (int c = 0; c < a.width; ++c) {
    for (int j = 0; j < a.kernel; ++j) wt[j][c] = a.weight[c * a.kernel + j];
  }
  auto window_row = [&](int i) -> const float* {
    if (i >= hist) return a.x + static_cast<size_t>(i - hist) * a.x_stride;
    if (a.hist == nullptr) return kZeros;
    return a.hist + static_cast<size_t>(i) * a.hist_stride;
  };
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int t = 0; t < a.n_rows; ++t) {
    alignas(64) float sum[kMaxConvWidth];
    alignas(64) float e[kMaxConvWidth];
    for (int c = 0; c < a.width; c += kLanes) {
      const __mmask16 live = FirstLanes(a.width - c);
      __m512 acc = _mm512_setzero_ps();
      for (int j = 0; j < a.kernel; ++j) {
        const __m512 x = _mm512_maskz_loadu_ps(live, window_row(t + j) + c);
        acc = _mm512_add_ps(acc, Rounded(_mm512_mul_ps(_mm512_maskz_load_ps(live, wt[j] + c), x)));
      }
      _mm512_store_ps(sum + c, acc);
    }
    for (int c = 0; c < a.width; ++c) e[c] = expf(-sum[c]);
    float* out = a.out + static_cast<size_t>(t) * a.out_stride;
    for (int c = 0; c < a.width; c += kLanes) {
      const __mmask16 live = FirstLanes(a.width - c);
      const __m512 silu = _mm512_div_ps(_mm512_load_ps(sum + c),
                                        _mm512_add_ps(one, _mm512_maskz_load_ps(live, e + c)));
      _mm512_mask_storeu_ps(out + c, live, silu);
    }
  }
}

// R rows of y, columns [j, j + 32) (two vectors) or under `live` [j, j + 16) (one), over all c.
template <int R, int V>
void MatAccBlock(const MatAcc& p, int r0, int j, __mmask16 live) {
  __m512 acc[R][V];
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < V; ++v) {
      acc[r][v] = _mm512_maskz_loadu_ps(live, p.y + (r0 + r) * p.y_stride + j + v * kLanes);
    }
  }
  for (int c = 0; c < p.m; ++c) {
    __m512 b[V];
    for (int v = 0; v < V; ++v)
      b[v] = _mm512_maskz_loadu_ps(live, p.b + c * p.b_stride + j + v * kLanes);
    for (int r = 0; r < R; ++r) {
      const __m512 x = _mm512_set1_ps(p.x[(r0 + r) * p.x_stride + c]);
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(x, b[v], acc[r][v]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < V; ++v) {
      _mm512_mask_storeu_ps(p.y + (r0 + r) * p.y_stride + j + v * kLanes, live, acc[r][v]);
    }
  }
}

template <int R>
void MatAccRows(const MatAcc& p, int r0) {
  int j = 0;
  for (; j + 2 * kLanes <= p.w; j += 2 * kLanes) MatAccBlock<R, 2>(p, r0, j, 0xFFFF);
  for (; j < p.w; j += kLanes) MatAccBlock<R, 1>(p, r0, j, FirstLanes(p.w - j));
}

void MatAccumulate(const MatAcc& p) {
  int r = 0;
  for (; r + 4 <= p.n; r += 4) MatAccRows<4>(p, r);
  for (; r < p.n; ++r) MatAccRows<1>(p, r);
}

}  // namespace kvserve::avx512
