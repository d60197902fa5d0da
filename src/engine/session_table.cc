#include "engine/session_table.h"

#include <algorithm>

namespace kvserve {

SessionTable::SessionTable(BlockManager& blocks, double ttl_s, double max_pinned_fraction,
                           std::function<void(std::vector<std::string>)> on_changed)
    : blocks_(blocks),
      ttl_s_(ttl_s),
      max_pinned_fraction_(max_pinned_fraction),
      on_changed_(std::move(on_changed)) {}

void SessionTable::Pin(const std::string& id, const BlockTable& table) {
  Release(id);
  Session session;
  session.pinned = blocks_.Share(table, static_cast<int>(table.keys.size()));
  session.expires = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(ttl_s_));
  pinned_blocks_ += session.pinned.held();
  sessions_[id] = std::move(session);
  const int max_blocks = static_cast<int>(max_pinned_fraction_ * blocks_.n_blocks());
  while (pinned_blocks_ > max_blocks && ReleaseOldest()) {
  }
  if (on_changed_) on_changed_(Ids());
}

void SessionTable::Erase(std::map<std::string, Session>::iterator it) {
  pinned_blocks_ -= it->second.pinned.held();
  blocks_.Free(it->second.pinned);
  sessions_.erase(it);
  if (on_changed_) on_changed_(Ids());
}

bool SessionTable::Release(const std::string& id) {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return false;
  Erase(it);
  return true;
}

bool SessionTable::ReleaseOldest() {
  if (sessions_.empty()) return false;
  auto oldest = std::min_element(
      sessions_.begin(), sessions_.end(),
      [](const auto& a, const auto& b) { return a.second.expires < b.second.expires; });
  Erase(oldest);
  return true;
}

void SessionTable::ReleaseExpired(Clock::time_point now) {
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    auto next = std::next(it);
    if (it->second.expires <= now) Erase(it);
    it = next;
  }
}

std::vector<std::string> SessionTable::Ids() const {
  std::vector<std::string> out;
  for (const auto& [id, session] : sessions_) out.push_back(id);
  return out;
}

}  // namespace kvserve
