// The rotations RoPE applies at one position (RopeParams in backend.h), computed once per row and
// shared by every head: the CPU backend rotates with them, and the Vulkan backend hands them to
// its shader, so both turn every pair by the same float angle.
#pragma once

#include <cstdint>

#include "kernels/backend.h"

namespace kvserve {

// cos_sin[2i], cos_sin[2i + 1] = cos and sin of pair i's angle at `pos`, times mscale, for
// i < rope_dims / 2. The angle is the float recurrence theta_i = pos * theta_scale^i (divided by
// freq_factors[i]), then YaRN's mix, exactly as ggml computes it.
void RopeCosSin(const RopeParams& rope, int32_t pos, float* cos_sin);

}  // namespace kvserve
