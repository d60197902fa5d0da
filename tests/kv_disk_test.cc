// The KV disk tier through the serving engine and the server (`--kv-disk`): a prompt served by
// one engine is served by the next one over the same directory (a restart) with its prefix read
// back from disk, the same tokens and log-probabilities; a corrupted or truncated block file is
// refused and recomputed (same output); an unusable directory or a tiny size limit never fails a
// request. The real stories260K model and a real `kvserve serve` process.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/kv_disk_setup.h"
#include "model/model.h"
#include "support/cli.h"
#include "support/fake_model.h"
#include "support/paths.h"
#include "support/serve_process.h"
#include "support/test_backend.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {
namespace {

namespace fs = std::filesystem;

// An empty directory of this test process (emptied when a repeated run finds it).
std::string FreshDir(const std::string& name) {
  const std::string dir = testing::TempDir() + "/" + name;
  fs::remove_all(dir);
  return dir;
}

struct Output {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  Usage usage;
  FinishReason finish_reason = FinishReason::kNone;
};

class KvDiskEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto model = LoadModel(testing::ModelPath("stories260K.gguf"), TestBackend());
    ASSERT_TRUE(model.ok()) << model.message();
    model_ = std::move(model).value().release();
    auto tokenizer = Tokenizer::FromGguf(model_->file());
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.message();
    tokenizer_ = std::move(tokenizer).value().release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete model_;
  }

  static EngineOptions Options(const std::string& dir) {
    EngineOptions o;
    o.n_threads = 1;
    o.block_size = 16;
    o.max_num_seqs = 4;
    o.kv_disk_dir = dir;
    return o;
  }

  static std::vector<int32_t> Prompt() {
    return tokenizer_->Encode(
        "Once upon a time there was a little girl named Lily. She loved to play outside in the "
        "park with her dog. One day she found a big red ball under a tree and",
        /*add_special=*/true, /*parse_special=*/false);
  }

  // One request through a fresh engine (created and destroyed here: a process's life).
  static Output Serve(const EngineOptions& options, const Request& request,
                      EngineStats* stats = nullptr) {
    auto engine = Engine::Create(*model_, *tokenizer_, options);
    EXPECT_TRUE(engine.ok()) << engine.message();
    Output out;
    if (!engine.ok()) return out;
    auto stream = (*engine)->Submit(request);
    EXPECT_TRUE(stream.ok()) << stream.message();
    if (!stream.ok()) return out;
    for (;;) {
      auto event = (*stream)->Next(std::chrono::seconds(60));
      EXPECT_TRUE(event.has_value());
      if (!event) break;
      if (event->kind == RequestEvent::Kind::kFinish) {
        out.usage = event->usage;
        out.finish_reason = event->finish_reason;
        break;
      }
      out.tokens.push_back(event->token);
      out.logprobs.push_back(event->logprob);
    }
    if (stats) *stats = (*engine)->Stats();
    return out;
  }

  static Request Greedy() {
    Request r;
    r.prompt = Prompt();
    r.max_tokens = 24;
    r.sampling.temperature = 0;
    return r;
  }
  static Request Seeded() {
    Request r = Greedy();
    r.sampling.temperature = 0.8f;
    r.sampling.seed = 1234;
    return r;
  }

  static std::vector<fs::path> BlockFiles(const std::string& dir) {
    std::vector<fs::path> out;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() == ".kvblock") out.push_back(entry.path());
    }
    return out;
  }

  static Model* model_;
  static Tokenizer* tokenizer_;
};

Model* KvDiskEngineTest::model_ = nullptr;
Tokenizer* KvDiskEngineTest::tokenizer_ = nullptr;

void ExpectSame(const Output& a, const Output& b) {
  EXPECT_EQ(a.tokens, b.tokens);
  ASSERT_EQ(a.logprobs.size(), b.logprobs.size());
  for (size_t i = 0; i < a.logprobs.size(); ++i) EXPECT_EQ(a.logprobs[i], b.logprobs[i]) << i;
  EXPECT_EQ(a.finish_reason, b.finish_reason);
}

TEST_F(KvDiskEngineTest, RestartedEngineReadsThePrefixBackWithTheSameOutput) {
  for (const Request& request : {Greedy(), Seeded()}) {
    const std::string dir = FreshDir("restart-" + std::to_string(request.sampling.seed));
    const int n_prompt = static_cast<int>(request.prompt.size());
    ASSERT_GE(n_prompt, 33) << "the prompt must span two full blocks";
    const int full_blocks = (n_prompt - 1) / 16;

    EngineOptions no_disk = Options("");
    const Output plain = Serve(no_disk, request);
    ASSERT_EQ(plain.tokens.size(), 24u);

    EngineStats first_stats;
    const Output first = Serve(Options(dir), request, &first_stats);
    ExpectSame(first, plain);
    EXPECT_EQ(first.usage.cached_tokens, 0);
    EXPECT_TRUE(first_stats.kv_disk);
    EXPECT_EQ(first_stats.kv_disk_hits, 0u);
    // Written at the first engine's shutdown: every full block of prompt + generated tokens.
    const size_t files = BlockFiles(dir).size();
    EXPECT_GE(files, static_cast<size_t>(full_blocks));

    EngineStats second_stats;
    const Output second = Serve(Options(dir), request, &second_stats);
    ExpectSame(second, plain);
    EXPECT_EQ(second.usage.cached_tokens, full_blocks * 16);
    EXPECT_EQ(second_stats.kv_disk_hits, static_cast<uint64_t>(full_blocks));
    EXPECT_EQ(second_stats.kv_disk_restored_tokens, static_cast<uint64_t>(full_blocks * 16));
    EXPECT_EQ(
        second_stats.kv_disk_read_bytes,
        second_stats.kv_disk_hits * KvCache::BytesPerBlock(model_->kv_spec(), KvType::kF32, 16));
    EXPECT_EQ(second_stats.prompt_tokens, static_cast<uint64_t>(n_prompt - full_blocks * 16));
    EXPECT_EQ(second_stats.kv_disk_rejected, 0u);
    EXPECT_GT(second_stats.kv_disk_bytes_used, 0u);
  }
}

// Within one engine: a pool of 6 blocks, so a second prompt evicts the first one's prefix (written
// then); the first prompt again reads it back from disk.
TEST_F(KvDiskEngineTest, EvictedBlocksAreReadBackInTheSameEngine) {
  const std::string dir = FreshDir("evicted");
  EngineOptions o = Options(dir);
  o.max_num_seqs = 1;
  o.kv_memory_bytes = 6 * KvCache::BytesPerBlock(model_->kv_spec(), KvType::kF32, 16);
  const Request a = Greedy();
  Request b = Greedy();
  b.prompt = tokenizer_->Encode(
      "The little dog ran to the big tree in the park and barked at the cat. The cat jumped "
      "down and ran away, and the dog was happy and went home to sleep",
      /*add_special=*/true, /*parse_special=*/false);
  const int full_blocks = (static_cast<int>(a.prompt.size()) - 1) / 16;
  const Output plain = Serve(Options(""), a);
  auto engine = Engine::Create(*model_, *tokenizer_, o);
  ASSERT_TRUE(engine.ok()) << engine.message();
  ASSERT_EQ((*engine)->Stats().blocks_total, 6);
  auto run = [&](const Request& r) {
    Output out;
    auto stream = (*engine)->Submit(r);
    EXPECT_TRUE(stream.ok()) << stream.message();
    if (!stream.ok()) return out;
    for (;;) {
      auto event = (*stream)->Next(std::chrono::seconds(60));
      EXPECT_TRUE(event.has_value());
      if (!event) break;
      if (event->kind == RequestEvent::Kind::kFinish) {
        out.usage = event->usage;
        out.finish_reason = event->finish_reason;
        break;
      }
      out.tokens.push_back(event->token);
      out.logprobs.push_back(event->logprob);
    }
    return out;
  };
  ExpectSame(run(a), plain);
  run(b);
  const EngineStats after_b = (*engine)->Stats();
  EXPECT_GE(after_b.kv_disk_writes, static_cast<uint64_t>(full_blocks));
  const Output again = run(a);
  ExpectSame(again, plain);
  EXPECT_EQ(again.usage.cached_tokens, full_blocks * 16);
  const EngineStats after = (*engine)->Stats();
  EXPECT_GE(after.kv_disk_hits, static_cast<uint64_t>(full_blocks));
}

// A session's conversation across a restart: turn 1 (session_id set, its blocks pinned) in one
// engine; turn 2 (turn 1's prompt and answer, then more) in the next finds turn 1's computed full
// blocks on disk and answers as an engine that never stopped.
TEST_F(KvDiskEngineTest, ASessionsNextTurnAfterARestartReadsItsBlocksBack) {
  const std::string dir = FreshDir("session");
  Request turn1 = Greedy();
  turn1.session_id = "chat-1";
  const Output first = Serve(Options(dir), turn1);
  ASSERT_EQ(first.tokens.size(), 24u);
  Request turn2 = turn1;
  turn2.prompt.insert(turn2.prompt.end(), first.tokens.begin(), first.tokens.end());
  const std::vector<int32_t> more = tokenizer_->Encode(" Then they went home.", false, false);
  turn2.prompt.insert(turn2.prompt.end(), more.begin(), more.end());
  // K/V was stored for every token of turn 1 but its last sampled one.
  const int stored = static_cast<int>(turn1.prompt.size() + first.tokens.size()) - 1;
  const int expect_cached = stored / 16 * 16;
  ASSERT_GT(expect_cached, (static_cast<int>(turn1.prompt.size()) - 1) / 16 * 16);
  const Output plain = Serve(Options(""), turn2);
  EngineStats stats;
  const Output second = Serve(Options(dir), turn2, &stats);
  ExpectSame(second, plain);
  EXPECT_EQ(second.usage.cached_tokens, expect_cached);
  EXPECT_EQ(stats.kv_disk_hits, static_cast<uint64_t>(expect_cached / 16));
}

// Two engines alive at once over one directory (two servers sharing it), each serving the same
// prompts, written by both at shutdown: a third finds only whole, valid files and reads both
// prompts back.
TEST_F(KvDiskEngineTest, TwoEnginesSharingADirectoryLeaveItValid) {
  const std::string dir = FreshDir("shared");
  Request a = Greedy();
  Request b = Greedy();
  b.prompt = tokenizer_->Encode(
      "The little dog ran to the big tree in the park and barked at the cat. The cat jumped "
      "down and ran away, and the dog was happy and went home to sleep",
      /*add_special=*/true, /*parse_special=*/false);
  const Output plain_a = Serve(Options(""), a);
  const Output plain_b = Serve(Options(""), b);
  {
    auto one = Engine::Create(*model_, *tokenizer_, Options(dir));
    auto two = Engine::Create(*model_, *tokenizer_, Options(dir));
    ASSERT_TRUE(one.ok() && two.ok());
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (Engine* engine : {one->get(), two->get()}) {
      for (const Request* r : {&a, &b}) {
        Request copy = *r;
        copy.id = "";
        auto stream = engine->Submit(copy);
        ASSERT_TRUE(stream.ok()) << stream.message();
        streams.push_back(*stream);
      }
    }
    for (auto& stream : streams) {
      for (;;) {
        auto event = stream->Next(std::chrono::seconds(60));
        ASSERT_TRUE(event.has_value());
        if (event->kind == RequestEvent::Kind::kFinish) break;
      }
    }
    std::thread close_one([&] { one->reset(); });
    two->reset();
    close_one.join();
  }
  for (const fs::path& file : BlockFiles(dir)) {
    EXPECT_EQ(fs::file_size(file), fs::file_size(BlockFiles(dir).front())) << file;
  }
  EngineStats stats;
  const Output again_a = Serve(Options(dir), a, &stats);
  ExpectSame(again_a, plain_a);
  EXPECT_EQ(again_a.usage.cached_tokens, (static_cast<int>(a.prompt.size()) - 1) / 16 * 16);
  const Output again_b = Serve(Options(dir), b, &stats);
  ExpectSame(again_b, plain_b);
  EXPECT_EQ(again_b.usage.cached_tokens, (static_cast<int>(b.prompt.size()) - 1) / 16 * 16);
  EXPECT_EQ(stats.kv_disk_rejected, 0u);
}

TEST_F(KvDiskEngineTest, AnotherBlockSizeOrKvTypeFindsNothing) {
  const std::string dir = FreshDir("foreign");
  const Request request = Greedy();
  Serve(Options(dir), request);
  EngineOptions other_type = Options(dir);
  other_type.kv_type = KvType::kF16;
  EngineStats stats;
  const Output f16 = Serve(other_type, request, &stats);
  EXPECT_EQ(f16.usage.cached_tokens, 0);
  EXPECT_EQ(stats.kv_disk_hits, 0u);
  EngineOptions other_block = Options(dir);
  other_block.block_size = 8;
  const Output bs8 = Serve(other_block, request, &stats);
  EXPECT_EQ(bs8.usage.cached_tokens, 0);
  EXPECT_EQ(stats.kv_disk_hits, 0u);
  EngineOptions other_model = Options(dir);
  other_model.kv_disk_model_id = "another model";
  const Output other = Serve(other_model, request, &stats);
  EXPECT_EQ(other.usage.cached_tokens, 0);
  EXPECT_EQ(stats.kv_disk_hits, 0u);
}

TEST_F(KvDiskEngineTest, CorruptedAndTruncatedFilesAreRecomputedWithTheSameOutput) {
  const Request request = Greedy();
  const Output plain = Serve(Options(""), request);
  for (const bool truncate : {false, true}) {
    const std::string dir = FreshDir(truncate ? "truncated" : "corrupted");
    Serve(Options(dir), request);
    const std::vector<fs::path> files = BlockFiles(dir);
    ASSERT_FALSE(files.empty());
    for (const fs::path& file : files) {
      if (truncate) {
        fs::resize_file(file, fs::file_size(file) / 2);
      } else {
        std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(static_cast<std::streamoff>(fs::file_size(file) - 5));
        f.put('\x5a');
      }
    }
    EngineStats stats;
    const Output again = Serve(Options(dir), request, &stats);
    ExpectSame(again, plain);
    EXPECT_EQ(again.usage.cached_tokens, 0);
    EXPECT_EQ(stats.kv_disk_hits, 0u);
    EXPECT_GE(stats.kv_disk_rejected, 1u);
    EXPECT_GE(stats.kv_disk_misses, 1u);
  }
}

TEST_F(KvDiskEngineTest, UnusableDirectoryOrTinyLimitNeverFailsARequest) {
  const Request request = Greedy();
  const Output plain = Serve(Options(""), request);
  // A path under a regular file cannot be a directory: the tier is off, the request is served.
  const std::string file = FreshDir("not-a-dir");
  std::ofstream(file) << "x";
  EngineStats stats;
  ExpectSame(Serve(Options(file + "/kv"), request, &stats), plain);
  EXPECT_FALSE(stats.kv_disk);
  // A limit below one block: refused at open, served without the tier.
  EngineOptions tiny = Options(FreshDir("tiny"));
  tiny.kv_disk_bytes = 100;
  ExpectSame(Serve(tiny, request, &stats), plain);
  EXPECT_FALSE(stats.kv_disk);
  // A directory made read-only after opening (writes fail at shutdown): no request fails, the
  // next engine finds nothing. (Root ignores permissions; then the files are written.)
  const std::string ro = FreshDir("read-only");
  fs::create_directories(ro);
  auto engine = Engine::Create(*model_, *tokenizer_, Options(ro));
  ASSERT_TRUE(engine.ok()) << engine.message();
  chmod(ro.c_str(), 0555);
  auto stream = (*engine)->Submit(request);
  ASSERT_TRUE(stream.ok());
  for (;;) {
    auto event = (*stream)->Next(std::chrono::seconds(60));
    ASSERT_TRUE(event.has_value());
    if (event->kind == RequestEvent::Kind::kFinish) {
      EXPECT_EQ(event->finish_reason, plain.finish_reason);
      break;
    }
  }
  engine->reset();
  chmod(ro.c_str(), 0755);
  ExpectSame(Serve(Options(ro), request), plain);
}

// A real `kvserve serve --kv-disk`, stopped and started again over the same directory: the same
// completion, its prompt tokens reported cached, the disk tier's metrics; then every block file
// corrupted and a third server recomputes the same completion.
// Whether an engine can have a disk tier is said with a reason: not without the prefix cache, not
// for a cache kind that is not disk_storable; stories260K with the prefix cache opens one, and
// --kv-disk-model-id replaces the file's identity; a model of several KV layer groups (Gemma 3's
// sliding-window and global layers) opens one with a block size per group and its layout in the
// fingerprint.
TEST(KvDiskSetupTest, OpensWhereEveryGroupIsStorableAndSaysWhyNotOtherwise) {
  auto stories = LoadModel(testing::ModelPath("stories260K.gguf"), TestBackend());
  ASSERT_TRUE(stories.ok()) << stories.message();
  EngineOptions options{.kv_disk_dir = FreshDir("setup")};
  auto tier = OpenEngineDiskTier(options, **stories);
  ASSERT_TRUE(tier.ok()) << tier.message();
  EXPECT_NE(DiskModelIdentity(options, (*stories)->file()).find("stories260K.gguf|"),
            std::string::npos);
  options.kv_disk_model_id = "my-model";
  EXPECT_EQ(DiskModelIdentity(options, (*stories)->file()), "my-model");

  options.prefix_caching = false;
  auto no_prefix = OpenEngineDiskTier(options, **stories);
  ASSERT_FALSE(no_prefix.ok());
  EXPECT_NE(no_prefix.message().find("prefix cache"), std::string::npos) << no_prefix.message();

  auto gemma = LoadModel(testing::ModelPath("arch/gemma3-f32.gguf"), TestBackend());
  ASSERT_TRUE(gemma.ok()) << gemma.message();
  const int n_groups = static_cast<int>((*gemma)->kv_spec().groups.size());
  ASSERT_GT(n_groups, 1);
  options.prefix_caching = true;
  auto groups = OpenEngineDiskTier(options, **gemma);
  ASSERT_TRUE(groups.ok()) << groups.message();
  EXPECT_EQ((*groups)->n_groups(), n_groups);
  EXPECT_NE(DiskGroupLayout((*gemma)->kv_spec()).find("sliding window"), std::string::npos);
  EXPECT_EQ(DiskGroupLayout((*stories)->kv_spec()), "");  // one group: the fingerprint as before

  // A cache kind that is not per position (as a recurrent state will be) keeps the tier off.
  class StateKind final : public KvCacheKind {
   public:
    std::string Describe() const override { return "recurrent state"; }
    bool keeps_every_block() const override { return false; }
    int FirstLiveBlock(int next_position, int block_size) const override { return 0; }
    int BlocksPerSequence(int n_tokens, int block_size) const override { return 1; }
    int attention_window() const override { return 0; }
    bool disk_storable() const override { return false; }
  };
  auto state = testing::FakeModel::Create(TestBackend(), {.kind = std::make_shared<StateKind>()});
  auto refused = OpenEngineDiskTier(options, *state);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("recurrent state layers keep state the disk tier cannot store"),
            std::string::npos)
      << refused.message();
  auto full = testing::FakeModel::Create(TestBackend());
  EXPECT_TRUE(OpenEngineDiskTier(options, *full).ok());
}

TEST(KvDiskServerTest, RestartedServerServesThePromptFromDisk) {
  using testing::Get;
  using testing::Metric;
  using testing::Post;
  const std::string dir = FreshDir("serve-disk");
  const nlohmann::json body = {
      {"prompt",
       "Once upon a time there was a little girl named Lily. She loved to play outside in the "
       "park with her dog. One day she found a big red ball under a tree and"},
      {"max_tokens", 20},
      {"temperature", 0}};
  const std::vector<std::string> flags = {"--kv-disk", dir, "--kv-disk-size", "4MiB"};

  auto first = testing::ServeProcess::Start(flags);
  ASSERT_NE(first, nullptr);
  auto client = first->Client();
  const testing::Reply a = Post(*client, "/v1/completions", body);
  ASSERT_EQ(a.status, 200) << a.text;
  EXPECT_EQ(a.body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  const std::string metrics_a = Get(*client, "/metrics").text;
  EXPECT_EQ(Metric(metrics_a, "kvserve:kv_disk_hits_total"), 0) << metrics_a;
  client.reset();
  ASSERT_EQ(first->Terminate(), 0) << first->log();

  auto second = testing::ServeProcess::Start(flags);
  ASSERT_NE(second, nullptr);
  client = second->Client();
  const testing::Reply b = Post(*client, "/v1/completions", body);
  ASSERT_EQ(b.status, 200) << b.text;
  EXPECT_EQ(b.body["choices"][0]["text"], a.body["choices"][0]["text"]);
  const int prompt_tokens = b.body["usage"]["prompt_tokens"];
  const int cached = b.body["usage"]["prompt_tokens_details"]["cached_tokens"];
  EXPECT_EQ(cached, (prompt_tokens - 1) / 16 * 16);
  EXPECT_GT(cached, 0);
  const std::string metrics_b = Get(*client, "/metrics").text;
  EXPECT_EQ(Metric(metrics_b, "kvserve:kv_disk_hits_total"), cached / 16) << metrics_b;
  EXPECT_EQ(Metric(metrics_b, "kvserve:kv_disk_reads_total"), cached / 16);
  EXPECT_GT(Metric(metrics_b, "kvserve:kv_disk_read_bytes_total"), 0);
  EXPECT_GT(Metric(metrics_b, "kvserve:kv_disk_bytes_used"), 0);
  EXPECT_EQ(Metric(metrics_b, "kvserve:kv_disk_writes_total"), 0);
  EXPECT_NE(Metric(metrics_b, "kvserve:kv_disk_misses_total"), -1);
  EXPECT_NE(Metric(metrics_b, "kvserve:kv_disk_write_bytes_total"), -1);
  client.reset();
  ASSERT_EQ(second->Terminate(), 0) << second->log();

  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".kvblock") continue;
    std::fstream f(entry.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(entry.file_size() - 3));
    f.put('\x11');
  }
  auto third = testing::ServeProcess::Start(flags);
  ASSERT_NE(third, nullptr);
  client = third->Client();
  const testing::Reply c = Post(*client, "/v1/completions", body);
  ASSERT_EQ(c.status, 200) << c.text;
  EXPECT_EQ(c.body["choices"][0]["text"], a.body["choices"][0]["text"]);
  EXPECT_EQ(c.body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  const std::string metrics_c = Get(*client, "/metrics").text;
  EXPECT_EQ(Metric(metrics_c, "kvserve:kv_disk_hits_total"), 0);
  EXPECT_GE(Metric(metrics_c, "kvserve:kv_disk_rejected_total"), 1);
  client.reset();
  EXPECT_EQ(third->Terminate(), 0) << third->log();
}

// `kvserve run --kv-disk`: the second run of a prompt prints the same text; size flags checked.
TEST(KvDiskCliTest, RunTwiceGivesTheSameTextAndBadFlagsAreRefused) {
  const std::string dir = FreshDir("cli-disk");
  const std::string model = testing::ModelPath("stories260K.gguf");
  const std::string run = "run -m " + model +
                          " -t 1 -n 16 --temp 0 --output-format json -p 'Once upon a time there "
                          "was a little girl named Lily. She loved to play outside in the park' "
                          "--kv-disk " +
                          dir + " --kv-disk-size 8MiB";
  std::string out1, out2, err;
  ASSERT_EQ(testing::RunKvserve(run, &out1, &err), 0) << err;
  ASSERT_EQ(testing::RunKvserve(run, &out2, &err), 0) << err;
  const auto a = nlohmann::json::parse(out1, nullptr, false);
  const auto b = nlohmann::json::parse(out2, nullptr, false);
  ASSERT_FALSE(a.is_discarded()) << out1;
  ASSERT_FALSE(b.is_discarded()) << out2;
  EXPECT_EQ(a["tokens"], b["tokens"]);
  EXPECT_EQ(a["text"], b["text"]);
  EXPECT_FALSE(fs::is_empty(dir));

  std::string out;
  EXPECT_EQ(testing::RunKvserve("run -m " + model + " -p hi --kv-disk-size 1MiB", &out, &err), 2);
  EXPECT_NE(err.find("--kv-disk-size needs --kv-disk DIR"), std::string::npos) << err;
  EXPECT_EQ(testing::RunKvserve(
                "run -m " + model + " -p hi --kv-disk " + dir + " --kv-disk-size 12XB", &out, &err),
            2);
  EXPECT_NE(err.find("--kv-disk-size"), std::string::npos) << err;
}

}  // namespace
}  // namespace kvserve
