// `kvserve run`: generate from a prompt with the KV cache (or, with --no-cache, by recomputing
// the whole sequence every step).
#include <cstdio>

#include "cli/commands.h"

namespace kvserve {

int RunGenerate(const std::vector<std::string>& argv) {
  std::fprintf(stderr, "kvserve run: not built yet\n");
  return 1;
}

}  // namespace kvserve
