// T5's encoder inputs in the disk tier (EngineOptions::kv_disk_dir, `--kv-disk`; docs/kv-cache.md,
// "The disk tier"): the cross-attention blocks of an input are written when the pool evicts them
// and at shutdown, and read back, the whole input or nothing, before a waiting request looks for
// them (KvDiskSpill::RestoreInput). Checked on both T5 fixtures (EngineCore stepped by hand, the
// block invariants after every step): an input encoded by one engine is found by a fresh engine on
// the same directory after the first shut down (its tokens reported cached, the same tokens and
// logprobs bit for bit, greedy and seeded); an input evicted from a small pool comes back from disk
// in the same engine; 16 requests sharing 4 inputs through small pools with the tier give each
// one's answer alone, and leave every input on disk for the next engine; another T5 file on the
// same directory finds nothing of the first's. No block is left held. The tier opens on a T5 file
// with the cross-attention group in its fingerprint.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/engine_core.h"
#include "engine/kv_disk_setup.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "support/core_run.h"
#include "support/paths.h"
#include "support/reference_runs.h"
#include "support/synthetic_files.h"
#include "support/unfreed_run.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {
namespace {

using Output = testing::StreamOutput;

using Loaded = testing::LoadedModel;

Loaded LoadTiny(const std::string& preset) { return testing::LoadSynthesizedF32(preset); }

std::string FreshDir(const std::string& name) {
  const std::string dir = testing::TempDir() + "/t5-disk-" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

// Block size 4; `dir` empty: no disk tier (and no prefix cache: the answers alone).
EngineOptions Options(const std::string& dir) {
  EngineOptions o{.n_threads = 2,
                  .n_ctx = 128,
                  .block_size = 4,
                  .max_num_seqs = 16,
                  .max_batched_tokens = 64,
                  .prefix_caching = !dir.empty()};
  o.kv_disk_dir = dir;
  return o;
}

// Blocks of the decoder's self-attention pool and of the cross-attention pool.
std::vector<int> Pools(int self, int cross) { return {self, cross}; }

Request Greedy(std::vector<int32_t> prompt, int max_tokens) {
  Request r = testing::Sampled(std::move(prompt), max_tokens, 0);
  r.sampling.temperature = 0.0f;
  return r;
}

EngineStats StatsOf(EngineCore& core) {
  EngineStats stats;
  core.FillStats(stats);
  return stats;
}

void ExpectNothingHeld(EngineCore& core) {
  const EngineStats stats = StatsOf(core);
  for (size_t g = 0; g < stats.group_blocks_used.size(); ++g) {
    EXPECT_EQ(stats.group_blocks_used[g], 0) << "group " << g;
  }
}

void ExpectSame(const Output& got, const Output& want, const std::string& what) {
  EXPECT_EQ(got.tokens, want.tokens) << what;
  EXPECT_EQ(got.logprobs, want.logprobs) << what;
}

class T5Disk : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    l_ = LoadTiny(GetParam());
    ASSERT_TRUE(l_.model && l_.tokenizer);
  }
  std::unique_ptr<EngineCore> Core(const std::string& dir, std::vector<int> pools) {
    return std::make_unique<EngineCore>(*l_.model, *l_.tokenizer, Options(dir), std::move(pools), 0,
                                        nullptr);
  }
  Output Alone(const Request& r) {
    auto core = Core("", Pools(64, 64));
    return testing::RunCoreChecked(*core, {r})[0];
  }
  std::vector<int32_t> Input(int seed, int n) {
    std::mt19937 rng(seed);
    return testing::RandomPrompt(rng, n, l_.model->config().n_vocab);
  }
  Loaded l_;
};

// The tier opens on a T5 file: one block size per group, the cross-attention group's layout in
// the fingerprint.
TEST_P(T5Disk, TheTierOpensWithTheCrossAttentionGroup) {
  const KvSpec spec = l_.model->kv_spec();
  ASSERT_EQ(spec.groups.size(), 2u);
  ASSERT_EQ(l_.model->cross_group(), 1);
  auto tier = OpenEngineDiskTier(Options(FreshDir(GetParam() + "-open")), *l_.model);
  ASSERT_TRUE(tier.ok()) << tier.message();
  EXPECT_EQ((*tier)->n_groups(), 2);
  EXPECT_EQ((*tier)->block_bytes(1), KvCache::BytesPerBlock(spec, KvType::kF32, 4, 1));
  EXPECT_NE(DiskGroupLayout(spec).find("|cross-attention:layers"), std::string::npos)
      << DiskGroupLayout(spec);
}

TEST_P(T5Disk, AnInputEncodedBeforeARestartIsReadBack) {
  const std::vector<int32_t> input = Input(3, 23);  // 6 blocks, the last one of 3 positions
  for (const Request& r : {Greedy(input, 16), testing::Sampled(input, 16, 1)}) {
    const std::string what = "temperature " + std::to_string(r.sampling.temperature);
    const std::string dir = FreshDir(GetParam() + "-restart");
    const Output plain = Alone(r);
    {
      auto a = Core(dir, Pools(64, 64));
      const Output first = testing::RunCoreChecked(*a, {r})[0];
      EXPECT_EQ(first.usage.cached_tokens, 0) << what;
      ExpectSame(first, plain, what);
      ExpectNothingHeld(*a);
    }  // a's shutdown writes the input's blocks (and the decoder's)
    auto b = Core(dir, Pools(64, 64));
    const Output again = testing::RunCoreChecked(*b, {r})[0];
    EXPECT_EQ(again.usage.cached_tokens, 23) << what;
    ExpectSame(again, plain, what);
    const EngineStats stats = StatsOf(*b);
    EXPECT_EQ(stats.kv_disk_hits, 6u) << what;  // the input's blocks; the decoder has no prefix
    EXPECT_EQ(stats.kv_disk_restored_tokens, 23u) << what;
    ExpectNothingHeld(*b);
  }
}

TEST_P(T5Disk, AnInputEvictedFromMemoryIsReadBackInTheSameEngine) {
  const std::vector<int32_t> x = Input(4, 23), y = Input(5, 21);  // 6 blocks each
  const std::string dir = FreshDir(GetParam() + "-evicted");
  auto core = Core(dir, Pools(64, 6));  // one input's blocks at a time
  const Request rx = testing::Sampled(x, 12, 2), ry = testing::Sampled(y, 12, 3);
  const Output first = testing::RunCoreChecked(*core, {rx})[0];
  ExpectSame(testing::RunCoreChecked(*core, {ry})[0], Alone(ry), "y");  // evicts x's blocks
  EXPECT_GE(StatsOf(*core).kv_disk_writes, 6u);
  const Output again = testing::RunCoreChecked(*core, {rx})[0];  // evicts y's, reads x's
  EXPECT_EQ(again.usage.cached_tokens, 23);
  ExpectSame(again, first, "x again");
  ExpectSame(first, Alone(rx), "x");
  EXPECT_EQ(StatsOf(*core).kv_disk_hits, 6u);
  EXPECT_EQ(testing::RunCoreChecked(*core, {ry})[0].usage.cached_tokens, 21);
  ExpectNothingHeld(*core);
}

// The cross pool holds 12 blocks (the inputs take 3, 4, 6 and 8): inputs are evicted to disk and
// read back while the 16 run (12 times on each fixture when this was written); the decoder's
// pool of 10 blocks (6 a sequence) preempts them, and its prefixes are evicted and read back too.
TEST_P(T5Disk, SixteenSharingFourInputsThroughASmallPoolEqualAlone) {
  std::vector<std::vector<int32_t>> inputs;
  for (int i = 0; i < 4; ++i) inputs.push_back(Input(11 + i, 9 + 7 * i));
  std::vector<Request> requests;
  for (int i = 0; i < 16; ++i) requests.push_back(testing::Sampled(inputs[i % 4], 24, i));
  const std::string dir = FreshDir(GetParam() + "-sixteen");
  {
    auto core = Core(dir, Pools(10, 12));
    const std::vector<Output> together = testing::RunCoreChecked(*core, requests);
    for (size_t i = 0; i < requests.size(); ++i) {
      ExpectSame(together[i], Alone(requests[i]), "request " + std::to_string(i));
    }
    const EngineStats stats = StatsOf(*core);
    EXPECT_GT(stats.preemptions, 0u);
    EXPECT_GT(stats.kv_disk_writes, 0u);
    EXPECT_GT(stats.kv_disk_hits, 0u);
    EXPECT_EQ(stats.kv_disk_rejected, 0u);
    ExpectNothingHeld(*core);
  }
  // Every input is on disk after the shutdown: a fresh engine finds each whole.
  auto next = Core(dir, Pools(10, 12));
  for (size_t i = 0; i < 4; ++i) {
    const Output out = testing::RunCoreChecked(*next, {requests[i]})[0];
    EXPECT_EQ(out.usage.cached_tokens, static_cast<int>(inputs[i].size())) << "input " << i;
    ExpectSame(out, Alone(requests[i]), "input " + std::to_string(i) + " after the restart");
  }
  ExpectNothingHeld(*next);
}

// The tier's fingerprint holds the model file's identity (and the groups' layout, the
// cross-attention group's among them): another T5 file on the same directory finds none of the
// first one's blocks and computes its own answer.
TEST_P(T5Disk, AnotherModelsBlocksAreIgnored) {
  const std::string other_preset = GetParam() == "t5-tiny" ? "t5-tiny-v1" : "t5-tiny";
  Loaded other = LoadTiny(other_preset);
  ASSERT_TRUE(other.model && other.tokenizer);
  const std::string dir = FreshDir(GetParam() + "-foreign");
  const Request r = Greedy(Input(6, 17), 12);
  {
    auto core = Core(dir, Pools(64, 64));
    testing::RunCoreChecked(*core, {r});
  }
  ASSERT_FALSE(std::filesystem::is_empty(dir));
  EngineCore plain(*other.model, *other.tokenizer, Options(""), Pools(64, 64), 0, nullptr);
  const Output want = testing::RunCoreChecked(plain, {r})[0];
  EngineCore core(*other.model, *other.tokenizer, Options(dir), Pools(64, 64), 0, nullptr);
  const Output got = testing::RunCoreChecked(core, {r})[0];
  EXPECT_EQ(got.usage.cached_tokens, 0);
  ExpectSame(got, want, other_preset);
  EXPECT_EQ(StatsOf(core).kv_disk_hits, 0u);
  EXPECT_EQ(StatsOf(core).kv_disk_rejected, 0u);  // named apart: never even opened
}

INSTANTIATE_TEST_SUITE_P(Presets, T5Disk, ::testing::Values("t5-tiny", "t5-tiny-v1"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace kvserve
