// A model file copied with edits (a tensor dropped, metadata added or overwritten), loaded from
// memory on the test backend: how the loader tests feed a file a key or shape it lacks.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "io/gguf_writer.h"
#include "model/model.h"
#include "util/status.h"

namespace kvserve::testing {

struct EditedModel {
  std::unique_ptr<uint8_t[]> bytes;  // the image the GgufFile views; outlives the model
  Result<std::unique_ptr<Model>> model = Status::Internal("not loaded");
};

// The GGUF file at `path` without tensor `drop_tensor` and metadata key `drop_key` (none when
// empty), with `extra` (may be null) applied after the copied metadata and tensors; the loaded
// file is named "edited.gguf".
EditedModel LoadEditedModel(const std::string& path, const std::string& drop_tensor,
                            const std::function<void(GgufWriter&)>& extra,
                            const std::string& drop_key = "");

}  // namespace kvserve::testing
