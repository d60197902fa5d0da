// Flags shared by the commands that load a model and run it: -m, -t, -c, --kv-type, --backend.
#pragma once

#include <memory>
#include <string>

#include "cli/args.h"
#include "kv/kv_format.h"
#include "model/model.h"
#include "util/status.h"

namespace kvserve {

struct ModelOptions {
  std::string model_path;
  int n_threads = 0;                 // 0 = one per core
  int n_ctx = 0;                     // 0 = the model's training context
  KvFormat kv_type = KvType::kF32;   // --kv-type: one type, or one per KV layer group
  const Backend* backend = nullptr;  // --backend (cli_backend.h); lives until exit
};

// -m, -t, -c, --kv-type, --backend, for a command's FlagTable.
FlagGroup ModelFlags();
Result<ModelOptions> ReadModelOptions(const Args& args);

// Loads the model on `backend` (options.backend unless a caller wraps it; it must outlive the
// model), resolves n_ctx against it (Model::CheckContextSize) and checks --kv-type against its KV
// layer groups (KvSpec::CheckFormat).
Result<std::unique_ptr<Model>> OpenModel(ModelOptions& options, const Backend& backend);
Result<std::unique_ptr<Model>> OpenModel(ModelOptions& options);

}  // namespace kvserve
