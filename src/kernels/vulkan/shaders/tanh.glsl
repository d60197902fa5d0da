// Shared by the shaders that soft-cap (#include "tanh.glsl", after "kv_exp.glsl").
// tanh to about 1e-7 absolute without the driver's tanh (whose accuracy Vulkan leaves open): an
// odd Taylor polynomial below 0.5, 1 - 2 / (e^2|x| + 1) above.
float tanh_accurate(float x) {
  const float a = abs(x);
  float t;
  if (a < 0.5) {
    const float x2 = a * a;
    float poly = -929569.0 / 638512875.0;
    poly = fma(poly, x2, 21844.0 / 6081075.0);
    poly = fma(poly, x2, -1382.0 / 155925.0);
    poly = fma(poly, x2, 62.0 / 2835.0);
    poly = fma(poly, x2, -17.0 / 315.0);
    poly = fma(poly, x2, 2.0 / 15.0);
    poly = fma(poly, x2, -1.0 / 3.0);
    t = fma(poly * x2, a, a);
  } else {
    t = 1.0 - 2.0 / (kv_exp(2.0 * a) + 1.0);
  }
  return x < 0.0 ? -t : t;
}
