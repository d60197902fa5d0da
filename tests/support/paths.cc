#include "support/paths.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace kvserve::testing {

std::string SharedDir() {
  const char* env = std::getenv("KVSERVE_SHARED");
  return env ? env : KVSERVE_SHARED_DIR;
}

std::string ModelPath(const std::string& name) { return SharedDir() + "/models/" + name; }
std::string ReferencePath(const std::string& name) { return SharedDir() + "/reference/" + name; }
std::string KvserveBinary() { return KVSERVE_BINARY; }
std::string TestDataPath(const std::string& name) {
  return std::string(KVSERVE_SOURCE_DIR) + "/tests/data/" + name;
}

std::string RealModelPath(const std::string& name) {
  const char* file = name == "smollm2-135m"  ? "SmolLM2-135M-Instruct.Q4_1.gguf"
                     : name == "gemma3-270m" ? "gemma-3-270m-q4_k_m.gguf"
                                             : nullptr;
  if (file == nullptr) {
    ADD_FAILURE() << "RealModelPath: unknown model '" << name << "'";
    return "";
  }
  const std::string path = std::string(KVSERVE_SOURCE_DIR) + "/models/" + file;
  if (!std::filesystem::exists(path)) {
    ADD_FAILURE() << path << " is missing: run scripts/get-model.sh " << name
                  << " (scripts/test.sh does)";
    return "";
  }
  return path;
}

std::string TempDir() {
  static const std::string dir = [] {
    auto path =
        std::filesystem::temp_directory_path() / ("kvserve-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
    return path.string();
  }();
  return dir;
}

}  // namespace kvserve::testing
