// The KV block pool at one moment, for the web UI's block map: every block's state (from
// BlockManager::Snapshot), which running request or pinned session holds it at which logical
// index, and the engine's stats of the same moment. Plain data: no token ids, no text. Taken by
// the engine thread (EngineCore::FillBlockMap); read by any thread through Engine::SnapshotBlocks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "kv/block_manager.h"

namespace kvserve {

struct BlockOwner {
  enum class Kind : uint8_t { kRequest, kSession };
  Kind kind = Kind::kRequest;
  std::string id;          // Request::id, or the session id for a pinned session
  std::string session_id;  // the request's Request::session_id (sessions: id); may be empty
  std::string cache_salt;  // the request's Request::cache_salt; empty for sessions
  int n_tokens = 0;        // tokens whose K/V the owner holds (requests: Sequence::n_computed)
  int n_blocks = 0;        // blocks in its table
};

// The owner's logical block `logical` is physical block `block`: it covers positions
// [logical * block_size, (logical + 1) * block_size).
struct BlockUse {
  int32_t block = 0;
  int32_t owner = 0;  // index into BlockMap::owners
  int32_t logical = 0;
};

struct BlockMap {
  int block_size = 0;                 // tokens per block
  std::vector<BlockSnapshot> blocks;  // [n_blocks], by physical id, of layer group 0's pool
  std::vector<BlockOwner> owners;     // running requests (admission order), then sessions
  std::vector<BlockUse> uses;         // every (owner, block) reference, owner by owner
  EngineStats stats;                  // FillStats at the same moment

  // Appends `owner` (n_blocks set from the table) and one use per block of `table` in group 0's
  // pool (the pool the map shows; a window group's released entries are not uses).
  void AddOwner(BlockOwner owner, const BlockTable& table);
  // How many uses name `block`; equals blocks[block].refs when the map is whole.
  int UsesOf(int32_t block) const;
};

}  // namespace kvserve
