// `kvserve bench --cache-compare` on T5 (cli/encdec_cache_compare.h): greedy generation with both
// caches, with the self-attention cache only (the cross K/V recomputed from the kept encoder
// output before every step: EncodeBatch::cross_only) and with none gives the tokens of the model
// run by hand (support/t5_run.h), on t5-tiny (v1.0: ReLU, tied output) and t5-tiny-v1 (v1.1: gated
// GELU, own output); the command prints the three modes and the shared-input test, and writes an
// SVG with three series.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/encdec_cache_compare.h"
#include "model/model.h"
#include "support/cli.h"
#include "support/paths.h"
#include "support/reference_runs.h"
#include "support/synthetic_files.h"
#include "support/t5_run.h"

namespace kvserve {
namespace {

std::string TinyFile(const std::string& preset) {
  return testing::SynthesizedModel(preset, preset + "-f32", GgmlType::kF32);
}

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

class T5CacheCompareTest : public ::testing::TestWithParam<std::string> {};

TEST_P(T5CacheCompareTest, ThreeModesGiveTheTokensOfTheRunByHand) {
  const std::unique_ptr<Model> model = testing::LoadPathOrDie(TinyFile(GetParam()));
  ASSERT_NE(model, nullptr);
  const int n_vocab = model->config().n_vocab;
  const std::unique_ptr<Workspace> ws = model->backend().NewWorkspace({.n_threads = 2});
  for (const int n_input : {1, 7, 40}) {
    std::vector<int32_t> input;
    for (int i = 0; i < n_input; ++i) input.push_back((37 * i + 11) % n_vocab);
    constexpr int kLength = 20;
    testing::T5Run by_hand(*model, 1);
    by_hand.Encode({input});
    const std::vector<int32_t> expected = by_hand.Greedy(kLength);
    for (const EncDecCacheMode mode :
         {EncDecCacheMode::kBoth, EncDecCacheMode::kSelfOnly, EncDecCacheMode::kNone}) {
      auto tokens = GenerateEncDec(*model, input, kLength, mode, KvType::kF32, *ws);
      ASSERT_TRUE(tokens.ok()) << tokens.message();
      EXPECT_EQ(*tokens, expected) << "input " << n_input << ", mode " << static_cast<int>(mode);
    }
  }
  auto row = CompareEncDecCache(*model, std::vector<int32_t>{5, 6, 7}, 6, KvType::kF32, 2);
  ASSERT_TRUE(row.ok()) << row.message();
  EXPECT_TRUE(row->same_tokens);
  EXPECT_GT(row->both_s, 0);
  EXPECT_GT(row->self_only_s, 0);
  EXPECT_GT(row->none_s, 0);
}

INSTANTIATE_TEST_SUITE_P(Presets, T5CacheCompareTest, ::testing::Values("t5-tiny", "t5-tiny-v1"));

TEST(T5CacheCompareCliTest, PrintsThreeModesAndPlotsThreeSeries) {
  const std::string model = TinyFile("t5-tiny");
  ASSERT_FALSE(model.empty());
  const std::string plot = testing::TempDir() + "/t5-cache-compare.svg";
  std::string out, err;
  ASSERT_EQ(testing::RunKvserve("bench --cache-compare -m " + model +
                                    " --lengths 4,8 -t 1 --prompt 'Once upon a time' --plot " +
                                    plot + " --shared-input 3 -r 2 --output-format json",
                                &out, &err),
            0)
      << err;
  const auto j = nlohmann::json::parse(out);
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_EQ(j["rows"][0]["length"], 4);
  EXPECT_EQ(j["rows"][1]["length"], 8);
  for (const auto& r : j["rows"]) {
    EXPECT_TRUE(r["same_tokens"].get<bool>()) << r.dump();
    for (const char* key : {"both_caches_s", "self_cache_only_s", "no_cache_s"}) {
      EXPECT_GT(r[key].get<double>(), 0) << key;
    }
    EXPECT_NEAR(r["no_cache_ratio"].get<double>(),
                r["no_cache_s"].get<double>() / r["both_caches_s"].get<double>(), 1e-9);
  }
  const auto& shared = j["shared_input"];
  EXPECT_EQ(shared["requests"], 3);
  EXPECT_EQ(shared["generated_tokens"], 4);
  EXPECT_GT(shared["input_tokens"].get<int>(), 1);
  EXPECT_GT(shared["same_input_s"].get<double>(), 0);
  EXPECT_GT(shared["different_inputs_s"].get<double>(), 0);

  std::stringstream svg_stream;
  svg_stream << std::ifstream(plot, std::ios::binary).rdbuf();
  const std::string svg = svg_stream.str();
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_EQ(Count(svg, "<polyline"), 3u);
  EXPECT_EQ(Count(svg, "<svg"), Count(svg, "</svg>"));
  for (const char* name : {"both caches", "self-attention cache only", "no cache"}) {
    EXPECT_NE(svg.find(name), std::string::npos) << name;
  }

  ASSERT_EQ(
      testing::RunKvserve("bench --cache-compare -m " + model + " --lengths 4 -t 1", &out, &err), 0)
      << err;
  EXPECT_NE(out.find("| 4 |"), std::string::npos) << out;
  EXPECT_NE(out.find("self cache only s"), std::string::npos) << out;
}

TEST(T5CacheCompareCliTest, SharedInputNeedsAnEncoder) {
  std::string out, err;
  EXPECT_EQ(
      testing::RunKvserve("bench --cache-compare -m " + testing::ModelPath("stories260K.gguf") +
                              " --lengths 4 -t 1 --shared-input 2",
                          &out, &err),
      2);
  EXPECT_NE(err.find("--shared-input"), std::string::npos) << err;
  EXPECT_EQ(
      testing::RunKvserve(
          "bench -m " + testing::ModelPath("stories260K.gguf") + " --shared-input 2", &out, &err),
      2);
  EXPECT_NE(err.find("--shared-input needs --cache-compare"), std::string::npos) << err;
}

}  // namespace
}  // namespace kvserve
