// A directory of KV blocks (`--kv-disk DIR --kv-disk-size SIZE`): the bytes of a block that leaves
// the in-memory prefix cache are written to one file named by its prefix-cache key, its KV layer
// group and a fingerprint of what produced them (model file, KV format, block size, the groups'
// layout), so a later request with that prefix, or a restarted server, can read them back instead
// of recomputing. Each layer group (KvSpec::groups) has its own block size in bytes: a model of
// several groups (an attention group and a recurrent-state group, window and global layers) keeps
// one file per group and key, and group 0's file is named as a one-group model's always was.
//
// Every file: a header (magic "KVSDISK1", version, the group, SHA-256 of the fingerprint, the
// block key, the payload size, SHA-256 of the payload), then the payload. (The group sits in
// what version 1 wrote as a zero "reserved" field: a one-group model's files are group 0's, so
// directories written before groups were stored stay valid, and the version is unchanged.) A file
// that fails any check (short, another magic or version, another group, fingerprint or key,
// another size, a checksum mismatch) is never used: it is deleted and counted. The directory's size
// is kept under its limit by deleting the least recently used files (by modification time; a read
// touches the file) before each write; several processes may share a directory (each rescans it
// when it needs room). Nothing here throws or aborts on a disk error: Put returns the error (the
// caller warns and goes on without the copy), Get returns false (the caller recomputes).
//
// Crash safety: a write goes to a temporary file in the directory (".tmp.*", counted in the size
// like a block file), then rename() puts it in place, so a reader sees a whole file or none. A
// process killed at any point (SIGKILL, a crash) leaves whole block files and at most one
// half-written temporary file, deleted by the next Open once it is older than a minute (a younger
// one may belong to a live writer sharing the directory; the size limit counts it meanwhile).
// There is no fsync: the page cache outlives the process, so it is not needed for a process
// crash, and after a power loss or kernel crash a file the disk did not finish is caught by the
// size and checksum checks and dropped like any bad file: the tier is a cache, losing the last
// seconds of blocks costs a recompute, never a wrong answer. fsync would cost the engine thread
// 0.3 ms per 20 KiB block on the development VM (0.06 ms without), more on real disks and for
// bigger blocks (tests/kv_disk_crash_test.cc kills a server mid-write hundreds of times).
//
// A directory that exists but cannot be written (a read-only volume, another owner) opens
// read-only: its blocks are read back, nothing is written, touched or deleted (writable() is false
// and read_only_reason() says why; the engine warns once at start-up).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "util/sha256.h"
#include "util/status.h"

namespace kvserve {

struct DiskTierStats {
  uint64_t hits = 0;         // Get found a valid file
  uint64_t misses = 0;       // Get found none, or only an invalid one
  uint64_t read_bytes = 0;   // payload bytes of the hits
  uint64_t writes = 0;       // files written
  uint64_t write_bytes = 0;  // payload bytes written
  uint64_t write_failures = 0;
  uint64_t rejected = 0;          // invalid files found (and deleted)
  uint64_t deleted_for_room = 0;  // files deleted to keep the size limit
  uint64_t bytes_used = 0;        // the directory's block files, as last counted
};

class DiskTier {
 public:
  // What a block's bytes depend on besides its key: the model file's identity (e.g. its SHA-256 or
  // path, size and modification time), the KV format's name, the block size and, for a model of
  // several layer groups, their layout (empty: a one-group model's fingerprint, as before groups
  // were stored).
  static std::string Fingerprint(const std::string& model_identity, const std::string& kv_format,
                                 int block_size, const std::string& group_layout = "");

  // Creates `dir` if needed, deletes stale temporary files and counts the block files in it.
  // block_bytes: the payload size of one block of each layer group (KvCache::BytesPerBlock of
  // each; one entry for a one-group model). Fails (naming the path) when the directory cannot be
  // created or read, or max_bytes cannot hold the largest block; a directory that cannot be
  // written opens read-only.
  static Result<std::unique_ptr<DiskTier>> Open(const std::string& dir, uint64_t max_bytes,
                                                const std::string& fingerprint,
                                                std::vector<uint64_t> block_bytes);
  static Result<std::unique_ptr<DiskTier>> Open(const std::string& dir, uint64_t max_bytes,
                                                const std::string& fingerprint,
                                                uint64_t block_bytes) {
    return Open(dir, max_bytes, fingerprint, std::vector<uint64_t>{block_bytes});
  }

  // Writes `payload` (block_bytes(group) long) as the file of `key` in `group`, replacing an
  // older one, after deleting least recently used files until it fits. The error names the path
  // and the reason (a read-only tier refuses every write).
  Status Put(const Sha256Digest& key, std::span<const uint8_t> payload, int group = 0);
  // Fills `out` (block_bytes(group) long) from the file of `key` in `group`; false when there is
  // none or it is invalid (then deleted), and `out` may then hold anything.
  bool Get(const Sha256Digest& key, std::span<uint8_t> out, int group = 0);
  bool Contains(const Sha256Digest& key, int group = 0) const;

  DiskTierStats Stats() const;
  const std::string& dir() const { return dir_; }
  uint64_t max_bytes() const { return max_bytes_; }
  int n_groups() const { return static_cast<int>(block_bytes_.size()); }
  uint64_t block_bytes(int group = 0) const { return block_bytes_[group]; }
  // False when Open found the directory unwritable; read_only_reason() then says why.
  bool writable() const { return read_only_reason_.empty(); }
  const std::string& read_only_reason() const { return read_only_reason_; }
  // Bytes of one block's file in `group`: header + payload.
  uint64_t file_bytes(int group = 0) const;
  // The file that holds `key` of `group`.
  std::string PathOf(const Sha256Digest& key, int group = 0) const;

 private:
  DiskTier(std::string dir, uint64_t max_bytes, const std::string& fingerprint,
           std::vector<uint64_t> block_bytes);
  // A fresh temporary name in the directory for a file named `final_name`.
  std::string TempPath(const std::string& final_name);
  // Creates and deletes a temporary file; its error ("Permission denied", ...) or "".
  std::string ProbeWrite();
  void DeleteStaleTemporaries();     // ".tmp.*" files older than kStaleTempAge
  uint64_t CountBytes();             // rescans the directory; sets stats_.bytes_used
  void MakeRoom(uint64_t incoming);  // deletes least recently used files until incoming fits
  void Reject(const std::string& path);

  std::string dir_;
  uint64_t max_bytes_;
  Sha256Digest fingerprint_;
  std::vector<uint64_t> block_bytes_;  // [n_groups]
  std::string read_only_reason_;       // empty: writable
  mutable std::mutex mutex_;           // guards stats_ and temp_counter_
  DiskTierStats stats_;
  uint64_t temp_counter_ = 0;
  uint64_t nonce_;  // random: temporary names of two instances in one process never collide
};

}  // namespace kvserve
