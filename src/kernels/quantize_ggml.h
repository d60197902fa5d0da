// The encoders of the GGML block types beyond Q8_0/Q4_0 (quantize_ggml.cc), behind QuantizeRow.
// Q4_K and Q6_K are llama.cpp's searched encoders (quantize_row_q4_K_ref / q6_K_ref, what
// llama-quantize writes without an importance matrix), byte for byte; MXFP4 is llama.cpp's too.
// The other weight encoders are plain, non-optimizing ones: per block (or sub-block) the scale and
// offset come from the minimum and maximum, and every value rounds to the nearest level.
// The activation encoders (Q8_1, Q8_K) round exactly as llama.cpp's CPU backend does, so that the
// integer dot products see the same activations.
#pragma once

#include <cstdint>

namespace kvserve::ggml_encode {

// Each encodes n floats (n a multiple of the type's block size) into blocks at `out`.
void Q4_1(const float* x, int64_t n, uint8_t* out);
void Q5_0(const float* x, int64_t n, uint8_t* out);
void Q5_1(const float* x, int64_t n, uint8_t* out);
void Iq4Nl(const float* x, int64_t n, uint8_t* out);
// MXFP4 byte for byte as llama.cpp's quantize_row_mxfp4_ref (which llama-quantize uses, with or
// without an importance matrix): e from the block's largest magnitude, each value to the nearest
// table entry times 2^(e - 128).
void Mxfp4(const float* x, int64_t n, uint8_t* out);
void Q2_K(const float* x, int64_t n, uint8_t* out);
void Q3_K(const float* x, int64_t n, uint8_t* out);
void Q4_K(const float* x, int64_t n, uint8_t* out);
void Q5_K(const float* x, int64_t n, uint8_t* out);
void Q6_K(const float* x, int64_t n, uint8_t* out);
// Activations: d = max|x| / 127, q = round-to-nearest-even(x * (127 / max|x|)), d stored as f16,
// s = f16(d * sum(q)) with d in f32.
void Q8_1(const float* x, int64_t n, uint8_t* out);
// Activations: m = the element of largest magnitude (the first one on ties) with its sign,
// q = min(127, round-to-nearest-even(x * (-127 / m))), d = 1 / (-127 / m) in f32, bsums per 16.
void Q8_K(const float* x, int64_t n, uint8_t* out);

// float -> integer in [lo, hi] rounding toward zero, without undefined behaviour: NaN becomes 0,
// out-of-range values clamp (only non-finite or denormal-scaled blocks can produce them).
int ClampToInt(float v, int lo, int hi);

}  // namespace kvserve::ggml_encode
