// The command line as a new user meets it, through the real binary: -h/--help on every command,
// --version, and the suggestion for a mistyped flag or command.
#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>
#include <string>

#include "cli/commands.h"
#include "support/cli.h"
#include "support/test_backend.h"

#ifndef KVSERVE_VERSION
#error "tests/CMakeLists.txt defines KVSERVE_VERSION and KVSERVE_GIT_COMMIT for this file"
#endif

namespace kvserve {
namespace {

using testing::RunKvserve;

TEST(CommandHelp, EveryCommandListsEveryFlagOfItsTableAndExitsZero) {
  for (const Command& command : Commands()) {
    for (const char* help : {"--help", "-h"}) {
      SCOPED_TRACE(std::string(command.name) + " " + help);
      std::string out, err;
      ASSERT_EQ(RunKvserve(std::string(command.name) + " " + help, &out, &err), 0) << err;
      EXPECT_EQ(err, "");
      EXPECT_EQ(out.rfind("usage: kvserve " + std::string(command.name), 0), 0u) << out;
      for (const std::string& name : command.flags().Names()) {
        EXPECT_TRUE(std::regex_search(out, std::regex("[ ,]" + name + "[ ,\n]")))
            << name << " missing from:\n"
            << out;
      }
    }
  }
}

TEST(CommandHelp, HelpWinsOverMissingRequiredFlags) {
  // Without -m, run would fail; with --help anywhere among its flags it prints the help instead.
  std::string out, err;
  EXPECT_EQ(RunKvserve("run -n 4 --help", &out, &err), 0) << err;
  EXPECT_NE(out.find("--n-predict N"), std::string::npos) << out;
  EXPECT_EQ(RunKvserve("serve -h", &out, &err), 0) << err;
  EXPECT_NE(out.find("--port N"), std::string::npos) << out;
}

TEST(Version, PrintsTheVersionTheCommitAndTheKernelIsa) {
  const std::string expected = std::string("kvserve ") + KVSERVE_VERSION + " (commit " +
                               KVSERVE_GIT_COMMIT + ", kernels " + TestBackend().kernel_set() +
                               ")\n";
  EXPECT_TRUE(std::regex_match(KVSERVE_VERSION, std::regex("[0-9]+\\.[0-9]+\\.[0-9]+")));
  EXPECT_TRUE(std::regex_match(KVSERVE_GIT_COMMIT, std::regex("[0-9a-f]{4,40}|unknown")));
  for (const char* args : {"--version", "version"}) {
    SCOPED_TRACE(args);
    std::string out, err;
    ASSERT_EQ(RunKvserve(args, &out, &err), 0) << err;
    EXPECT_EQ(out, expected);
    EXPECT_EQ(err, "");
  }
}

TEST(Version, NamesTheKernelTableInUse) {
  ASSERT_EQ(::setenv("KVSERVE_ISA", "scalar", 1), 0);
  std::string out, err;
  const int status = RunKvserve("--version", &out, &err);
  ::unsetenv("KVSERVE_ISA");
  ASSERT_EQ(status, 0) << err;
  EXPECT_NE(out.find(", kernels scalar)"), std::string::npos) << out;
}

TEST(Typos, AMistypedFlagGetsTheNearestOneAndExitCodeTwo) {
  std::string out, err;
  EXPECT_EQ(RunKvserve("run --tmp 0", &out, &err), 2);
  EXPECT_EQ(err, "kvserve run: unknown flag '--tmp' (did you mean '--temp'?)\n");
  EXPECT_EQ(RunKvserve("serve -m x --prot 8080", &out, &err), 2);
  EXPECT_EQ(err, "kvserve serve: unknown flag '--prot' (did you mean '--port'?)\n");
  EXPECT_EQ(RunKvserve("bench --cache-compre", &out, &err), 2);
  EXPECT_NE(err.find("unknown flag '--cache-compre' (did you mean '--cache-compare'?)"),
            std::string::npos)
      << err;
}

TEST(Typos, AMistypedCommandGetsTheNearestOneAndExitCodeTwo) {
  std::string out, err;
  EXPECT_EQ(RunKvserve("rn -m x", &out, &err), 2);
  EXPECT_EQ(err.rfind("kvserve: unknown command 'rn' (did you mean 'run'?)\n", 0), 0u) << err;
  EXPECT_EQ(RunKvserve("--verison", &out, &err), 2);
  EXPECT_EQ(err.rfind("kvserve: unknown flag '--verison' (did you mean '--version'?)\n", 0), 0u)
      << err;
  EXPECT_EQ(RunKvserve("frobnicate", &out, &err), 2);
  EXPECT_EQ(err.rfind("kvserve: unknown command 'frobnicate'\n", 0), 0u) << err;
}

TEST(Usage, NoCommandIsAnErrorAndHelpIsNot) {
  std::string out, err;
  EXPECT_EQ(RunKvserve("", &out, &err), 2);
  EXPECT_EQ(out, "");
  EXPECT_EQ(err.rfind("usage: kvserve COMMAND", 0), 0u) << err;
  for (const char* help : {"-h", "--help"}) {
    EXPECT_EQ(RunKvserve(help, &out, &err), 0);
    EXPECT_EQ(err, "");
    for (const Command& command : Commands()) {
      EXPECT_NE(out.find("  " + std::string(command.name) + " "), std::string::npos)
          << command.name << " missing from:\n"
          << out;
    }
    EXPECT_NE(out.find("--version"), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace kvserve
