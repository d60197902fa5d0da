#include "support/real_model.h"

#include <gtest/gtest.h>

#include "support/paths.h"
#include "support/test_backend.h"

namespace kvserve::testing {

LoadedModel LoadModelWithTokenizer(const std::string& path) {
  LoadedModel loaded;
  auto model = LoadModel(path, TestBackend());
  EXPECT_TRUE(model.ok()) << model.message();
  if (!model.ok()) return loaded;
  auto tokenizer = Tokenizer::FromGguf((*model)->file());
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.message();
  if (!tokenizer.ok()) return loaded;
  loaded.model = std::move(model).value();
  loaded.tokenizer = std::move(tokenizer).value();
  return loaded;
}

LoadedModel LoadRealModel(const std::string& name) {
  const std::string path = RealModelPath(name);
  if (path.empty()) return {};
  return LoadModelWithTokenizer(path);
}

}  // namespace kvserve::testing
