// scripts/loadgen.py against a real `kvserve serve` (stories260K, a per-step target far below
// any step so every prefill beside a decode is cut to the floor): every streamed request
// completes, the figures it prints are consistent (counts, percentile order), and a wrong URL
// is a failure (exit 1) rather than empty figures. No timing is asserted.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "support/serve_process.h"

namespace kvserve {
namespace {

using testing::json;
using testing::ServeProcess;

std::string LoadgenPath() { return std::string(KVSERVE_SOURCE_DIR) + "/scripts/loadgen.py"; }

// Runs the command; returns its stdout and sets *status to its exit code.
std::string RunCommand(const std::string& command, int* status) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    *status = -1;
    return out;
  }
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  const int raw = pclose(pipe);
  *status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return out;
}

TEST(Loadgen, StreamsEveryRequestAndReportsConsistentFigures) {
  auto server = ServeProcess::Start({"--max-step-ms", "0.001", "--max-batched-tokens", "32"});
  ASSERT_NE(server, nullptr);
  const std::string url = "http://127.0.0.1:" + std::to_string(server->port());
  int status = 0;
  const std::string out = RunCommand("python3 " + LoadgenPath() + " --url " + url +
                                         " --clients 8 --requests 2 --words 30 --tokens 12 --json",
                                     &status);
  ASSERT_EQ(status, 0) << out;
  const json r = json::parse(out);
  EXPECT_EQ(r["errors"], 0);
  EXPECT_EQ(r["requests"], 16);
  EXPECT_EQ(r["clients"], 8);
  const int chunks = r["chunks"];
  EXPECT_GT(chunks, 16) << "at least a first chunk per request, and more";
  EXPECT_LE(chunks, 16 * 12);
  for (const char* key : {"ttft_p50_s", "ttft_p99_s", "gap_p50_s", "gap_p99_s", "total_s"}) {
    ASSERT_TRUE(r[key].is_number()) << key;
    EXPECT_TRUE(std::isfinite(r[key].get<double>()) && r[key].get<double>() >= 0) << key;
  }
  EXPECT_LE(r["ttft_p50_s"].get<double>(), r["ttft_p99_s"].get<double>());
  EXPECT_LE(r["gap_p50_s"].get<double>(), r["gap_p99_s"].get<double>());
  EXPECT_LE(r["gap_p99_s"].get<double>(), r["gap_max_s"].get<double>());
  EXPECT_LE(r["ttft_p99_s"].get<double>(), r["total_s"].get<double>());
}

TEST(Loadgen, AnUnreachableServerFails) {
  int status = 0;
  const std::string out = RunCommand(
      "python3 " + LoadgenPath() + " --url http://127.0.0.1:1 --clients 2 --tokens 4 --json 2>&1",
      &status);
  EXPECT_EQ(status, 1) << out;
  EXPECT_NE(out.find("\"errors\": 2"), std::string::npos) << out;
}

}  // namespace
}  // namespace kvserve
