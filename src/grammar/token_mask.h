// A set of token ids as a bitset over the vocabulary: which tokens a grammar allows next.
#pragma once

#include <cstdint>
#include <vector>

namespace kvserve {

class TokenMask {
 public:
  void Reset(int n_vocab) {
    n_vocab_ = n_vocab;
    words_.assign((static_cast<size_t>(n_vocab) + 63) / 64, 0);
  }
  void Set(int32_t id) { words_[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63); }
  void Clear(int32_t id) { words_[static_cast<size_t>(id) >> 6] &= ~(uint64_t{1} << (id & 63)); }
  bool Test(int32_t id) const { return (words_[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1; }
  // this |= other (same vocabulary).
  void Add(const TokenMask& other) {
    for (size_t i = 0; i < words_.size(); ++i) words_[i] |= other.words_[i];
  }
  int Count() const {
    int n = 0;
    for (uint64_t w : words_) n += __builtin_popcountll(w);
    return n;
  }
  bool Empty() const {
    for (uint64_t w : words_) {
      if (w != 0) return false;
    }
    return true;
  }
  int n_vocab() const { return n_vocab_; }
  const std::vector<uint64_t>& words() const { return words_; }
  bool operator==(const TokenMask&) const = default;

 private:
  int n_vocab_ = 0;
  std::vector<uint64_t> words_;
};

}  // namespace kvserve
