#include "support/synthetic_files.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <vector>

#include "io/gguf_reader.h"
#include "model/synthetic_model.h"
#include "support/paths.h"
#include "util/sha256.h"

namespace kvserve::testing {

std::string SynthesizedModel(const std::string& preset, const std::string& file_name, GgmlType type,
                             std::optional<GgmlType> expert_type) {
  const std::string path = TempDir() + "/" + file_name + ".gguf";
  if (std::ifstream(path).good()) return path;
  auto vocab = GgufFile::Open(ModelPath("stories260K.gguf"));
  auto shape = SyntheticPreset(preset);
  if (!vocab.ok() || !shape.ok()) {
    ADD_FAILURE() << "no vocabulary or no preset " << preset;
    return "";
  }
  const SyntheticOptions options{
      .shape = *shape, .type = type, .expert_type = expert_type, .n_threads = 2, .name = preset};
  auto synth = SyntheticModel::Create(options, *vocab);
  if (!synth.ok()) {
    ADD_FAILURE() << synth.message();
    return "";
  }
  const Status written = synth->WriteFile(path);
  if (!written.ok()) {
    ADD_FAILURE() << written.message();
    return "";
  }
  return path;
}

std::string FileSha256(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  return Sha256::Hex(Sha256::Hash(bytes.data(), bytes.size()));
}

}  // namespace kvserve::testing
