// `kvserve run --batch-file`: many requests at once through the serving engine.
#pragma once

#include "cli/args.h"
#include "cli/model_options.h"
#include "model/model.h"

namespace kvserve {

// Reads --batch-file (JSON lines) and prints one JSON result line per request; returns the exit
// code.
int RunBatchFile(const Args& args, const ModelOptions& model_options, const Model& model);

}  // namespace kvserve
