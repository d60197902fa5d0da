// Converting a model in-process, as `kvserve convert` does, for the tests of the converter.
#pragma once

#include <string>

#include "model/quant_recipe.h"

namespace kvserve::testing {

// GgufConverter of the GGUF file at `source_path` with `recipe`, written to
// TempDir()/<out_name>.gguf; returns that path. Failures are test failures (the file is then
// missing or partial).
std::string ConvertToTemp(const std::string& source_path, const QuantRecipe& recipe,
                          const std::string& out_name);

}  // namespace kvserve::testing
