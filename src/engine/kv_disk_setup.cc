#include "engine/kv_disk_setup.h"

#include <filesystem>
#include <system_error>

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
  // A block file holds one block id's K/V of every layer; with several layer groups a block id
  // names a different block in each group's pool.
  const int n_groups = static_cast<int>(spec.groups.size());
  if (n_groups != 1) {
    return R::InvalidArgument("the model has " + std::to_string(n_groups) +
                              " KV layer groups (sliding-window layers); the disk tier serves "
                              "models of one group");
  }
  const std::string fingerprint = DiskTier::Fingerprint(DiskModelIdentity(options, model.file()),
                                                        options.kv_type.Name(), options.block_size);
  return DiskTier::Open(options.kv_disk_dir, options.kv_disk_bytes, fingerprint,
                        KvCache::BytesPerBlock(spec, options.kv_type, options.block_size));
}

}  // namespace kvserve
