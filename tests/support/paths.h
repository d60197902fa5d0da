// Where tests find the shared, read-only fixtures (../shared beside the checkout), the test data
// committed with them (tests/data) and the kvserve binary. KVSERVE_SHARED overrides the fixture
// folder.
#pragma once

#include <string>

namespace kvserve::testing {

std::string SharedDir();
std::string ModelPath(const std::string& name);      // SharedDir()/models/name
std::string ReferencePath(const std::string& name);  // SharedDir()/reference/name
std::string TestDataPath(const std::string& name);   // tests/data/name in the source tree
std::string KvserveBinary();
// A fresh, empty temporary folder for this test process.
std::string TempDir();

}  // namespace kvserve::testing
