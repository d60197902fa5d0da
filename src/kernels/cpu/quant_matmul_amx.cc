// AMX (Advanced Matrix Extensions, AMX-INT8) tiles for Q8_0 / Q4_0 matrices in the x16 layout of
// packed_weights.h, against Q8_0 activation rows, for prompts: 16 activation rows at a time.
//
// The same bits as the AVX-512 tiles (quant_matmul_avx512.cc; the contract of kernels.h): for each
// block b in increasing order, acc = fma(float(isum_b), dw_b * dx_b, acc) from acc = 0, with the
// exact int32 block sum isum_b. Only how isum_b is found differs: one TDPBSSD multiplies a tile of
// 16 activation rows' block b (16 rows x 32 signed bytes, read in place from the Q8_0 rows) by the
// block's weights for the group's 16 rows (8 rows of 64 bytes: dword d holds elements 4d .. 4d + 3
// of every weight row, which is AMX's B layout and the packed layout's own), giving the 16 x 16
// integer sums in one instruction. The packed weights are unsigned (Q8_0: w + 128; Q4_0: the raw
// nibble, w + 8); each group is first turned back into signed bytes in the thread's scratch
// (once per group, for every 16 activation rows), so the sums need no correction (adding the
// AVX-512 tile's -offset * sum(x) per row and block cost 16 more vector additions a block).
//
// Fewer than 16 rows (decode, the rows past the last multiple of 16) go to the AVX-512 tile,
// which gives each row the same bits whatever its neighbours.
//
// Tiles: tmm0 = C (16 x 16 int32), tmm1 = A (16 rows x 32 bytes), tmm2 = B (8 rows x 64 bytes);
// tmm3-5 the same for the second block of a pair. Each call loads its tile configuration and
// releases the tiles before it returns, so no AMX state outlives a call (a thread pool's threads
// carry none into other work).
#include "kernels/cpu/immintrin_avx512.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cassert>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/packed_weights.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/scratch_buffer.h"

namespace kvserve::amx {

namespace {

constexpr int kRows = 16;  // activation rows per A tile; weight rows per group
constexpr size_t kQ8BlockBytes = sizeof(BlockQ8_0);

// The 64-byte operand of LDTILECFG (palette 1).
struct alignas(64) TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];  // bytes per row of each tile
  uint8_t rows[16];
};
static_assert(sizeof(TileConfig) == 64);

void LoadTileConfig() {
  TileConfig config{};
  config.palette_id = 1;
  config.rows[0] = kRows;  // C: 16 activation rows x 16 weight rows of int32
  config.colsb[0] = 64;
  config.rows[1] = kRows;  // A: 16 activation rows x one block's 32 quants
  config.colsb[1] = 32;
  config.rows[2] = 8;  // B: 8 dwords of 4 elements x 16 weight rows
  config.colsb[2] = 64;
  for (int t = 3; t < 6; ++t) {  // a second set of the same shapes, for every other block
    config.rows[t] = config.rows[t - 3];
    config.colsb[t] = config.colsb[t - 3];
  }
  asm volatile("ldtilecfg %0" : : "m"(config));
}

enum class QType { kQ8_0, kQ4_0 };
template <QType Q>
constexpr size_t kQuantBytes = Q == QType::kQ8_0 ? 8 * 64 : 4 * 64;

inline __mmask16 LanesBelow(int valid) {
  return valid >= kRows ? static_cast<__mmask16>(0xffff)
                        : static_cast<__mmask16>((1u << valid) - 1u);
}

// The activation blocks' scales, in tiles of 16 rows: tile i's block b at
// dx[(i * n_blocks + b) * 16 + row].
void ComputeScales(const MatmulTile& t, int rows, int n_blocks, float* dx) {
  for (int i = 0; i < rows; ++i) {
    const uint8_t* row = t.x + static_cast<size_t>(i) * t.x_row_bytes;
    for (int b = 0; b < n_blocks; ++b) {
      uint16_t scale;
      std::memcpy(&scale, row + kQ8BlockBytes * static_cast<size_t>(b), sizeof(scale));
      dx[(static_cast<size_t>(i / kRows) * n_blocks + b) * kRows + i % kRows] = _cvtsh_ss(scale);
    }
  }
}

// A group's quants as signed bytes, block b's 8 B-tile rows at signed_quants + 512 * b. Q8_0: the
// packed dwords with the offset undone; Q4_0: rows 0-3 the low nibbles (elements 4d..), rows 4-7
// the high ones (elements 16 + 4d..), each less 8.
template <QType Q>
void SignedGroup(const uint8_t* group, int n_blocks, uint8_t* signed_quants) {
  const BlockBundles bundles = PackedBundles(kQuantBytes<Q>, n_blocks);
  const __m512i low = _mm512_set1_epi8(0x0f);
  const __m512i eight = _mm512_set1_epi8(8);
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int b = 0; b < n_blocks; ++b) {
    const uint8_t* quants = group + bundles.QuantsOffset(b);
    uint8_t* out = signed_quants + 512 * static_cast<size_t>(b);
    if constexpr (Q == QType::kQ8_0) {
      for (int d = 0; d < 8; ++d) {
        _mm512_store_si512(out + 64 * d,
                           _mm512_xor_si512(_mm512_load_si512(quants + 64 * d), flip));
      }
    } else {
      for (int d = 0; d < 4; ++d) {
        const __m512i g = _mm512_load_si512(quants + 64 * d);
        const __m512i lo = _mm512_and_si512(g, low);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(g, 4), low);
        _mm512_store_si512(out + 64 * d, _mm512_sub_epi8(lo, eight));
        _mm512_store_si512(out + 64 * (4 + d), _mm512_sub_epi8(hi, eight));
      }
    }
  }
}

// Blocks per batch: the tiles find the integer sums of kBatch blocks into c (kBatch x 16 x 16
// int32, 8 KiB), then the vector units scale and add them. A load of what a tile store wrote
// waits until the store leaves the core, so block by block (sums, then their use) the two units
// mostly took turns: 56 cycles per block and 16 x 16 outputs for the vector work alone, 69 for the
// tiles alone, 123 together (2048x2048, m = 128, one thread, an Intel Xeon VM: 498 GFLOP/s);
// batches of 8 blocks gave 524-535.
constexpr int kBatch = 8;

// The integer sums of blocks [b0, b0 + count) for 16 activation rows (x: block 0's quants, rows
// x_row_bytes apart) and the group's 16 rows (weights(b): block b's B tile), into c: blocks in
// pairs on two tile sets, so that one block's store does not hold up the next one's multiply
// (A/B of one thread, Q8_0 m = 128-512, three shapes: 1.72-1.84x the AVX-512 tile, where one
// set gave 1.58-1.75x).
template <typename Weights>
inline void BatchSums(const uint8_t* x, size_t x_row_bytes, Weights weights, int b0, int count,
                      int32_t* c) {
  int i = 0;
  for (; i + 2 <= count; i += 2) {
    _tile_loadd(1, x + kQ8BlockBytes * static_cast<size_t>(b0 + i), x_row_bytes);
    _tile_loadd(2, weights(b0 + i), 64);
    _tile_loadd(4, x + kQ8BlockBytes * static_cast<size_t>(b0 + i + 1), x_row_bytes);
    _tile_loadd(5, weights(b0 + i + 1), 64);
    _tile_zero(0);
    _tile_zero(3);
    _tile_dpbssd(0, 1, 2);
    _tile_dpbssd(3, 4, 5);
    _tile_stored(0, c + kRows * kRows * i, 64);
    _tile_stored(3, c + kRows * kRows * (i + 1), 64);
  }
  for (; i < count; ++i) {
    _tile_loadd(1, x + kQ8BlockBytes * static_cast<size_t>(b0 + i), x_row_bytes);
    _tile_loadd(2, weights(b0 + i), 64);
    _tile_zero(0);
    _tile_dpbssd(0, 1, 2);
    _tile_stored(0, c + kRows * kRows * i, 64);
  }
}

// 16 activation rows (x, x_row_bytes apart; their scales dx) against one group (its scales from
// `group`, its signed quants from signed_quants): y gets rows y .. y + 15 (ldy apart), the lanes
// of `mask`.
template <QType Q>
void GroupTile(const uint8_t* group, const uint8_t* signed_quants, int n_blocks, const uint8_t* x,
               size_t x_row_bytes, const float* dx, int32_t* c, float* y, int ldy, __mmask16 mask) {
  const BlockBundles bundles = PackedBundles(kQuantBytes<Q>, n_blocks);
  auto weights = [&](int b) { return signed_quants + 512 * static_cast<size_t>(b); };
  __m512 acc[kRows];
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r) acc[r] = _mm512_setzero_ps();
  for (int b0 = 0; b0 < n_blocks; b0 += kBatch) {
    const int count = n_blocks - b0 < kBatch ? n_blocks - b0 : kBatch;
    BatchSums(x + 2, x_row_bytes, weights, b0, count, c);
    for (int i = 0; i < count; ++i) {
      const int b = b0 + i;
      const int32_t* sums = c + kRows * kRows * i;
      const __m512 dw = _mm512_cvtph_ps(
          _mm256_load_si256(reinterpret_cast<const __m256i*>(group + bundles.SideOffset(b))));
      const float* dx_b = dx + static_cast<size_t>(b) * kRows;
#pragma GCC unroll 16
      for (int r = 0; r < kRows; ++r) {
        const __m512i isum = _mm512_load_si512(sums + kRows * r);
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum),
                                 _mm512_mul_ps(dw, _mm512_set1_ps(dx_b[r])), acc[r]);
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r) {
    _mm512_mask_storeu_ps(y + static_cast<size_t>(r) * ldy, mask, acc[r]);
  }
}

template <QType Q>
void MatmulAmx(const MatmulTile& t, MatmulTileFn avx512_tile) {
  assert(t.k % 32 == 0 && t.n_begin % kRows == 0);
  const int m_amx = t.m / kRows * kRows;
  if (m_amx == 0 || t.n_begin == t.n_end || t.k == 0) return avx512_tile(t);
  if (m_amx < t.m) {  // the last rows, fewer than 16
    MatmulTile rest = t;
    rest.x = t.x + static_cast<size_t>(m_amx) * t.x_row_bytes;
    rest.y = t.y + static_cast<size_t>(m_amx) * t.ldy;
    rest.m = t.m - m_amx;
    avx512_tile(rest);
  }
  const int n_blocks = t.k / 32;
  float* dx = t.scratch->x.GetFloats(static_cast<size_t>(m_amx) * n_blocks);
  uint8_t* signed_quants =
      static_cast<uint8_t*>(t.scratch->w.Get(512 * static_cast<size_t>(n_blocks)));
  int32_t* c = static_cast<int32_t*>(t.scratch->acc.Get(kBatch * sizeof(int32_t) * kRows * kRows));
  assert(dx != nullptr && signed_quants != nullptr && c != nullptr);
  ComputeScales(t, m_amx, n_blocks, dx);
  LoadTileConfig();
  for (int j0 = t.n_begin; j0 < t.n_end; j0 += kRows) {
    const uint8_t* group = t.w + static_cast<size_t>(j0 / kRows) * t.w_row_bytes;
    SignedGroup<Q>(group, n_blocks, signed_quants);
    const __mmask16 mask = LanesBelow(t.n_end - j0);
    for (int i0 = 0; i0 < m_amx; i0 += kRows) {
      GroupTile<Q>(group, signed_quants, n_blocks, t.x + static_cast<size_t>(i0) * t.x_row_bytes,
                   t.x_row_bytes, dx + static_cast<size_t>(i0) * n_blocks, c,
                   t.y + static_cast<size_t>(i0) * t.ldy + j0, t.ldy, mask);
    }
  }
  _tile_release();
}

}  // namespace

bool RequestTilePermission() {
  // Linux keeps the AMX tile data state off until a process asks (ARCH_REQ_XCOMP_PERM for
  // XFEATURE_XTILEDATA); until then the tile instructions fault.
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

void MatmulQ8_0x16(const MatmulTile& t) { MatmulAmx<QType::kQ8_0>(t, avx512::MatmulQ8_0x16); }
void MatmulQ4_0x16(const MatmulTile& t) { MatmulAmx<QType::kQ4_0>(t, avx512::MatmulQ4_0x16); }

}  // namespace kvserve::amx
