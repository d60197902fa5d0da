#include "support/edited_model.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "io/gguf_reader.h"
#include "support/test_backend.h"

namespace kvserve::testing {

EditedModel LoadEditedModel(const std::string& path, const std::string& drop_tensor,
                            const std::function<void(GgufWriter&)>& extra,
                            const std::string& drop_key) {
  auto source = GgufFile::Open(path);
  EXPECT_TRUE(source.ok()) << source.message();
  EditedModel e;
  if (!source.ok()) return e;
  GgufWriter writer(source->alignment());
  for (const auto& [key, value] : source->metadata()) {
    if (key != drop_key) writer.CopyValue(key, value);
  }
  for (const TensorInfo& t : source->tensors()) {
    if (t.name == drop_tensor) continue;
    writer.AddTensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  }
  if (extra) extra(writer);
  const std::vector<uint8_t> image = writer.Serialize();
  e.bytes.reset(new uint8_t[image.size()]);
  std::memcpy(e.bytes.get(), image.data(), image.size());
  auto file = GgufFile::Parse(e.bytes.get(), image.size(), "edited.gguf");
  EXPECT_TRUE(file.ok()) << file.message();
  if (file.ok()) e.model = LoadModel(std::move(file).value(), TestBackend());
  return e;
}

}  // namespace kvserve::testing
