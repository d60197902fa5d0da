// The KV block map as the web UI receives it: one compact JSON object per snapshot, with no
// token ids and no text, and other tenants' owners unnamed.
//
//   {"block_size":16, "n_blocks":512,
//    "stats":{"running":1, "waiting":0, "blocks_used":3, ...},   // EngineStats, as /metrics
//    "cells":[block, refs, lru_rank, chain_index, hits, ...],     // 5 ints per block not free
//    "owners":[{"kind":"request", "id":"chatcmpl-..-0", "session":"conv-1", "mine":true,
//               "tokens":40, "blocks":3}, {"kind":"session", "mine":false, ...}],
//    "uses":[block, owner, logical, ...]}                        // 3 ints per reference
//
// A cell with refs > 0 is in use; with refs 0 it is cached-free (lru_rank 0 is evicted next).
// chain_index i (or -1: no key) means the block holds positions [i*block_size, (i+1)*block_size).
// `uses` lists each owner's table: its logical block `logical` is that physical block.
//
// Tenants: OpenAiRoutes scopes cache salts and session ids as "TENANT/...". An owner whose tenant
// is not the caller's keeps only its kind, token and block counts ("mine": false, no ids).
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "engine/block_map.h"

namespace kvserve {

nlohmann::json EngineStatsJson(const EngineStats& stats);

// `tenant` is the caller's tag from ApiKeys::Check.
nlohmann::json KvMapJson(const BlockMap& map, std::string_view tenant);

}  // namespace kvserve
