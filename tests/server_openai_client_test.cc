// The official `openai` npm package (tests/openai_client, installed by scripts/install-npm.sh)
// runs its chat and completion calls, streaming and not, against a real `kvserve serve`.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/paths.h"

namespace kvserve {
namespace {

using ::kvserve::testing::KvserveBinary;
using ::kvserve::testing::ModelPath;
using ::kvserve::testing::TempDir;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

TEST(OpenAiClientTest, OfficialNodeClientTalksToServe) {
  const std::filesystem::path client_dir =
      std::filesystem::path(__FILE__).parent_path() / "openai_client";
  if (!std::filesystem::exists(client_dir / "node_modules" / "openai" / "package.json")) {
    GTEST_SKIP() << "the openai npm package is not installed: run scripts/install-npm.sh";
  }
  if (std::system("node --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "node is not installed";

  const std::string log_path = TempDir() + "/serve-openai.log";
  const std::string key = "test-key-0123";
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<std::string> args = {
        KvserveBinary(), "serve",     "-m",     ModelPath("stories260K.gguf"),
        "--host",        "127.0.0.1", "--port", "0",
        "--api-key",     key,         "-t",     "1"};
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int port = -1;
  for (int i = 0; i < 1500 && port < 0; ++i) {
    const std::string log = ReadAll(log_path);
    if (log.find("ready:") != std::string::npos) {
      port = std::stoi(log.substr(log.find("127.0.0.1:") + 10));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ASSERT_GT(port, 0) << ReadAll(log_path);

  const std::string output = TempDir() + "/openai-client.out";
  const std::string command =
      "cd '" + client_dir.string() + "' && KVSERVE_URL=http://127.0.0.1:" + std::to_string(port) +
      "/v1 KVSERVE_API_KEY=" + key + " timeout 120 node --test test.mjs >'" + output + "' 2>&1";
  const int status = std::system(command.c_str());
  kill(pid, SIGTERM);
  int server_status = 0;
  waitpid(pid, &server_status, 0);
  const std::string report = ReadAll(output);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << report;
  EXPECT_NE(report.find("# pass 7"), std::string::npos) << report;
  EXPECT_NE(report.find("# fail 0"), std::string::npos) << report;
  EXPECT_TRUE(WIFEXITED(server_status) && WEXITSTATUS(server_status) == 0) << ReadAll(log_path);
}

}  // namespace
}  // namespace kvserve
