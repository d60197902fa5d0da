// `kvserve version` (and `kvserve --version`): one line with the project version, the git commit
// the binary was built from, and the kernel set the default backend runs on this machine (the
// CPU's ISA table).
#include <cstdio>

#include "cli/args.h"
#include "cli/cli_backend.h"
#include "cli/commands.h"

#ifndef KVSERVE_VERSION
#error "CMakeLists.txt defines KVSERVE_VERSION (the project version) for this file"
#endif
#ifndef KVSERVE_GIT_COMMIT
#error "CMakeLists.txt defines KVSERVE_GIT_COMMIT (git rev-parse --short HEAD) for this file"
#endif

namespace kvserve {

FlagTable VersionFlagTable() { return {.usage = "version", .groups = {}}; }

std::string VersionLine() {
  return std::string("kvserve ") + KVSERVE_VERSION + " (commit " + KVSERVE_GIT_COMMIT +
         ", kernels " + CliBackend().kernel_set() + ")";
}

int RunVersion(const std::vector<std::string>& argv) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "kvserve version: %s\n", message.c_str());
    return 2;
  };
  auto args = Args::Parse(argv, VersionFlagTable());
  if (!args.ok()) return fail(args.message());
  if (!args->positional().empty()) {
    return fail("unexpected argument '" + args->positional()[0] + "'");
  }
  std::printf("%s\n", VersionLine().c_str());
  return 0;
}

}  // namespace kvserve
