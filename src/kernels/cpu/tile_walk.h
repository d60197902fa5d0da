// How the SIMD matmul tiles walk one MatmulTile call: activation rows in blocks of `m_block` (so
// the block stays in L2 while the weights stream past it), weight rows in register tiles of kNr
// (then single rows for the remainder), activation rows in register tiles of up to kMr.
//
// Included only by the per-ISA translation units; the templates are instantiated with lambdas local
// to each of them, so no ISA-specific code is shared between translation units. The walk only
// changes which elements are computed together, never the order in which one element is
// accumulated (the determinism contract in kernels.h is kept by the tile functions).
#pragma once

namespace kvserve {

// on_block(m0, m1) runs before the tiles of activation rows [m0, m1) (to repack them, say).
// fn(i0, mr, j0, nr) computes y[i][j] for i in [i0, i0 + mr), j in [j0, j0 + nr), where
// 1 <= mr <= kMr and nr is kNr or 1. (No std:: helpers here: see the note above about sharing.)
template <int kMr, int kNr, typename BlockFn, typename Fn>
inline void WalkTiles(int m, int n_begin, int n_end, int m_block, BlockFn&& on_block, Fn&& fn) {
  if (m_block < kMr) m_block = kMr;
  for (int m0 = 0; m0 < m; m0 += m_block) {
    const int m1 = m - m0 < m_block ? m : m0 + m_block;
    on_block(m0, m1);
    int j = n_begin;
    for (; j + kNr <= n_end; j += kNr) {
      for (int i = m0; i < m1; i += kMr) fn(i, m1 - i < kMr ? m1 - i : kMr, j, kNr);
    }
    for (; j < n_end; ++j) {
      for (int i = m0; i < m1; i += kMr) fn(i, m1 - i < kMr ? m1 - i : kMr, j, 1);
    }
  }
}

}  // namespace kvserve
