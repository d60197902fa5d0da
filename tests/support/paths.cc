#include "support/paths.h"

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
std::string TestDataPath(const std::string& name) {
  return std::string(KVSERVE_TEST_DATA_DIR) + "/" + name;
}
std::string KvserveBinary() { return KVSERVE_BINARY; }

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
