// T5's relative position bias: each (key, query) distance falls in one of n_buckets buckets
// (exact for small distances, logarithmic up to 128, then the last), each bucket has a learned
// bias per head (attn_rel_b, layer 0's shared by every layer of its stack), added to the
// attention scores. Per batch the bias of every distance the batch reads is looked up once into a
// table the attention kernels index (AttentionParams::position_bias).
#pragma once

#include <vector>

#include "kernels/backend.h"
#include "kernels/weight_matrix.h"

namespace kvserve {

// The bucket of key position `key_pos` for a query at `query_pos`, as llama.cpp's
// llama_relative_position_bucket computes it (the same float and double roundings). The encoder
// is bidirectional (half the buckets for keys after the query); the decoder is not (keys after
// the query are never read and share bucket 0).
int RelativePositionBucket(int key_pos, int query_pos, int n_buckets, bool bidirectional);

class PositionBiasTable {
 public:
  // Looks up distances key - query in [-max_back, max_ahead] for every head. rel_b: the file's
  // attn_rel_b, [n_buckets][n_heads] floats (GGUF dims {n_heads, n_buckets}).
  void Build(const WeightVector& rel_b, int n_heads, int n_buckets, bool bidirectional,
             int max_back, int max_ahead);
  // Points `params` at the table.
  void Apply(AttentionParams& params) const;

 private:
  std::vector<float> values_;  // [n_heads, width_]: head h, distance d at h * width_ + zero_ + d
  int width_ = 0;
  int zero_ = 0;
};

}  // namespace kvserve
