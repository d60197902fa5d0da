#include "support/real_model.h"

#include <gtest/gtest.h>

#include "support/paths.h"
#include "support/test_backend.h"

namespace kvserve::testing {

LoadedModel LoadRealModel(const std::string& name) {
  LoadedModel loaded;
  const std::string path = RealModelPath(name);
  if (path.empty()) return loaded;
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

}  // namespace kvserve::testing
