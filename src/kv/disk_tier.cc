#include "kv/disk_tier.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <system_error>
#include <utility>
#include <vector>

namespace kvserve {

namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'K', 'V', 'S', 'D', 'I', 'S', 'K', '1'};
constexpr uint32_t kVersion = 1;
constexpr const char* kSuffix = ".kvblock";
constexpr const char* kTempPrefix = ".tmp.";
// A temporary file this old is an orphan of a killed writer: one block's write takes milliseconds.
constexpr auto kStaleTempAge = std::chrono::minutes(1);

// The header, written field by field in little-endian order (x86-64's own).
struct Header {
  char magic[8];
  uint32_t version;
  uint32_t group;  // the KV layer group (version 1 before groups: "reserved", always 0)
  Sha256Digest fingerprint;
  Sha256Digest key;
  uint64_t payload_bytes;
  Sha256Digest checksum;
};
static_assert(sizeof(Header) == 8 + 4 + 4 + 32 + 32 + 8 + 32, "no padding in the header");

std::string Errno() { return std::strerror(errno); }

// Writes all of `n` bytes; false on a short write.
bool WriteAll(int fd, const void* data, size_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t wrote = ::write(fd, p, n);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) return false;
    p += wrote;
    n -= static_cast<size_t>(wrote);
  }
  return true;
}

bool ReadAll(int fd, void* data, size_t n) {
  uint8_t* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    const ssize_t got = ::read(fd, p, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

// Block files and temporary files (".tmp.*.kvblock") alike: both count in the size limit.
bool IsBlockFile(const fs::directory_entry& entry) {
  std::error_code ec;
  const std::string name = entry.path().filename().string();
  return entry.is_regular_file(ec) && name.size() > std::strlen(kSuffix) &&
         name.compare(name.size() - std::strlen(kSuffix), std::string::npos, kSuffix) == 0;
}

}  // namespace

std::string DiskTier::Fingerprint(const std::string& model_identity, const std::string& kv_format,
                                  int block_size, const std::string& group_layout) {
  return "model=" + model_identity + ";kv=" + kv_format + ";block=" + std::to_string(block_size) +
         (group_layout.empty() ? "" : ";groups=" + group_layout);
}

DiskTier::DiskTier(std::string dir, uint64_t max_bytes, const std::string& fingerprint,
                   std::vector<uint64_t> block_bytes)
    : dir_(std::move(dir)),
      max_bytes_(max_bytes),
      fingerprint_(Sha256::Hash(fingerprint.data(), fingerprint.size())),
      block_bytes_(std::move(block_bytes)),
      nonce_(std::random_device{}()) {}

Result<std::unique_ptr<DiskTier>> DiskTier::Open(const std::string& dir, uint64_t max_bytes,
                                                 const std::string& fingerprint,
                                                 std::vector<uint64_t> block_bytes) {
  if (block_bytes.empty()) return Status::InvalidArgument("KV disk tier of no layer group");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir, ec)) {
    return Status::Unavailable("KV disk directory '" + dir + "' cannot be created" +
                               (ec ? ": " + ec.message() : std::string(" (not a directory)")));
  }
  std::unique_ptr<DiskTier> tier(new DiskTier(dir, max_bytes, fingerprint, std::move(block_bytes)));
  uint64_t largest = 0;
  for (int g = 0; g < tier->n_groups(); ++g) largest = std::max(largest, tier->file_bytes(g));
  if (max_bytes < largest) {
    return Status::InvalidArgument("KV disk size " + std::to_string(max_bytes) +
                                   " bytes cannot hold one block of " + std::to_string(largest) +
                                   " bytes");
  }
  tier->read_only_reason_ = tier->ProbeWrite();
  if (tier->writable()) tier->DeleteStaleTemporaries();
  tier->CountBytes();
  return tier;
}

std::string DiskTier::TempPath(const std::string& final_name) {
  uint64_t n;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    n = temp_counter_++;
  }
  return (fs::path(dir_) / (kTempPrefix + std::to_string(::getpid()) + "." +
                            std::to_string(nonce_) + "." + std::to_string(n) + "." + final_name))
      .string();
}

std::string DiskTier::ProbeWrite() {
  const std::string probe = TempPath(std::string("probe") + kSuffix);
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Errno();
  ::close(fd);
  ::unlink(probe.c_str());
  return "";
}

void DiskTier::DeleteStaleTemporaries() {
  const auto now = fs::file_time_type::clock::now();
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    if (!IsBlockFile(entry) || entry.path().filename().string().rfind(kTempPrefix, 0) != 0) {
      continue;
    }
    std::error_code time_ec;
    const auto written = entry.last_write_time(time_ec);
    if (!time_ec && now - written > kStaleTempAge) fs::remove(entry.path(), time_ec);
  }
}

uint64_t DiskTier::file_bytes(int group) const { return sizeof(Header) + block_bytes_[group]; }

std::string DiskTier::PathOf(const Sha256Digest& key, int group) const {
  Sha256 name;
  name.Update(fingerprint_.data(), fingerprint_.size());
  name.Update(key.data(), key.size());
  // Group 0's name is the one a one-group model's file always had.
  const uint32_t group_id = static_cast<uint32_t>(group);
  if (group_id != 0) name.Update(&group_id, sizeof(group_id));
  return (fs::path(dir_) / (Sha256::Hex(name.Finish()) + kSuffix)).string();
}

uint64_t DiskTier::CountBytes() {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    if (!IsBlockFile(entry)) continue;
    std::error_code size_ec;
    const uintmax_t size = entry.file_size(size_ec);
    if (!size_ec) total += size;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.bytes_used = total;
  return total;
}

void DiskTier::MakeRoom(uint64_t incoming) {
  {
    // Our own count first: files other processes added are seen at the next rescan.
    std::lock_guard<std::mutex> lock(mutex_);
    if (stats_.bytes_used + incoming <= max_bytes_) return;
  }
  if (CountBytes() + incoming <= max_bytes_) return;
  struct File {
    fs::file_time_type time;
    std::string path;
    uintmax_t size;
  };
  std::vector<File> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    if (!IsBlockFile(entry)) continue;
    std::error_code e1, e2;
    File f{entry.last_write_time(e1), entry.path().string(), entry.file_size(e2)};
    if (!e1 && !e2) files.push_back(std::move(f));
  }
  std::sort(files.begin(), files.end(),
            [](const File& a, const File& b) { return a.time < b.time; });
  uint64_t used = 0;
  for (const File& f : files) used += f.size;
  for (const File& f : files) {
    if (used + incoming <= max_bytes_) break;
    std::error_code remove_ec;
    if (fs::remove(f.path, remove_ec) || !fs::exists(f.path, remove_ec)) {
      used -= std::min<uint64_t>(used, f.size);
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.deleted_for_room;
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.bytes_used = used;
}

Status DiskTier::Put(const Sha256Digest& key, std::span<const uint8_t> payload, int group) {
  auto fail = [&](std::string message) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.write_failures;
    return Status::Unavailable(std::move(message));
  };
  if (group < 0 || group >= n_groups() || payload.size() != block_bytes_[group]) {
    return fail("KV disk block of " + std::to_string(payload.size()) + " bytes in group " +
                std::to_string(group) + ", expected " +
                (group < 0 || group >= n_groups()
                     ? std::string("a group below ") + std::to_string(n_groups())
                     : std::to_string(block_bytes_[group])));
  }
  if (!writable()) {
    return fail("KV disk directory '" + dir_ + "' is read-only (" + read_only_reason_ + ")");
  }
  MakeRoom(file_bytes(group));
  Header header{};
  std::memcpy(header.magic, kMagic, sizeof(kMagic));
  header.version = kVersion;
  header.group = static_cast<uint32_t>(group);
  header.fingerprint = fingerprint_;
  header.key = key;
  header.payload_bytes = payload.size();
  header.checksum = Sha256::Hash(payload.data(), payload.size());
  const std::string path = PathOf(key, group);
  const std::string temp = TempPath(fs::path(path).filename().string());
  // Crash safety (disk_tier.h): the whole file is written under a temporary name, then renamed
  // into place; no fsync (a torn file after a power loss fails its checksum and is dropped).
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return fail("cannot write KV disk file '" + temp + "': " + Errno());
  const bool written =
      WriteAll(fd, &header, sizeof(header)) && WriteAll(fd, payload.data(), payload.size());
  const std::string write_error = written ? "" : Errno();
  ::close(fd);
  if (!written || ::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string reason = written ? Errno() : write_error;
    ::unlink(temp.c_str());
    return fail("cannot write KV disk file '" + path + "': " + reason);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.writes;
  stats_.write_bytes += payload.size();
  stats_.bytes_used += file_bytes(group);
  return Status::Ok();
}

void DiskTier::Reject(const std::string& path) {
  if (writable()) ::unlink(path.c_str());  // a read-only tier changes nothing in the directory
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.rejected;
  ++stats_.misses;
}

bool DiskTier::Get(const Sha256Digest& key, std::span<uint8_t> out, int group) {
  if (group < 0 || group >= n_groups()) return false;
  const std::string path = PathOf(key, group);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.misses;
    return false;
  }
  Header header{};
  struct stat st {};
  const uint64_t bytes = block_bytes_[group];
  const bool ok = ::fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) == file_bytes(group) &&
                  ReadAll(fd, &header, sizeof(header)) &&
                  std::memcmp(header.magic, kMagic, sizeof(kMagic)) == 0 &&
                  header.version == kVersion && header.group == static_cast<uint32_t>(group) &&
                  header.fingerprint == fingerprint_ && header.key == key &&
                  header.payload_bytes == bytes && out.size() == bytes &&
                  ReadAll(fd, out.data(), out.size()) &&
                  Sha256::Hash(out.data(), out.size()) == header.checksum;
  ::close(fd);
  if (!ok) {
    Reject(path);
    return false;
  }
  if (writable()) ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // most recently used now
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.hits;
  stats_.read_bytes += out.size();
  return true;
}

bool DiskTier::Contains(const Sha256Digest& key, int group) const {
  if (group < 0 || group >= n_groups()) return false;
  std::error_code ec;
  return fs::exists(PathOf(key, group), ec);
}

DiskTierStats DiskTier::Stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace kvserve
