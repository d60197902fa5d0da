// The KV disk tier's pieces (kv/disk_tier.h, KvCache's block copies, BlockManager's eviction
// hook): blocks written atomically and read back by a second instance (a restart); corrupted,
// truncated, foreign and misplaced files detected and never used; the size limit kept by deleting
// the least recently used files; an unwritable directory and a too-small limit reported, never
// thrown; two instances sharing one directory; an encoder input's cross-attention blocks written
// on eviction and read back whole or not at all, apart from the decoder's prefix chain.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kv/block_manager.h"
#include "kv/cross_attention_kind.h"
#include "kv/disk_tier.h"
#include "kv/kv_cache.h"
#include "kv/kv_disk_spill.h"
#include "kv/kv_spec.h"
#include "support/paths.h"
#include "util/buffer.h"

namespace kvserve {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kBlockBytes = 1000;

Sha256Digest Key(int i) { return Sha256::Hash(&i, sizeof(i)); }

std::vector<uint8_t> Payload(int seed) {
  std::vector<uint8_t> bytes(kBlockBytes);
  std::mt19937 rng(seed);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  return bytes;
}

std::string FreshDir(const std::string& name) {
  const std::string dir = testing::TempDir() + "/" + name;
  fs::remove_all(dir);
  return dir;
}

std::unique_ptr<DiskTier> OpenOrDie(const std::string& dir, uint64_t max_bytes,
                                    const std::string& fingerprint = "model-a") {
  auto tier = DiskTier::Open(dir, max_bytes, fingerprint, kBlockBytes);
  EXPECT_TRUE(tier.ok()) << tier.message();
  return tier.ok() ? std::move(tier).value() : nullptr;
}

TEST(DiskTier, WritesAndReadsBackAcrossARestart) {
  const std::string dir = FreshDir("roundtrip");
  const std::vector<uint8_t> payload = Payload(1);
  {
    auto tier = OpenOrDie(dir, 1 << 20);
    ASSERT_NE(tier, nullptr);
    ASSERT_TRUE(tier->Put(Key(1), payload).ok());
    EXPECT_TRUE(tier->Contains(Key(1)));
    EXPECT_FALSE(tier->Contains(Key(2)));
    const DiskTierStats stats = tier->Stats();
    EXPECT_EQ(stats.writes, 1u);
    EXPECT_EQ(stats.write_bytes, kBlockBytes);
    EXPECT_EQ(stats.bytes_used, tier->file_bytes());
    EXPECT_EQ(fs::file_size(tier->PathOf(Key(1))), tier->file_bytes());
  }
  auto restarted = OpenOrDie(dir, 1 << 20);
  ASSERT_NE(restarted, nullptr);
  EXPECT_EQ(restarted->Stats().bytes_used, restarted->file_bytes());
  std::vector<uint8_t> out(kBlockBytes);
  ASSERT_TRUE(restarted->Get(Key(1), out));
  EXPECT_EQ(out, payload);
  EXPECT_FALSE(restarted->Get(Key(2), out));
  const DiskTierStats stats = restarted->Stats();
  EXPECT_EQ(stats.hits, 1u);
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.read_bytes, kBlockBytes);
  // No temporary file is left behind.
  for (const auto& entry : fs::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().extension(), ".kvblock") << entry.path();
  }
}

// Overwrites `n` bytes of `path` at `offset` (from the end when negative) with `byte`.
void Poke(const std::string& path, long offset, char byte) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(offset, offset < 0 ? std::ios::end : std::ios::beg);
  f.put(byte);
}

// A tier of two layer groups (an attention group and a recurrent-state group): one file per
// group and key, each of its group's size; group 0's file has the name a one-group tier always
// gave it (SHA-256 of the fingerprint's hash and the key), so older directories stay valid; a
// group's file put in another group's place is refused by its header.
TEST(DiskTier, KeepsOneFilePerGroupAndKey) {
  const std::string dir = FreshDir("groups");
  auto opened = DiskTier::Open(dir, 1 << 20, "hybrid", std::vector<uint64_t>{kBlockBytes, 40});
  ASSERT_TRUE(opened.ok()) << opened.message();
  DiskTier& tier = **opened;
  const std::vector<uint8_t> kv = Payload(1);
  const std::vector<uint8_t> state(40, 7);
  ASSERT_TRUE(tier.Put(Key(1), kv, 0).ok());
  EXPECT_FALSE(tier.Contains(Key(1), 1));
  EXPECT_FALSE(tier.Put(Key(1), kv, 1).ok());  // group 1's blocks are 40 bytes
  ASSERT_TRUE(tier.Put(Key(1), state, 1).ok());
  EXPECT_NE(tier.PathOf(Key(1), 0), tier.PathOf(Key(1), 1));
  EXPECT_EQ(tier.file_bytes(1), tier.file_bytes(0) - kBlockBytes + 40);
  const Sha256Digest fingerprint = Sha256::Hash("hybrid", 6);
  Sha256 name;
  name.Update(fingerprint.data(), fingerprint.size());
  name.Update(Key(1).data(), Key(1).size());
  EXPECT_EQ(fs::path(tier.PathOf(Key(1))).filename().string(),
            Sha256::Hex(name.Finish()) + ".kvblock");
  std::vector<uint8_t> kv_back(kBlockBytes), state_back(40);
  ASSERT_TRUE(tier.Get(Key(1), kv_back, 0));
  ASSERT_TRUE(tier.Get(Key(1), state_back, 1));
  EXPECT_EQ(kv_back, kv);
  EXPECT_EQ(state_back, state);
  // Two groups of one size: group 1's file copied over group 0's is refused (and deleted).
  auto same = DiskTier::Open(FreshDir("groups-same"), 1 << 20, "hybrid",
                             std::vector<uint64_t>{kBlockBytes, kBlockBytes});
  ASSERT_TRUE(same.ok()) << same.message();
  ASSERT_TRUE((*same)->Put(Key(2), Payload(2), 1).ok());
  fs::copy_file((*same)->PathOf(Key(2), 1), (*same)->PathOf(Key(2), 0));
  EXPECT_FALSE((*same)->Get(Key(2), kv_back, 0));
  EXPECT_EQ((*same)->Stats().rejected, 1u);
  EXPECT_TRUE((*same)->Get(Key(2), kv_back, 1));
  // The size limit must hold the largest group's block.
  auto small = DiskTier::Open(FreshDir("groups-small"), 200, "hybrid",
                              std::vector<uint64_t>{40, kBlockBytes});
  EXPECT_FALSE(small.ok());
}

TEST(DiskTier, CorruptedTruncatedForeignAndMisplacedFilesAreNeverUsed) {
  const std::string dir = FreshDir("invalid");
  auto tier = OpenOrDie(dir, 1 << 20);
  ASSERT_NE(tier, nullptr);
  std::vector<uint8_t> out(kBlockBytes);
  const std::vector<uint8_t> payload = Payload(2);

  // A flipped payload byte: the checksum fails; the file is deleted.
  ASSERT_TRUE(tier->Put(Key(1), payload).ok());
  Poke(tier->PathOf(Key(1)), -10, 0x5a ^ static_cast<char>(payload[kBlockBytes - 10]));
  EXPECT_FALSE(tier->Get(Key(1), out));
  EXPECT_FALSE(fs::exists(tier->PathOf(Key(1))));
  // A flipped header byte (the version).
  ASSERT_TRUE(tier->Put(Key(1), payload).ok());
  Poke(tier->PathOf(Key(1)), 8, 7);
  EXPECT_FALSE(tier->Get(Key(1), out));
  // Truncated.
  ASSERT_TRUE(tier->Put(Key(1), payload).ok());
  fs::resize_file(tier->PathOf(Key(1)), tier->file_bytes() - 1);
  EXPECT_FALSE(tier->Get(Key(1), out));
  // Empty.
  ASSERT_TRUE(tier->Put(Key(1), payload).ok());
  fs::resize_file(tier->PathOf(Key(1)), 0);
  EXPECT_FALSE(tier->Get(Key(1), out));
  // Another key's file under this key's name.
  ASSERT_TRUE(tier->Put(Key(2), payload).ok());
  fs::copy_file(tier->PathOf(Key(2)), tier->PathOf(Key(1)), fs::copy_options::overwrite_existing);
  EXPECT_FALSE(tier->Get(Key(1), out));
  EXPECT_TRUE(tier->Get(Key(2), out));
  EXPECT_EQ(out, payload);
  EXPECT_EQ(tier->Stats().rejected, 5u);

  // Another model (fingerprint): its files have other names, and one renamed to ours is refused.
  auto other = OpenOrDie(dir, 1 << 20, DiskTier::Fingerprint("model-b", "q8_0", 16));
  ASSERT_NE(other, nullptr);
  EXPECT_NE(other->PathOf(Key(2)), tier->PathOf(Key(2)));
  EXPECT_FALSE(other->Get(Key(2), out));
  fs::copy_file(tier->PathOf(Key(2)), other->PathOf(Key(2)));
  EXPECT_FALSE(other->Get(Key(2), out));
  EXPECT_EQ(other->Stats().rejected, 1u);
  EXPECT_TRUE(tier->Get(Key(2), out));  // ours is untouched
  // Another block size is another payload size: refused at Put, and a file of it is refused.
  auto wider = DiskTier::Open(dir, 1 << 20, "model-a", kBlockBytes + 1);
  ASSERT_TRUE(wider.ok());
  std::vector<uint8_t> wide_out(kBlockBytes + 1);
  EXPECT_FALSE((*wider)->Get(Key(2), wide_out));
  EXPECT_FALSE((*wider)->Put(Key(3), payload).ok());
}

TEST(DiskTier, SizeLimitDeletesTheLeastRecentlyUsedFiles) {
  const std::string dir = FreshDir("limit");
  auto probe = OpenOrDie(dir, 1 << 20);
  ASSERT_NE(probe, nullptr);
  const uint64_t file = probe->file_bytes();
  auto tier = OpenOrDie(dir, 3 * file + file / 2);  // room for three files
  ASSERT_NE(tier, nullptr);
  for (int i = 1; i <= 3; ++i) ASSERT_TRUE(tier->Put(Key(i), Payload(i)).ok());
  // Ages by hand (file times can tie within a test): 2 is the oldest, then 3, then 1.
  const auto now = fs::file_time_type::clock::now();
  fs::last_write_time(tier->PathOf(Key(1)), now - std::chrono::seconds(30));
  fs::last_write_time(tier->PathOf(Key(2)), now - std::chrono::seconds(300));
  fs::last_write_time(tier->PathOf(Key(3)), now - std::chrono::seconds(100));
  std::vector<uint8_t> out(kBlockBytes);
  ASSERT_TRUE(tier->Get(Key(3), out));  // a read makes 3 the most recently used
  ASSERT_TRUE(tier->Put(Key(4), Payload(4)).ok());
  EXPECT_FALSE(tier->Contains(Key(2)));
  EXPECT_TRUE(tier->Contains(Key(1)));
  EXPECT_TRUE(tier->Contains(Key(3)));
  EXPECT_TRUE(tier->Contains(Key(4)));
  ASSERT_TRUE(tier->Put(Key(5), Payload(5)).ok());
  EXPECT_FALSE(tier->Contains(Key(1)));
  EXPECT_TRUE(tier->Contains(Key(3)));
  const DiskTierStats stats = tier->Stats();
  EXPECT_EQ(stats.deleted_for_room, 2u);
  EXPECT_LE(stats.bytes_used, tier->max_bytes());
  uint64_t on_disk = 0;
  for (const auto& entry : fs::directory_iterator(dir)) on_disk += entry.file_size();
  EXPECT_EQ(on_disk, 3 * file);
}

TEST(DiskTier, FailuresAreReportedNotThrown) {
  // A limit below one block is refused at Open, naming both sizes.
  auto tiny = DiskTier::Open(FreshDir("tiny"), 100, "model-a", kBlockBytes);
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.message().find("100 bytes"), std::string::npos) << tiny.message();
  // A directory that cannot be created (a file is in the way).
  const std::string blocked = FreshDir("blocked");
  { std::ofstream(blocked) << "x"; }
  auto under_file = DiskTier::Open(blocked + "/sub", 1 << 20, "model-a", kBlockBytes);
  ASSERT_FALSE(under_file.ok());
  EXPECT_NE(under_file.message().find(blocked + "/sub"), std::string::npos) << under_file.message();
  // A directory that goes away (or becomes unwritable) after Open: Put says why, Get misses.
  const std::string dir = FreshDir("vanishing");
  auto tier = OpenOrDie(dir, 1 << 20);
  ASSERT_NE(tier, nullptr);
  ASSERT_TRUE(tier->Put(Key(1), Payload(1)).ok());
  fs::remove_all(dir);
  { std::ofstream(dir) << "not a directory"; }
  const Status put = tier->Put(Key(2), Payload(2));
  ASSERT_FALSE(put.ok());
  EXPECT_NE(put.message().find(dir), std::string::npos) << put.message();
  std::vector<uint8_t> out(kBlockBytes);
  EXPECT_FALSE(tier->Get(Key(1), out));
  EXPECT_EQ(tier->Stats().write_failures, 1u);
  fs::remove(dir);
}

// A writer killed mid-write leaves a temporary file: counted in the size while young (a live
// writer sharing the directory may own it), deleted by the next Open once older than a minute.
TEST(DiskTier, OrphanedTemporaryFilesAreCountedThenDeleted) {
  const std::string dir = FreshDir("orphans");
  fs::create_directories(dir);
  const std::string old_temp = dir + "/.tmp.123.456.0.abc.kvblock";
  const std::string young_temp = dir + "/.tmp.123.456.1.def.kvblock";
  { std::ofstream(old_temp) << std::string(700, 'x'); }
  { std::ofstream(young_temp) << std::string(300, 'y'); }
  fs::last_write_time(old_temp, fs::file_time_type::clock::now() - std::chrono::minutes(2));
  auto tier = OpenOrDie(dir, 1 << 20);
  ASSERT_NE(tier, nullptr);
  EXPECT_TRUE(tier->writable()) << tier->read_only_reason();
  EXPECT_FALSE(fs::exists(old_temp));
  EXPECT_TRUE(fs::exists(young_temp));
  EXPECT_EQ(tier->Stats().bytes_used, 300u);
  // The write probe of Open left nothing behind.
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) files += entry.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 1);
}

// Two instances (as two servers) writing the same and different keys at once: every file left is
// whole and valid, every Get returns either nothing or the right bytes.
TEST(DiskTier, TwoInstancesShareOneDirectory) {
  const std::string dir = FreshDir("shared");
  auto a = OpenOrDie(dir, 1 << 30);
  auto b = OpenOrDie(dir, 1 << 30);
  ASSERT_TRUE(a != nullptr && b != nullptr);
  auto work = [](DiskTier& tier, int offset) {
    std::vector<uint8_t> out(kBlockBytes);
    for (int round = 0; round < 20; ++round) {
      for (int i = 0; i < 8; ++i) {
        const int key = (i + offset + round) % 8;
        EXPECT_TRUE(tier.Put(Key(key), Payload(key)).ok());
        if (tier.Get(Key((key + 3) % 8), out)) {
          EXPECT_EQ(out, Payload((key + 3) % 8));
        }
      }
    }
  };
  std::thread ta(work, std::ref(*a), 0);
  std::thread tb(work, std::ref(*b), 5);
  ta.join();
  tb.join();
  EXPECT_EQ(a->Stats().rejected + b->Stats().rejected, 0u);
  std::vector<uint8_t> out(kBlockBytes);
  for (int key = 0; key < 8; ++key) {
    ASSERT_TRUE(a->Get(Key(key), out)) << key;
    EXPECT_EQ(out, Payload(key));
  }
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().extension(), ".kvblock") << entry.path();
    ++files;
  }
  EXPECT_EQ(files, 8);
}

// ---- The hooks the tier needs from kv/ ------------------------------------------------------

// A block's bytes of one group, each of its layers' K and V, out of one block and into another;
// the other group's block of the same id is untouched.
TEST(DiskTierHooks, KvCacheCopiesOneBlockOutAndIn) {
  KvSpec spec = KvSpec::Uniform(3, 2, 40);
  spec.groups.push_back(spec.groups[0]);
  spec.groups[0].layers = {0, 2};
  spec.groups[1].layers = {1};
  spec.groups[1].head_dim = 16;
  const KvFormat format = KvFormat::PerGroup({KvType::kQ8_0, KvType::kF16});
  HostAllocator allocator;
  KvCache cache(spec, format, 4, 6, allocator);
  std::mt19937 rng(7);
  for (int layer = 0; layer < cache.n_layers(); ++layer) {
    const KvLayerView& view = cache.layer(layer);
    for (size_t i = 0; i < view.slot_bytes() * 4 * 6; ++i) {
      view.k[i] = static_cast<uint8_t>(rng());
      view.v[i] = static_cast<uint8_t>(rng());
    }
  }
  EXPECT_EQ(KvCache::BytesPerBlock(spec, format, 4, 0) + KvCache::BytesPerBlock(spec, format, 4, 1),
            KvCache::BytesPerBlock(spec, format, 4));
  const uint64_t block_bytes = KvCache::BytesPerBlock(spec, format, 4, 0);
  std::vector<uint8_t> bytes(block_bytes);
  cache.CopyBlockOut(0, 2, bytes);
  cache.CopyBlockIn(0, 5, bytes);
  for (int layer = 0; layer < cache.n_layers(); ++layer) {
    const KvLayerView& view = cache.layer(layer);
    const size_t n = view.slot_bytes() * 4;
    const bool copied = view.group == 0;
    EXPECT_EQ(std::memcmp(view.k + 5 * n, view.k + 2 * n, n) == 0, copied) << layer;
    EXPECT_EQ(std::memcmp(view.v + 5 * n, view.v + 2 * n, n) == 0, copied) << layer;
    EXPECT_NE(std::memcmp(view.k + 4 * n, view.k + 2 * n, n), 0) << layer;
  }
  std::vector<uint8_t> again(block_bytes);
  cache.CopyBlockOut(0, 5, again);
  EXPECT_EQ(again, bytes);
}

// ZeroSlots clears a block's K and V rows from a slot on, in every layer of its group, and nothing
// else: the slots before it, the other blocks and the other group keep their bytes.
TEST(DiskTierHooks, KvCacheZeroesTheSlotsPastAnInput) {
  KvSpec spec = KvSpec::Uniform(3, 2, 40);
  spec.groups.push_back(spec.groups[0]);
  spec.groups[0].layers = {0, 2};
  spec.groups[1].layers = {1};
  const KvFormat format = KvFormat::PerGroup({KvType::kQ8_0, KvType::kF16});
  HostAllocator allocator;
  KvCache cache(spec, format, 4, 6, allocator);
  std::mt19937 rng(9);
  for (int layer = 0; layer < cache.n_layers(); ++layer) {
    const KvLayerView& view = cache.layer(layer);
    for (size_t i = 0; i < view.slot_bytes() * 4 * 6; ++i) {
      view.k[i] = static_cast<uint8_t>(rng() | 1);  // never 0
      view.v[i] = static_cast<uint8_t>(rng() | 1);
    }
  }
  cache.ZeroSlots(0, 3, 1);
  for (int layer = 0; layer < cache.n_layers(); ++layer) {
    const KvLayerView& view = cache.layer(layer);
    const size_t slot = view.slot_bytes();
    for (int s = 0; s < 4 * 6; ++s) {
      const bool zeroed = view.group == 0 && s >= 3 * 4 + 1 && s < 4 * 4;
      for (const uint8_t* pool : {view.k, view.v}) {
        const bool all_zero =
            std::all_of(pool + s * slot, pool + (s + 1) * slot, [](uint8_t b) { return b == 0; });
        const bool none_zero =
            std::none_of(pool + s * slot, pool + (s + 1) * slot, [](uint8_t b) { return b == 0; });
        EXPECT_TRUE(zeroed ? all_zero : none_zero) << "layer " << layer << " slot " << s;
      }
    }
  }
}

// The eviction hooks see each cached block, with its key, just before it is reused; a removed
// hook sees nothing more.
TEST(DiskTierHooks, BlockManagerCallsTheEvictionHookWithTheKey) {
  BlockManager manager(2, 2, true);
  std::vector<std::pair<int32_t, BlockKey>> evicted;
  int removed_calls = 0;
  const int removed =
      manager.AddEvictionHook([&](int, int32_t, const BlockKey&) { ++removed_calls; });
  manager.AddEvictionHook(
      [&](int, int32_t block, const BlockKey& key) { evicted.emplace_back(block, key); });
  manager.RemoveEvictionHook(removed);
  const std::vector<int32_t> tokens = {5, 6, 7, 8};
  BlockTable table;
  ASSERT_TRUE(manager.Grow(table, 4));
  manager.Commit(table, tokens, 4, "");
  const std::vector<int32_t> blocks = table.group(0);
  const BlockKey first = BlockManager::KeyOf(nullptr, "", std::span(tokens).first(2));
  const BlockKey second = BlockManager::KeyOf(&first, "", std::span(tokens).subspan(2));
  manager.Free(table);
  EXPECT_TRUE(evicted.empty());
  BlockTable other;
  ASSERT_TRUE(manager.Grow(other, 3));  // both cached blocks are taken, least recently freed first
  ASSERT_EQ(evicted.size(), 2u);
  const std::vector<std::pair<int32_t, BlockKey>> want = {{blocks[1], second}, {blocks[0], first}};
  EXPECT_EQ(evicted, want);
  EXPECT_EQ(removed_calls, 0);
  EXPECT_TRUE(manager.CheckInvariants().ok());
}

// ---- Memory and disk together ------------------------------------------------------------------

// A pool of 4 blocks of 2 tokens; the prompt's 3 full blocks get K/V bytes and keys, are freed
// (cached), then evicted by another sequence: each is written to disk once. A fresh manager and
// cache on the same directory (a restart) read them back: the prompt's prefix is found again, with
// the same bytes. A corrupted file ends the chain there; another salt finds nothing.
TEST(KvDiskSpill, EvictedBlocksComeBackAfterARestart) {
  const std::string dir = FreshDir("spill");
  const KvSpec spec = KvSpec::Uniform(2, 1, 8);
  const KvFormat format = KvType::kQ8_0;
  const uint64_t block_bytes = KvCache::BytesPerBlock(spec, format, 2);
  HostAllocator allocator;
  const std::vector<int32_t> prompt = {1, 5, 6, 7, 8, 9, 10};  // 3 full blocks + the last token
  std::vector<std::vector<uint8_t>> contents;
  {
    auto tier = DiskTier::Open(dir, 1 << 20, "stories;q8_0;2", block_bytes);
    ASSERT_TRUE(tier.ok()) << tier.message();
    KvCache cache(spec, format, 2, 4, allocator);
    BlockManager manager(4, 2, true);
    KvDiskSpill spill(manager, cache, **tier);
    BlockTable table;
    ASSERT_TRUE(manager.Grow(table, 7));
    for (int32_t block : table.group(0)) {
      std::vector<uint8_t> bytes = Payload(block);
      bytes.resize(block_bytes);
      cache.CopyBlockIn(0, block, bytes);
      contents.push_back(bytes);
    }
    manager.Commit(table, prompt, 7, "");
    manager.Free(table);
    EXPECT_EQ((*tier)->Stats().writes, 0u);
    BlockTable other;
    ASSERT_TRUE(manager.Grow(other, 8));  // all four blocks: the three cached ones are evicted
    EXPECT_EQ((*tier)->Stats().writes, 3u);
    EXPECT_EQ(spill.write_failures(), 0u);
    manager.Free(other);
  }
  auto tier = DiskTier::Open(dir, 1 << 20, "stories;q8_0;2", block_bytes);
  ASSERT_TRUE(tier.ok());
  KvCache cache(spec, format, 2, 4, allocator);
  BlockManager manager(4, 2, true);
  KvDiskSpill spill(manager, cache, **tier);
  EXPECT_EQ(manager.CachedPrefixTokens(prompt, ""), 0);
  EXPECT_EQ(spill.Restore(prompt, "tenant-b"), 0);  // salts apply on disk too
  EXPECT_EQ(spill.Restore(prompt, ""), 3);
  EXPECT_EQ(spill.Restore(prompt, ""), 0);  // in memory now
  EXPECT_TRUE(manager.CheckInvariants().ok());
  BlockTable table;
  ASSERT_EQ(manager.AllocatePrefix(table, prompt, ""), 6);
  std::vector<uint8_t> bytes(block_bytes);
  for (size_t i = 0; i < table.group(0).size(); ++i) {
    cache.CopyBlockOut(0, table.group(0)[i], bytes);
    EXPECT_EQ(bytes, contents[i]) << "block " << i;
  }
  manager.Free(table);

  // Corrupt the second block's file: a fresh manager reads the first block only.
  const BlockKey first = BlockManager::KeyOf(nullptr, "", std::span(prompt).first(2));
  const BlockKey second = BlockManager::KeyOf(&first, "", std::span(prompt).subspan(2, 2));
  Poke((*tier)->PathOf(second), -1, 0);
  Poke((*tier)->PathOf(second), -2, 0);
  BlockManager fresh(4, 2, true);
  KvDiskSpill again(fresh, cache, **tier);
  EXPECT_EQ(again.Restore(prompt, ""), 1);
  EXPECT_EQ(fresh.CachedPrefixTokens(prompt, ""), 2);
  EXPECT_TRUE(fresh.CheckInvariants().ok());
}

// An encoder-decoder's two groups: the decoder's full group (block_size 2, 8 blocks) and the
// cross-attention group of encoder inputs (3 blocks). An input's blocks, evicted by another
// input, are written under their keys (InputBlockKey) in group 1; a fresh manager (a restart)
// restores the decoder's prefix chain from group 0 alone (no cross block is in that chain) and the
// input's three blocks with RestoreInput, with the same bytes, which AllocateInput then finds. An
// input with one file missing is not read at all.
TEST(KvDiskSpill, AnEncoderInputsBlocksComeBackWholeOrNotAtAll) {
  const std::string dir = FreshDir("spill-input");
  KvSpec spec;
  spec.groups.push_back({.layers = {0}, .n_kv_heads = 1, .head_dim = 8});
  spec.groups.push_back(
      {.kind = CrossAttentionKind::Make(), .layers = {1}, .n_kv_heads = 1, .head_dim = 8});
  const KvFormat format = KvType::kF32;
  const std::vector<uint64_t> bytes = {KvCache::BytesPerBlock(spec, format, 2, 0),
                                       KvCache::BytesPerBlock(spec, format, 2, 1)};
  const std::vector<BlockPoolSpec> pools = {{.n_blocks = 8},
                                            {.n_blocks = 3, .kind = CrossAttentionKind::Make()}};
  HostAllocator allocator;
  KvCache cache(spec, format, 2, {8, 3}, allocator);
  const std::vector<int32_t> prompt = {1, 5, 6, 7, 8};  // the decoder's: 2 full blocks
  const BlockKey input = BlockManager::InputKey(std::vector<int32_t>{9, 9, 9, 9, 9}, "");
  const BlockKey other_input = BlockManager::InputKey(std::vector<int32_t>{7, 7, 7, 7, 7}, "");
  std::vector<std::vector<uint8_t>> contents;  // the input's blocks
  {
    auto tier = DiskTier::Open(dir, 1 << 20, "t5;f32;2", bytes);
    ASSERT_TRUE(tier.ok()) << tier.message();
    BlockManager manager(pools, 2, true);
    KvDiskSpill spill(manager, cache, **tier);
    BlockTable table;
    ASSERT_TRUE(manager.Grow(table, 5));
    manager.Commit(table, prompt, 4, "");
    manager.Free(table);
    std::vector<int32_t> blocks;
    bool hit = true;
    ASSERT_TRUE(manager.AllocateInput(1, input, 3, 5, blocks, &hit));
    EXPECT_FALSE(hit);
    for (int32_t block : blocks) {
      std::vector<uint8_t> payload(bytes[1]);
      std::iota(payload.begin(), payload.end(), static_cast<uint8_t>(40 + 7 * block));
      cache.CopyBlockIn(1, block, payload);
      contents.push_back(payload);
    }
    manager.CommitInput(1, input, blocks);
    manager.FreeInput(1, blocks);
    ASSERT_TRUE(manager.AllocateInput(1, other_input, 3, 5, blocks, &hit));  // evicts all three
    EXPECT_EQ((*tier)->Stats().writes, 3u);
    manager.FreeInput(1, blocks);  // never committed: free, nothing to keep
    EXPECT_EQ(spill.Flush(), 2);   // the decoder's two keyed blocks
    EXPECT_TRUE(manager.CheckInvariants().ok());
  }
  auto tier = DiskTier::Open(dir, 1 << 20, "t5;f32;2", bytes);
  ASSERT_TRUE(tier.ok()) << tier.message();
  BlockManager manager(pools, 2, true);
  KvDiskSpill spill(manager, cache, **tier);
  EXPECT_EQ(spill.Restore(prompt, ""), 2);
  EXPECT_EQ(manager.Stats(1).cached, 0);
  EXPECT_FALSE(spill.RestoreInput(1, other_input, 3));
  EXPECT_TRUE(spill.RestoreInput(1, input, 3));
  EXPECT_FALSE(spill.RestoreInput(1, input, 3));  // in memory now: nothing to read
  std::vector<int32_t> blocks;
  bool hit = false;
  ASSERT_TRUE(manager.AllocateInput(1, input, 3, 5, blocks, &hit));
  EXPECT_TRUE(hit);
  std::vector<uint8_t> payload(bytes[1]);
  for (size_t b = 0; b < blocks.size(); ++b) {
    cache.CopyBlockOut(1, blocks[b], payload);
    EXPECT_EQ(payload, contents[b]) << "block " << b;
  }
  manager.FreeInput(1, blocks);
  EXPECT_TRUE(manager.CheckInvariants().ok());

  // One block's file gone: nothing of the input is read.
  fs::remove((*tier)->PathOf(BlockManager::InputBlockKey(input, 1), 1));
  BlockManager fresh(pools, 2, true);
  KvDiskSpill again(fresh, cache, **tier);
  const uint64_t hits = (*tier)->Stats().hits;
  EXPECT_FALSE(again.RestoreInput(1, input, 3));
  EXPECT_EQ((*tier)->Stats().hits, hits);
  EXPECT_EQ(fresh.Stats(1).cached, 0);
  ASSERT_TRUE(fresh.AllocateInput(1, input, 3, 5, blocks, &hit));
  EXPECT_FALSE(hit);
  fresh.FreeInput(1, blocks);
  EXPECT_TRUE(fresh.CheckInvariants().ok());
}

// An unusable directory: evictions go on (the blocks are simply not kept), counted and warned.
TEST(KvDiskSpill, WriteFailuresNeverStopEviction) {
  const std::string dir = FreshDir("spill-broken");
  const KvSpec spec = KvSpec::Uniform(1, 1, 8);
  const uint64_t block_bytes = KvCache::BytesPerBlock(spec, KvType::kF32, 2);
  auto tier = DiskTier::Open(dir, 1 << 20, "x", block_bytes);
  ASSERT_TRUE(tier.ok());
  fs::remove_all(dir);
  { std::ofstream(dir) << "not a directory"; }
  HostAllocator allocator;
  KvCache cache(spec, KvType::kF32, 2, 2, allocator);
  BlockManager manager(2, 2, true);
  KvDiskSpill spill(manager, cache, **tier);
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5};
  BlockTable table;
  ASSERT_TRUE(manager.Grow(table, 4));
  manager.Commit(table, prompt, 4, "");
  manager.Free(table);
  BlockTable other;
  ASSERT_TRUE(manager.Grow(other, 4));
  EXPECT_EQ(spill.write_failures(), 2u);
  EXPECT_EQ(spill.Restore(prompt, ""), 0);
  EXPECT_TRUE(manager.CheckInvariants().ok());
  fs::remove(dir);
}

}  // namespace
}  // namespace kvserve
