// A whole file's bytes, for tests that read committed data.
#pragma once

#include <string>

namespace kvserve::testing {

// The bytes of `path`; fails the calling test (ADD_FAILURE naming the path) and returns "" when
// it cannot be read.
std::string ReadWholeFile(const std::string& path);

}  // namespace kvserve::testing
