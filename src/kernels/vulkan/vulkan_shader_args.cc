#include "kernels/vulkan/vulkan_shader_args.h"

#include <algorithm>
#include <cassert>
#include <cstring>

namespace kvserve {

uint32_t VulkanShaderArgs::Input(const void* p, size_t bytes) {
  return Bind(p, bytes, /*output=*/false, /*in_bytes=*/false);
}

uint32_t VulkanShaderArgs::Output(void* p, size_t bytes) {
  return Bind(p, bytes, /*output=*/true, /*in_bytes=*/false);
}

uint32_t VulkanShaderArgs::InputBytes(const void* p, size_t bytes) {
  return Bind(p, bytes, /*output=*/false, /*in_bytes=*/true);
}

uint32_t VulkanShaderArgs::Bind(const void* p, size_t bytes, bool output, bool in_bytes) {
  std::optional<VulkanLocation> where = memory_.Find(p, bytes);
  if (!where.has_value()) {
    uint8_t* staged = ws_.Transient(bytes);
    if (bytes > 0) std::memcpy(staged, p, bytes);
    if (output) copy_back_.push_back({const_cast<void*>(p), staged, bytes});
    where = memory_.Find(staged, bytes);
    assert(where.has_value());
  }
  const size_t bind = where->offset / alignment_ * alignment_;
  const size_t rest = where->offset - bind;
  // Whole 4-byte words, at least one (a shader's array of uint or float).
  const size_t range = std::max<size_t>((rest + bytes + 3) / 4 * 4, 4);
  fits_ = fits_ && range <= max_range_;
  bindings_.push_back({where->buffer, bind, std::min(range, max_range_)});
  if (in_bytes) return static_cast<uint32_t>(rest);
  assert(rest % 4 == 0);
  return static_cast<uint32_t>(rest / 4);
}

void VulkanShaderArgs::Dispatch(std::string_view name, std::span<const uint8_t> push, uint32_t x,
                                uint32_t y, uint32_t z) {
  ws_.NoteDispatch(device_.Dispatch(name, bindings_, push, x, y, z));
  if (copy_back_.empty()) return;
  device_.Flush();
  for (const CopyBack& c : copy_back_) std::memcpy(c.host, c.staged, c.bytes);
  copy_back_.clear();
}

}  // namespace kvserve
