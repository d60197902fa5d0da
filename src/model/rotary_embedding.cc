#include "model/rotary_embedding.h"

#include <string>

namespace kvserve {

Status RotaryEmbedding::Load(const GgufFile& file, const ModelConfig& c, RopeMode mode,
                             WeightList& weights) {
  const WeightLoader r(file);
  for (const char* name : {"rope_factors_long.weight", "rope_factors_short.weight"}) {
    if (r.Has(name)) {
      return Status::InvalidArgument(file.path() + ": tensor '" + name +
                                     "' (LongRoPE) is not supported");
    }
  }
  params_ = RopeParams{.rope_dims = c.rope_dims,
                       .freq_base = c.rope_freq_base,
                       .mode = mode,
                       .position_scale = c.rope_position_scale};
  if (r.Has("rope_freqs.weight")) {
    KVSERVE_RETURN_IF_ERROR(r.Vector("rope_freqs.weight", c.rope_dims / 2, &freqs_));
  }
  weights.vectors.push_back(&freqs_);
  return Status::Ok();
}

}  // namespace kvserve
