#include "kernels/cpu/quant_tiles_scalar.h"

#include <cstddef>

#include "kernels/cpu/scratch_buffer.h"
#include "kernels/ggml_blocks.h"
#include "util/half.h"

namespace kvserve::scalar {

namespace {

// Walks the tile: for each weight row j, its blocks are unpacked once into the thread's scratch
// (or, without scratch, again for every activation row: the same arithmetic either way), then
// y[i][j] = Σ_b dot(block b of row j, block b of X row i), summed in block order.
template <typename Unpacked, typename Unpack, typename BlockDot>
void WalkTile(const MatmulTile& t, int block_elements, size_t w_block_bytes, size_t x_block_bytes,
              Unpack unpack, BlockDot block_dot) {
  const int n_blocks = t.k / block_elements;
  Unpacked* row = nullptr;
  if (t.scratch != nullptr) {
    row =
        static_cast<Unpacked*>(t.scratch->w.Get(sizeof(Unpacked) * static_cast<size_t>(n_blocks)));
  }
  for (int j = t.n_begin; j < t.n_end; ++j) {
    const uint8_t* w = t.w + static_cast<size_t>(j) * t.w_row_bytes;
    if (row != nullptr) {
      for (int b = 0; b < n_blocks; ++b) unpack(w + b * w_block_bytes, row[b]);
    }
    for (int i = 0; i < t.m; ++i) {
      const uint8_t* x = t.x + static_cast<size_t>(i) * t.x_row_bytes;
      float sum = 0.0f;
      for (int b = 0; b < n_blocks; ++b) {
        Unpacked local;
        const Unpacked* u = &local;
        if (row != nullptr) {
          u = &row[b];
        } else {
          unpack(w + b * w_block_bytes, local);
        }
        sum = block_dot(sum, *u, x + b * x_block_bytes);
      }
      t.y[static_cast<size_t>(i) * t.ldy + j] = sum;
    }
  }
}

// Q5_0, IQ4_NL, MXFP4 against Q8_0. |isum| <= 32 * 127 * 127 (MXFP4: 32 * 12 * 127).
// MXFP4's d_w = 2^(e - 128) times d_x is llama.cpp's GGML_E8M0_TO_FP32_HALF(e) * d_x, and its q
// the doubled table, so isum * (d_w * d_x) is what ggml_vec_dot_mxfp4_q8_0 adds per block.
void Matmul32Q8_0(const MatmulTile& t, Unpack32Fn unpack, size_t w_block_bytes) {
  WalkTile<Unpacked32>(t, 32, w_block_bytes, sizeof(BlockQ8_0), unpack,
                       [](float sum, const Unpacked32& u, const uint8_t* xp) {
                         const auto x = LoadBlock<BlockQ8_0>(xp);
                         int isum = 0;
                         for (int k = 0; k < 32; ++k) isum += u.q[k] * x.quants[k];
                         return sum + static_cast<float>(isum) * (u.d * Fp16ToFloat(x.scale));
                       });
}

// Q4_1, Q5_1 against Q8_1: the weight's offset m meets the activation block's s = d_x * Σ q_x.
void Matmul32Q8_1(const MatmulTile& t, Unpack32Fn unpack, size_t w_block_bytes) {
  WalkTile<Unpacked32>(
      t, 32, w_block_bytes, sizeof(BlockQ8_1), unpack,
      [](float sum, const Unpacked32& u, const uint8_t* xp) {
        const auto x = LoadBlock<BlockQ8_1>(xp);
        int isum = 0;
        for (int k = 0; k < 32; ++k) isum += u.q[k] * x.quants[k];
        return sum + (static_cast<float>(isum) * (u.d * Fp16ToFloat(x.d)) + u.m * Fp16ToFloat(x.s));
      });
}

// The K-quants against Q8_K.
void MatmulK(const MatmulTile& t, UnpackKFn unpack, size_t w_block_bytes) {
  WalkTile<UnpackedK>(t, 256, w_block_bytes, sizeof(BlockQ8_K), unpack,
                      [](float sum, const UnpackedK& u, const uint8_t* xp) {
                        const auto x = LoadBlock<BlockQ8_K>(xp);
                        const int n_sub = 256 / u.sub;
                        int isum = 0;  // |isum| <= 16 * 128 * 32 * 128 < 2^31
                        int msum = 0;
                        for (int s = 0; s < n_sub; ++s) {
                          int sub_sum = 0;
                          for (int e = s * u.sub; e < (s + 1) * u.sub; ++e)
                            sub_sum += u.q[e] * x.quants[e];
                          isum += u.scales[s] * sub_sum;
                          if (u.has_mins) {
                            int bsum = 0;
                            for (int g = s * u.sub / 16; g < (s + 1) * u.sub / 16; ++g)
                              bsum += x.bsums[g];
                            msum += u.mins[s] * bsum;
                          }
                        }
                        float block = static_cast<float>(isum) * (u.d * x.d);
                        if (u.has_mins) block -= static_cast<float>(msum) * (u.dmin * x.d);
                        return sum + block;
                      });
}

}  // namespace

void MatmulQ4_1(const MatmulTile& t) { Matmul32Q8_1(t, UnpackQ4_1, sizeof(BlockQ4_1)); }
void MatmulQ5_0(const MatmulTile& t) { Matmul32Q8_0(t, UnpackQ5_0, sizeof(BlockQ5_0)); }
void MatmulQ5_1(const MatmulTile& t) { Matmul32Q8_1(t, UnpackQ5_1, sizeof(BlockQ5_1)); }
void MatmulIq4Nl(const MatmulTile& t) { Matmul32Q8_0(t, UnpackIq4Nl, sizeof(BlockIq4Nl)); }
void MatmulMxfp4(const MatmulTile& t) { Matmul32Q8_0(t, UnpackMxfp4, sizeof(BlockMxfp4)); }
void MatmulQ2_K(const MatmulTile& t) { MatmulK(t, UnpackQ2_K, sizeof(BlockQ2_K)); }
void MatmulQ3_K(const MatmulTile& t) { MatmulK(t, UnpackQ3_K, sizeof(BlockQ3_K)); }
void MatmulQ4_K(const MatmulTile& t) { MatmulK(t, UnpackQ4_K, sizeof(BlockQ4_K)); }
void MatmulQ5_K(const MatmulTile& t) { MatmulK(t, UnpackQ5_K, sizeof(BlockQ5_K)); }
void MatmulQ6_K(const MatmulTile& t) { MatmulK(t, UnpackQ6_K, sizeof(BlockQ6_K)); }

}  // namespace kvserve::scalar
