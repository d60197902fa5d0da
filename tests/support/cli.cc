#include "support/cli.h"

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "support/paths.h"

namespace kvserve::testing {

int RunKvserve(const std::string& args, std::string* out, std::string* err) {
  static int counter = 0;
  const std::string base = TempDir() + "/cli-" + std::to_string(counter++);
  const std::string command =
      KvserveBinary() + " " + args + " >" + base + ".out 2>" + base + ".err";
  const int status = std::system(command.c_str());
  auto slurp = [](const std::string& path) {
    std::stringstream s;
    s << std::ifstream(path).rdbuf();
    return s.str();
  };
  *out = slurp(base + ".out");
  *err = slurp(base + ".err");
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

}  // namespace kvserve::testing
