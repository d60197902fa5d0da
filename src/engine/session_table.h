// Pinned sessions: when a request with a session id completes, its blocks stay referenced under
// that id so the next turn finds its whole history in the prefix cache. A session is released by
// its id, when its TTL passes, when pinned blocks exceed their share of the pool (oldest first), or
// when the scheduler needs blocks and nothing else is left (ReleaseOldest). Engine thread only.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kv/block_manager.h"

namespace kvserve {

class SessionTable {
 public:
  using Clock = std::chrono::steady_clock;
  struct Session {
    BlockTable pinned;  // shares the finished request's blocks
    Clock::time_point expires;
  };

  // `blocks` is borrowed. on_changed (may be empty) gets the live ids after every pin or release.
  SessionTable(BlockManager& blocks, double ttl_s, double max_pinned_fraction,
               std::function<void(std::vector<std::string>)> on_changed);

  // Pins `table`'s full, registered blocks under `id` (replacing an earlier pin of it), so the
  // next turn finds them in the prefix cache even under pressure; then releases the oldest
  // sessions while pinned blocks exceed max_pinned_fraction of the pool.
  void Pin(const std::string& id, const BlockTable& table);
  bool Release(const std::string& id);  // false: no such session
  bool ReleaseOldest();                 // false: none left
  void ReleaseExpired(Clock::time_point now);

  std::vector<std::string> Ids() const;
  const std::map<std::string, Session>& sessions() const { return sessions_; }
  int size() const { return static_cast<int>(sessions_.size()); }
  int pinned_blocks() const { return pinned_blocks_; }

 private:
  void Erase(std::map<std::string, Session>::iterator it);

  BlockManager& blocks_;
  double ttl_s_;
  double max_pinned_fraction_;
  std::function<void(std::vector<std::string>)> on_changed_;
  std::map<std::string, Session> sessions_;
  int pinned_blocks_ = 0;  // blocks held by sessions, counted per session
};

}  // namespace kvserve
