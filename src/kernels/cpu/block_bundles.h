// The blocks of a 16-row group stored in bundles (packed_weights.h, packed_blocks32.h): a few
// blocks' quant parts, then those blocks' side parts (scales, minimums), bundle after bundle, so
// that a tile reads one forward stream, each block's scales a few hundred bytes from its quants,
// instead of all the quants and then all the side data (two streams a group's quants apart). A
// bundle is the fewest blocks whose bytes fill whole 64-byte lines, so every quant part stays
// 64-byte aligned; a group's last bundle may hold fewer (its side parts right after its quants),
// and the group is padded to 64 bytes. Offsets are closed forms (the tiles' inner loops).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvserve {

// The fewest blocks of quant_bytes + side_bytes (quant_bytes a multiple of 64) that fill whole
// 64-byte lines.
constexpr int64_t BlocksPerBundle(size_t quant_bytes, size_t side_bytes) {
  int64_t n = 1;
  while ((quant_bytes + side_bytes) * static_cast<size_t>(n) % 64 != 0) ++n;
  return n;
}

// per_bundle must be BlocksPerBundle(quant_bytes, side_bytes); callers pass it as a constant
// where they can, so that the offsets' divisions by it compile to shifts.
struct BlockBundles {
  constexpr BlockBundles(size_t quant_bytes, size_t side_bytes, int64_t n_blocks,
                         int64_t blocks_per_bundle)
      : quant(quant_bytes), side(side_bytes), blocks(n_blocks), per_bundle(blocks_per_bundle) {}

  size_t quant, side;  // bytes of one block's quant part and side part
  int64_t blocks;      // in the group
  int64_t per_bundle;

  constexpr size_t BundleOffset(int64_t b) const {
    return static_cast<size_t>(b / per_bundle * per_bundle) * (quant + side);
  }
  // Blocks in block b's bundle.
  constexpr int64_t InBundle(int64_t b) const {
    const int64_t left = blocks - b / per_bundle * per_bundle;
    return left < per_bundle ? left : per_bundle;
  }
  constexpr size_t QuantsOffset(int64_t b) const {
    return BundleOffset(b) + static_cast<size_t>(b % per_bundle) * quant;
  }
  constexpr size_t SideOffset(int64_t b) const {
    return BundleOffset(b) + static_cast<size_t>(InBundle(b)) * quant +
           static_cast<size_t>(b % per_bundle) * side;
  }
  // The bytes from block b's quants to the next block's (after a bundle's last block, the bundle's
  // side parts too): what a tile reads with block b, and prefetches ahead.
  constexpr size_t StreamBytes(int64_t b) const {
    const bool last = b % per_bundle == per_bundle - 1 || b + 1 == blocks;
    return quant + (last ? static_cast<size_t>(InBundle(b)) * side : 0);
  }
  // The group's bytes: whole bundles, then the last one's blocks rounded up to 64 bytes.
  constexpr size_t GroupBytes() const {
    const size_t rest = static_cast<size_t>(blocks % per_bundle) * (quant + side);
    return BundleOffset(blocks - blocks % per_bundle) + (rest + 63) / 64 * 64;
  }
};

}  // namespace kvserve
