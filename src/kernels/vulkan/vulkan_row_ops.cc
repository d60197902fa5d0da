// VulkanBackend's elementwise operations, norms, row moves and a mixture's row operations
// (elementwise.comp, gelu.comp, rms_norm.comp, layer_norm.comp, copy_rows.comp, route_topk.comp,
// add_weighted_rows.comp). Each runs on the CPU backend instead when an argument is wider than
// one binding may span.
#include <algorithm>
#include <array>

#include "kernels/vulkan/vulkan_backend.h"
#include "kernels/vulkan/vulkan_launch.h"
#include "kernels/vulkan/vulkan_shader_args.h"
#include "kernels/vulkan/vulkan_workspace.h"

namespace kvserve {

bool VulkanBackend::Elementwise(const char* shader, float* x, size_t x_stride, const float* y,
                                size_t y_floats, int n_rows, int width, float factor, float limit,
                                Workspace& ws) const {
  const uint64_t n = static_cast<uint64_t>(n_rows) * width;
  if (n == 0) return true;
  VulkanShaderArgs args(*memory, Vk(ws), *VulkanBackendParts::device);
  const uint32_t x_word = args.Output(x, sizeof(float) * ((n_rows - 1) * x_stride + width));
  const uint32_t y_word = args.Input(y, sizeof(float) * y_floats);
  if (!args.fits()) return false;
  const VulkanGroups grid = VulkanGroups::Cover((n + 255) / 256);
  const std::array<uint32_t, 8> push = {
      PushInt(n),     PushFloat(factor), x_word,          y_word, grid.x,
      PushInt(width), PushInt(x_stride), PushFloat(limit)};
  args.Dispatch(shader, PushBytes(push), grid.x, grid.y, 1);
  return true;
}

void VulkanBackend::Add(float* x, const float* y, int n_rows, int width, Workspace& ws) const {
  const size_t n = static_cast<size_t>(n_rows) * width;
  if (!Elementwise("add", x, width, y, n, n_rows, width, 0.0f, 0.0f, ws)) {
    inner_.Add(x, y, n_rows, width, Inner(ws));
  }
}

void VulkanBackend::AddBias(float* x, size_t stride, const float* bias, int n_rows, int width,
                            Workspace& ws) const {
  if (!Elementwise("add_bias", x, stride, bias, width, n_rows, width, 0.0f, 0.0f, ws)) {
    inner_.AddBias(x, stride, bias, n_rows, width, Inner(ws));
  }
}

void VulkanBackend::Scale(float* x, int n_rows, int width, float factor, Workspace& ws) const {
  // The shader reads no y; binding 1 is x again.
  if (!Elementwise("scale", x, width, x, 1, n_rows, width, factor, 0.0f, ws)) {
    inner_.Scale(x, n_rows, width, factor, Inner(ws));
  }
}

void VulkanBackend::SwiGlu(float* gate, const float* up, int n_rows, int width,
                           Workspace& ws) const {
  const size_t n = static_cast<size_t>(n_rows) * width;
  if (!Elementwise("swiglu", gate, width, up, n, n_rows, width, 0.0f, 0.0f, ws)) {
    inner_.SwiGlu(gate, up, n_rows, width, Inner(ws));
  }
}

void VulkanBackend::Relu(float* x, int n_rows, int width, Workspace& ws) const {
  if (!Elementwise("relu", x, width, x, 1, n_rows, width, 0.0f, 0.0f, ws)) {
    inner_.Relu(x, n_rows, width, Inner(ws));
  }
}

void VulkanBackend::SoftCap(float* x, int n_rows, int width, float cap, Workspace& ws) const {
  if (!Elementwise("soft_cap", x, width, x, 1, n_rows, width, cap, 0.0f, ws)) {
    inner_.SoftCap(x, n_rows, width, cap, Inner(ws));
  }
}

void VulkanBackend::SwiGluOai(float* gate, const float* up, int n_rows, int width, float alpha,
                              float limit, Workspace& ws) const {
  const size_t n = static_cast<size_t>(n_rows) * width;
  if (!Elementwise("swiglu_oai", gate, width, up, n, n_rows, width, alpha, limit, ws)) {
    inner_.SwiGluOai(gate, up, n_rows, width, alpha, limit, Inner(ws));
  }
}

bool VulkanBackend::MoveRows(const RowMove& move, Workspace& ws) const {
  const uint64_t n = static_cast<uint64_t>(move.n_rows) * move.width;
  if (n == 0) return true;
  // The rows each side touches: the largest index + 1 where indices pick them.
  const auto touched = [&](bool indexed) -> int64_t {
    if (!indexed) return move.n_rows;
    int64_t last = -1;
    for (const int32_t r : move.rows) {
      if (r < 0) return -1;
      last = std::max<int64_t>(last, r);
    }
    return last + 1;
  };
  const int64_t src_rows = touched(move.mode == RowMove::kGather);
  const int64_t dst_rows = touched(move.mode == RowMove::kScatter);
  if (src_rows < 0 || dst_rows < 0) return false;
  const auto span_bytes = [&](int64_t rows, size_t stride) {
    return sizeof(float) * (static_cast<size_t>(rows - 1) * stride + move.width);
  };
  VulkanShaderArgs args(*memory, Vk(ws), *VulkanBackendParts::device);
  const uint32_t src_word = args.Input(move.src, span_bytes(src_rows, move.src_stride));
  const uint32_t dst_word = args.Output(move.dst, span_bytes(dst_rows, move.dst_stride));
  const uint32_t rows_word = move.rows.empty()
                                 ? args.Input(move.src, sizeof(float))  // unread; bound
                                 : args.Input(move.rows.data(), move.rows.size_bytes());
  if (!args.fits()) return false;
  const VulkanGroups grid = VulkanGroups::Cover((n + 255) / 256);
  const std::array<uint32_t, 9> push = {PushInt(n),
                                        PushInt(move.width),
                                        PushInt(move.src_stride),
                                        PushInt(move.dst_stride),
                                        src_word,
                                        dst_word,
                                        rows_word,
                                        static_cast<uint32_t>(move.mode),
                                        grid.x};
  args.Dispatch("copy_rows", PushBytes(push), grid.x, grid.y, 1);
  return true;
}

void VulkanBackend::GatherRows(const float* src, size_t src_stride, std::span<const int32_t> rows,
                               int width, float* dst, Workspace& ws) const {
  const RowMove move{.mode = RowMove::kGather,
                     .src = src,
                     .src_stride = src_stride,
                     .dst = dst,
                     .dst_stride = static_cast<size_t>(width),
                     .rows = rows,
                     .n_rows = static_cast<int>(rows.size()),
                     .width = width};
  if (!MoveRows(move, ws)) inner_.GatherRows(src, src_stride, rows, width, dst, Inner(ws));
}

void VulkanBackend::CopyRows(const float* src, size_t src_stride, int n_rows, int width, float* dst,
                             Workspace& ws) const {
  const RowMove move{.mode = RowMove::kCopy,
                     .src = src,
                     .src_stride = src_stride,
                     .dst = dst,
                     .dst_stride = static_cast<size_t>(width),
                     .n_rows = n_rows,
                     .width = width};
  if (!MoveRows(move, ws)) inner_.CopyRows(src, src_stride, n_rows, width, dst, Inner(ws));
}

void VulkanBackend::ScatterRows(const float* src, int width, std::span<const int32_t> rows,
                                size_t dst_stride, float* dst, Workspace& ws) const {
  const RowMove move{.mode = RowMove::kScatter,
                     .src = src,
                     .src_stride = static_cast<size_t>(width),
                     .dst = dst,
                     .dst_stride = dst_stride,
                     .rows = rows,
                     .n_rows = static_cast<int>(rows.size()),
                     .width = width};
  if (!MoveRows(move, ws)) inner_.ScatterRows(src, width, rows, dst_stride, dst, Inner(ws));
}

void VulkanBackend::RouteTopK(const float* logits, int n_rows, int n_expert, int k, int32_t* ids,
                              float* weights, Workspace& ws) const {
  if (n_rows == 0 || k == 0) return;
  const size_t chosen = static_cast<size_t>(n_rows) * k;
  VulkanShaderArgs args(*memory, Vk(ws), *VulkanBackendParts::device);
  const uint32_t logits_word = args.Input(logits, sizeof(float) * n_rows * n_expert);
  const uint32_t ids_word = args.Output(ids, sizeof(int32_t) * chosen);
  const uint32_t weights_word = args.Output(weights, sizeof(float) * chosen);
  if (!args.fits()) return inner_.RouteTopK(logits, n_rows, n_expert, k, ids, weights, Inner(ws));
  const VulkanGroups grid = VulkanGroups::Cover(n_rows);
  const std::array<uint32_t, 7> push = {PushInt(n_rows), PushInt(n_expert), PushInt(k), logits_word,
                                        ids_word,        weights_word,      grid.x};
  args.Dispatch("route_topk", PushBytes(push), grid.x, grid.y, 1);
  // The rows the shader left to the CPU (first id -1).
  for (int r = 0; r < n_rows; ++r) {
    const size_t at = static_cast<size_t>(r) * k;
    if (ids[at] >= 0) continue;
    inner_.RouteTopK(logits + static_cast<size_t>(r) * n_expert, 1, n_expert, k, ids + at,
                     weights + at, Inner(ws));
  }
}

void VulkanBackend::AddWeightedRows(float* x, const float* src, const float* weights, int n_rows,
                                    int k, int width, Workspace& ws) const {
  const uint64_t n = static_cast<uint64_t>(n_rows) * width;
  if (n == 0 || k == 0) return;
  VulkanShaderArgs args(*memory, Vk(ws), *VulkanBackendParts::device);
  const uint32_t x_word = args.Output(x, sizeof(float) * n);
  const uint32_t src_word = args.Input(src, sizeof(float) * n * k);
  const uint32_t weights_word = args.Input(weights, sizeof(float) * n_rows * k);
  if (!args.fits()) return inner_.AddWeightedRows(x, src, weights, n_rows, k, width, Inner(ws));
  const VulkanGroups grid = VulkanGroups::Cover((n + 255) / 256);
  const std::array<uint32_t, 7> push = {PushInt(n_rows), PushInt(k),   PushInt(width), x_word,
                                        src_word,        weights_word, grid.x};
  args.Dispatch("add_weighted_rows", PushBytes(push), grid.x, grid.y, 1);
}

bool VulkanBackend::GeluShader(const char* shader, float* x, const float* y, uint64_t n,
                               Workspace& ws) const {
  if (n == 0) return true;
  VulkanShaderArgs args(*memory, Vk(ws), *VulkanBackendParts::device);
  const uint32_t x_word = args.Output(x, sizeof(float) * n);
  const uint32_t y_word = args.Input(y, y == x ? sizeof(float) : sizeof(float) * n);
  const uint32_t table_word = args.Input(gelu_table.data(), gelu_table.size());
  if (!args.fits()) return false;
  const VulkanGroups grid = VulkanGroups::Cover((n + 255) / 256);
  const std::array<uint32_t, 5> push = {PushInt(n), x_word, y_word, table_word, grid.x};
  args.Dispatch(shader, PushBytes(push), grid.x, grid.y, 1);
  return true;
}

void VulkanBackend::Gelu(float* x, int n_rows, int width, Workspace& ws) const {
  if (!GeluShader("gelu", x, x, static_cast<uint64_t>(n_rows) * width, ws)) {
    inner_.Gelu(x, n_rows, width, Inner(ws));
  }
}

void VulkanBackend::GeGlu(float* gate, const float* up, int n_rows, int width,
                          Workspace& ws) const {
  if (!GeluShader("geglu", gate, up, static_cast<uint64_t>(n_rows) * width, ws)) {
    inner_.GeGlu(gate, up, n_rows, width, Inner(ws));
  }
}

void VulkanBackend::RmsNorm(const float* x, const float* weight, int n_rows, int width, float eps,
                            float* out, Workspace& ws) const {
  const size_t bytes = sizeof(float) * n_rows * width;
  VulkanShaderArgs args(*memory, Vk(ws), *VulkanBackendParts::device);
  const uint32_t x_word = args.Input(x, bytes);
  const uint32_t weight_word = args.Input(weight, sizeof(float) * width);
  const uint32_t out_word = args.Output(out, bytes);
  if (!args.fits() || n_rows == 0) {
    return inner_.RmsNorm(x, weight, n_rows, width, eps, out, Inner(ws));
  }
  const std::array<uint32_t, 5> push = {PushInt(width), PushFloat(eps), x_word, weight_word,
                                        out_word};
  args.Dispatch("rms_norm", PushBytes(push), PushInt(n_rows), 1, 1);
}

void VulkanBackend::LayerNorm(const float* x, const float* weight, const float* bias, int n_rows,
                              int width, float eps, float* out, Workspace& ws) const {
  const size_t bytes = sizeof(float) * n_rows * width;
  VulkanShaderArgs args(*memory, Vk(ws), *VulkanBackendParts::device);
  const uint32_t x_word = args.Input(x, bytes);
  const uint32_t weight_word = args.Input(weight, sizeof(float) * width);
  const uint32_t bias_word = args.Input(bias, sizeof(float) * width);
  const uint32_t out_word = args.Output(out, bytes);
  if (!args.fits() || n_rows == 0) {
    return inner_.LayerNorm(x, weight, bias, n_rows, width, eps, out, Inner(ws));
  }
  const std::array<uint32_t, 6> push = {PushInt(width), PushFloat(eps), x_word,
                                        weight_word,    bias_word,      out_word};
  args.Dispatch("layer_norm", PushBytes(push), PushInt(n_rows), 1, 1);
}

}  // namespace kvserve
