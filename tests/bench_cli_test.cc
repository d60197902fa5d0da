// bench_cli_test: `kvserve doctor` and `kvserve bench` at tiny settings (no timing assertions).
// - doctor: the kernels agree with their scalar twins, the JSON has every field, measurements are
//   positive;
// - bench: pp/tg results in md, csv and json with the documented fields, one run per repeat;
// - bench --cache-compare: cached and uncached generation give the same tokens, the plot is an
//   SVG document with two series;
// - bad flags exit 2 and name the flag.
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "kernels/backend_registry.h"
#include "support/cli.h"
#include "support/paths.h"

namespace kvserve {
namespace {

using ::kvserve::testing::ModelPath;
using ::kvserve::testing::TempDir;

std::string ReadAll(const std::string& path) {
  std::stringstream s;
  s << std::ifstream(path, std::ios::binary).rdbuf();
  return s.str();
}

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

const std::string kStories = " -m " + ModelPath("stories260K.gguf");
// Small enough to be quick; doctor and bench measure bandwidth on this many MiB.
const std::string kQuick = " --bandwidth-mib 64";

TEST(DoctorTest, JsonHasEveryFieldAndTheCheckPasses) {
  std::string out, err;
  ASSERT_EQ(testing::RunKvserve("doctor -t 1 -r 1 --output-format json" + kQuick, &out, &err), 0)
      << err << out;
  const auto j = nlohmann::json::parse(out);
  for (const char* key :
       {"cpu", "isa", "cores", "hardware_threads", "ram_total_bytes", "ram_available_bytes",
        "disk_free_bytes", "bandwidth_gb_s", "matmul_f32_gflop_s", "matmul_q8_0_gflop_s",
        "kernel_checks", "check_ok", "gpu"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_TRUE(j["check_ok"].get<bool>());
  EXPECT_GT(j["bandwidth_gb_s"].get<double>(), 0);
  EXPECT_GT(j["matmul_f32_gflop_s"].get<double>(), 0);
  EXPECT_GT(j["matmul_q8_0_gflop_s"].get<double>(), 0);
  EXPECT_GT(j["ram_total_bytes"].get<uint64_t>(), 0u);
  EXPECT_GE(j["hardware_threads"].get<int>(), 1);
  EXPECT_EQ(j["threads"].get<int>(), 1);
  // The devices of the GPU backends in the build (lavapipe's in CI), else a line saying none.
  ASSERT_TRUE(j["gpu"].is_array());
  ASSERT_FALSE(j["gpu"].empty());
  if (BackendNames().find("vulkan") != std::string::npos) {
    EXPECT_EQ(j["gpu"][0].get<std::string>().rfind("vulkan 0: ", 0), 0u) << j["gpu"];
  } else {
    EXPECT_EQ(j["gpu"][0], "none (built without GPU support)");
  }
  // The CPU's vendor, family, model and stepping, as /proc/cpuinfo gives them (the per-CPU tables
  // of docs/benchmarks.md are keyed by them).
  EXPECT_TRUE(std::regex_match(j["cpu_id"].get<std::string>(),
                               std::regex(R"(\S+ family \d+ model \d+ stepping \d+)")))
      << j["cpu_id"];
  // Five matmul types, the activation quantizer, attention and GELU.
  ASSERT_EQ(j["kernel_checks"].size(), 9u);
  for (const auto& check : j["kernel_checks"]) {
    EXPECT_TRUE(check["ok"].get<bool>()) << check.dump();
    EXPECT_LE(check["max_ratio"].get<double>(), 1.0) << check.dump();
  }
}

TEST(DoctorTest, TextNamesTheMachineAndTheIsa) {
  std::string out, err;
  ASSERT_EQ(testing::RunKvserve("doctor -t 1 -r 1" + kQuick, &out, &err), 0) << err;
  for (const char* line : {"cpu:", "isa:", "threads:", "memory:", "disk:", "bandwidth:", "matmul:",
                           "check:", "status:     ok"}) {
    EXPECT_NE(out.find(line), std::string::npos) << line << "\n" << out;
  }
  EXPECT_NE(out.find(BackendNames().find("vulkan") != std::string::npos
                         ? "gpu:        vulkan 0: "
                         : "gpu:        none (built without GPU support)"),
            std::string::npos)
      << out;
  EXPECT_EQ(testing::RunKvserve("doctor --bandwidth-mib 1", &out, &err), 2);
  EXPECT_NE(err.find("--bandwidth-mib: 1 is out of range"), std::string::npos) << err;
  EXPECT_EQ(testing::RunKvserve("doctor --output-format xml", &out, &err), 2);
  EXPECT_NE(err.find("'xml'"), std::string::npos) << err;
}

TEST(BenchTest, JsonHasOneEntryPerTest) {
  std::string out, err;
  ASSERT_EQ(
      testing::RunKvserve("bench" + kStories + " -p 8 -n 4 -r 2 -t 1 --output-format json" + kQuick,
                          &out, &err),
      0)
      << err;
  const auto j = nlohmann::json::parse(out);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["test"], "pp8");
  EXPECT_EQ(j[1]["test"], "tg4");
  for (const auto& r : j) {
    for (const char* key : {"test", "tokens_per_s", "stddev", "runs", "ceiling_fraction"}) {
      EXPECT_TRUE(r.contains(key)) << key << " in " << r.dump();
    }
    EXPECT_GT(r["tokens_per_s"].get<double>(), 0);
    EXPECT_GE(r["stddev"].get<double>(), 0);
    ASSERT_EQ(r["runs"].size(), 2u);
    EXPECT_GT(r["ceiling_fraction"].get<double>(), 0);
    // The mean is the mean of the runs.
    const double mean = (r["runs"][0].get<double>() + r["runs"][1].get<double>()) / 2;
    EXPECT_NEAR(r["tokens_per_s"].get<double>(), mean, 1e-9 * mean);
  }
}

// --profile: per-token op totals of the timed runs only; every matrix multiplied once per
// decoded token, so the matmuls' bytes per token are the model's weight bytes per token.
TEST(BenchTest, ProfileAccountsForEveryMatmul) {
  std::string out, err;
  ASSERT_EQ(testing::RunKvserve(
                "bench" + kStories + " -p 0 -n 4 -r 2 -t 2 --profile -o json" + kQuick, &out, &err),
            0)
      << err;
  const auto j = nlohmann::json::parse(out);
  ASSERT_EQ(j["results"].size(), 1u);
  ASSERT_EQ(j["profiles"].size(), 1u);
  const auto& profile = j["profiles"][0];
  EXPECT_EQ(profile["test"], "tg4");
  EXPECT_EQ(profile["tokens"].get<double>(), 8.0);
  double matmul_bytes = 0, attention_calls = 0;
  for (const auto& op : profile["ops"]) {
    if (op["op"].get<std::string>().rfind("matmul ", 0) == 0) {
      matmul_bytes += op["weight_bytes_per_token"].get<double>();
    }
    if (op["op"] == "attention") attention_calls = op["calls_per_token"].get<double>();
    EXPECT_GE(op["us_per_token"].get<double>(), op["wait_us_per_token"].get<double>()) << op;
  }
  EXPECT_EQ(matmul_bytes, j["results"][0]["weight_bytes_per_token"].get<double>());
  EXPECT_EQ(attention_calls, 5.0);  // stories260K's layers

  ASSERT_EQ(testing::RunKvserve("bench" + kStories + " -p 4 -n 2 -r 1 -t 1 --profile" + kQuick,
                                &out, &err),
            0)
      << err;
  EXPECT_EQ(Count(out, "profile of pp4"), 1u) << out;
  EXPECT_EQ(Count(out, "profile of tg2"), 1u) << out;
  EXPECT_EQ(Count(out, "| all ops |"), 2u) << out;
}

TEST(BenchTest, DepthMarkdownAndCsv) {
  std::string out, err;
  ASSERT_EQ(testing::RunKvserve("bench" + kStories + " -p 8 -n 4 -r 1 -t 1 --depth 16" + kQuick,
                                &out, &err),
            0)
      << err;
  EXPECT_NE(out.find("| pp8 @ d16 |"), std::string::npos) << out;
  EXPECT_NE(out.find("| tg4 @ d16 |"), std::string::npos) << out;
  EXPECT_NE(out.find("ceilings:"), std::string::npos) << out;
  ASSERT_EQ(
      testing::RunKvserve(
          "bench" + kStories + " -p 0 -n 2,3 -r 1 -t 1 --output-format csv" + kQuick, &out, &err),
      0)
      << err;
  EXPECT_EQ(Count(out, "\n"), 3u) << out;  // header + tg2 + tg3
  EXPECT_NE(out.find(",tg2,"), std::string::npos) << out;
  EXPECT_NE(out.find(",tg3,"), std::string::npos) << out;
}

TEST(BenchTest, ConcurrencyGoesThroughTheEngine) {
  std::string out, err;
  ASSERT_EQ(testing::RunKvserve(
                "bench" + kStories + " -p 0 -n 4 -r 1 -t 1 --concurrency 1,3 -o json" + kQuick,
                &out, &err),
            0)
      << err;
  const auto j = nlohmann::json::parse(out);
  ASSERT_EQ(j.size(), 3u);  // tg4, then tg4 x1 and tg4 x3 through the engine
  EXPECT_EQ(j[0]["test"], "tg4");
  EXPECT_EQ(j[1]["test"], "tg4 x1");
  EXPECT_EQ(j[2]["test"], "tg4 x3");
  for (const auto& r : j) EXPECT_GT(r["tokens_per_s"].get<double>(), 0) << r.dump();
}

TEST(BenchTest, CacheCompareGivesSameTokensAndAPlot) {
  const std::string plot = TempDir() + "/cache.svg";
  std::string out, err;
  ASSERT_EQ(testing::RunKvserve("bench --cache-compare" + kStories +
                                    " --lengths 8,16 -t 1 --plot " + plot + " --output-format json",
                                &out, &err),
            0)
      << err;
  const auto j = nlohmann::json::parse(out);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["length"], 8);
  EXPECT_EQ(j[1]["length"], 16);
  for (const auto& r : j) {
    for (const char* key : {"length", "cached_s", "uncached_s", "ratio", "same_tokens"}) {
      EXPECT_TRUE(r.contains(key)) << key;
    }
    EXPECT_TRUE(r["same_tokens"].get<bool>()) << r.dump();
    EXPECT_GT(r["cached_s"].get<double>(), 0);
    EXPECT_GT(r["uncached_s"].get<double>(), 0);
    EXPECT_NEAR(r["ratio"].get<double>(),
                r["uncached_s"].get<double>() / r["cached_s"].get<double>(), 1e-9);
  }
  const std::string svg = ReadAll(plot);
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_EQ(Count(svg, "<polyline"), 2u);
  EXPECT_EQ(Count(svg, "<svg"), Count(svg, "</svg>"));
  EXPECT_NE(svg.find("generated tokens"), std::string::npos);
  EXPECT_NE(svg.find("with KV cache"), std::string::npos);
  EXPECT_NE(svg.find("without cache"), std::string::npos);
  // Every opened element is closed: count tags that are neither self-closing nor closing.
  size_t opened = 0, closed = 0;
  for (size_t at = svg.find('<'); at != std::string::npos; at = svg.find('<', at + 1)) {
    const size_t end = svg.find('>', at);
    ASSERT_NE(end, std::string::npos);
    if (svg[at + 1] == '?') continue;
    if (svg[at + 1] == '/') {
      ++closed;
    } else if (svg[end - 1] != '/') {
      ++opened;
    }
  }
  EXPECT_EQ(opened, closed);

  ASSERT_EQ(
      testing::RunKvserve("bench --cache-compare" + kStories + " --lengths 8 -t 1", &out, &err), 0)
      << err;
  EXPECT_NE(out.find("| 8 |"), std::string::npos) << out;
}

TEST(BenchTest, BadFlagsNameTheFlag) {
  const std::pair<std::string, std::string> cases[] = {
      {"bench -p 8", "missing -m MODEL"},
      {"bench" + kStories + " -p abc", "abc"},
      {"bench" + kStories + " -p -3", "--n-prompt: -3 is out of range"},
      {"bench" + kStories + " -r 0", "--repetitions: 0 is out of range"},
      {"bench" + kStories + " --output-format xml", "'xml' is not one of md, csv, json"},
      {"bench" + kStories + " --cache-compare", "--cache-compare needs --lengths"},
      {"bench" + kStories + " --cache-compare --lengths 8,0", "--lengths: 0 is out of range"},
      {"bench" + kStories + " --lengths 8", "--lengths needs --cache-compare"},
      {"bench" + kStories + " --concurrency 0", "--concurrency: 0 is out of range"},
      {"bench" + kStories + " -p 0 -n 4 -r 1 --concurrency 2 --kv-memory 12parsecs", "--kv-memory"},
      {"bench" + kStories + " --cache-compare --lengths 8 --concurrency 2", "--concurrency"},
      {"bench" + kStories + " -p 0 -n 0", "nothing to run"},
      {"bench" + kStories + " --profile -o csv", "--profile: its tables come as md or json"},
      {"bench" + kStories + " --profile --cache-compare --lengths 8", "--profile does not go"},
  };
  for (const auto& [args, needle] : cases) {
    std::string out, err;
    EXPECT_EQ(testing::RunKvserve(args + kQuick, &out, &err), 2) << args << "\n" << err;
    EXPECT_NE(err.find(needle), std::string::npos) << args << "\n" << err;
  }
  std::string out, err;
  // gpt2 positions: pp + depth beyond the model's context is an error naming the test.
  EXPECT_EQ(testing::RunKvserve(
                "bench -m " + ModelPath("gpt2-tiny-f32.gguf") + " -p 200 -n 0 --depth 100" + kQuick,
                &out, &err),
            1);
  EXPECT_NE(err.find("pp200 @ d100 needs 300 positions"), std::string::npos) << err;
}

}  // namespace
}  // namespace kvserve
