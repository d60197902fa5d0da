// Opening an engine's KV disk tier (--kv-disk): whether this engine can use one, the fingerprint
// that keeps another model's, format's, block size's or group layout's files out, and the
// directory itself (one block size per KV layer group).
#pragma once

#include <memory>
#include <string>

#include "engine/engine.h"
#include "io/gguf_reader.h"
#include "kv/disk_tier.h"
#include "model/model.h"
#include "util/status.h"

namespace kvserve {

// The model's identity in the fingerprint: options.kv_disk_model_id where given, else the file's
// canonical path, size and modification time ("path|bytes|mtime").
std::string DiskModelIdentity(const EngineOptions& options, const GgufFile& file);

// The layer groups' layout for the fingerprint of a model of several groups (each group's kind,
// layers and row or state shape); empty for one group, whose fingerprint stays as it was before
// groups were stored (the model file already fixes its layout). An encoder-decoder's
// cross-attention group is one of them ("cross-attention:layers ...:kv HxD"); what its blocks
// hold also depends on the encoder's weights, which the model's identity covers.
std::string DiskGroupLayout(const KvSpec& spec);

// Opens options.kv_disk_dir for this model, KV format and block size. An error says why the tier
// cannot serve this engine (no prefix cache; a layer group whose cache kind is not disk_storable;
// a directory it cannot use): the engine warns and recomputes prompts.
Result<std::unique_ptr<DiskTier>> OpenEngineDiskTier(const EngineOptions& options,
                                                     const Model& model);

}  // namespace kvserve
