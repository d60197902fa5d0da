#version 450
// A mixture's routing (Backend::RouteTopK): per row of n_expert logits, the k experts of highest
// softmax probability in decreasing order, lowest index first on equal probability, and their
// probabilities divided by their sum. One workgroup of 64 threads per row.
// The CPU takes the softmax in double (kernels/cpu/moe_ops.cc); exp is increasing, so its order
// is the logits' order, ties included, wherever its doubles keep two logits apart: the shader
// ranks the logits themselves (exact float comparisons) and picks the k + 1 best, one scan and
// one shared-memory tree per pick, each pick the best of the experts ranked after the one before.
// Where two consecutive picks of different logits are closer than 2^-36, or the higher is more
// than 600 below the row's largest (the double exp then nears its subnormals), or a logit is not
// finite, the CPU's doubles may tie what the logits order: the shader writes -1 as the row's first
// id and the host routes that row on the CPU. So the ids are always the CPU's.
// weights[j] = e_j / (e_0 + ... + e_{k-1}), e_j = exp(logit_j - largest) in float (the CPU's exp
// polynomial, the difference's rounding error carried: exp_difference), summed in pick order:
// within (k + 8) 2^-24 of the CPU's doubles rounded to float, relatively.
// Groups: (groups_x, ceil(n_rows / groups_x)); row = group.y * groups_x + group.x.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Logits { float logits[]; };
layout(std430, binding = 1) buffer Ids { int ids[]; };
layout(std430, binding = 2) buffer Weights { float weights[]; };
layout(push_constant) uniform Params {
  uint n_rows;
  uint n_expert;
  uint k;             // 1 <= k <= n_expert
  uint logits_word;   // logits: [n_rows, n_expert]
  uint ids_word;      // ids, weights: [n_rows, k]
  uint weights_word;
  uint groups_x;
} p;

#include "kv_exp.glsl"

const uint kNone = 0xffffffffu;  // no expert (a thread with none left to offer)
shared float best_value[64];
shared uint best_index[64];
shared uint not_finite;

// Expert a (logit va) ranks before expert b: a larger logit, or the same and a lower index.
bool before(float va, uint a, float vb, uint b) { return va > vb || (va == vb && a < b); }

// The best expert ranked after (prev_value, prev) (after none when prev is kNone), over the
// whole group: thread t scans experts t, t + 64, ..., then a tree of 64. Every thread returns it.
uint next_pick(uint base, uint t, float prev_value, uint prev, out float value) {
  float v = 0.0;
  uint best = kNone;
  for (uint e = t; e < p.n_expert; e += 64u) {
    const float l = logits[base + e];
    if (prev != kNone && !before(prev_value, prev, l, e)) continue;
    if (best == kNone || before(l, e, v, best)) {
      v = l;
      best = e;
    }
  }
  best_value[t] = v;
  best_index[t] = best;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1) {
    if (t < s) {
      const uint other = best_index[t + s];
      const uint mine = best_index[t];
      const bool better = mine == kNone || before(best_value[t + s], other, best_value[t], mine);
      if (other != kNone && better) {
        best_value[t] = best_value[t + s];
        best_index[t] = other;
      }
    }
    barrier();
  }
  value = best_value[0];
  const uint pick = best_index[0];
  barrier();  // every thread has read slot 0 before the next pick writes it
  return pick;
}

// exp(l - largest): the difference rounded to float is hi, hi + lo exactly (Knuth's TwoSum), and
// exp(hi + lo) = kv_exp(hi) (1 + lo) to float rounding. Without lo, the rounding of a difference
// of 9 moves exp by up to 2^-22 of itself.
float exp_difference(float l, float largest) {
  precise float hi = l - largest;
  precise float b = hi - l;
  precise float lo = (l - (hi - b)) + (-largest - b);
  const float e = kv_exp(hi);
  precise float corrected = e + e * lo;
  return corrected;
}

void main() {
  const uint row = gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x;
  if (row >= p.n_rows) return;  // the whole group leaves
  const uint t = gl_LocalInvocationID.x;
  const uint base = p.logits_word + row * p.n_expert;
  const uint out_ids = p.ids_word + row * p.k;
  const uint out_weights = p.weights_word + row * p.k;
  if (t == 0u) not_finite = 0u;
  barrier();
  for (uint e = t; e < p.n_expert; e += 64u) {
    // Infinity or NaN, by the bits (a NaN test may be compiled away).
    if ((floatBitsToUint(logits[base + e]) & 0x7f800000u) == 0x7f800000u) atomicOr(not_finite, 1u);
  }
  barrier();
  if (not_finite != 0u) {
    if (t == 0u) ids[out_ids] = -1;
    return;
  }
  const uint picks = min(p.k + 1u, p.n_expert);
  float largest = 0.0;
  float prev_value = 0.0;
  uint prev = kNone;
  float chosen_sum = 0.0;
  bool to_cpu = false;
  for (uint j = 0u; j < picks; ++j) {
    float value;
    const uint pick = next_pick(base, t, prev_value, prev, value);
    if (j == 0u) {
      largest = value;
    } else if (value != prev_value) {
      const float gap = prev_value - value;
      to_cpu = to_cpu || gap < 1.4551915228366852e-11 || prev_value - largest < -600.0;
    }
    if (t == 0u && j < p.k) {
      const float e_j = exp_difference(value, largest);
      ids[out_ids + j] = int(pick);
      weights[out_weights + j] = e_j;
      chosen_sum += e_j;
    }
    prev_value = value;
    prev = pick;
  }
  if (t != 0u) return;
  if (to_cpu) {
    ids[out_ids] = -1;
    return;
  }
  for (uint j = 0u; j < p.k; ++j) weights[out_weights + j] = weights[out_weights + j] / chosen_sum;
}
