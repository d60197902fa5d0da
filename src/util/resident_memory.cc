#include "util/resident_memory.h"

#include <cstdio>
#include <cstring>

namespace kvserve {

namespace {
// The value of a "Name:   1234 kB" line of /proc/self/status, in bytes.
std::optional<uint64_t> StatusKilobytes(const char* name) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return std::nullopt;
  char line[256];
  std::optional<uint64_t> bytes;
  const size_t name_len = std::strlen(name);
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    unsigned long long kb = 0;
    if (std::strncmp(line, name, name_len) == 0 && line[name_len] == ':' &&
        std::sscanf(line + name_len + 1, "%llu", &kb) == 1) {
      bytes = static_cast<uint64_t>(kb) * 1024;
      break;
    }
  }
  std::fclose(f);
  return bytes;
}
}  // namespace

std::optional<uint64_t> PeakResidentBytes() { return StatusKilobytes("VmHWM"); }

bool ResetPeakResident() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (f == nullptr) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

}  // namespace kvserve
