// Finds stop strings in streamed text. Text that might be the start of a stop string is held back
// until it is known not to be one, so a stop string is never emitted, even when it is split
// across tokens.
#pragma once

#include <string>
#include <vector>

namespace kvserve {

class StopStrings {
 public:
  explicit StopStrings(std::vector<std::string> stops);

  // Adds newly decoded text; returns the text that is now safe to emit. Sets stopped() when a
  // stop string appeared: the returned text then ends just before it, and the rest is dropped.
  std::string Push(const std::string& text);
  // The held-back tail, at the end of generation (nothing once stopped).
  std::string Flush();
  bool stopped() const { return stopped_; }
  // The stop string that stopped the text ("" while not stopped).
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;  // text not yet emitted
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace kvserve
