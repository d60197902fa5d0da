// backend_registry_test: backends are chosen by name, from one registry, by the CLI and the tests:
// - the registry lists "cpu" first and builds it; an unknown name is an error listing the names;
// - the default name (CLI and tests alike) is KVSERVE_BACKEND, else the first entry;
// - a backend measures and checks itself through the Backend interface alone (no kernels/cpu/);
// - `--backend NAME` and KVSERVE_BACKEND choose it on the command line, and a wrong name is exit
//   status 2 with a message naming the flag, the value and what the build has.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "kernels/backend.h"
#include "kernels/backend_registry.h"
#include "support/cli.h"
#include "support/paths.h"

namespace kvserve {
namespace {

TEST(BackendRegistry, ListsCpuFirstAndBuildsItByName) {
  ASSERT_FALSE(RegisteredBackends().empty());
  EXPECT_STREQ(RegisteredBackends()[0].name, "cpu");
  EXPECT_EQ(BackendNames().substr(0, 3), "cpu");
  for (const BackendEntry& entry : RegisteredBackends()) {
    SCOPED_TRACE(entry.name);
    auto backend = MakeBackend(entry.name);
    ASSERT_TRUE(backend.ok()) << backend.message();
    // name() is the registry name and the kernel set: "cpu-avx2".
    EXPECT_EQ((*backend)->name(), std::string(entry.name) + "-" + (*backend)->kernel_set());
    EXPECT_FALSE((*backend)->device().empty());
  }
}

TEST(BackendRegistry, TheDefaultIsKvserveBackendElseTheFirstEntry) {
  const char* saved = std::getenv("KVSERVE_BACKEND");
  const std::string restore = saved != nullptr ? saved : "";
  unsetenv("KVSERVE_BACKEND");
  EXPECT_EQ(DefaultBackendName(), RegisteredBackends()[0].name);
  setenv("KVSERVE_BACKEND", "", 1);
  EXPECT_EQ(DefaultBackendName(), RegisteredBackends()[0].name);  // empty is unset
  setenv("KVSERVE_BACKEND", "warp-drive", 1);
  EXPECT_EQ(DefaultBackendName(), "warp-drive");  // MakeBackend then names the mistake
  if (saved != nullptr) {
    setenv("KVSERVE_BACKEND", restore.c_str(), 1);
  } else {
    unsetenv("KVSERVE_BACKEND");
  }
}

TEST(BackendRegistry, AnUnknownNameIsAnErrorThatListsTheKnownOnes) {
  auto backend = MakeBackend("warp-drive");
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(backend.message().find("'warp-drive'"), std::string::npos) << backend.message();
  EXPECT_NE(backend.message().find("cpu"), std::string::npos) << backend.message();
  EXPECT_FALSE(MakeBackend("").ok());
  EXPECT_FALSE(MakeBackend("CPU").ok());  // names are exact
}

TEST(BackendRegistry, EveryBackendMeasuresAndChecksItself) {
  for (const BackendEntry& entry : RegisteredBackends()) {
    SCOPED_TRACE(entry.name);
    auto backend = MakeBackend(entry.name);
    ASSERT_TRUE(backend.ok()) << backend.message();
    auto ws = (*backend)->NewWorkspace({.n_threads = 2});
    EXPECT_EQ(ws->threads(), 2);
    const Measurement read = (*backend)->MeasureReadBandwidth(64 << 20, 2, *ws);
    EXPECT_EQ(read.repeats, 2);
    EXPECT_GT(read.best, 0);
    EXPECT_GE(read.best, read.mean);
    const Measurement flops = (*backend)->MeasureMatmulFlops(GgmlType::kQ8_0, 4, 64, 256, 1, *ws);
    EXPECT_EQ(flops.repeats, 1);
    EXPECT_GT(flops.best, 0);
    const std::vector<KernelCheck> checks = (*backend)->CheckKernels();
    ASSERT_FALSE(checks.empty());
    for (const KernelCheck& check : checks) {
      EXPECT_TRUE(check.ok) << check.what << ": " << check.max_error << ", " << check.max_ratio;
      EXPECT_LE(check.max_ratio, 1.0) << check.what;
    }
  }
}

TEST(BackendFlag, ChoosesTheBackendByNameAndRefusesAnUnknownOne) {
  const std::string model = testing::ModelPath("stories260K.gguf");
  std::string out, err;
  ASSERT_EQ(
      testing::RunKvserve("run -m " + model + " -p Once -n 4 --temp 0 --backend cpu", &out, &err),
      0)
      << err;
  const std::string with_flag = out;
  EXPECT_FALSE(with_flag.empty());

  EXPECT_EQ(
      testing::RunKvserve("run -m " + model + " -p Once -n 4 --backend warp-drive", &out, &err), 2);
  EXPECT_NE(err.find("flag --backend: backend 'warp-drive' is not in this build (it has: cpu"),
            std::string::npos)
      << err;
  EXPECT_EQ(testing::RunKvserve("doctor -t 1 -r 1 --bandwidth-mib 64 --backend nope", &out, &err),
            2);
  EXPECT_NE(err.find("flag --backend: backend 'nope'"), std::string::npos) << err;

  // KVSERVE_BACKEND is the default; the flag wins over it.
  ASSERT_EQ(::setenv("KVSERVE_BACKEND", "nope", 1), 0);
  const int from_env = testing::RunKvserve("info " + model, &out, &err);
  const int flag_wins =
      testing::RunKvserve("run -m " + model + " -p Once -n 4 --temp 0 --backend cpu", &out, &err);
  ::unsetenv("KVSERVE_BACKEND");
  EXPECT_EQ(from_env, 2);
  EXPECT_EQ(flag_wins, 0) << err;
  EXPECT_EQ(out, with_flag);
}

}  // namespace
}  // namespace kvserve
