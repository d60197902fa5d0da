#include "tokenizer/byte_trie.h"

#include <algorithm>
#include <deque>

namespace kvserve {

namespace {

// Keys [begin, end) of the sorted order share their first `depth` bytes, which lead to `node`.
struct Range {
  size_t begin;
  size_t end;
  size_t depth;
  int32_t node;
};

}  // namespace

ByteTrie::ByteTrie(const std::vector<std::pair<std::string_view, int32_t>>& entries) {
  // Sorted by key (bytes compare unsigned); among equal keys the one given last comes last.
  std::vector<size_t> order;
  order.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    if (!entries[i].first.empty()) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return entries[a].first < entries[b].first; });
  auto key = [&](size_t i) { return entries[order[i]].first; };
  auto byte_at = [&](size_t i, size_t depth) { return static_cast<uint8_t>(key(i)[depth]); };
  nodes_.assign(1, Node{});
  std::deque<Range> pending{{0, order.size(), 0, root()}};
  while (!pending.empty()) {  // breadth first: a node's edges are laid out together
    Range range = pending.front();
    pending.pop_front();
    const auto node = static_cast<size_t>(range.node);
    for (; range.begin < range.end && key(range.begin).size() == range.depth; ++range.begin) {
      nodes_[node].value = entries[order[range.begin]].second;  // the last equal key stays
    }
    nodes_[node].first_edge = static_cast<uint32_t>(edge_byte_.size());
    for (size_t i = range.begin; i < range.end;) {
      const uint8_t byte = byte_at(i, range.depth);
      size_t j = i + 1;
      while (j < range.end && byte_at(j, range.depth) == byte) ++j;
      const auto child = static_cast<int32_t>(nodes_.size());
      nodes_.push_back(Node{});
      edge_byte_.push_back(byte);
      edge_child_.push_back(child);
      pending.push_back(Range{i, j, range.depth + 1, child});
      i = j;
    }
    nodes_[node].n_edges = static_cast<uint32_t>(edge_byte_.size()) - nodes_[node].first_edge;
  }
}

int32_t ByteTrie::Child(int32_t node, uint8_t byte) const {
  const Node& n = nodes_[static_cast<size_t>(node)];
  const uint8_t* first = edge_byte_.data() + n.first_edge;
  const uint8_t* last = first + n.n_edges;
  const uint8_t* it = std::lower_bound(first, last, byte);
  return it != last && *it == byte ? edge_child_[static_cast<size_t>(it - edge_byte_.data())]
                                   : kNone;
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
