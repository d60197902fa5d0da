#include "cli/machine_info.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "util/thread_pool.h"

namespace kvserve {

namespace {

// The value after "key:" on the first line of `path` that starts with `key`.
std::string ProcField(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) != 0) continue;
    const size_t colon = line.find(':');
    // The whole key: "model" is not "model name".
    if (colon == std::string::npos || line.find_first_not_of(" \t", key.size()) != colon) continue;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

uint64_t MeminfoBytes(const std::string& key) {
  const std::string value = ProcField("/proc/meminfo", key);  // "24576000 kB"
  return value.empty() ? 0 : std::strtoull(value.c_str(), nullptr, 10) * 1024;
}

}  // namespace

MachineInfo ReadMachineInfo() {
  MachineInfo info;
  info.cpu_model = ProcField("/proc/cpuinfo", "model name");
  if (info.cpu_model.empty()) info.cpu_model = "unknown";
  const std::string vendor = ProcField("/proc/cpuinfo", "vendor_id");
  if (!vendor.empty()) {
    info.cpu_id = vendor + " family " + ProcField("/proc/cpuinfo", "cpu family") + " model " +
                  ProcField("/proc/cpuinfo", "model") + " stepping " +
                  ProcField("/proc/cpuinfo", "stepping");
  }
  info.hardware_threads = HardwareThreads();
  info.cores = std::atoi(ProcField("/proc/cpuinfo", "cpu cores").c_str());
  info.ram_total_bytes = MeminfoBytes("MemTotal");
  info.ram_available_bytes = MeminfoBytes("MemAvailable");
  std::error_code error;
  info.disk_path = std::filesystem::current_path(error).string();
  struct statvfs fs;
  if (!error && ::statvfs(info.disk_path.c_str(), &fs) == 0) {
    info.disk_free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  }
  return info;
}

}  // namespace kvserve
