// `kvserve doctor [-t N] [--bandwidth-mib M] [--output-format text|json]`: what this machine is
// and what it measures at (memory bandwidth, matmul rate: the ceilings of design.md's performance
// model), plus a check of the active kernels against their scalar twins. Exits 1 when a check
// fails.
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
constexpr const char* kGpu = "none (built without GPU support)";
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
                       {.name = "--output-format",
                        .value_name = "FORMAT",
                        .default_text = "text",
                        .help = "text or json"}}}}};
}

int RunDoctor(const std::vector<std::string>& argv) {
  auto args = Args::Parse(argv, DoctorFlagTable());
  if (!args.ok()) return Fail(args.message(), 2);
  if (!args->positional().empty()) {
    return Fail("unexpected argument '" + args->positional()[0] + "'", 2);
  }
  auto threads = args->GetInt("--threads", 0);
  auto mib = args->GetInt("--bandwidth-mib", 1024);
  auto repeats = args->GetInt("--repeats", 5);
  for (const Status& s : {threads.status(), mib.status(), repeats.status()}) {
    if (!s.ok()) return Fail(s.message(), 2);
  }
  if (*threads < 0 || *threads > 1024) {
    return Fail("flag -t: " + std::to_string(*threads) + " threads is out of range (0 to 1024)", 2);
  }
  if (*mib < 64 || *mib > (1 << 20)) {
    return Fail(
        "flag --bandwidth-mib: " + std::to_string(*mib) + " is out of range (64 to 1048576)", 2);
  }
  if (*repeats < 1 || *repeats > 1000) {
    return Fail("flag -r: " + std::to_string(*repeats) + " is out of range (1 to 1000)", 2);
  }
  const std::string format = args->GetOr("--output-format", "text");
  if (format != "text" && format != "json") {
    return Fail("flag --output-format: '" + format + "' is not one of text, json", 2);
  }

  auto chosen = CliBackend(*args);
  if (!chosen.ok()) return Fail(chosen.message(), 2);
  const Backend& backend = **chosen;

  const MachineInfo info = ReadMachineInfo();
  const std::unique_ptr<Workspace> ws =
      backend.NewWorkspace({.n_threads = static_cast<int>(*threads)});
  const std::vector<KernelCheck> checks = backend.CheckKernels();
  bool all_ok = true;
  for (const KernelCheck& check : checks) all_ok = all_ok && check.ok;
  const uint64_t buffer_bytes = static_cast<uint64_t>(*mib) << 20;
  const int n = static_cast<int>(*repeats);
  const Measurement bandwidth = backend.MeasureReadBandwidth(buffer_bytes, n, *ws);
  const Measurement f32 =
      backend.MeasureMatmulFlops(GgmlType::kF32, kMatmulM, kMatmulN, kMatmulN, n, *ws);
  const Measurement q8 =
      backend.MeasureMatmulFlops(GgmlType::kQ8_0, kMatmulM, kMatmulN, kMatmulN, n, *ws);

  if (format == "json") {
    nlohmann::json check_list = nlohmann::json::array();
    for (const KernelCheck& c : checks) {
      check_list.push_back(
          {{"what", c.what}, {"ok", c.ok}, {"max_error", c.max_error}, {"max_ratio", c.max_ratio}});
    }
    const nlohmann::json out = {
        {"cpu", info.cpu_model},
        {"cpu_id", info.cpu_id},
        {"backend", backend.name()},
        {"backends", BackendNames()},
        {"isa", backend.kernel_set()},
        {"cores", info.cores},
        {"hardware_threads", info.hardware_threads},
        {"threads", ws->threads()},
        {"ram_total_bytes", info.ram_total_bytes},
        {"ram_available_bytes", info.ram_available_bytes},
        {"disk_free_bytes", info.disk_free_bytes},
        {"disk_path", info.disk_path},
        {"bandwidth_gb_s", bandwidth.best / 1e9},
        {"bandwidth_mean_gb_s", bandwidth.mean / 1e9},
        {"bandwidth_buffer_bytes", buffer_bytes},
        {"matmul_f32_gflop_s", f32.best / 1e9},
        {"matmul_q8_0_gflop_s", q8.best / 1e9},
        {"matmul_shape", {kMatmulM, kMatmulN, kMatmulN}},
        {"repeats", *repeats},
        {"kernel_checks", check_list},
        {"check_ok", all_ok},
        {"gpu", kGpu},
    };
    std::printf("%s\n", out.dump(2).c_str());
    return all_ok ? 0 : 1;
  }
  std::printf("cpu:        %s%s%s%s\n", info.cpu_model.c_str(), info.cpu_id.empty() ? "" : " (",
              info.cpu_id.c_str(), info.cpu_id.empty() ? "" : ")");
  std::printf("backend:    %s (this build has: %s)\n", backend.name().c_str(),
              BackendNames().c_str());
  std::printf("isa:        %s (%s)\n", backend.kernel_set().c_str(), backend.device().c_str());
  std::printf("threads:    %d hardware threads, %d cores; measuring with %d\n",
              info.hardware_threads, info.cores, ws->threads());
  std::printf("memory:     %.1f GiB total, %.1f GiB available\n", GiB(info.ram_total_bytes),
              GiB(info.ram_available_bytes));
  std::printf("disk:       %.1f GiB free in %s\n", GiB(info.disk_free_bytes),
              info.disk_path.c_str());
  std::printf("bandwidth:  %.1f GB/s read (best of %d, mean %.1f; %lld MiB buffer)\n",
              bandwidth.best / 1e9, bandwidth.repeats, bandwidth.mean / 1e9,
              static_cast<long long>(*mib));
  std::printf("matmul:     F32 %.1f GFLOP/s, Q8_0 %.1f GFLOP/s (m=%d, %dx%d, best of %d)\n",
              f32.best / 1e9, q8.best / 1e9, kMatmulM, kMatmulN, kMatmulN, f32.repeats);
  for (const KernelCheck& c : checks) {
    std::printf("check:      %-14s %s vs scalar: %s (max error %.3g, %.2f of tolerance)\n",
                c.what.c_str(), backend.kernel_set().c_str(), c.ok ? "ok" : "FAILED", c.max_error,
                c.max_ratio);
  }
  std::printf("gpu:        %s\n", kGpu);
  std::printf("status:     %s\n", all_ok ? "ok" : "FAILED: kernels disagree with the scalar twins");
  return all_ok ? 0 : 1;
}

}  // namespace kvserve
