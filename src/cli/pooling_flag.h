// --pooling, shared by `kvserve embed` and `kvserve serve` (its /v1/embeddings).
#pragma once

#include "cli/args.h"
#include "cli/flag_table.h"
#include "engine/embedder.h"
#include "model/model.h"
#include "util/status.h"

namespace kvserve {

FlagGroup PoolingFlag();
// --pooling when given, else the file's (FilePooling).
Result<Pooling> ReadPooling(const Args& args, const Model& model);

}  // namespace kvserve
