// What the machine offers: the host facts `kvserve doctor` prints beside the backend's own
// measurements (Backend::MeasureReadBandwidth, ...).
#pragma once

#include <cstdint>
#include <string>

namespace kvserve {

struct MachineInfo {
  std::string cpu_model;         // /proc/cpuinfo "model name", or "unknown"
  std::string cpu_id;            // "GenuineIntel family 6 model 143 stepping 8", or ""
  int hardware_threads = 0;      // logical CPUs this process may use
  int cores = 0;                 // physical cores (cpuinfo "cpu cores"), 0 if unknown
  uint64_t ram_total_bytes = 0;  // /proc/meminfo MemTotal
  uint64_t ram_available_bytes = 0;
  uint64_t disk_free_bytes = 0;  // statvfs of the working directory, for this user
  std::string disk_path;
};
MachineInfo ReadMachineInfo();

}  // namespace kvserve
