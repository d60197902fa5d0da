// The web UI's KV block map, from the bottom up: BlockManager::Snapshot (states, LRU ranks,
// chain positions, hit counts), EngineCore::FillBlockMap (owners and their tables, driven step by
// step on this thread), Engine::SnapshotBlocks from other threads, KvMapJson's packing and tenant
// redaction, and the served routes (the page open, the map behind the key, --no-webui).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "engine/block_map.h"
#include "engine/engine.h"
#include "engine/engine_core.h"
#include "kv/block_manager.h"
#include "server/kv_map.h"
#include "server/webui_assets.h"
#include "server/webui_routes.h"
#include "support/fake_model.h"
#include "support/serve_process.h"
#include "support/test_backend.h"

namespace kvserve {
namespace {

using nlohmann::json;
using State = BlockSnapshot::State;

std::vector<int32_t> Tokens(int n, int32_t start) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = start + i;
  return t;
}

int CountState(const std::vector<BlockSnapshot>& s, State state) {
  return static_cast<int>(
      std::count_if(s.begin(), s.end(), [&](const BlockSnapshot& b) { return b.state == state; }));
}

TEST(BlockSnapshot, StatesRefsChainsHitsAndLruRanks) {
  BlockManager m(8, 4, /*prefix_caching=*/true);
  const std::vector<int32_t> prompt = Tokens(13, 100);  // three full blocks and one token
  BlockTable a;
  ASSERT_TRUE(m.Grow(a, 13));
  m.Commit(a, prompt, 13, "");
  BlockTable b;
  ASSERT_EQ(m.AllocatePrefix(b, prompt, ""), 12);
  ASSERT_TRUE(m.Grow(b, 13));

  std::vector<BlockSnapshot> s = m.Snapshot();
  ASSERT_EQ(s.size(), 8u);
  for (int i = 0; i < 3; ++i) {
    const BlockSnapshot& shared = s[a.group(0)[i]];
    EXPECT_EQ(shared.state, State::kUsed);
    EXPECT_EQ(shared.refs, 2);
    EXPECT_EQ(shared.chain_index, i);
    EXPECT_EQ(shared.hits, 1u);
    EXPECT_EQ(shared.lru_rank, -1);
  }
  for (const BlockTable* t : {&a, &b}) {  // each one's partial last block: no key, its own
    const BlockSnapshot& last = s[t->group(0)[3]];
    EXPECT_EQ(last.state, State::kUsed);
    EXPECT_EQ(last.refs, 1);
    EXPECT_EQ(last.chain_index, -1);
    EXPECT_EQ(last.hits, 0u);
  }
  EXPECT_EQ(CountState(s, State::kFree), 3);

  // Freed: keyed blocks turn cached, tail first, so block 2 is evicted first (rank 0).
  m.Free(a);
  m.Free(b);
  s = m.Snapshot();
  const BlockManagerStats stats = m.Stats();
  EXPECT_EQ(CountState(s, State::kCached), stats.cached);
  EXPECT_EQ(CountState(s, State::kFree), stats.free);
  EXPECT_EQ(CountState(s, State::kUsed), 0);
  std::vector<int32_t> chain;
  for (int32_t id = 0; id < 8; ++id) {
    if (s[id].state == State::kCached) chain.push_back(id);
  }
  ASSERT_EQ(chain.size(), 3u);
  std::sort(chain.begin(), chain.end(),
            [&](int32_t x, int32_t y) { return s[x].lru_rank < s[y].lru_rank; });
  EXPECT_EQ(s[chain[0]].lru_rank, 0);
  EXPECT_EQ(s[chain[0]].chain_index, 2);
  EXPECT_EQ(s[chain[2]].chain_index, 0);
  EXPECT_EQ(s[chain[2]].hits, 1u);

  // A reuse counts a hit; eviction clears the block's key, chain and hits.
  BlockTable c;
  ASSERT_EQ(m.AllocatePrefix(c, prompt, ""), 12);
  EXPECT_EQ(m.Snapshot()[c.group(0)[0]].hits, 2u);
  m.Free(c);
  BlockTable fill;
  ASSERT_TRUE(m.Grow(fill, 8 * 4));  // takes the free blocks, then evicts every cached one
  s = m.Snapshot();
  for (const BlockSnapshot& block : s) {
    EXPECT_EQ(block.state, State::kUsed);
    EXPECT_EQ(block.chain_index, -1);
    EXPECT_EQ(block.hits, 0u);
  }
  m.Free(fill);
  EXPECT_EQ(CountState(m.Snapshot(), State::kFree), 8);
  EXPECT_TRUE(m.CheckInvariants().ok());
}

class BlockMapTest : public ::testing::Test {
 protected:
  void SetUp() override { tokenizer_ = testing::FakeTokenizer(); }
  static Request Greedy(std::vector<int32_t> prompt, int max_tokens) {
    Request r{.prompt = std::move(prompt), .max_tokens = max_tokens};
    r.sampling.temperature = 0.0f;
    r.ignore_eos = true;
    return r;
  }
  static std::vector<int32_t> Prompt(int length, int32_t salt) {
    std::vector<int32_t> p = {testing::kFakeBos};
    for (int i = 1; i < length; ++i) p.push_back(testing::kFakeFirstNormal + (i * 7 + salt) % 50);
    return p;
  }
  // Every use points at a block in use, and every used block has as many uses as references.
  static void ExpectWhole(const BlockMap& map) {
    for (const BlockUse& use : map.uses) {
      ASSERT_GE(use.block, 0);
      ASSERT_LT(use.block, static_cast<int>(map.blocks.size()));
      EXPECT_EQ(map.blocks[use.block].state, State::kUsed);
    }
    for (size_t b = 0; b < map.blocks.size(); ++b) {
      EXPECT_EQ(map.UsesOf(static_cast<int32_t>(b)), map.blocks[b].refs) << "block " << b;
    }
  }
  std::unique_ptr<testing::FakeModel> model_ = testing::FakeModel::Create(TestBackend());
  std::unique_ptr<Tokenizer> tokenizer_;
};

// Driven step by step: while two requests with a common prefix run, the map shows each one's
// table in order and the shared blocks with two uses; after they finish, the session keeps its
// blocks and the rest are cached-free.
TEST_F(BlockMapTest, OwnersAndUsesFollowTheRunningRequestsAndSessions) {
  EngineOptions options{.n_threads = 1, .n_ctx = 128, .block_size = 4};
  EngineCore core(*model_, *tokenizer_, options, {64}, 0, nullptr);
  Request a = Greedy(Prompt(17, 1), 6);
  a.id = "a";
  a.cache_salt = "t/";
  a.session_id = "t/conversation";
  core.Add(a, std::make_shared<RequestStream>());
  ASSERT_TRUE(core.Step());              // a's prompt is computed and its full blocks registered
  Request b = Greedy(Prompt(17, 1), 6);  // a's first four blocks, then its own
  b.prompt[16] = a.prompt[16] == 10 ? 11 : 10;
  b.id = "b";
  b.cache_salt = "t/";
  core.Add(b, std::make_shared<RequestStream>());
  ASSERT_TRUE(core.Step());

  BlockMap map;
  core.FillBlockMap(map);
  EXPECT_EQ(map.block_size, 4);
  ASSERT_EQ(map.blocks.size(), 64u);
  ASSERT_EQ(map.owners.size(), 2u);
  EXPECT_EQ(map.owners[0].id, "a");
  EXPECT_EQ(map.owners[0].session_id, "t/conversation");
  EXPECT_EQ(map.owners[0].cache_salt, "t/");
  EXPECT_EQ(map.owners[0].kind, BlockOwner::Kind::kRequest);
  EXPECT_EQ(map.owners[1].id, "b");
  EXPECT_GE(map.owners[0].n_tokens, 17);
  ExpectWhole(map);
  // b took a's four full prompt blocks from the prefix cache: logical 0..3 of both.
  std::map<int, std::vector<int32_t>> tables;
  for (const BlockUse& use : map.uses) {
    auto& table = tables[use.owner];
    EXPECT_EQ(use.logical, static_cast<int>(table.size()));
    table.push_back(use.block);
  }
  for (int l = 0; l < 4; ++l) {
    EXPECT_EQ(tables[0][l], tables[1][l]);
    EXPECT_EQ(map.blocks[tables[0][l]].refs, 2);
    EXPECT_EQ(map.blocks[tables[0][l]].chain_index, l);
    EXPECT_EQ(map.blocks[tables[0][l]].hits, 1u);
  }
  EXPECT_EQ(map.owners[0].n_blocks, static_cast<int>(tables[0].size()));

  for (int i = 0; i < 20 && core.Step(); ++i) {
  }
  BlockMap after;
  core.FillBlockMap(after);
  ASSERT_EQ(after.owners.size(), 1u);
  EXPECT_EQ(after.owners[0].kind, BlockOwner::Kind::kSession);
  EXPECT_EQ(after.owners[0].id, "t/conversation");
  EXPECT_EQ(after.owners[0].n_tokens, after.owners[0].n_blocks * 4);
  ExpectWhole(after);
  EngineStats stats;
  core.FillStats(stats);
  EXPECT_EQ(CountState(after.blocks, State::kUsed), stats.blocks_used);
  EXPECT_EQ(CountState(after.blocks, State::kCached), stats.blocks_cached);
  EXPECT_EQ(stats.blocks_used, after.owners[0].n_blocks);
  EXPECT_GT(stats.blocks_cached, 0);
}

// Many threads ask for maps while requests run; each map is whole and its stats agree with its
// blocks. When idle, the map's stats are Engine::Stats().
TEST_F(BlockMapTest, SnapshotsFromManyThreadsAreConsistent) {
  auto engine = Engine::Create(*model_, *tokenizer_,
                               {.n_threads = 1, .n_ctx = 128, .block_size = 4, .max_num_seqs = 4});
  ASSERT_TRUE(engine.ok()) << engine.message();
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 8; ++i) {
    Request r = Greedy(Prompt(10 + i, i % 2), 40);
    if (i == 0) r.session_id = "t/s";
    auto stream = (*engine)->Submit(r);
    ASSERT_TRUE(stream.ok()) << stream.message();
    streams.push_back(*stream);
  }
  std::atomic<int> maps{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        std::shared_ptr<const BlockMap> map = (*engine)->SnapshotBlocks(std::chrono::seconds(10));
        ASSERT_NE(map, nullptr);
        ExpectWhole(*map);
        EXPECT_EQ(CountState(map->blocks, State::kUsed), map->stats.blocks_used);
        EXPECT_EQ(CountState(map->blocks, State::kCached), map->stats.blocks_cached);
        EXPECT_EQ(CountState(map->blocks, State::kFree), map->stats.blocks_free);
        ++maps;
      }
    });
  }
  for (auto& stream : streams) {
    for (;;) {
      auto event = stream->Next(std::chrono::seconds(10));
      ASSERT_TRUE(event.has_value());
      if (event->kind == RequestEvent::Kind::kFinish) break;
    }
  }
  for (auto& reader : readers) reader.join();
  EXPECT_EQ(maps.load(), 60);
  // Idle now (the finishes were pushed before the stats were published; wait for the engine to
  // publish them).
  std::shared_ptr<const BlockMap> map;
  for (int i = 0; i < 100; ++i) {
    map = (*engine)->SnapshotBlocks(std::chrono::seconds(10));
    ASSERT_NE(map, nullptr);
    if (map->stats.running == 0 && map->stats.waiting == 0) break;
  }
  const EngineStats stats = (*engine)->Stats();
  EXPECT_EQ(map->stats.blocks_used, stats.blocks_used);
  EXPECT_EQ(map->stats.blocks_cached, stats.blocks_cached);
  EXPECT_EQ(map->stats.prefix_hits_tokens, stats.prefix_hits_tokens);
  EXPECT_EQ(map->stats.sessions, 1);
  ASSERT_EQ(map->owners.size(), 1u);
  EXPECT_EQ(map->owners[0].id, "t/s");
}

BlockMap TwoTenantMap() {
  BlockMap map;
  map.block_size = 4;
  map.blocks.resize(6);
  map.blocks[1] = {.state = State::kUsed, .refs = 2, .chain_index = 0, .hits = 3};
  map.blocks[2] = {.state = State::kUsed, .refs = 1};
  map.blocks[4] = {.state = State::kCached, .lru_rank = 0, .chain_index = 5, .hits = 1};
  BlockTable mine{.groups = {{1, 2}}};
  map.AddOwner({.kind = BlockOwner::Kind::kRequest,
                .id = "chatcmpl-1-0",
                .session_id = "aaaa/conv-7",
                .cache_salt = "aaaa/",
                .n_tokens = 6},
               mine);
  BlockTable theirs{.groups = {{1}}};
  map.AddOwner({.kind = BlockOwner::Kind::kSession,
                .id = "bbbb/their-secret-session",
                .session_id = "bbbb/their-secret-session",
                .n_tokens = 4},
               theirs);
  map.stats.blocks_total = 6;
  map.stats.blocks_used = 2;
  return map;
}

TEST(KvMapJson, PacksCellsAndUsesAndNamesOnlyTheCallersOwners) {
  const json j = KvMapJson(TwoTenantMap(), "aaaa");
  EXPECT_EQ(j["block_size"], 4);
  EXPECT_EQ(j["n_blocks"], 6);
  EXPECT_EQ(j["cells"], json::parse("[1,2,-1,0,3, 2,1,-1,-1,0, 4,0,0,5,1]"));
  EXPECT_EQ(j["uses"], json::parse("[1,0,0, 2,0,1, 1,1,0]"));
  EXPECT_EQ(j["stats"]["blocks_used"], 2);
  ASSERT_EQ(j["owners"].size(), 2u);
  EXPECT_EQ(j["owners"][0], json::parse(R"({"kind":"request","mine":true,"id":"chatcmpl-1-0",
                                            "session":"conv-7","tokens":6,"blocks":2})"));
  EXPECT_EQ(j["owners"][1],
            json::parse(R"({"kind":"session","mine":false,"tokens":4,"blocks":1})"));
  EXPECT_EQ(DumpJson(j).find("secret"), std::string::npos);
  EXPECT_EQ(DumpJson(j).find("bbbb"), std::string::npos);
  // The other tenant sees its session and not the request.
  const json other = KvMapJson(TwoTenantMap(), "bbbb");
  EXPECT_FALSE(other["owners"][0]["mine"]);
  EXPECT_FALSE(other["owners"][0].contains("id"));
  EXPECT_EQ(other["owners"][1]["session"], "their-secret-session");
  EXPECT_EQ(DumpJson(other).find("conv-7"), std::string::npos);
  // A tenant whose tag is a prefix of another's is still another tenant.
  EXPECT_FALSE(KvMapJson(TwoTenantMap(), "aa")["owners"][0]["mine"]);
}

TEST(WebUiAssets, ThePageAndItsFilesAreCompiledIn) {
  std::vector<std::string> names;
  for (const WebUiAsset& asset : WebUiAssets()) {
    names.emplace_back(asset.name);
    EXPECT_FALSE(asset.body.empty()) << asset.name;
  }
  for (const char* name : {"index.html", "app.js", "kvmap.js", "markdown.js", "style.css"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
  for (const WebUiAsset& asset : WebUiAssets()) {
    if (asset.name == "index.html") {
      EXPECT_EQ(asset.content_type, "text/html; charset=utf-8");
      EXPECT_NE(asset.body.find("/webui/app.js"), std::string_view::npos);
      // Offline: nothing is loaded from another origin.
      EXPECT_EQ(asset.body.find("http"), std::string_view::npos);
    }
  }
}

// Over HTTP: the page is open (with a strict content security policy), the map needs the key,
// its stream is rate-bounded, and --no-webui takes all of it away.
TEST(WebUiRoutes, ThePageIsOpenTheMapNeedsTheKeyNoWebuiRemovesBoth) {
  using testing::ServeProcess;
  auto server = ServeProcess::Start({"--api-key", "sk-map"});
  ASSERT_NE(server, nullptr);
  httplib::Client client("127.0.0.1", server->port());
  auto page = client.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("<title>kvserve</title>"), std::string::npos);
  EXPECT_NE(page->get_header_value("Content-Security-Policy").find("script-src 'self'"),
            std::string::npos);
  auto script = client.Get("/webui/app.js");
  ASSERT_TRUE(script);
  EXPECT_EQ(script->status, 200);
  EXPECT_EQ(script->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(client.Get("/webui/nothing.js")->status, 404);
  EXPECT_EQ(client.Get("/v1/kv-map")->status, 401);
  EXPECT_EQ(client.Get("/v1/kv-map/stream")->status, 401);
  httplib::Headers key = {{"Authorization", "Bearer sk-map"}};
  auto map = client.Get("/v1/kv-map", key);
  ASSERT_TRUE(map);
  ASSERT_EQ(map->status, 200) << map->body;
  const json j = json::parse(map->body);
  EXPECT_EQ(j["n_blocks"], j["stats"]["blocks_total"]);
  EXPECT_EQ(j["stats"]["blocks_free"], j["n_blocks"]);
  EXPECT_EQ(client.Get("/v1/kv-map/stream?interval_ms=10", key)->status, 400);
  EXPECT_EQ(client.Get("/v1/kv-map/stream?interval_ms=abc", key)->status, 400);
  // A stream's first event is a snapshot.
  std::string received;
  client.Get("/v1/kv-map/stream?interval_ms=100", key, [&](const char* data, size_t n) {
    received.append(data, n);
    return received.find("\n\n") == std::string::npos;  // stop after one event
  });
  EXPECT_EQ(received.rfind("event: kvmap\ndata: {", 0), 0u) << received;

  // kMaxKvMapStreams open streams (each has had its first event): one more gets 429.
  std::vector<std::unique_ptr<httplib::Client>> clients;
  std::vector<std::thread> streams;
  std::atomic<int> open{0};
  for (int i = 0; i < kMaxKvMapStreams; ++i) {
    clients.push_back(std::make_unique<httplib::Client>("127.0.0.1", server->port()));
    streams.emplace_back([&, c = clients.back().get()] {
      bool first = true;
      c->Get("/v1/kv-map/stream", key, [&](const char*, size_t) {
        if (first) ++open;
        first = false;
        return true;
      });
    });
  }
  for (int i = 0; i < 1000 && open.load() < kMaxKvMapStreams; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(open.load(), kMaxKvMapStreams);
  auto refused = client.Get("/v1/kv-map/stream", key);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 429);
  EXPECT_EQ(refused->get_header_value("Retry-After"), "5");
  for (auto& c : clients) c->stop();
  for (auto& t : streams) t.join();

  EXPECT_EQ(server->Terminate(), 0) << server->log();

  auto plain = ServeProcess::Start({"--no-webui"});
  ASSERT_NE(plain, nullptr);
  httplib::Client plain_client("127.0.0.1", plain->port());
  EXPECT_EQ(plain_client.Get("/")->status, 404);
  EXPECT_EQ(plain_client.Get("/webui/app.js")->status, 404);
  EXPECT_EQ(plain_client.Get("/v1/kv-map")->status, 404);
  EXPECT_EQ(plain_client.Get("/health")->status, 200);
}

}  // namespace
}  // namespace kvserve
