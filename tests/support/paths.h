// Where tests find the shared, read-only fixtures (../shared beside the checkout), the test data
// committed with them (tests/data) and the kvserve binary. KVSERVE_SHARED overrides the fixture
// folder.
#pragma once

#include <string>

namespace kvserve::testing {

std::string SharedDir();
std::string ModelPath(const std::string& name);      // SharedDir()/models/name
std::string ReferencePath(const std::string& name);  // SharedDir()/reference/name
// A real model fetched by scripts/get-model.sh into the checkout's models/ folder ("smollm2-135m":
// SmolLM2-135M-Instruct.Q4_1.gguf, "gemma3-270m": gemma-3-270m-q4_k_m.gguf). Fails the calling
// test (ADD_FAILURE, with the command to run) and returns "" when the file is not there.
std::string RealModelPath(const std::string& name);
// The committed test data folder, tests/data/name.
std::string TestDataPath(const std::string& name);
std::string KvserveBinary();
// A fresh, empty temporary folder for this test process.
std::string TempDir();

}  // namespace kvserve::testing
