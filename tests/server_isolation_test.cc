// Tenant isolation, measured (issue 17, part 4): with two API keys, or two cache_salts, tenant B's
// prompts never hit tenant A's blocks, and B's time to first token has the same distribution
// whether or not A sent the same prompt just before. Without salts (one tenant) the same
// measurement shows the expected cache hit. Real `kvserve serve` processes on stories260K.
//
// Each sample is a fresh prompt (its first tokens differ from every other sample's, so no sample
// shares a block with another). Samples alternate between "A sent it" (A sends the prompt, then B)
// and "A did not" (A sends another fresh prompt, then B). B's time is the wall time of a 1-token
// completion: its time to first token. The check is about cache hits and a same-distribution
// comparison with wide margins, not about speed.
#include <algorithm>
#include <cstdio>

#include "support/serve_process.h"

namespace kvserve {
namespace {

using namespace ::kvserve::testing;  // NOLINT: test helpers

constexpr int kSamples = 20;  // per case
// The median of one case may differ from the other's by this factor at most when isolated.
constexpr double kMaxMedianRatio = 2.0;
// The prompt: its sentence this many times (about 38 tokens each), in a context of kContext.
constexpr int kRepeats = 30;
constexpr const char* kContext = "2048";

struct Tenant {
  httplib::Client* client = nullptr;
  std::string salt;  // empty: no cache_salt field
};

// About 1,150 tokens (stories260K's training context is 128; -c raises it for timing): long enough
// that its prefill is most of the time of a 1-token request.
std::string Prompt(const std::string& tag, int sample) {
  // The sample number comes first, so two samples differ within their first block.
  std::string text = std::to_string(100 + sample) + " " + tag + ". ";
  for (int i = 0; i < kRepeats; ++i) {
    text +=
        "Once upon a time, Tom and his mom went to the big store to buy some red apples and a "
        "toy. ";
  }
  return text;
}

struct Timed {
  double ms = 0;
  int cached_tokens = 0;
  int prompt_tokens = 0;
};

Timed Send(const Tenant& tenant, const std::string& prompt) {
  json request = {{"prompt", prompt}, {"max_tokens", 1}, {"temperature", 0}};
  if (!tenant.salt.empty()) request["cache_salt"] = tenant.salt;
  const auto start = std::chrono::steady_clock::now();
  Reply reply = Post(*tenant.client, "/v1/completions", request);
  const auto end = std::chrono::steady_clock::now();
  EXPECT_EQ(reply.status, 200) << reply.text;
  Timed timed;
  timed.ms = std::chrono::duration<double, std::milli>(end - start).count();
  if (reply.status == 200) {
    timed.cached_tokens = reply.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
    timed.prompt_tokens = reply.body["usage"]["prompt_tokens"].get<int>();
  }
  return timed;
}

double Quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const double at = q * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(at);
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (at - static_cast<double>(lo));
}

struct Measurement {
  std::vector<double> after_a_ms;  // B's times when A had sent the same prompt
  std::vector<double> fresh_ms;    // B's times when A had not
  int after_a_cached_min = 1 << 30, after_a_cached_max = 0;
  int fresh_cached_max = 0;
  int prompt_tokens = 0;
};

Measurement Measure(const Tenant& a, const Tenant& b, const std::string& tag) {
  Measurement m;
  // Warm-up (not counted): the first requests pay for page faults and thread start.
  for (int i = 0; i < 2; ++i) Send(b, Prompt(tag + "-warm", i));
  for (int i = 0; i < 2 * kSamples; ++i) {
    const std::string prompt = Prompt(tag, i);
    if (i % 2 == 0) {
      Send(a, prompt);
      const Timed t = Send(b, prompt);
      m.after_a_ms.push_back(t.ms);
      m.after_a_cached_min = std::min(m.after_a_cached_min, t.cached_tokens);
      m.after_a_cached_max = std::max(m.after_a_cached_max, t.cached_tokens);
      m.prompt_tokens = t.prompt_tokens;
    } else {
      Send(a, Prompt(tag + "-other", i));
      const Timed t = Send(b, prompt);
      m.fresh_ms.push_back(t.ms);
      m.fresh_cached_max = std::max(m.fresh_cached_max, t.cached_tokens);
    }
  }
  auto line = [](const char* name, const std::vector<double>& v) {
    std::printf("  %-22s p25 %6.2f ms  p50 %6.2f ms  p75 %6.2f ms  (n=%zu)\n", name,
                Quantile(v, 0.25), Quantile(v, 0.5), Quantile(v, 0.75), v.size());
  };
  std::printf("[%s] prompt of %d tokens; B's time to first token:\n", tag.c_str(), m.prompt_tokens);
  line("A sent the prompt", m.after_a_ms);
  line("A did not", m.fresh_ms);
  std::printf("  median ratio %.2f; B's cached_tokens after A: %d to %d, without A: at most %d\n",
              Quantile(m.after_a_ms, 0.5) / Quantile(m.fresh_ms, 0.5), m.after_a_cached_min,
              m.after_a_cached_max, m.fresh_cached_max);
  std::fflush(stdout);
  return m;
}

void ExpectIndistinguishable(const Measurement& m) {
  EXPECT_GT(m.prompt_tokens, 1000);
  EXPECT_EQ(m.after_a_cached_max, 0) << "tenant B hit tenant A's blocks";
  EXPECT_EQ(m.fresh_cached_max, 0);
  const double ratio = Quantile(m.after_a_ms, 0.5) / Quantile(m.fresh_ms, 0.5);
  EXPECT_LT(ratio, kMaxMedianRatio);
  EXPECT_GT(ratio, 1.0 / kMaxMedianRatio);
}

TEST(ServerIsolationTest, TwoApiKeysShareNoBlocksAndNoTiming) {
  signal(SIGPIPE, SIG_IGN);
  const std::string key_file = TempDir() + "/isolation-keys.txt";
  std::ofstream(key_file) << "key-tenant-a\nkey-tenant-b\n";
  auto server = ServeProcess::Start({"--api-key-file", key_file, "-c", kContext});
  ASSERT_NE(server, nullptr);
  auto alpha = server->Client("key-tenant-a");
  auto beta = server->Client("key-tenant-b");
  ExpectIndistinguishable(Measure({alpha.get(), ""}, {beta.get(), ""}, "keys"));
  // A's last prompt under A's key again is a hit: the cache was on all along.
  EXPECT_GT(Send({alpha.get(), ""}, Prompt("keys", 2 * kSamples - 2)).cached_tokens, 1000);
  EXPECT_EQ(server->Terminate(), 0);
}

TEST(ServerIsolationTest, TwoCacheSaltsShareNoBlocksAndNoTiming) {
  signal(SIGPIPE, SIG_IGN);
  auto server = ServeProcess::Start({"-c", kContext});
  ASSERT_NE(server, nullptr);
  auto a = server->Client();
  auto b = server->Client();
  ExpectIndistinguishable(Measure({a.get(), "salt-a"}, {b.get(), "salt-b"}, "salts"));
  EXPECT_GT(Send({a.get(), "salt-a"}, Prompt("salts", 2 * kSamples - 2)).cached_tokens, 1000);
  EXPECT_EQ(server->Terminate(), 0);
}

TEST(ServerIsolationTest, WithoutSaltsTheSecondSenderHitsTheCache) {
  signal(SIGPIPE, SIG_IGN);
  auto server = ServeProcess::Start({"-c", kContext});
  ASSERT_NE(server, nullptr);
  auto a = server->Client();
  auto b = server->Client();
  const Measurement m = Measure({a.get(), ""}, {b.get(), ""}, "no-salt");
  // One tenant: B is served from A's blocks (all but the last partial block and the last token),
  // and only then.
  EXPECT_GT(m.after_a_cached_min, m.prompt_tokens - 2 * 16 - 1);
  EXPECT_EQ(m.fresh_cached_max, 0);
  // The statistic that finds the isolated cases alike sees this hit (about 50x sooner when
  // measured), so it would see a hit leaking across tenants.
  EXPECT_LT(Quantile(m.after_a_ms, 0.5) / Quantile(m.fresh_ms, 0.5), 1.0 / kMaxMedianRatio);
  EXPECT_EQ(server->Terminate(), 0);
}

}  // namespace
}  // namespace kvserve
