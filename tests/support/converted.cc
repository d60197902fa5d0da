#include "support/converted.h"

#include <gtest/gtest.h>

#include "io/gguf_reader.h"
#include "model/gguf_converter.h"
#include "support/paths.h"

namespace kvserve::testing {

std::string ConvertToTemp(const std::string& source_path, const QuantRecipe& recipe,
                          const std::string& out_name) {
  const std::string out = TempDir() + "/" + out_name + ".gguf";
  auto source = GgufFile::Open(source_path);
  EXPECT_TRUE(source.ok()) << source.message();
  if (!source.ok()) return out;
  auto converter = GgufConverter::Create(*source, recipe);
  EXPECT_TRUE(converter.ok()) << converter.message();
  if (!converter.ok()) return out;
  const Status written = converter->WriteFile(out);
  EXPECT_TRUE(written.ok()) << written.message();
  return out;
}

}  // namespace kvserve::testing
