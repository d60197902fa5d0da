// The recurrent layers' hot loops on AVX2 (kernels.h: DeltaRuleStep, ConvRows), giving the bits
// of the plain C++ in recurrent_ops.cc:
// - the delta rule: LaneDot's 16 lanes are two ymm (lanes 0-7 and 8-15), its pairwise tree is
//   Tree below; a state row is decayed, dotted with k, stored, then updated, dotted with q and
//   stored again while still in L1, so the head's state crosses memory once each way. Four state
//   rows go side by side, so the dependency chains of their sums overlap.
// - the convolution: 8 channels per ymm, summed over the taps in order from +0; SiLU's expf is the
//   C library's, one element at a time (a vector exp would give other bits), and its add and
//   division are vector operations, rounded as the scalar ones. Masked loads and stores (slow on
//   AMD) only for the last partial vector.
// Every product is rounded before its sum (Rounded): the file is compiled with FMA enabled and
// -ffp-contract=fast, and the plain twin has no FMA.
//
// Everything is in an anonymous namespace but the two entry points, and only intrinsics are used
// (no inline helpers from shared headers), so no AVX2 code can leak into other translation units
// through COMDAT folding.
#include <immintrin.h>
#include <math.h>  // expf, as the plain twin's std::exp(float)

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/recurrent_rows.h"

namespace kvserve::avx2 {

namespace {

constexpr int kLanes = 16;      // LaneDot's: two ymm
constexpr int kHalf = 8;        // floats per ymm
constexpr int kRowsAtOnce = 2;  // state rows side by side
constexpr int kMaxKernel = 8;   // longer convolutions take the plain twin

// v as rounded floats: keeps GCC from fusing the product with the sum that follows.
inline __m256 Rounded(__m256 v) {
  asm("" : "+x"(v));
  return v;
}

// LaneDot's tree over lanes lo (0-7) and hi (8-15): lane l += lane l + 8, then + 4, + 2, + 1.
inline float Tree(__m256 lo, __m256 hi) {
  const __m256 a = _mm256_add_ps(lo, hi);
  __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  b = _mm_add_ps(b, _mm_movehl_ps(b, b));
  b = _mm_add_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}

// Lanes [0, n) all ones, the rest zero (n <= 0: none; n >= 8: all).
inline __m256i FirstLanes(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// acc + p on the lanes of `mask`, acc elsewhere.
inline __m256 MaskAdd(__m256 acc, __m256i mask, __m256 p) {
  return _mm256_blendv_ps(acc, _mm256_add_ps(acc, p), _mm256_castsi256_ps(mask));
}

// m = src[i ..] * decay (0 * decay where src is nullptr), on 8 lanes or those of `mask`.
inline __m256 Decayed(const float* src, int i, __m256 decay) {
  return _mm256_mul_ps(src != nullptr ? _mm256_loadu_ps(src + i) : _mm256_setzero_ps(), decay);
}
inline __m256 Decayed(const float* src, int i, __m256 decay, __m256i mask) {
  return _mm256_mul_ps(src != nullptr ? _mm256_maskload_ps(src + i, mask) : _mm256_setzero_ps(),
                       decay);
}

// State rows j0 .. j0 + R - 1 of the step. A 128-wide row does not fit AVX2's 16 registers, and
// storing m = src * decay to read it back in the second pass measured slower than computing it
// again (the same bits), so each state row is read twice (the second time from L1) and stored
// once; src may be the state, since each element is read before it is stored.
template <int R>
void DeltaRows(const DeltaRuleStep& s, int j0) {
  const int hd = s.head_dim;
  const int full = hd / kLanes * kLanes;
  const int rest = hd - full;
  const __m256i tail_lo = FirstLanes(rest);
  const __m256i tail_hi = FirstLanes(rest - kHalf);
  const __m256 decay = _mm256_set1_ps(s.decay);
  const __m256 zero = _mm256_setzero_ps();
  float* m[R];
  const float* src[R];
  for (int r = 0; r < R; ++r) {
    m[r] = s.state + static_cast<size_t>(j0 + r) * hd;
    src[r] = s.src != nullptr ? s.src + static_cast<size_t>(j0 + r) * hd : nullptr;
  }
  // acc = LaneDot(src * decay, k).
  __m256 lo[R], hi[R];
  for (int r = 0; r < R; ++r) lo[r] = hi[r] = zero;
  int i = 0;
  for (; i < full; i += kLanes) {
    const __m256 k0 = _mm256_loadu_ps(s.k + i);
    const __m256 k1 = _mm256_loadu_ps(s.k + i + kHalf);
    for (int r = 0; r < R; ++r) {
      const __m256 x0 = Decayed(src[r], i, decay);
      const __m256 x1 = Decayed(src[r], i + kHalf, decay);
      lo[r] = _mm256_add_ps(lo[r], Rounded(_mm256_mul_ps(x0, k0)));
      hi[r] = _mm256_add_ps(hi[r], Rounded(_mm256_mul_ps(x1, k1)));
    }
  }
  if (rest != 0) {
    const __m256 k0 = _mm256_maskload_ps(s.k + i, tail_lo);
    const __m256 k1 = _mm256_maskload_ps(s.k + i + kHalf, tail_hi);
    for (int r = 0; r < R; ++r) {
      const __m256 x0 = Decayed(src[r], i, decay, tail_lo);
      const __m256 x1 = Decayed(src[r], i + kHalf, decay, tail_hi);
      lo[r] = MaskAdd(lo[r], tail_lo, Rounded(_mm256_mul_ps(x0, k0)));
      hi[r] = MaskAdd(hi[r], tail_hi, Rounded(_mm256_mul_ps(x1, k1)));
    }
  }
  // m = src * decay + d * k, stored; acc = LaneDot(m, q).
  __m256 d[R];
  for (int r = 0; r < R; ++r) {
    d[r] = _mm256_set1_ps((s.v[j0 + r] - Tree(lo[r], hi[r])) * s.beta);
    lo[r] = hi[r] = zero;
  }
  for (i = 0; i < full; i += kLanes) {
    const __m256 k0 = _mm256_loadu_ps(s.k + i);
    const __m256 k1 = _mm256_loadu_ps(s.k + i + kHalf);
    const __m256 q0 = _mm256_loadu_ps(s.q + i);
    const __m256 q1 = _mm256_loadu_ps(s.q + i + kHalf);
    for (int r = 0; r < R; ++r) {
      const __m256 x0 =
          _mm256_add_ps(Rounded(Decayed(src[r], i, decay)), Rounded(_mm256_mul_ps(d[r], k0)));
      const __m256 x1 = _mm256_add_ps(Rounded(Decayed(src[r], i + kHalf, decay)),
                                      Rounded(_mm256_mul_ps(d[r], k1)));
      _mm256_storeu_ps(m[r] + i, x0);
      _mm256_storeu_ps(m[r] + i + kHalf, x1);
      lo[r] = _mm256_add_ps(lo[r], Rounded(_mm256_mul_ps(x0, q0)));
      hi[r] = _mm256_add_ps(hi[r], Rounded(_mm256_mul_ps(x1, q1)));
    }
  }
  if (rest != 0) {
    const __m256 k0 = _mm256_maskload_ps(s.k + i, tail_lo);
    const __m256 k1 = _mm256_maskload_ps(s.k + i + kHalf, tail_hi);
    const __m256 q0 = _mm256_maskload_ps(s.q + i, tail_lo);
    const __m256 q1 = _mm256_maskload_ps(s.q + i + kHalf, tail_hi);
    for (int r = 0; r < R; ++r) {
      const __m256 x0 = _mm256_add_ps(Rounded(Decayed(src[r], i, decay, tail_lo)),
                                      Rounded(_mm256_mul_ps(d[r], k0)));
      const __m256 x1 = _mm256_add_ps(Rounded(Decayed(src[r], i + kHalf, decay, tail_hi)),
                                      Rounded(_mm256_mul_ps(d[r], k1)));
      _mm256_maskstore_ps(m[r] + i, tail_lo, x0);
      _mm256_maskstore_ps(m[r] + i + kHalf, tail_hi, x1);
      lo[r] = MaskAdd(lo[r], tail_lo, Rounded(_mm256_mul_ps(x0, q0)));
      hi[r] = MaskAdd(hi[r], tail_hi, Rounded(_mm256_mul_ps(x1, q1)));
    }
  }
  for (int r = 0; r < R; ++r) s.out[j0 + r] = Tree(lo[r], hi[r]) * s.scale;
}

}  // namespace

void DeltaRule(const DeltaRuleStep& step) {
  int j = step.j_begin;
  for (; j + kRowsAtOnce <= step.j_end; j += kRowsAtOnce) DeltaRows<kRowsAtOnce>(step, j);
  for (; j < step.j_end; ++j) DeltaRows<1>(step, j);
}

void ShortConvRows(const ConvRows& a) {
  if (a.kernel > kMaxKernel || a.width > kMaxConvWidth) return scalar::ShortConvRows(a);
  static constexpr float kZeros[kMaxConvWidth] = {};
  const int hist = a.kernel - 1;
  // The weights as [kernel][channel] (read under masks: nothing past width).
  alignas(32) float wt[kMaxKernel][kMaxConvWidth];
  for (int c = 0; c < a.width; ++c) {
    for (int j = 0; j < a.kernel; ++j) wt[j][c] = a.weight[c * a.kernel + j];
  }
  auto window_row = [&](int i) -> const float* {
    if (i >= hist) return a.x + static_cast<size_t>(i - hist) * a.x_stride;
    if (a.hist == nullptr) return kZeros;
    return a.hist + static_cast<size_t>(i) * a.hist_stride;
  };
  const __m256 one = _mm256_set1_ps(1.0f);
  for (int t = 0; t < a.n_rows; ++t) {
    alignas(32) float sum[kMaxConvWidth];
    alignas(32) float e[kMaxConvWidth];
    int c = 0;
    for (; c + kHalf <= a.width; c += kHalf) {
      __m256 acc = _mm256_setzero_ps();
      for (int j = 0; j < a.kernel; ++j) {
        const __m256 x = _mm256_loadu_ps(window_row(t + j) + c);
        acc = _mm256_add_ps(acc, Rounded(_mm256_mul_ps(_mm256_load_ps(wt[j] + c), x)));
      }
      _mm256_store_ps(sum + c, acc);
    }
    if (c < a.width) {
      const __m256i live = FirstLanes(a.width - c);
      __m256 acc = _mm256_setzero_ps();
      for (int j = 0; j < a.kernel; ++j) {
        const __m256 x = _mm256_maskload_ps(window_row(t + j) + c, live);
        acc = _mm256_add_ps(acc, Rounded(_mm256_mul_ps(_mm256_maskload_ps(wt[j] + c, live), x)));
      }
      _mm256_store_ps(sum + c, acc);
    }
    for (c = 0; c < a.width; ++c) e[c] = expf(-sum[c]);
    float* out = a.out + static_cast<size_t>(t) * a.out_stride;
    for (c = 0; c + kHalf <= a.width; c += kHalf) {
      _mm256_storeu_ps(out + c, _mm256_div_ps(_mm256_load_ps(sum + c),
                                              _mm256_add_ps(one, _mm256_load_ps(e + c))));
    }
    if (c < a.width) {
      const __m256i live = FirstLanes(a.width - c);
      const __m256 silu = _mm256_div_ps(_mm256_load_ps(sum + c),
                                        _mm256_add_ps(one, _mm256_maskload_ps(e + c, live)));
      _mm256_maskstore_ps(out + c, live, silu);
    }
  }
}

// R rows of y, columns [j, j + 16) (two ymm), over all c.
template <int R>
void MatAccBlock(const MatAcc& p, int r0, int j) {
  __m256 acc[R][2];
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < 2; ++v)
      acc[r][v] = _mm256_loadu_ps(p.y + (r0 + r) * p.y_stride + j + v * 8);
  }
  for (int c = 0; c < p.m; ++c) {
    const __m256 b0 = _mm256_loadu_ps(p.b + c * p.b_stride + j);
    const __m256 b1 = _mm256_loadu_ps(p.b + c * p.b_stride + j + 8);
    for (int r = 0; r < R; ++r) {
      const __m256 x = _mm256_set1_ps(p.x[(r0 + r) * p.x_stride + c]);
      acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < 2; ++v)
      _mm256_storeu_ps(p.y + (r0 + r) * p.y_stride + j + v * 8, acc[r][v]);
  }
}

template <int R>
void MatAccRows(const MatAcc& p, int r0) {
  int j = 0;
  for (; j + 16 <= p.w; j += 16) MatAccBlock<R>(p, r0, j);
  for (int r = r0; r < r0 + R; ++r) {  // the last w % 16 columns
    for (int c = 0; c < p.m; ++c) {
      const float x = p.x[r * p.x_stride + c];
      for (int jj = j; jj < p.w; ++jj) p.y[r * p.y_stride + jj] += x * p.b[c * p.b_stride + jj];
    }
  }
}

void MatAccumulate(const MatAcc& p) {
  int r = 0;
  for (; r + 4 <= p.n; r += 4) MatAccRows<4>(p, r);
  for (; r < p.n; ++r) MatAccRows<1>(p, r);
}

}  // namespace kvserve::avx2
