// A `kvserve serve` child process on loopback and small HTTP helpers for the server tests.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "server/http_server.h"
#include "support/paths.h"

namespace kvserve::testing {

using nlohmann::json;

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// A `kvserve serve` child process on a free port; killed if the test did not stop it.
class ServeProcess {
 public:
  // `in_child`, when set, runs in the forked child just before exec (e.g. to set a resource limit
  // or drop a capability for the server alone); only async-signal-safe calls belong there.
  static std::unique_ptr<ServeProcess> Start(const std::vector<std::string>& extra,
                                             const std::function<void()>& in_child = {}) {
    static int counter = 0;
    auto process = std::unique_ptr<ServeProcess>(new ServeProcess);
    process->log_path_ = TempDir() + "/serve-" + std::to_string(counter++) + ".log";
    std::vector<std::string> args = {KvserveBinary(),
                                     "serve",
                                     "-m",
                                     ModelPath("stories260K.gguf"),
                                     "--host",
                                     "127.0.0.1",
                                     "--port",
                                     "0",
                                     "-t",
                                     "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    process->pid_ = fork();
    if (process->pid_ == 0) {
      const int fd = open(process->log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      if (in_child) in_child();
      std::vector<char*> argv;
      for (std::string& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    // Wait (bounded) for "ready"; the port is on the "listening" line.
    for (int i = 0; i < 1500; ++i) {
      const std::string log = ReadAll(process->log_path_);
      if (log.find("ready:") != std::string::npos) {
        const size_t at = log.find("127.0.0.1:");
        process->port_ = std::stoi(log.substr(at + 10));
        return process;
      }
      int status = 0;
      if (waitpid(process->pid_, &status, WNOHANG) == process->pid_) {
        process->pid_ = -1;
        ADD_FAILURE() << "kvserve serve exited early:\n" << log;
        return nullptr;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "kvserve serve did not get ready:\n" << ReadAll(process->log_path_);
    return nullptr;
  }

  ~ServeProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  // SIGTERM, then the exit status (bounded wait; -1 if it did not exit).
  int Terminate() {
    kill(pid_, SIGTERM);
    for (int i = 0; i < 3000; ++i) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }

  std::unique_ptr<httplib::Client> Client(const std::string& key = "") const {
    auto client = std::make_unique<httplib::Client>("127.0.0.1", port_);
    client->set_read_timeout(60, 0);
    if (!key.empty()) client->set_bearer_token_auth(key);
    return client;
  }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // The caller reaped the process (waitpid); the destructor leaves it alone.
  void Forget() { pid_ = -1; }
  std::string log() const { return ReadAll(log_path_); }

 private:
  pid_t pid_ = -1;
  int port_ = -1;
  std::string log_path_;
};

struct Reply {
  int status = 0;
  json body;
  std::string text;
  std::string retry_after;
};

inline Reply Post(httplib::Client& client, const std::string& path, const std::string& body,
                  const httplib::Headers& headers = {}) {
  auto result = client.Post(path.c_str(), headers, body, "application/json");
  Reply reply;
  if (!result) return reply;
  reply.status = result->status;
  reply.text = result->body;
  reply.retry_after = result->get_header_value("Retry-After");
  reply.body = json::parse(result->body, nullptr, false);
  return reply;
}

inline Reply Post(httplib::Client& client, const std::string& path, const json& body,
                  const httplib::Headers& headers = {}) {
  return Post(client, path, body.dump(), headers);
}

inline Reply Get(httplib::Client& client, const std::string& path) {
  auto result = client.Get(path.c_str());
  Reply reply;
  if (!result) return reply;
  reply.status = result->status;
  reply.text = result->body;
  reply.body = json::parse(result->body, nullptr, false);
  return reply;
}

// The JSON of each `data:` event, and whether the stream ended with [DONE].
struct SseStream {
  std::vector<json> events;
  bool done = false;
};

inline SseStream ParseSse(const std::string& text) {
  SseStream out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find("\n\n", start);
    if (end == std::string::npos) end = text.size();
    const std::string event = text.substr(start, end - start);
    start = end + 2;
    if (event.rfind("data: ", 0) != 0) continue;  // comments (keep-alives)
    const std::string data = event.substr(6);
    EXPECT_FALSE(out.done) << "event after [DONE]: " << data;
    if (data == "[DONE]") {
      out.done = true;
    } else {
      out.events.push_back(json::parse(data, nullptr, false));
      EXPECT_FALSE(out.events.back().is_discarded()) << data;
    }
  }
  return out;
}

// Concatenated text of choice `index` in a completion or chat stream.
inline std::string StreamText(const SseStream& stream, int index,
                              std::string* finish_reason = nullptr) {
  std::string text;
  for (const json& event : stream.events) {
    for (const json& choice : event.value("choices", json::array())) {
      if (choice["index"] != index) continue;
      if (choice.contains("text")) text += choice["text"].get<std::string>();
      if (choice.contains("delta") && choice["delta"].contains("content")) {
        text += choice["delta"]["content"].get<std::string>();
      }
      if (finish_reason && !choice["finish_reason"].is_null()) {
        *finish_reason = choice["finish_reason"];
      }
    }
  }
  return text;
}

// A metric's value from /metrics text; -1 when absent.
inline double Metric(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + name.size() + 2));
}

inline void ExpectError(const Reply& reply, int status, const std::string& param = "") {
  EXPECT_EQ(reply.status, status) << reply.text;
  ASSERT_TRUE(reply.body.is_object()) << reply.text;
  ASSERT_TRUE(reply.body.contains("error")) << reply.text;
  const json& error = reply.body["error"];
  EXPECT_TRUE(error["message"].is_string() && !error["message"].get<std::string>().empty());
  EXPECT_TRUE(error["type"].is_string());
  EXPECT_TRUE(error.contains("param") && error.contains("code")) << reply.text;
  if (!param.empty()) {
    EXPECT_EQ(error["param"], param) << reply.text;
  }
}

// A fixture whose tests share one `kvserve serve`, started once for the suite with
// Derived::ServeFlags() (extra flags after the defaults of ServeProcess::Start) and terminated at
// its end, which must exit 0. Each test gets its own client.
template <typename Derived>
class SharedServeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    signal(SIGPIPE, SIG_IGN);
    server_ = ServeProcess::Start(Derived::ServeFlags()).release();
  }
  static void TearDownTestSuite() {
    if (server_) {
      EXPECT_EQ(server_->Terminate(), 0) << server_->log();
    }
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    client_ = server_->Client();
  }
  static inline ServeProcess* server_ = nullptr;
  std::unique_ptr<httplib::Client> client_;
};

}  // namespace kvserve::testing
