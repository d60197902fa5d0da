// Where tests find the shared, read-only fixtures (../shared beside the checkout) and the kvserve
// binary. KVSERVE_SHARED overrides the fixture folder.
#pragma once

#include <string>

namespace kvserve::testing {

std::string SharedDir();
std::string ModelPath(const std::string& name);      // SharedDir()/models/name
std::string ReferencePath(const std::string& name);  // SharedDir()/reference/name
std::string KvserveBinary();
// A fresh, empty temporary folder for this test process.
std::string TempDir();

}  // namespace kvserve::testing
