#include "support/read_file.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace kvserve::testing {

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path;
    return "";
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

}  // namespace kvserve::testing
