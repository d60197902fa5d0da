// A trie over the bytes of token texts, for the unigram encoder (ugm_encoder.h): walking it one
// byte of the text at a time meets every token that is a prefix of the text, shortest first.
// Built at once from all keys, then flat: 12 bytes a node and 5 an edge (at most one node per
// byte of all keys; mT5's 250,112 tokens have not been measured). Immutable; reads from many
// threads at once are safe.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace kvserve {

class ByteTrie {
 public:
  static constexpr int32_t kNone = -1;

  ByteTrie() : nodes_(1) {}  // the root alone: no keys
  // `entries`: (key, value) pairs; empty keys are skipped, and a key given twice keeps the value
  // given last (as llama.cpp's naive_trie does). The views need only outlive the call.
  explicit ByteTrie(const std::vector<std::pair<std::string_view, int32_t>>& entries);

  static constexpr int32_t root() { return 0; }
  // The child of `node` for `byte`, or kNone.
  int32_t Child(int32_t node, uint8_t byte) const;
  // The value of the key that ends at `node`, or kNone.
  int32_t value(int32_t node) const { return nodes_[static_cast<size_t>(node)].value; }
  // How many leading bytes of `text` the trie can walk (whether or not a key ends there).
  size_t WalkLength(std::string_view text) const;

 private:
  struct Node {
    uint32_t first_edge = 0;  // its edges are [first_edge, first_edge + n_edges), sorted by byte
    uint32_t n_edges = 0;
    int32_t value = kNone;
  };
  std::vector<Node> nodes_;          // [n_nodes], breadth first; 0 is the root
  std::vector<uint8_t> edge_byte_;   // [n_edges]
  std::vector<int32_t> edge_child_;  // [n_edges] node index
};

}  // namespace kvserve
