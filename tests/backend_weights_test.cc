// backend_weights_test: every weight the forward pass reads goes through the backend.
// - A backend that keeps its own copy of every weight vector (norm weights, biases, RoPE
//   divisors), as a GPU backend keeps them in device memory, and then fills the host copies with
//   NaN, gives the plain backend's logits bit for bit on every architecture: no model reads a
//   vector it did not declare to Backend::PrepareWeights.
// - The KV cache's block copies (the disk tier's) go through the backend's allocator.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "kernels/forwarding_backend.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "support/forward.h"
#include "support/paths.h"
#include "support/test_backend.h"

namespace kvserve {
namespace {

// Keeps each vector in memory of its own and poisons the loader's host values.
class OwnVectorsBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;

  size_t PrepareWeights(std::span<WeightMatrix* const> matrices,
                        std::span<WeightVector* const> vectors, const GgufFile& file,
                        std::shared_ptr<uint8_t>& storage) const override {
    size_t bytes = inner_.PrepareWeights(matrices, {}, file, storage);
    for (WeightVector* v : vectors) {
      copies_.push_back(std::make_unique<float[]>(v->size()));
      std::memcpy(copies_.back().get(), v->host.data(), v->size() * sizeof(float));
      v->prepared = copies_.back().get();
      std::fill(v->host.begin(), v->host.end(), std::numeric_limits<float>::quiet_NaN());
      bytes += v->size() * sizeof(float);
    }
    return bytes;
  }
  size_t vectors_prepared() const { return copies_.size(); }

 private:
  mutable std::vector<std::unique_ptr<float[]>> copies_;  // live as long as the backend
};

class EveryArchitecture : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryArchitecture, ReadsOnlyTheVectorsTheBackendPrepared) {
  const std::string path = testing::SharedDir() + "/models/" + GetParam();
  auto plain = LoadModel(path, TestBackend());
  ASSERT_TRUE(plain.ok()) << plain.message();
  OwnVectorsBackend own(TestBackend());
  auto moved = LoadModel(path, own);
  ASSERT_TRUE(moved.ok()) << moved.message();
  // Every 1-D tensor of the file (each norm weight, bias, RoPE divisor) was declared: a vector
  // the model loads but does not declare would keep its host values and escape the NaN below.
  size_t one_dimensional = 0;
  for (const TensorInfo& t : (*plain)->file().tensors()) one_dimensional += t.dims.size() == 1;
  EXPECT_GE(one_dimensional, static_cast<size_t>((*plain)->config().n_layers));
  EXPECT_EQ(own.vectors_prepared(), one_dimensional);

  const std::vector<int32_t> tokens = {1, 5, 9, 2, 7, 3, 11, 4, 6, 8};
  const std::vector<float> want = testing::AllPositionLogits(**plain, tokens);
  const std::vector<float> got = testing::AllPositionLogits(**moved, tokens);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << "logit " << i << ": a host vector was read";
    ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0) << "logit " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Files, EveryArchitecture,
                         ::testing::Values("stories260K.gguf", "gpt2-tiny-f32.gguf",
                                           "arch/llama3-f32.gguf", "arch/qwen2-f32.gguf",
                                           "arch/qwen3-f32.gguf", "arch/qwen3moe-f32.gguf",
                                           "arch/phi3-f32.gguf", "arch/gemma2-f32.gguf",
                                           "arch/gemma3-f32.gguf"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param.substr(info.param.rfind('/') + 1);
                           name = name.substr(0, name.find('.'));
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

// Host memory that counts the allocations and copies made through it, and refuses an allocation
// over `cap` bytes as a GPU driver does past its maxMemoryAllocationSize (2 GiB on lavapipe).
class CountingAllocator final : public BufferAllocator {
 public:
  explicit CountingAllocator(uint64_t cap = UINT64_MAX) : cap_(cap) {}
  Buffer AllocateZeroed(size_t bytes) override {
    if (bytes > cap_) throw std::bad_alloc();
    ++allocations;
    Buffer inner = host_.AllocateZeroed(bytes);
    uint8_t* data = inner.data();
    held_.push_back(std::move(inner));
    return Buffer(data, bytes, this);
  }
  void Free(uint8_t* data, size_t) override {
    std::erase_if(held_, [&](const Buffer& b) { return b.data() == data; });
  }
  void CopyToHost(const uint8_t* src, size_t bytes, uint8_t* host) const override {
    ++to_host;
    host_.CopyToHost(src, bytes, host);
  }
  void CopyFromHost(const uint8_t* host, size_t bytes, uint8_t* dst) const override {
    ++from_host;
    host_.CopyFromHost(host, bytes, dst);
  }
  uint64_t max_allocation_bytes() const override { return cap_; }
  int allocations = 0;
  mutable int to_host = 0, from_host = 0;

 private:
  uint64_t cap_;
  HostAllocator host_;
  std::vector<Buffer> held_;
};

TEST(KvCacheBlockCopies, GoThroughTheBackendsAllocator) {
  auto model = LoadModel(testing::SharedDir() + "/models/stories260K.gguf", TestBackend());
  ASSERT_TRUE(model.ok()) << model.message();
  const KvSpec spec = (*model)->kv_spec();
  CountingAllocator allocator;
  KvCache kv(spec, KvType::kF16, 16, 4, allocator);
  std::vector<uint8_t> block(KvCache::BytesPerBlock(spec, KvType::kF16, 16));
  for (size_t i = 0; i < block.size(); ++i) block[i] = static_cast<uint8_t>(i * 7 + 1);
  kv.CopyBlockIn(0, 2, block);
  EXPECT_EQ(allocator.from_host, 2 * kv.n_layers());  // K and V of every layer
  std::vector<uint8_t> back(block.size());
  kv.CopyBlockOut(0, 2, back);
  EXPECT_EQ(allocator.to_host, 2 * kv.n_layers());
  EXPECT_EQ(back, block);
  kv.CopyBlockOut(0, 1, back);  // untouched: zeros
  EXPECT_EQ(back, std::vector<uint8_t>(block.size(), 0));
}

// A cache larger than one allocation may be takes one per pool (each layer's K and V), and
// holds and copies blocks as the one-allocation cache does; where the total fits, one.
TEST(KvCachePools, ACacheLargerThanOneAllocationTakesOnePerPool) {
  auto model = LoadModel(testing::SharedDir() + "/models/stories260K.gguf", TestBackend());
  ASSERT_TRUE(model.ok()) << model.message();
  const KvSpec spec = (*model)->kv_spec();
  constexpr int kBlocks = 64;
  const uint64_t total = KvCache::BytesPerBlock(spec, KvType::kF16, 16) * kBlocks;
  CountingAllocator roomy(total);
  KvCache whole(spec, KvType::kF16, 16, kBlocks, roomy);
  EXPECT_EQ(roomy.allocations, 1);
  CountingAllocator capped(total / 4);
  KvCache split(spec, KvType::kF16, 16, kBlocks, capped);
  EXPECT_EQ(capped.allocations, 2 * split.n_layers());
  EXPECT_EQ(split.bytes(), whole.bytes());
  std::vector<uint8_t> block(KvCache::BytesPerBlock(spec, KvType::kF16, 16));
  for (size_t i = 0; i < block.size(); ++i) block[i] = static_cast<uint8_t>(i * 5 + 3);
  for (KvCache* kv : {&whole, &split}) {
    kv->CopyBlockIn(0, kBlocks - 1, block);
    std::vector<uint8_t> back(block.size());
    kv->CopyBlockOut(0, kBlocks - 1, back);
    EXPECT_EQ(back, block);
    kv->CopyBlockOut(0, 0, back);
    EXPECT_EQ(back, std::vector<uint8_t>(block.size(), 0));
    for (int layer = 0; layer < kv->n_layers(); ++layer) {
      EXPECT_NE(kv->layer(layer).k, nullptr);
      EXPECT_NE(kv->layer(layer).v, nullptr);
    }
  }
  CountingAllocator too_small(total / (4 * split.n_layers()));
  EXPECT_THROW(KvCache(spec, KvType::kF16, 16, kBlocks, too_small), std::bad_alloc);
}

}  // namespace
}  // namespace kvserve
