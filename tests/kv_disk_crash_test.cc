// Crash consistency of the disk tier (kv/disk_tier.h): a real `kvserve serve --kv-disk` is killed
// with SIGKILL at seeded random moments while three clients keep its small KV pool evicting (so
// blocks are written to disk all the time), then restarted on the same directory, again and
// again. After every kill each file of the directory is checked on its own, with this file's
// reading of the on-disk format (header, name, SHA-256 of the payload), and the directory's bytes
// against --kv-disk-size; every answer any of the servers gave equals the answer of a server
// without the disk tier and without the prefix cache. Every fifth round the test damages the
// newest block file as a power loss could (truncated, or one payload byte changed): later servers
// must drop it (kvserve:kv_disk_rejected_total), never serve it. The same with a full disk and
// with a read-only directory.
//
// KVSERVE_CRASH_KILLS (20, what CI runs) and KVSERVE_CRASH_SEED (1) set the kills and the seed;
// the long form, by hand (it prints its figures):
//   KVSERVE_CRASH_KILLS=200 build/kv_disk_crash_test --gtest_filter='*ManyKills*'
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/paths.h"
#include "support/serve_process.h"
#include "util/sha256.h"

namespace kvserve {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::ServeProcess;

constexpr uint64_t kDiskBytes = 2u << 20;  // --kv-disk-size 2MiB: about 100 blocks of stories260K
constexpr int kClients = 3;
constexpr int kMaxTokens = 8;
constexpr size_t kHeaderBytes = 120;  // disk_tier.cc's Header

int EnvInt(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value && *value ? std::atoi(value) : fallback;
}

std::string FreshDir(const std::string& name) {
  const std::string dir = testing::TempDir() + "/" + name;
  fs::remove_all(dir);
  return dir;
}

// 24 seeded prompts of 55 to 105 words (about 120 to 240 tokens); each three share their first
// 35 words, so a prompt's leading blocks are also another's.
std::vector<std::string> MakePrompts(uint32_t seed) {
  static const char* kWords[] = {
      "the",   "little", "girl", "boy",    "dog", "cat",    "park", "ball",   "tree",   "happy",
      "sad",   "big",    "red",  "blue",   "ran", "played", "saw",  "found",  "mom",    "dad",
      "house", "garden", "sun",  "friend", "toy", "car",    "bird", "flower", "jumped", "said"};
  constexpr int kWordCount = sizeof(kWords) / sizeof(kWords[0]);
  std::mt19937 rng(seed);
  auto words = [&](int n) {
    std::string text;
    for (int i = 0; i < n; ++i) text += std::string(" ") + kWords[rng() % kWordCount];
    return text;
  };
  std::vector<std::string> prompts;
  for (int group = 0; group < 8; ++group) {
    const std::string stem = "Once upon a time" + words(35);
    for (int i = 0; i < 3; ++i) prompts.push_back(stem + words(20 + rng() % 50) + ".");
  }
  return prompts;
}

json Body(const std::string& prompt) {
  return {{"prompt", prompt}, {"max_tokens", kMaxTokens}, {"temperature", 0}};
}

std::string TextOf(const testing::Reply& reply) {
  if (reply.status != 200 || !reply.body.is_object()) return "<" + reply.text + ">";
  return reply.body["choices"][0]["text"].get<std::string>();
}

// The answers of a server without the disk tier and without the prefix cache.
std::vector<std::string> UncachedAnswers(const std::vector<std::string>& prompts) {
  auto server = ServeProcess::Start({"-c", "512", "--no-prefix-cache"});
  if (!server) return {};
  auto client = server->Client();
  std::vector<std::string> answers;
  for (const std::string& prompt : prompts) {
    answers.push_back(TextOf(testing::Post(*client, "/v1/completions", Body(prompt))));
  }
  EXPECT_EQ(server->Terminate(), 0) << server->log();
  return answers;
}

// What one look at the directory found.
struct DirCheck {
  int whole = 0;                  // block files that pass every check
  std::vector<std::string> bad;   // block files that fail one (names)
  std::vector<std::string> temp;  // temporary files (names): a write a kill cut short
  uint64_t bytes = 0;             // every file's bytes
};

// Checks one block file as the format says: magic, version, payload size, SHA-256 of the payload,
// and its name: SHA-256 of (fingerprint hash, key) in hex.
bool WholeBlockFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < kHeaderBytes || bytes.compare(0, 8, "KVSDISK1") != 0) return false;
  uint32_t version = 0;
  uint64_t payload_bytes = 0;
  Sha256Digest fingerprint, key, checksum;
  std::memcpy(&version, bytes.data() + 8, 4);
  std::memcpy(fingerprint.data(), bytes.data() + 16, 32);
  std::memcpy(key.data(), bytes.data() + 48, 32);
  std::memcpy(&payload_bytes, bytes.data() + 80, 8);
  std::memcpy(checksum.data(), bytes.data() + 88, 32);
  if (version != 1 || payload_bytes != bytes.size() - kHeaderBytes) return false;
  if (Sha256::Hash(bytes.data() + kHeaderBytes, payload_bytes) != checksum) return false;
  Sha256 name;
  name.Update(fingerprint.data(), fingerprint.size());
  name.Update(key.data(), key.size());
  return path.filename() == Sha256::Hex(name.Finish()) + ".kvblock";
}

DirCheck CheckDirectory(const std::string& dir) {
  DirCheck check;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    check.bytes += entry.file_size();
    if (name.rfind(".tmp.", 0) == 0) {
      check.temp.push_back(name);
    } else if (WholeBlockFile(entry.path())) {
      ++check.whole;
    } else {
      check.bad.push_back(name);
    }
  }
  return check;
}

// Damages the newest block file as a power loss could: cut short, or one payload byte changed.
std::string Damage(const std::string& dir, std::mt19937& rng) {
  fs::path newest;
  fs::file_time_type newest_time = fs::file_time_type::min();
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(".tmp.", 0) == 0 || entry.last_write_time() < newest_time) continue;
    newest = entry.path();
    newest_time = entry.last_write_time();
  }
  if (newest.empty()) return "";
  const uint64_t size = fs::file_size(newest);
  if (rng() % 2 == 0) {
    fs::resize_file(newest, rng() % size);
  } else {
    std::fstream f(newest, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(kHeaderBytes + rng() % (size - kHeaderBytes)));
    const char byte = static_cast<char>(f.peek());
    f.seekp(f.tellg());
    f.put(static_cast<char>(byte ^ 0x5a));
  }
  return newest.filename().string();
}

// Totals over the rounds of one test.
struct Figures {
  int kills = 0;
  int kills_at_write = 0;  // kills sent the moment a block's temporary file appeared
  int files_checked = 0;   // block files checked after the kills, summed over the looks
  int temps_left = 0;      // temporary files a kill left (writes it cut short), distinct
  int damaged = 0;         // block files the test damaged
  int compared = 0;        // answers compared with the uncached ones
  int mismatched = 0;
  int refused = 0;                                                // replies other than 200
  double hits = 0, writes = 0, write_failures = 0, rejected = 0;  // from /metrics
  uint64_t max_bytes = 0;                                         // the directory's largest size
  std::set<std::string> damaged_names, temp_names;
  std::string first_mismatch;
};

// Adds the disk tier's counters of a server's /metrics to `f`.
void AddMetrics(const ServeProcess& server, Figures& f) {
  auto client = server.Client();
  client->set_read_timeout(5, 0);
  const std::string text = testing::Get(*client, "/metrics").text;
  f.hits += std::max(0.0, testing::Metric(text, "kvserve:kv_disk_hits_total"));
  f.writes += std::max(0.0, testing::Metric(text, "kvserve:kv_disk_writes_total"));
  f.write_failures += std::max(0.0, testing::Metric(text, "kvserve:kv_disk_write_failures_total"));
  f.rejected += std::max(0.0, testing::Metric(text, "kvserve:kv_disk_rejected_total"));
}

// One client: random prompts until the server stops answering (killed) or `stop`; each answer
// compared with the uncached one. Counts go to `f` under `mutex`.
void ClientLoop(int port, const std::vector<std::string>& prompts,
                const std::vector<std::string>& answers, uint32_t seed,
                const std::atomic<bool>& stop, Figures& f, std::mutex& mutex) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(30, 0);
  std::mt19937 rng(seed);
  while (!stop.load()) {
    const size_t i = rng() % prompts.size();
    auto result = client.Post("/v1/completions", Body(prompts[i]).dump(), "application/json");
    if (!result) return;  // killed: the reply was cut off
    const json body = json::parse(result->body, nullptr, false);
    std::lock_guard<std::mutex> lock(mutex);
    if (result->status != 200 || !body.is_object()) {
      ++f.refused;
      continue;
    }
    ++f.compared;
    const std::string text = body["choices"][0]["text"];
    if (text != answers[i]) {
      if (f.mismatched++ == 0)
        f.first_mismatch = "prompt " + std::to_string(i) + ": '" + text + "' against uncached '" +
                           answers[i] + "'";
    }
  }
}

// Looks at the directory after a kill: bytes within the limit, every bad block file one the test
// damaged, temporary files counted.
void Inspect(const std::string& dir, Figures& f) {
  const DirCheck check = CheckDirectory(dir);
  f.files_checked += check.whole + static_cast<int>(check.bad.size());
  f.max_bytes = std::max(f.max_bytes, check.bytes);
  EXPECT_LE(check.bytes, kDiskBytes) << "the directory outgrew --kv-disk-size";
  for (const std::string& name : check.bad) {
    EXPECT_TRUE(f.damaged_names.count(name)) << "a block file nobody damaged is bad: " << name;
  }
  for (const std::string& name : check.temp) {
    if (f.temp_names.insert(name).second) ++f.temps_left;
  }
}

// Waits (at most `timeout_ms`) until a file is created in `dir` (a temporary file: the first
// moment of a block's write); false on timeout.
bool WaitForWriteStart(const std::string& dir, int timeout_ms) {
  const int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0 || inotify_add_watch(fd, dir.c_str(), IN_CREATE) < 0) {
    if (fd >= 0) close(fd);
    return false;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  alignas(inotify_event) char buffer[4096];
  bool seen = false;
  while (!seen && std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 10) <= 0) continue;
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    for (ssize_t at = 0; at < n && !seen;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buffer + at);
      seen = event->len > 0;  // a temporary file, or any file a writer creates
      at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
    }
  }
  close(fd);
  return seen;
}

// What a round runs: the server's flags, what its child does before exec, and whether it ends by
// SIGKILL (else SIGTERM, whose drain writes the blocks still in memory).
struct Round {
  std::vector<std::string> flags;
  std::function<void()> in_child;
  bool kill = true;
  // Kill at the start of a block's write (a file created) after the wait, not at the
  // wait's end: the kill then lands inside the write's few tens of microseconds much more often.
  bool at_write = false;
};

// The value of --kv-disk in `flags`.
std::string KvDiskDir(const std::vector<std::string>& flags) {
  const auto at = std::find(flags.begin(), flags.end(), "--kv-disk");
  return at != flags.end() && at + 1 != flags.end() ? *(at + 1) : "";
}

// Starts a server on the directory, lets the clients run for a seeded 100 to 700 ms (or through
// every prompt twice when it ends by SIGTERM), then ends it; returns its log.
std::string RunRound(const Round& round, const std::vector<std::string>& prompts,
                     const std::vector<std::string>& answers, std::mt19937& rng, Figures& f) {
  auto server = ServeProcess::Start(round.flags, round.in_child);
  if (!server) return "";
  std::atomic<bool> stop{false};
  std::mutex mutex;
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back(ClientLoop, server->port(), std::cref(prompts), std::cref(answers),
                         static_cast<uint32_t>(rng()), std::cref(stop), std::ref(f),
                         std::ref(mutex));
  }
  const int wait_ms = round.kill ? 100 + static_cast<int>(rng() % 600) : 1500;
  std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
  AddMetrics(*server, f);
  if (round.at_write && WaitForWriteStart(KvDiskDir(round.flags), 1000)) ++f.kills_at_write;
  if (round.kill) {
    kill(server->pid(), SIGKILL);
    waitpid(server->pid(), nullptr, 0);
    server->Forget();
    ++f.kills;
  }
  stop = true;
  for (std::thread& client : clients) client.join();
  if (!round.kill) {
    EXPECT_EQ(server->Terminate(), 0) << server->log();
  }
  return server->log();
}

std::vector<std::string> DiskFlags(const std::string& dir) {
  // A pool of about 50 blocks for three clients' prompts of 5 to 16 blocks: blocks are evicted, so
  // written to disk, all the time; the directory holds about 100 of the prompts' ~300.
  return {"-c",          "512",  "--kv-disk",      dir, "--kv-disk-size", "2MiB",
          "--kv-memory", "1MiB", "--max-num-seqs", "3"};
}

void Print(const char* what, const Figures& f) {
  std::printf(
      "%s: kills %d (%d at the start of a block write); block files checked after kills %d, "
      "temporary files left by kills %d, "
      "largest directory %llu of %llu bytes; blocks read back (checksum verified) %.0f, written "
      "%.0f, write failures %.0f; damaged by the test %d, dropped as bad %.0f; answers compared "
      "%d, mismatched %d\n",
      what, f.kills, f.kills_at_write, f.files_checked, f.temps_left,
      static_cast<unsigned long long>(f.max_bytes), static_cast<unsigned long long>(kDiskBytes),
      f.hits, f.writes, f.write_failures, f.damaged, f.rejected, f.compared, f.mismatched);
}

// What every scenario demands: each answer exact, none refused, no block dropped that the test
// did not damage.
void ExpectSound(const Figures& f) {
  EXPECT_GT(f.compared, 0);
  EXPECT_EQ(f.mismatched, 0) << f.first_mismatch;
  EXPECT_EQ(f.refused, 0);
  EXPECT_LE(f.rejected, f.damaged) << "blocks dropped that the test did not damage";
}

class KvDiskCrashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    signal(SIGPIPE, SIG_IGN);
    seed_ = static_cast<uint32_t>(EnvInt("KVSERVE_CRASH_SEED", 1));
    rng_.seed(seed_);
    prompts_ = MakePrompts(seed_);
    answers_ = UncachedAnswers(prompts_);
    ASSERT_EQ(answers_.size(), prompts_.size());
    for (const std::string& answer : answers_) ASSERT_NE(answer.substr(0, 1), "<") << answer;
  }

  // A server that ends by SIGTERM: its blocks in memory are written at the drain.
  std::string Populate(const std::string& dir, Figures& f) {
    const std::string log = RunRound({.flags = DiskFlags(dir), .kill = false}, f);
    Inspect(dir, f);
    return log;
  }
  std::string RunRound(const Round& round, Figures& f) {
    return kvserve::RunRound(round, prompts_, answers_, rng_, f);
  }

  uint32_t seed_ = 1;
  std::mt19937 rng_;
  std::vector<std::string> prompts_, answers_;
};

// CI: 20 kills (KVSERVE_CRASH_KILLS), every fifth followed by a damaged block file; then a server
// that drains normally.
TEST_F(KvDiskCrashTest, ManyKillsLeaveEveryBlockWholeAndEveryAnswerExact) {
  const std::string dir = FreshDir("many-kills");
  const int kills = EnvInt("KVSERVE_CRASH_KILLS", 20);
  Figures f;
  for (int r = 0; r < kills && !HasFailure(); ++r) {
    RunRound({.flags = DiskFlags(dir), .at_write = r % 2 == 1}, f);
    Inspect(dir, f);
    if (r % 5 == 4) {
      const std::string name = Damage(dir, rng_);
      if (!name.empty()) {
        f.damaged_names.insert(name);
        ++f.damaged;
      }
    }
  }
  Populate(dir, f);
  Print("kill test", f);
  EXPECT_EQ(f.kills, kills);
  ExpectSound(f);
  EXPECT_GT(f.writes, 10 * kills) << "the kills did not come during heavy writing";
  EXPECT_GT(f.kills_at_write, 0);
  EXPECT_GT(f.hits, 0) << "no block was read back";
}

// A full disk, unprivileged: the server runs under RLIMIT_FSIZE = 8 KiB with SIGXFSZ ignored, so
// every block file (20,600 bytes) fails partway, after its header and first 8 KiB, as a write
// into a filling disk does. The error is EFBIG, not ENOSPC, but the path is the same: write()
// fails, the temporary file is removed, the failure is counted and warned about once, the block
// is simply not kept. Blocks already on disk are still read back; answers stay exact; kills on
// top leave the directory as sound as before.
TEST_F(KvDiskCrashTest, FullDiskFailsEveryWriteButNoAnswer) {
  const std::string dir = FreshDir("full-disk");
  Figures before;
  Populate(dir, before);
  const auto full = [] {
    signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{8192, 8192};
    setrlimit(RLIMIT_FSIZE, &limit);
  };
  Figures f;
  for (int r = 0; r < 4; ++r) {
    RunRound({.flags = DiskFlags(dir), .in_child = full, .at_write = r % 2 == 1}, f);
    Inspect(dir, f);
  }
  const std::set<std::string> temps_of_kills = f.temp_names;
  const std::string log = RunRound({.flags = DiskFlags(dir), .in_child = full, .kill = false}, f);
  Inspect(dir, f);
  Print("full disk", f);
  ExpectSound(f);
  EXPECT_EQ(f.writes, 0);
  EXPECT_GT(f.write_failures, 0);
  EXPECT_GT(f.hits, 0) << "blocks on the full disk were not read back";
  EXPECT_NE(log.find("warning: KV disk tier: cannot write KV disk file"), std::string::npos) << log;
  EXPECT_NE(log.find("File too large"), std::string::npos) << log;
  for (const std::string& name : CheckDirectory(dir).temp) {
    EXPECT_TRUE(temps_of_kills.count(name)) << "a failed write left its temporary file " << name;
  }
}

// Each block file's name, bytes and modification time (a read touches it in a writable tier).
std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    files[entry.path().filename().string()] =
        std::to_string(entry.last_write_time().time_since_epoch().count()) + ":" +
        testing::ReadAll(entry.path().string());
  }
  return files;
}

// A read-only directory (chmod 0555; as root the server also loses CAP_DAC_OVERRIDE, which would
// ignore the mode): a user who mounts a warmed cache read-only expects it used, so the server
// starts with one warning, reads its blocks back and writes nothing; the directory is unchanged.
TEST_F(KvDiskCrashTest, ReadOnlyDirectoryIsReadNeverWritten) {
  const std::string dir = FreshDir("read-only");
  Figures before;
  Populate(dir, before);
  const auto snapshot = Snapshot(dir);
  ASSERT_FALSE(snapshot.empty());
  ASSERT_EQ(chmod(dir.c_str(), 0555), 0);
  const auto unprivileged = [] {
    if (geteuid() != 0) return;
    prctl(PR_CAPBSET_DROP, CAP_DAC_OVERRIDE, 0, 0, 0);
    prctl(PR_CAPBSET_DROP, CAP_DAC_READ_SEARCH, 0, 0, 0);
  };
  Figures f;
  const std::string log =
      RunRound({.flags = DiskFlags(dir), .in_child = unprivileged, .kill = false}, f);
  for (int r = 0; r < 2; ++r) {
    RunRound({.flags = DiskFlags(dir), .in_child = unprivileged}, f);
    Inspect(dir, f);
  }
  chmod(dir.c_str(), 0755);
  Print("read-only directory", f);
  ExpectSound(f);
  EXPECT_NE(log.find("warning: KV disk directory '" + dir + "' is not writable"), std::string::npos)
      << log;
  EXPECT_EQ(f.writes, 0);
  EXPECT_EQ(f.write_failures, 0);
  EXPECT_GT(f.hits, 0);
  EXPECT_EQ(Snapshot(dir), snapshot) << "the read-only directory changed";
}

}  // namespace
}  // namespace kvserve
