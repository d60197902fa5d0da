// Shared by the shaders that divide as the CPU does (#include "div_rn.glsl").

// |a - b c| for c near a / b, from correctly rounded adds and multiplies alone (Vulkan rounds
// those correctly; its fma may be an unfused multiply and add): b c = hi + lo exactly (Dekker's
// product with Veltkamp's split), a - hi is exact (hi lies within a factor 2 of a), and so is the
// residual when c is within an ulp of a / b. `precise` keeps the compiler from fusing or
// reordering.
float residual(float a, float b, float c) {
  precise float hi = b * c;
  precise float tb = 4097.0 * b;
  precise float b_hi = tb - (tb - b);
  precise float b_lo = b - b_hi;
  precise float tc = 4097.0 * c;
  precise float c_hi = tc - (tc - c);
  precise float c_lo = c - c_hi;
  precise float lo = ((b_hi * c_hi - hi) + b_hi * c_lo + b_lo * c_hi) + b_lo * c_lo;
  precise float r = (a - hi) - lo;
  return abs(r);
}

// a / b rounded to nearest, for a >= 0 and b > 0 finite: the device's quotient (within 2.5 ulp
// by Vulkan's rules) or a neighbour up to 3 ulp away, whichever leaves the smallest residual.
float div_rn(float a, float b) {
  const float approx = a / b;
  const int base = int(floatBitsToUint(approx));
  float best = approx;
  float best_error = residual(a, b, approx);
  for (int k = -3; k <= 3; ++k) {
    const float c = uintBitsToFloat(uint(max(base + k, 0)));
    const float error = residual(a, b, c);
    if (error < best_error) {
      best = c;
      best_error = error;
    }
  }
  return best;
}
