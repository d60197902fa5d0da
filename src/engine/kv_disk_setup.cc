#include "engine/kv_disk_setup.h"

#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "kv/kv_cache.h"

namespace kvserve {

std::string DiskModelIdentity(const EngineOptions& options, const GgufFile& file) {
  if (!options.kv_disk_model_id.empty()) return options.kv_disk_model_id;
  std::error_code error;
  const auto path = std::filesystem::weakly_canonical(file.path(), error);
  const auto mtime = std::filesystem::last_write_time(file.path(), error);
  return (path.empty() ? file.path() : path.string()) + "|" + std::to_string(file.file_size()) +
         "|" + std::to_string(error ? 0 : mtime.time_since_epoch().count());
}

std::string DiskGroupLayout(const KvSpec& spec) {
  if (spec.groups.size() <= 1) return "";
  std::string layout;
  for (const KvGroupSpec& group : spec.groups) {
    if (!layout.empty()) layout += "|";
    layout += group.kind->Describe() + ":layers";
    for (int layer : group.layers) layout += " " + std::to_string(layer);
    layout += group.kind->per_position()
                  ? ":kv " + std::to_string(group.n_kv_heads) + "x" + std::to_string(group.head_dim)
                  : ":state " + std::to_string(group.state_floats);
  }
  return layout;
}

Result<std::unique_ptr<DiskTier>> OpenEngineDiskTier(const EngineOptions& options,
                                                     const Model& model) {
  using R = Result<std::unique_ptr<DiskTier>>;
  if (!options.prefix_caching) {
    return R::InvalidArgument(
        "--kv-disk needs the prefix cache (not --no-prefix-cache or --no-cache)");
  }
  const KvSpec spec = model.kv_spec();
  for (const KvGroupSpec& group : spec.groups) {
    if (!group.kind->disk_storable()) {
      return R::InvalidArgument("the model's " + group.kind->Describe() +
                                " layers keep state the disk tier cannot store");
    }
  }
  // One file per group and block: what a block of each group holds is its kind's (K/V rows of
  // its positions, or a recurrent state), BytesPerBlock of that group.
  std::vector<uint64_t> block_bytes;
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    block_bytes.push_back(
        KvCache::BytesPerBlock(spec, options.kv_type, options.block_size, static_cast<int>(g)));
  }
  const std::string fingerprint =
      DiskTier::Fingerprint(DiskModelIdentity(options, model.file()), options.kv_type.Name(),
                            options.block_size, DiskGroupLayout(spec));
  return DiskTier::Open(options.kv_disk_dir, options.kv_disk_bytes, fingerprint,
                        std::move(block_bytes));
}

}  // namespace kvserve
