#include "server/kv_map.h"

#include <optional>
#include <string>

namespace kvserve {

using nlohmann::json;

namespace {

// "TENANT/rest" -> "rest" when TENANT is `tenant`; nullopt when the scope is another tenant's.
std::optional<std::string_view> InTenant(std::string_view scoped, std::string_view tenant) {
  if (scoped.size() <= tenant.size() || scoped.substr(0, tenant.size()) != tenant ||
      scoped[tenant.size()] != '/') {
    return std::nullopt;
  }
  return scoped.substr(tenant.size() + 1);
}

json OwnerJson(const BlockOwner& owner, std::string_view tenant) {
  const bool request = owner.kind == BlockOwner::Kind::kRequest;
  // A request's tenant is its cache salt's scope; a session's is its id's.
  const auto scope = InTenant(request ? owner.cache_salt : owner.id, tenant);
  json out = {{"kind", request ? "request" : "session"},
              {"mine", scope.has_value()},
              {"tokens", owner.n_tokens},
              {"blocks", owner.n_blocks}};
  if (!scope) return out;
  if (request) {
    out["id"] = owner.id;
    const auto session = InTenant(owner.session_id, tenant);
    out["session"] = session ? std::string(*session) : "";
  } else {
    out["id"] = std::string(*scope);
    out["session"] = std::string(*scope);
  }
  return out;
}

}  // namespace

json EngineStatsJson(const EngineStats& s) {
  return {{"running", s.running},
          {"waiting", s.waiting},
          {"blocks_total", s.blocks_total},
          {"blocks_used", s.blocks_used},
          {"blocks_cached", s.blocks_cached},
          {"blocks_free", s.blocks_free},
          {"sessions", s.sessions},
          {"prefix_queries_tokens", s.prefix_queries_tokens},
          {"prefix_hits_tokens", s.prefix_hits_tokens},
          {"preemptions", s.preemptions},
          {"prompt_tokens", s.prompt_tokens},
          {"generation_tokens", s.generation_tokens},
          {"steps", s.steps}};
}

json KvMapJson(const BlockMap& map, std::string_view tenant) {
  json cells = json::array();
  for (size_t b = 0; b < map.blocks.size(); ++b) {
    const BlockSnapshot& s = map.blocks[b];
    if (s.state == BlockSnapshot::State::kFree) continue;
    for (int64_t v :
         {static_cast<int64_t>(b), static_cast<int64_t>(s.refs), static_cast<int64_t>(s.lru_rank),
          static_cast<int64_t>(s.chain_index), static_cast<int64_t>(s.hits)}) {
      cells.push_back(v);
    }
  }
  json owners = json::array();
  for (const BlockOwner& owner : map.owners) owners.push_back(OwnerJson(owner, tenant));
  json uses = json::array();
  for (const BlockUse& use : map.uses) {
    uses.push_back(use.block);
    uses.push_back(use.owner);
    uses.push_back(use.logical);
  }
  return {{"block_size", map.block_size},        {"n_blocks", map.blocks.size()},
          {"stats", EngineStatsJson(map.stats)}, {"cells", std::move(cells)},
          {"owners", std::move(owners)},         {"uses", std::move(uses)}};
}

}  // namespace kvserve
