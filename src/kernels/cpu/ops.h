// Row-wise operations of the transformer: norms, activations, rotary embeddings. Each works on one
// row at a time in a fixed order (batch invariant); reductions accumulate in double, as GGML does.
#pragma once

#include <cstdint>

#include "kernels/backend.h"
#include "kernels/cpu/kernels.h"

namespace kvserve {

// out = x / sqrt(mean(x²) + eps) * weight.  [n]
void RmsNorm(const float* x, const float* weight, int n, float eps, float* out);
// out = (x - mean) / sqrt(var + eps) * weight + bias.  [n]
void LayerNorm(const float* x, const float* weight, const float* bias, int n, float eps,
               float* out);
// GELU, tanh approximation (the form GPT-2 uses), in place. As in GGML, the input is rounded to
// f16 and the result read from a table of f16 values; |x| >= 10 passes through (or gives 0).
// Runs the table's gelu_f16_table kernel (every table gives the same bits).
void GeluInPlace(const KernelTable& kernels, float* x, int n);
// The table: GELU of every f16 value, rounded to f16; 65536 entries and one of padding.
const uint16_t* GeluF16Table();
// gate = silu(gate) * up, in place on gate, with the exp of attend_head.h (KvExp, about 2e-7
// relative error): the table's swiglu kernel (every table gives the same bits).  [n]
void SwiGluInPlace(const KernelTable& kernels, float* gate, const float* up, int n);
// gpt-oss's clamped SwiGLU, as ggml_swiglu_oai computes it (expf, one row):
// g = min(gate, limit), u = clamp(up, -limit, limit), gate = g / (1 + exp(-alpha g)) * (u + 1). [n]
void SwiGluOaiInPlace(float* gate, const float* up, int n, float alpha, float limit);
// x += y.  [n]
void AddInPlace(float* x, const float* y, int n);
// Rotary embedding as GGML computes it (ggml_rope_cache_init and rope_yarn): the pairs of the
// first rope_dims of each head (interleaved or split halves, see RopeMode) rotate by
// theta_i = position_scale * (pos * base^(-2i / rope_dims) / freq_factors[i]), where
// pos * base^(-2i / rope_dims) is a running float product, as in GGML; with YaRN (ext_factor != 0)
// theta_i mixes in the unscaled angle (RopeParams), and cos and sin are multiplied by mscale.
// With no factors, scale 1 and mscale 1 the extra operations are exact, so the plain rotation is
// unchanged. The values past rope_dims pass through.  x: [n_heads, head_dim]
void RopeInPlace(float* x, int n_heads, int head_dim, const RopeParams& rope, int32_t pos);

}  // namespace kvserve
