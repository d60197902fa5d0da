// llama files with <arch>.attention.sliding_window (Mistral's): every layer attends over the last
// `window` keys. Positions whose keys all fit the window give the full-attention logits bit for
// bit, later ones differ, and batch, incremental and no-cache runs agree bit for bit; the cache
// is one sliding-window group.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "io/gguf_reader.h"
#include "io/gguf_writer.h"
#include "model/model.h"
#include "model/synthetic_model.h"
#include "support/paths.h"
#include "support/reference_runs.h"
#include "support/test_backend.h"

namespace kvserve {
namespace {

// A small random llama file, with the sliding-window key when window > 0.
std::string WriteLlama(int window) {
  auto vocab = GgufFile::Open(testing::ModelPath(DefaultVocabFile("llama")));
  EXPECT_TRUE(vocab.ok()) << vocab.message();
  auto synth = SyntheticModel::Create({.shape = {.arch = "llama",
                                                 .n_embd = 64,
                                                 .n_layers = 2,
                                                 .n_heads = 4,
                                                 .n_kv_heads = 2,
                                                 .n_ff = 96,
                                                 .n_ctx = 64},
                                       .seed = 11},
                                      *vocab);
  EXPECT_TRUE(synth.ok()) << synth.message();
  GgufWriter writer(32);
  synth->AddTo(writer);
  if (window > 0) writer.SetUint32("llama.attention.sliding_window", window);
  const std::string path = testing::TempDir() + "/llama-window-" + std::to_string(window) + ".gguf";
  EXPECT_TRUE(writer.WriteFile(path).ok());
  return path;
}

std::unique_ptr<Model> Load(const std::string& path) {
  auto model = LoadModel(path, TestBackend());
  EXPECT_TRUE(model.ok()) << model.message();
  return model.ok() ? std::move(model).value() : nullptr;
}

bool RowEqual(const std::vector<float>& a, const std::vector<float>& b, int row, int n_vocab) {
  return std::memcmp(a.data() + row * n_vocab, b.data() + row * n_vocab, sizeof(float) * n_vocab) ==
         0;
}

TEST(LlamaWindowTest, WindowAppliesFromItsLengthOnAndEveryModeAgrees) {
  constexpr int kWindow = 5;
  const auto full = Load(WriteLlama(0));
  const auto windowed = Load(WriteLlama(kWindow));
  ASSERT_TRUE(full && windowed);
  const KvSpec spec = windowed->kv_spec();
  ASSERT_EQ(spec.groups.size(), 1u);
  EXPECT_EQ(spec.groups[0].kind->Describe(), "sliding window 5");
  EXPECT_EQ(spec.groups[0].kind->attention_window(), kWindow);
  EXPECT_EQ(full->kv_spec().groups[0].kind->Describe(), "full causal");

  const std::vector<int32_t> tokens = {1, 5, 9, 200, 31, 7, 7, 40, 3, 11, 2, 60, 17, 90, 4, 8};
  const int n_vocab = full->config().n_vocab;
  const std::vector<float> want = testing::Logits(*full, tokens, testing::Mode::kBatch);
  const std::vector<float> got = testing::Logits(*windowed, tokens, testing::Mode::kBatch);
  for (int p = 0; p < static_cast<int>(tokens.size()); ++p) {
    // Position p sees keys max(0, p - window + 1) .. p: all of them while p < window.
    EXPECT_EQ(RowEqual(want, got, p, n_vocab), p < kWindow) << "position " << p;
  }
  for (testing::Mode mode : {testing::Mode::kIncremental, testing::Mode::kNoCache}) {
    const std::vector<float> other = testing::Logits(*windowed, tokens, mode);
    ASSERT_EQ(other.size(), got.size());
    EXPECT_EQ(std::memcmp(other.data(), got.data(), sizeof(float) * got.size()), 0)
        << testing::ModeName(mode);
  }
}

}  // namespace
}  // namespace kvserve
