// Shared by the shaders that take exponentials as the CPU backend does (#include "kv_exp.glsl").
// KvExp of kernels/cpu/attend_head.h: the same sequence of operations.
float kv_exp(float x) {
  x = min(x, 88.0);
  if (!(x >= -87.0)) return 0.0;
  const float n = roundEven(x * 1.44269504088896341);
  float r = fma(n, -0.693359375, x);
  r = fma(n, 2.12194440e-4, r);
  float poly = 1.0 / 5040.0;
  poly = fma(poly, r, 1.0 / 720.0);
  poly = fma(poly, r, 1.0 / 120.0);
  poly = fma(poly, r, 1.0 / 24.0);
  poly = fma(poly, r, 1.0 / 6.0);
  poly = fma(poly, r, 0.5);
  poly = fma(poly, r, 1.0);
  poly = fma(poly, r, 1.0);
  return poly * uintBitsToFloat(uint(int(n) + 127) << 23);
}
