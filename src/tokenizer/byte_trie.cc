#include "tokenizer/byte_trie.h"

#include <algorithm>

namespace kvserve {

void ByteTrie::Insert(std::string_view key, int32_t value) {
  size_t node = 0;
  for (char c : key) {
    const auto byte = static_cast<uint8_t>(c);
    std::vector<Edge>& edges = nodes_[node].edges;
    auto it = std::lower_bound(edges.begin(), edges.end(), byte,
                               [](const Edge& e, uint8_t b) { return e.byte < b; });
    if (it != edges.end() && it->byte == byte) {
      node = static_cast<size_t>(it->child);
      continue;
    }
    const auto child = static_cast<int32_t>(nodes_.size());
    edges.insert(it, Edge{byte, child});  // before push_back: `edges` is a reference into nodes_
    nodes_.emplace_back();
    node = static_cast<size_t>(child);
  }
  nodes_[node].value = value;
}

int32_t ByteTrie::Child(int32_t node, uint8_t byte) const {
  const std::vector<Edge>& edges = nodes_[static_cast<size_t>(node)].edges;
  auto it = std::lower_bound(edges.begin(), edges.end(), byte,
                             [](const Edge& e, uint8_t b) { return e.byte < b; });
  return it != edges.end() && it->byte == byte ? it->child : kNone;
}

size_t ByteTrie::WalkLength(std::string_view text) const {
  int32_t node = root();
  size_t length = 0;
  while (length < text.size()) {
    node = Child(node, static_cast<uint8_t>(text[length]));
    if (node == kNone) break;
    ++length;
  }
  return length;
}

}  // namespace kvserve
