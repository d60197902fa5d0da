// The loaders of the architectures, one per model/<arch>.cc; the registry in model.cc maps GGUF
// architecture names ("general.architecture") to them. Adding an architecture: its file, its
// declaration here, its line in the registry, its test.
#pragma once

#include <memory>

#include "io/gguf_reader.h"
#include "kernels/backend.h"
#include "model/model.h"
#include "model/model_config.h"
#include "util/status.h"

namespace kvserve {

using ModelLoader = Result<std::unique_ptr<Model>> (*)(GgufFile file, ModelConfig config,
                                                       const Backend& backend);

Result<std::unique_ptr<Model>> LoadLlama(GgufFile file, ModelConfig config, const Backend& backend);
Result<std::unique_ptr<Model>> LoadQwen2(GgufFile file, ModelConfig config, const Backend& backend);
Result<std::unique_ptr<Model>> LoadQwen3(GgufFile file, ModelConfig config, const Backend& backend);
Result<std::unique_ptr<Model>> LoadQwen3Moe(GgufFile file, ModelConfig config,
                                            const Backend& backend);
Result<std::unique_ptr<Model>> LoadPhi3(GgufFile file, ModelConfig config, const Backend& backend);
Result<std::unique_ptr<Model>> LoadGpt2(GgufFile file, ModelConfig config, const Backend& backend);
Result<std::unique_ptr<Model>> LoadGemma2(GgufFile file, ModelConfig config,
                                          const Backend& backend);
Result<std::unique_ptr<Model>> LoadGemma3(GgufFile file, ModelConfig config,
                                          const Backend& backend);

}  // namespace kvserve
