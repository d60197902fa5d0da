// Random-weight model files the tests make with `kvserve synth`'s library (model files are never
// committed): a preset's shape with stories260K's 512-token vocabulary, seed 1, stddev 0.02, named
// after the preset, as tests/data/llama-reference/README.md's commands write them.
#pragma once

#include <optional>
#include <string>

#include "io/ggml_type.h"

namespace kvserve::testing {

// The file's path in this process's TempDir(), written on first use; "" (with a test failure)
// when it cannot be made. `file_name` tells files of one preset apart (e.g. "gpt-oss-tiny-f32").
std::string SynthesizedModel(const std::string& preset, const std::string& file_name, GgmlType type,
                             std::optional<GgmlType> expert_type = std::nullopt);

// The sha256 of a file, in hex.
std::string FileSha256(const std::string& path);

}  // namespace kvserve::testing
