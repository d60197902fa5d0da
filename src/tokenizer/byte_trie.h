// A trie over the bytes of token texts, for the unigram encoder (ugm_encoder.h): walking it one
// byte of the text at a time meets every token that is a prefix of the text, shortest first.
// Node 0 is the root; children are kept sorted by byte. Immutable once built; reads from many
// threads at once are safe.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace kvserve {

class ByteTrie {
 public:
  static constexpr int32_t kNone = -1;

  ByteTrie() : nodes_(1) {}

  // Adds `key` (non-empty) with `value`; a key added again keeps its last value (as llama.cpp's
  // naive_trie does).
  void Insert(std::string_view key, int32_t value);

  static constexpr int32_t root() { return 0; }
  // The child of `node` for `byte`, or kNone.
  int32_t Child(int32_t node, uint8_t byte) const;
  // The value of the key that ends at `node`, or kNone.
  int32_t value(int32_t node) const { return nodes_[static_cast<size_t>(node)].value; }
  // How many leading bytes of `text` the trie can walk (whether or not a key ends there).
  size_t WalkLength(std::string_view text) const;

 private:
  struct Edge {
    uint8_t byte;
    int32_t child;
  };
  struct Node {
    std::vector<Edge> edges;  // sorted by byte
    int32_t value = kNone;
  };
  std::vector<Node> nodes_;
};

}  // namespace kvserve
