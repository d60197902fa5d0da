// The blocks of a 16-row group stored in bundles (packed_blocks32.h): `per_bundle` blocks' quant
// parts, then those blocks' side parts, bundle after bundle, so that a tile reads one forward
// stream, each block's scales a few hundred bytes from its quants, instead of all the quants and
// then all the side data (two streams a whole group's quants apart). The bundle size is the fewest
// blocks whose bytes fill whole 64-byte lines, so every quant part stays 64-byte aligned; the last
// bundle of a group may hold fewer blocks (its side parts right after its quant parts).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvserve {

// Walks a group's blocks in order, without divisions (the tiles' inner loops). Not thread-safe:
// one per tile call.
class BundleCursor {
 public:
  // quant_bytes and side_bytes of one block; per_bundle (>= 1) blocks a bundle; n_blocks (>= 1)
  // blocks in the group.
  BundleCursor(const uint8_t* group, size_t quant_bytes, size_t side_bytes, int per_bundle,
               int n_blocks)
      : bundle_(group),
        quant_bytes_(quant_bytes),
        side_bytes_(side_bytes),
        per_bundle_(per_bundle),
        left_(n_blocks),
        in_bundle_(n_blocks < per_bundle ? n_blocks : per_bundle) {}

  const uint8_t* quants() const { return bundle_ + quant_bytes_ * static_cast<size_t>(index_); }
  const uint8_t* side() const {
    return bundle_ + quant_bytes_ * static_cast<size_t>(in_bundle_) +
           side_bytes_ * static_cast<size_t>(index_);
  }
  // The bytes from this block's quants to the next block's (after a bundle's last block, the
  // bundle's side parts too): what a tile reads with this block, and prefetches ahead.
  size_t stream_bytes() const {
    return quant_bytes_ +
           (index_ + 1 == in_bundle_ ? side_bytes_ * static_cast<size_t>(in_bundle_) : 0);
  }
  void Next() {
    if (++index_ < in_bundle_) return;
    bundle_ += (quant_bytes_ + side_bytes_) * static_cast<size_t>(in_bundle_);
    left_ -= in_bundle_;
    in_bundle_ = left_ < per_bundle_ ? left_ : per_bundle_;
    index_ = 0;
  }

 private:
  const uint8_t* bundle_;  // the current bundle's first byte
  size_t quant_bytes_, side_bytes_;
  int per_bundle_;
  int left_;       // blocks from the current bundle's first to the group's last
  int in_bundle_;  // blocks in the current bundle
  int index_ = 0;  // the current block's place in its bundle
};

// Blocks per bundle for blocks of quant_bytes + side_bytes (quant_bytes a multiple of 64): the
// fewest that fill whole 64-byte lines.
constexpr int BlocksPerBundle(size_t quant_bytes, size_t side_bytes) {
  int n = 1;
  while ((quant_bytes + side_bytes) * static_cast<size_t>(n) % 64 != 0) ++n;
  return n;
}

// Bytes of a group of n_blocks blocks in bundles: whole bundles, then the last one's blocks
// rounded up to 64 bytes.
constexpr size_t BundledGroupBytes(size_t quant_bytes, size_t side_bytes, int64_t n_blocks) {
  const size_t block = quant_bytes + side_bytes;
  const int per_bundle = BlocksPerBundle(quant_bytes, side_bytes);
  const size_t rest = block * static_cast<size_t>(n_blocks % per_bundle);
  return block * static_cast<size_t>(n_blocks - n_blocks % per_bundle) + (rest + 63) / 64 * 64;
}

}  // namespace kvserve
