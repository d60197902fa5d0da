// A model loaded for a test with its tokenizer: any file, or a real model of scripts/get-model.sh.
#pragma once

#include <memory>
#include <string>

#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace kvserve::testing {

struct LoadedModel {
  std::unique_ptr<Model> model;          // on TestBackend()
  std::unique_ptr<Tokenizer> tokenizer;  // from the model's file
};

// The model at `path` and its tokenizer; a load error fails the calling test and leaves the
// members null.
LoadedModel LoadModelWithTokenizer(const std::string& path);
// `name` as RealModelPath takes it ("smollm2-135m", "gemma3-270m"). A missing file or a load
// error fails the calling test and leaves the members null.
LoadedModel LoadRealModel(const std::string& name);

}  // namespace kvserve::testing
