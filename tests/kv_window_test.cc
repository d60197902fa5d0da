// Sliding-window layer groups in the KV cache (kv/kv_spec.h, BlockManager::SlideWindows): a
// window group's blocks that slid out of the window go back to its pool, so a long sequence holds
// about window / block_size + 1 blocks there while its full group grows; prefix hits need the
// last window's blocks in the window groups. Checked on BlockManager alone, then through the
// engine on the gemma2 / gemma3 fixtures (../shared/models/arch, window 8) and a llama file with
// llama.attention.sliding_window: block counts per group after every step, and every token and
// logprob bit for bit equal to a SequenceRunner run (one sequence, nothing ever freed), alone,
// with prefix-cache hits, and 16 at once under preemption.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/block_map.h"
#include "engine/engine.h"
#include "engine/engine_core.h"
#include "engine/proposer_replay.h"
#include "io/gguf_reader.h"
#include "io/gguf_writer.h"
#include "kv/block_manager.h"
#include "kv/sliding_window_kind.h"
#include "model/model.h"
#include "model/synthetic_model.h"
#include "support/core_run.h"
#include "support/paths.h"
#include "support/reference_runs.h"
#include "support/synthetic_files.h"
#include "support/test_backend.h"
#include "support/unfreed_run.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {
namespace {

constexpr int kBs = 4;  // tokens per block in these tests

// Plays a sequence of n tokens through `m` one token at a time as the scheduler does (grow,
// compute, commit, slide); checks the invariants at each step.
void Advance(BlockManager& m, BlockTable& table, const std::vector<int32_t>& tokens, int from,
             int to) {
  for (int c = from; c < to; ++c) {
    ASSERT_TRUE(m.Grow(table, c + 1)) << "position " << c;
    m.Commit(table, tokens, c + 1, "");
    m.SlideWindows(table, c + 1);
    ASSERT_TRUE(m.CheckInvariants().ok()) << m.CheckInvariants().message();
  }
}

std::vector<int32_t> Iota(int n, int start) {
  std::vector<int32_t> v(n);
  for (int i = 0; i < n; ++i) v[i] = start + i;
  return v;
}

TEST(BlockManagerWindow, WindowGroupHoldsItsWindowWhileTheFullGroupGrows) {
  constexpr int kWindow = 10;
  BlockManager m({{.n_blocks = 64}, {.n_blocks = 5, .kind = SlidingWindowKind::Make(kWindow)}}, kBs,
                 true);
  const std::vector<int32_t> tokens = Iota(200, 1);
  BlockTable table;
  for (int c = 0; c < 200; ++c) {
    Advance(m, table, tokens, c, c + 1);
    const int n = c + 1;
    EXPECT_EQ(m.Stats(0).used, (n + kBs - 1) / kBs) << n;
    // Blocks from the first key of the window of the last block boundary B <= n to the newest
    // position n - 1.
    const int first = std::max(0, n / kBs * kBs - kWindow + 1) / kBs;
    EXPECT_EQ(m.Stats(1).used, (n - 1) / kBs + 1 - first) << n;
    EXPECT_LE(m.Stats(1).used, (kWindow - 1 + kBs - 1) / kBs + 1) << n;
    for (int b = 0; b < static_cast<int>(table.group(1).size()); ++b) {
      EXPECT_EQ(table.group(1)[b] == kNoBlock, b < first) << "block " << b << " at " << n;
    }
  }
  EXPECT_EQ(table.held(), m.Stats(0).used + m.Stats(1).used);
  m.Free(table);
  EXPECT_EQ(m.Stats().used, 0);
  EXPECT_TRUE(m.CheckInvariants().ok());
}

TEST(BlockManagerWindow, PrefixHitNeedsTheLastWindowOfEveryWindowGroup) {
  constexpr int kWindow = 10;
  const std::vector<int32_t> tokens = Iota(101, 1);
  // A window pool that holds the whole sequence, and one of six blocks that evicts its oldest.
  for (int window_blocks : {32, 6}) {
    BlockManager m(
        {{.n_blocks = 64}, {.n_blocks = window_blocks, .kind = SlidingWindowKind::Make(kWindow)}},
        kBs, true);
    BlockTable a;
    Advance(m, a, tokens, 0, 100);
    m.Free(a);
    // The whole prefix: the full group has blocks 0..24, the window group the last window's.
    EXPECT_EQ(m.CachedPrefixTokens(tokens, ""), 100);
    // Its first 40 tokens: the window group needs blocks 7..9 (positions 31..39), evicted from
    // the small pool; a shorter hit needs earlier blocks, evicted too.
    std::vector<int32_t> head(tokens.begin(), tokens.begin() + 41);
    head[40] = 9999;
    EXPECT_EQ(m.CachedPrefixTokens(head, ""), window_blocks == 32 ? 40 : 0) << window_blocks;
    BlockTable b;
    EXPECT_EQ(m.AllocatePrefix(b, tokens, ""), 100);
    ASSERT_EQ(b.group(0).size(), 25u);
    ASSERT_EQ(b.group(1).size(), 25u);
    for (int i = 0; i < 25; ++i) {
      EXPECT_NE(b.group(0)[i], kNoBlock);
      // A query at position 100 reads keys 91..100: blocks 22.. are kept.
      EXPECT_EQ(b.group(1)[i] == kNoBlock, i < (100 - kWindow + 1) / kBs) << i;
    }
    EXPECT_TRUE(m.CheckInvariants().ok());
    // A session's share, a rejected draft's truncation, then every reference dropped.
    BlockTable pinned = m.Share(b, static_cast<int>(b.keys.size()));
    EXPECT_EQ(pinned.held(), b.held());
    ASSERT_TRUE(m.Grow(b, 110));
    m.Truncate(b, 101);
    EXPECT_EQ(b.group(1).size(), 26u);
    EXPECT_TRUE(m.CheckInvariants().ok());
    m.Free(b);
    m.Free(pinned);
    EXPECT_EQ(m.Stats().used, 0);
    EXPECT_TRUE(m.CheckInvariants().ok()) << m.CheckInvariants().message();
  }
}

// A session pins a finished sequence's whole blocks (Share of its keys); its next turn hits them
// all even after every unpinned block of the window pool was evicted: the window kept is that of
// the last block boundary (100), not of the next position (102).
TEST(BlockManagerWindow, APinnedSessionKeepsTheWindowOfItsWholeBlocks) {
  constexpr int kWindow = 10;
  BlockManager m({{.n_blocks = 64}, {.n_blocks = 6, .kind = SlidingWindowKind::Make(kWindow)}}, kBs,
                 true);
  std::vector<int32_t> tokens = Iota(102, 1);
  BlockTable seq;
  Advance(m, seq, tokens, 0, 102);
  ASSERT_EQ(seq.keys.size(), 25u);
  BlockTable pinned = m.Share(seq, static_cast<int>(seq.keys.size()));
  m.Free(seq);
  BlockTable other;  // takes every block the session does not pin, evicting the cached ones
  ASSERT_TRUE(m.Grow(other, 4 * m.Stats(1).free + 4 * m.Stats(1).cached));
  EXPECT_EQ(m.Stats(1).cached, 0);
  tokens.push_back(7);
  EXPECT_EQ(m.CachedPrefixTokens(tokens, ""), 100);
  m.Free(other);
  m.Free(pinned);
  EXPECT_EQ(m.Stats().used, 0);
  EXPECT_TRUE(m.CheckInvariants().ok());
}

TEST(BlockManagerWindow, GrowFailsWithoutChangeWhenTheWindowPoolIsShort) {
  BlockManager m({{.n_blocks = 16}, {.n_blocks = 2, .kind = SlidingWindowKind::Make(8)}}, kBs,
                 false);
  BlockTable table;
  EXPECT_FALSE(m.Grow(table, 12));  // three blocks in each group; the window pool has two
  EXPECT_EQ(m.Stats(0).used, 0);
  EXPECT_TRUE(m.Grow(table, 8));
  EXPECT_EQ(table.held(), 4);
  m.Free(table);
  EXPECT_TRUE(m.CheckInvariants().ok());
}

// --- Through the engine, on model files ---

std::string WriteWindowLlama() {
  auto vocab = GgufFile::Open(testing::ModelPath(DefaultVocabFile("llama")));
  EXPECT_TRUE(vocab.ok()) << vocab.message();
  auto synth = SyntheticModel::Create({.shape = {.arch = "llama",
                                                 .n_embd = 64,
                                                 .n_layers = 2,
                                                 .n_heads = 4,
                                                 .n_kv_heads = 2,
                                                 .n_ff = 96,
                                                 .n_ctx = 256},
                                       .seed = 11},
                                      *vocab);
  EXPECT_TRUE(synth.ok()) << synth.message();
  GgufWriter writer(32);
  synth->AddTo(writer);
  writer.SetUint32("llama.attention.sliding_window", 8);
  const std::string path = testing::TempDir() + "/kv-window-llama.gguf";
  EXPECT_TRUE(writer.WriteFile(path).ok());
  return path;
}

struct Loaded {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

Loaded LoadCase(const std::string& name) {
  Loaded l;
  if (name == "llama-window") {
    auto model = LoadModel(WriteWindowLlama(), TestBackend());
    EXPECT_TRUE(model.ok()) << model.message();
    if (model.ok()) l.model = std::move(model).value();
  } else if (name == "gemma4-tiny" || name == "gpt-oss-tiny") {
    // kvserve synth's files (tests/data/llama-reference): Gemma 4's shared-KV layers read the
    // window and full groups of earlier layers; gpt-oss's window with learned sinks.
    l.model =
        testing::LoadPathOrDie(testing::SynthesizedModel(name, name + "-f32", GgmlType::kF32));
  } else {
    l.model = testing::LoadOrDie("arch/" + name + ".gguf");
  }
  if (l.model) {
    auto tokenizer = Tokenizer::FromGguf(l.model->file());
    EXPECT_TRUE(tokenizer.ok()) << tokenizer.message();
    if (tokenizer.ok()) l.tokenizer = std::move(tokenizer).value();
  }
  return l;
}

using Output = testing::StreamOutput;
using testing::RandomPrompt;
using testing::Sampled;
using testing::Unfreed;

// The group indices of the case's full group (-1: none) and window group.
std::pair<int, int> Groups(const KvSpec& spec) {
  int full = -1, window = -1;
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    (spec.groups[g].kind->keeps_every_block() ? full : window) = static_cast<int>(g);
  }
  return {full, window};
}

EngineOptions Options(bool prefix_caching) {
  return EngineOptions{.n_threads = 2,
                       .n_ctx = 256,
                       .block_size = kBs,
                       .max_num_seqs = 16,
                       .max_batched_tokens = 16,
                       .prefix_caching = prefix_caching};
}

// Pools: `full` blocks for full groups, `window` for window groups.
std::vector<int> Pools(const KvSpec& spec, int full, int window) {
  std::vector<int> n;
  for (const KvGroupSpec& g : spec.groups) {
    n.push_back(g.kind->keeps_every_block() ? full : window);
  }
  return n;
}

class KvWindowEngineTest : public ::testing::TestWithParam<std::string> {};

// One long sequence (40 prompt tokens, 180 generated: 55 blocks of context) with a window pool
// of 7 blocks: it runs without preemption, its window group never holds more than the window's
// 3 blocks while decoding, its full group holds every block, and its tokens and logprobs equal
// the unfreed run's bit for bit.
TEST_P(KvWindowEngineTest, LongSequenceHoldsOnlyTheWindowInItsWindowGroup) {
  Loaded l = LoadCase(GetParam());
  ASSERT_TRUE(l.model && l.tokenizer);
  const KvSpec spec = l.model->kv_spec();
  const auto [full, window] = Groups(spec);
  ASSERT_GE(window, 0);
  ASSERT_EQ(spec.groups[window].kind->attention_window(), 8);
  const int n_window_blocks = spec.groups[window].BlocksPerSequence(256, kBs);
  EXPECT_EQ(n_window_blocks, 3);  // ceil(7 / 4) + 1
  std::mt19937 rng(5);
  const Request r = Sampled(RandomPrompt(rng, 40, l.model->config().n_vocab), 180, 0);
  EngineCore core(*l.model, *l.tokenizer, Options(false), Pools(spec, 64, 7), 0, nullptr);
  auto stream = std::make_shared<RequestStream>();
  core.Add(r, stream);
  int max_full = 0, max_window = 0;
  EngineStats stats;
  while (core.Step()) {
    ASSERT_TRUE(core.CheckBlockInvariants().ok()) << core.CheckBlockInvariants().message();
    core.FillStats(stats);
    if (stats.running == 0) break;
    const int n_computed = static_cast<int>(stats.prompt_tokens) +
                           std::max(0, static_cast<int>(stats.generation_tokens) - 1);
    if (full >= 0) {
      EXPECT_EQ(stats.group_blocks_used[full], (n_computed + kBs - 1) / kBs) << n_computed;
      max_full = std::max(max_full, stats.group_blocks_used[full]);
    }
    if (stats.generation_tokens > 0) {
      EXPECT_LE(stats.group_blocks_used[window], n_window_blocks) << n_computed;
    }
    max_window = std::max(max_window, stats.group_blocks_used[window]);
    // The web UI's block map (group 0's pool): one use per reference, none for released entries.
    BlockMap map;
    core.FillBlockMap(map);
    for (size_t b = 0; b < map.blocks.size(); ++b) {
      ASSERT_EQ(map.UsesOf(static_cast<int32_t>(b)), map.blocks[b].refs) << "block " << b;
    }
  }
  core.FillStats(stats);
  EXPECT_EQ(stats.preemptions, 0u);
  if (full >= 0) {
    EXPECT_EQ(max_full, (40 + 179 + kBs - 1) / kBs);
  }
  EXPECT_LE(max_window, 7);
  for (int used : stats.group_blocks_used) EXPECT_EQ(used, 0);
  const Output got = testing::CollectStream(*stream, std::chrono::milliseconds(0));
  const Output want = Unfreed(*l.model, r, 256);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.logprobs, want.logprobs);
}

// The engine's other ways to run the same request: the whole prompt in one step, and the
// no-cache baseline (recomputes from position 0 every step, so it keeps its window blocks).
TEST_P(KvWindowEngineTest, WholePromptAndNoCacheGiveTheUnfreedAnswer) {
  Loaded l = LoadCase(GetParam());
  ASSERT_TRUE(l.model && l.tokenizer);
  const KvSpec spec = l.model->kv_spec();
  std::mt19937 rng(17);
  const Request r = Sampled(RandomPrompt(rng, 50, l.model->config().n_vocab), 30, 4);
  const Output want = Unfreed(*l.model, r, 256);
  for (bool recompute : {false, true}) {
    EngineOptions options = Options(false);
    options.max_batched_tokens = 256;
    options.recompute = recompute;
    EngineCore core(*l.model, *l.tokenizer, options, Pools(spec, 64, 64), 0, nullptr);
    const Output got = testing::RunCoreChecked(core, {r})[0];
    EXPECT_EQ(got.tokens, want.tokens) << "recompute " << recompute;
    EXPECT_EQ(got.logprobs, want.logprobs) << "recompute " << recompute;
  }
}

// Prefix caching: a second turn (the first turn's prompt and answer, then more) hits the cache
// and gives the unfreed run's answer; a prompt sharing only the first 20 tokens finds their
// window blocks evicted from the small window pool, so it is not a hit, and is exact too.
TEST_P(KvWindowEngineTest, PrefixHitsGiveTheUncachedAnswer) {
  Loaded l = LoadCase(GetParam());
  ASSERT_TRUE(l.model && l.tokenizer);
  const KvSpec spec = l.model->kv_spec();
  const int n_vocab = l.model->config().n_vocab;
  std::mt19937 rng(9);
  EngineCore core(*l.model, *l.tokenizer, Options(true), Pools(spec, 64, 8), 0, nullptr);
  auto run = [&](const Request& r) { return testing::RunCoreChecked(core, {r})[0]; };
  const Request first = Sampled(RandomPrompt(rng, 40, n_vocab), 30, 1);
  const Output a = run(first);
  EXPECT_EQ(a.tokens, Unfreed(*l.model, first, 256).tokens);
  std::vector<int32_t> turn = first.prompt;
  turn.insert(turn.end(), a.tokens.begin(), a.tokens.end());
  const std::vector<int32_t> more = RandomPrompt(rng, 10, n_vocab);
  turn.insert(turn.end(), more.begin(), more.end());
  const Request second = Sampled(turn, 20, 2);
  const Output b = run(second);
  // Every committed block of the first turn (68 of its 69 computed tokens).
  EXPECT_EQ(b.usage.cached_tokens, 68);
  const Output b_want = Unfreed(*l.model, second, 256);
  EXPECT_EQ(b.tokens, b_want.tokens);
  EXPECT_EQ(b.logprobs, b_want.logprobs);

  std::vector<int32_t> head(first.prompt.begin(), first.prompt.begin() + 20);
  const std::vector<int32_t> tail = RandomPrompt(rng, 15, n_vocab);
  head.insert(head.end(), tail.begin(), tail.end());
  const Request third = Sampled(head, 20, 3);
  const Output c = run(third);
  if (Groups(spec).first >= 0) {
    EXPECT_EQ(c.usage.cached_tokens, 0);
  }
  const Output c_want = Unfreed(*l.model, third, 256);
  EXPECT_EQ(c.tokens, c_want.tokens);
  EXPECT_EQ(c.logprobs, c_want.logprobs);
  EngineStats stats;
  core.FillStats(stats);
  for (int used : stats.group_blocks_used) EXPECT_EQ(used, 0);
}

// 16 requests at once (prompts of 10..40 tokens, pairs sharing 12, 20..50 new tokens) in pools
// too small for all of them: preemption happens, every step keeps the invariants, no block is
// leaked, and every answer equals its unfreed run.
TEST_P(KvWindowEngineTest, SixteenAtOnceUnderPreemptionLeakNothing) {
  Loaded l = LoadCase(GetParam());
  ASSERT_TRUE(l.model && l.tokenizer);
  const KvSpec spec = l.model->kv_spec();
  const int n_vocab = l.model->config().n_vocab;
  std::mt19937 rng(13);
  std::vector<Request> requests;
  for (int i = 0; i < 16; ++i) {
    std::vector<int32_t> prompt = RandomPrompt(rng, 10 + static_cast<int>(rng() % 31), n_vocab);
    if (i % 2 == 1) {
      std::copy(requests.back().prompt.begin(), requests.back().prompt.begin() + 10,
                prompt.begin());
    }
    requests.push_back(Sampled(prompt, 20 + static_cast<int>(rng() % 31), 10 + i));
  }
  EngineCore core(*l.model, *l.tokenizer, Options(true), Pools(spec, 48, 24), 0, nullptr);
  const std::vector<Output> outputs = testing::RunCoreChecked(core, requests);
  EngineStats stats;
  core.FillStats(stats);
  EXPECT_GT(stats.preemptions, 0u);
  EXPECT_EQ(stats.running + stats.waiting, 0);
  for (int used : stats.group_blocks_used) EXPECT_EQ(used, 0);
  for (size_t i = 0; i < requests.size(); ++i) {
    const Output want = Unfreed(*l.model, requests[i], 256);
    EXPECT_EQ(outputs[i].tokens, want.tokens) << "request " << i;
    EXPECT_EQ(outputs[i].logprobs, want.logprobs) << "request " << i;
  }
}

// Speculative decoding: drafts of the right answer, each right with probability 0.7, so rejected
// drafts truncate the window rows too; 8 requests at once, pinned sessions between their turns.
TEST_P(KvWindowEngineTest, DraftsAndSessionsKeepTheAnswerAndLeakNothing) {
  Loaded l = LoadCase(GetParam());
  ASSERT_TRUE(l.model && l.tokenizer);
  const KvSpec spec = l.model->kv_spec();
  const int n_vocab = l.model->config().n_vocab;
  std::mt19937 rng(21);
  std::vector<Request> requests;
  std::map<std::string, std::vector<int32_t>> reference;
  std::vector<Output> want;
  for (int i = 0; i < 8; ++i) {
    Request r = Sampled(RandomPrompt(rng, 12 + static_cast<int>(rng() % 20), n_vocab), 40, 30 + i);
    r.session_id = "s" + std::to_string(i % 4);
    want.push_back(Unfreed(*l.model, r, 256));
    std::vector<int32_t> all = r.prompt;
    all.insert(all.end(), want.back().tokens.begin(), want.back().tokens.end());
    reference[r.id] = all;
    requests.push_back(r);
  }
  EngineOptions options = Options(true);
  options.spec.proposer = std::make_shared<ReplayProposer>(reference, 0.7, n_vocab, 3);
  options.spec.max_tokens = 4;
  options.spec.batch_tokens = 64;
  EngineCore core(*l.model, *l.tokenizer, options, Pools(spec, 160, 64), 0, nullptr);
  const std::vector<Output> outputs = testing::RunCoreChecked(core, requests);
  EngineStats stats;
  core.FillStats(stats);
  EXPECT_GT(stats.spec_draft_tokens, stats.spec_accepted_tokens);
  EXPECT_GT(stats.spec_accepted_tokens, 0u);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(outputs[i].tokens, want[i].tokens) << "request " << i;
    EXPECT_EQ(outputs[i].logprobs, want[i].logprobs) << "request " << i;
  }
  // The four sessions hold their last turns' blocks; released, nothing stays referenced.
  EXPECT_EQ(core.SessionIds().size(), 4u);
  for (const std::string& id : core.SessionIds()) EXPECT_TRUE(core.ReleaseSession(id));
  ASSERT_TRUE(core.CheckBlockInvariants().ok()) << core.CheckBlockInvariants().message();
  core.FillStats(stats);
  for (int used : stats.group_blocks_used) EXPECT_EQ(used, 0);
}

INSTANTIATE_TEST_SUITE_P(Files, KvWindowEngineTest,
                         ::testing::Values("gemma2-f32", "gemma3-f32", "llama-window",
                                           "gemma4-tiny", "gpt-oss-tiny"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// Engine::Create sizes each group's pool by its need: a full group n_ctx / block_size blocks per
// sequence, a window group BlocksPerSequence per sequence plus the prefill chunks' blocks; a
// byte budget is split between them by that need in bytes.
TEST(KvWindowPools, EngineSizesEachGroupByItsNeed) {
  Loaded l = LoadCase("gemma2-f32");
  ASSERT_TRUE(l.model && l.tokenizer);
  EngineOptions options{
      .n_threads = 1, .n_ctx = 256, .block_size = 16, .max_num_seqs = 4, .max_batched_tokens = 64};
  auto engine = Engine::Create(*l.model, *l.tokenizer, options);
  ASSERT_TRUE(engine.ok()) << engine.message();
  // Full: 16 blocks x 4; window 8: (ceil(7 / 16) + 1) x 4 + 64 / 16 + 4.
  EXPECT_EQ((*engine)->Stats().group_blocks_total, (std::vector<int>{64, 16}));
  EXPECT_EQ((*engine)->Stats().kv_bytes, 80u * 16 * 1024);  // f32: 1024 bytes/token per group
  options.kv_memory_bytes = 1 << 20;
  auto budget = Engine::Create(*l.model, *l.tokenizer, options);
  ASSERT_TRUE(budget.ok()) << budget.message();
  // 2^20 bytes x 64 / 80 and x 16 / 80, in blocks of 16 KiB.
  EXPECT_EQ((*budget)->Stats().group_blocks_total, (std::vector<int>{51, 12}));
  EXPECT_LE((*budget)->Stats().kv_bytes, uint64_t{1} << 20);
}

// The disk tier keeps one file per group and block: a model with a window group runs with it,
// and a restart over the same directory (a new core) answers a prompt from disk, its cached
// tokens the blocks the full group and the last window read back, the same tokens and logprobs
// as the unfreed run, nothing left referenced.
TEST(KvWindowDiskTier, AModelWithSeveralGroupsResumesFromDiskAfterARestart) {
  Loaded l = LoadCase("gemma2-f32");
  ASSERT_TRUE(l.model && l.tokenizer);
  EngineOptions options = Options(true);
  options.kv_disk_dir = testing::TempDir() + "/kv-window-disk";
  std::filesystem::remove_all(options.kv_disk_dir);
  std::mt19937 rng(2);
  const Request r = Sampled(RandomPrompt(rng, 60, l.model->config().n_vocab), 10, 0);
  const testing::StreamOutput want = Unfreed(*l.model, r, 256);
  for (int run = 0; run < 2; ++run) {
    EngineCore core(*l.model, *l.tokenizer, options, Pools(l.model->kv_spec(), 64, 16), 0, nullptr);
    const testing::StreamOutput got = testing::RunCoreChecked(core, {r})[0];
    EXPECT_EQ(got.tokens, want.tokens) << "run " << run;
    EXPECT_EQ(got.logprobs, want.logprobs) << "run " << run;
    EngineStats stats;
    core.FillStats(stats);
    EXPECT_TRUE(stats.kv_disk);
    for (int used : stats.group_blocks_used) EXPECT_EQ(used, 0) << "run " << run;
    if (run == 1) {
      EXPECT_EQ(got.usage.cached_tokens, 56);  // the 14 full blocks before the last token
      EXPECT_EQ(stats.kv_disk_restored_tokens, 56u);
      EXPECT_GT(stats.kv_disk_hits, 0u);
    }
  }
}

}  // namespace
}  // namespace kvserve
