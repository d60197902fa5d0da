// `kvserve doctor [-t N] [--bandwidth-mib M] [--output-format text|json]`: what this machine is
// and what it measures at (memory bandwidth, matmul rate: the ceilings of design.md's performance
// model), plus a check of the active kernels against the backend's reference (the CPU: the scalar
// twins). Exits 1 when a check fails.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/cli_backend.h"
#include "cli/commands.h"
#include "cli/machine_info.h"
#include "kernels/backend_registry.h"

namespace kvserve {

namespace {

constexpr const char* kUsage =
    "usage: kvserve doctor [-t N] [--bandwidth-mib M (>= 64, default 1024)] [--repeats R] "
    "[--backend NAME] [--output-format text|json]";
// The matmul rate is measured on this shape: a batch of kMatmulM rows against a square matrix.
constexpr int kMatmulM = 64;
constexpr int kMatmulN = 2048;

int Fail(const std::string& message, int code) {
  std::fprintf(stderr, "kvserve doctor: %s\n%s\n", message.c_str(), kUsage);
  return code;
}

double GiB(uint64_t bytes) { return bytes / (1024.0 * 1024.0 * 1024.0); }

}  // namespace

FlagTable DoctorFlagTable() {
  return {.usage = "doctor [flags]",
          .groups = {{"doctor",
                      {{.name = "--threads",
                        .alias = "-t",
                        .value_name = "N",
                        .default_text = "0, one per core",
                        .help = "threads of the measurements"},
                       {.name = "--bandwidth-mib",
                        .value_name = "MIB",
                        .default_text = "1024",
                        .help = "buffer of the read-bandwidth probe, 64 to 1048576"},
                       {.name = "--repeats",
                        .alias = "-r",
                        .value_name = "N",
                        .default_text = "5",
                        .help = "runs of each measurement (the best is shown)"},
                       BackendFlag(),
                       DeviceFlag(),
                       {.name = "--output-format",
                        .value_name = "FORMAT",
                        .default_text = "text",
                        .help = "text or json"}}}}};
}

namespace {

struct DoctorFlags {
  int threads = 0;
  int64_t mib = 1024;
  int repeats = 5;
  std::string format = "text";
};

// The flags, range-checked; the error names the flag and the value.
Result<DoctorFlags> ReadDoctorFlags(const Args& args) {
  if (!args.positional().empty()) {
    return Status::InvalidArgument("unexpected argument '" + args.positional()[0] + "'");
  }
  auto threads = args.GetInt("--threads", 0);
  auto mib = args.GetInt("--bandwidth-mib", 1024);
  auto repeats = args.GetInt("--repeats", 5);
  for (const Status& s : {threads.status(), mib.status(), repeats.status()}) {
    if (!s.ok()) return s;
  }
  if (*threads < 0 || *threads > 1024) {
    return Status::InvalidArgument("flag -t: " + std::to_string(*threads) +
                                   " threads is out of range (0 to 1024)");
  }
  if (*mib < 64 || *mib > (1 << 20)) {
    return Status::InvalidArgument("flag --bandwidth-mib: " + std::to_string(*mib) +
                                   " is out of range (64 to 1048576)");
  }
  if (*repeats < 1 || *repeats > 1000) {
    return Status::InvalidArgument("flag -r: " + std::to_string(*repeats) +
                                   " is out of range (1 to 1000)");
  }
  DoctorFlags flags{.threads = static_cast<int>(*threads),
                    .mib = *mib,
                    .repeats = static_cast<int>(*repeats),
                    .format = args.GetOr("--output-format", "text")};
  if (flags.format != "text" && flags.format != "json") {
    return Status::InvalidArgument("flag --output-format: '" + flags.format +
                                   "' is not one of text, json");
  }
  return flags;
}

// The GPUs the build's backends can run on, one line each ("vulkan 0: llvmpipe ..."), or why
// there are none.
std::vector<std::string> GpuLines() {
  std::vector<std::string> lines;
  for (const BackendEntry& entry : RegisteredBackends()) {
    if (entry.devices == nullptr) continue;
    auto devices = entry.devices();
    if (!devices.ok()) {
      lines.push_back(std::string(entry.name) + ": " + devices.message());
    } else if (devices->empty()) {
      lines.push_back(std::string(entry.name) + ": no device (no driver found)");
    }
    for (const std::string& device : devices.ok() ? *devices : std::vector<std::string>{}) {
      lines.push_back(std::string(entry.name) + " " + device);
    }
  }
  if (lines.empty()) lines.push_back("none (built without GPU support)");
  return lines;
}

// What doctor reports: the host, and the backend's checks and measurements.
struct DoctorReport {
  MachineInfo info;
  const Backend* backend = nullptr;
  int threads = 0;
  std::vector<KernelCheck> checks;
  bool all_ok = true;
  uint64_t buffer_bytes = 0;
  Measurement bandwidth, f32, q8;
};

DoctorReport Examine(const Backend& backend, const DoctorFlags& flags) {
  DoctorReport r{.info = ReadMachineInfo(), .backend = &backend};
  const std::unique_ptr<Workspace> ws = backend.NewWorkspace({.n_threads = flags.threads});
  r.threads = ws->threads();
  r.checks = backend.CheckKernels();
  for (const KernelCheck& check : r.checks) r.all_ok = r.all_ok && check.ok;
  r.buffer_bytes = static_cast<uint64_t>(flags.mib) << 20;
  r.bandwidth = backend.MeasureReadBandwidth(r.buffer_bytes, flags.repeats, *ws);
  r.f32 =
      backend.MeasureMatmulFlops(GgmlType::kF32, kMatmulM, kMatmulN, kMatmulN, flags.repeats, *ws);
  r.q8 =
      backend.MeasureMatmulFlops(GgmlType::kQ8_0, kMatmulM, kMatmulN, kMatmulN, flags.repeats, *ws);
  return r;
}

void PrintJson(const DoctorReport& r, const DoctorFlags& flags) {
  const MachineInfo& info = r.info;
  nlohmann::json check_list = nlohmann::json::array();
  for (const KernelCheck& c : r.checks) {
    check_list.push_back(
        {{"what", c.what}, {"ok", c.ok}, {"max_error", c.max_error}, {"max_ratio", c.max_ratio}});
  }
  const nlohmann::json out = {
      {"cpu", info.cpu_model},
      {"cpu_id", info.cpu_id},
      {"backend", r.backend->name()},
      {"backends", BackendNames()},
      {"isa", r.backend->kernel_set()},
      {"cores", info.cores},
      {"hardware_threads", info.hardware_threads},
      {"threads", r.threads},
      {"ram_total_bytes", info.ram_total_bytes},
      {"ram_available_bytes", info.ram_available_bytes},
      {"disk_free_bytes", info.disk_free_bytes},
      {"disk_path", info.disk_path},
      {"bandwidth_gb_s", r.bandwidth.best / 1e9},
      {"bandwidth_mean_gb_s", r.bandwidth.mean / 1e9},
      {"bandwidth_buffer_bytes", r.buffer_bytes},
      {"matmul_f32_gflop_s", r.f32.best / 1e9},
      {"matmul_q8_0_gflop_s", r.q8.best / 1e9},
      {"matmul_shape", {kMatmulM, kMatmulN, kMatmulN}},
      {"repeats", flags.repeats},
      {"kernel_checks", check_list},
      {"check_ok", r.all_ok},
      {"gpu", GpuLines()},
  };
  std::printf("%s\n", out.dump(2).c_str());
}

void PrintText(const DoctorReport& r, const DoctorFlags& flags) {
  const MachineInfo& info = r.info;
  const std::string kernels = r.backend->kernel_set();
  std::printf("cpu:        %s%s%s%s\n", info.cpu_model.c_str(), info.cpu_id.empty() ? "" : " (",
              info.cpu_id.c_str(), info.cpu_id.empty() ? "" : ")");
  std::printf("backend:    %s\n", r.backend->name().c_str());
  for (const BackendEntry& entry : RegisteredBackends()) {
    std::printf("built in:   %-6s %s\n", entry.name, entry.summary);
  }
  std::printf("isa:        %s (%s)\n", kernels.c_str(), r.backend->device().c_str());
  std::printf("threads:    %d hardware threads, %d cores; measuring with %d\n",
              info.hardware_threads, info.cores, r.threads);
  std::printf("memory:     %.1f GiB total, %.1f GiB available\n", GiB(info.ram_total_bytes),
              GiB(info.ram_available_bytes));
  std::printf("disk:       %.1f GiB free in %s\n", GiB(info.disk_free_bytes),
              info.disk_path.c_str());
  std::printf("bandwidth:  %.1f GB/s read (best of %d, mean %.1f; %lld MiB buffer)\n",
              r.bandwidth.best / 1e9, r.bandwidth.repeats, r.bandwidth.mean / 1e9,
              static_cast<long long>(flags.mib));
  std::printf("matmul:     F32 %.1f GFLOP/s, Q8_0 %.1f GFLOP/s (m=%d, %dx%d, best of %d)\n",
              r.f32.best / 1e9, r.q8.best / 1e9, kMatmulM, kMatmulN, kMatmulN, r.f32.repeats);
  for (const KernelCheck& c : r.checks) {
    std::printf("check:      %-14s %s vs reference: %s (max error %.3g, %.2f of tolerance)\n",
                c.what.c_str(), kernels.c_str(), c.ok ? "ok" : "FAILED", c.max_error, c.max_ratio);
  }
  for (const std::string& line : GpuLines()) std::printf("gpu:        %s\n", line.c_str());
  std::printf("status:     %s\n",
              r.all_ok ? "ok" : "FAILED: kernels disagree with the backend's reference kernels");
}

}  // namespace

int RunDoctor(const std::vector<std::string>& argv) {
  auto args = Args::Parse(argv, DoctorFlagTable());
  if (!args.ok()) return Fail(args.message(), 2);
  auto flags = ReadDoctorFlags(*args);
  if (!flags.ok()) return Fail(flags.message(), 2);
  auto backend = CliBackend(*args);
  if (!backend.ok()) return Fail(backend.message(), 2);
  const DoctorReport report = Examine(**backend, *flags);
  if (flags->format == "json") {
    PrintJson(report, *flags);
  } else {
    PrintText(report, *flags);
  }
  return report.all_ok ? 0 : 1;
}

}  // namespace kvserve
