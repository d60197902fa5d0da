// The Vulkan backend's compute shaders as SPIR-V, compiled from shaders/*.comp by glslc at build
// time and embedded by cmake/embed-spirv.cmake (one module per variant a shader's first line
// lists).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace kvserve {

struct SpirvModule {
  std::string_view name;           // the variant: "matmul_q4_k", "rms_norm"
  std::span<const uint32_t> code;  // SPIR-V words
};

// Every module, sorted by name; static storage.
std::span<const SpirvModule> SpirvModules();

}  // namespace kvserve
