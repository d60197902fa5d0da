// Flags shared by the commands that load a model and run it: -m, -t, -c, --kv-type.
#pragma once

#include <memory>
#include <string>

#include "cli/args.h"
#include "kernels/cpu/attention.h"
#include "model/transformer.h"
#include "util/status.h"

namespace kvserve {

struct ModelOptions {
  std::string model_path;
  int n_threads = 0;  // 0 = one per core
  int n_ctx = 0;      // 0 = the model's training context
  KvType kv_type = KvType::kF32;
};

// -m, -t, -c, --kv-type, for a command's FlagTable.
FlagGroup ModelFlags();
Result<ModelOptions> ReadModelOptions(const Args& args);
Result<KvType> ParseKvType(const std::string& name);

// Loads the model and resolves n_ctx against it (gpt2 cannot go past its position table).
Result<std::unique_ptr<Transformer>> LoadModel(ModelOptions& options);

}  // namespace kvserve
