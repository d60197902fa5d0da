#include "tokenizer/charsmap_normalizer.h"

#include <cstring>

namespace kvserve {

namespace {

constexpr std::string_view kKey = "tokenizer.ggml.precompiled_charsmap";

uint32_t ReadLittleEndian32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

// The fields of a packed node (see the header).
uint32_t Base(uint32_t node) { return (node >> 10) << ((node & (1u << 9)) >> 6); }
uint32_t LabelCheck(uint32_t node) { return node & ((1u << 31) | 0xFFu); }
bool IsLeaf(uint32_t node) { return ((node >> 8) & 1u) != 0; }
uint32_t LeafValue(uint32_t node) { return node & ((1u << 31) - 1); }

}  // namespace

Result<CharsmapNormalizer> CharsmapNormalizer::FromBlob(std::span<const uint8_t> blob) {
  if (blob.size() < 4) {
    return Result<CharsmapNormalizer>::InvalidArgument(std::string(kKey) + ": " +
                                                       std::to_string(blob.size()) +
                                                       " bytes, shorter than its 4-byte header");
  }
  const uint64_t trie_bytes = ReadLittleEndian32(blob.data());
  if (trie_bytes + 4 >= blob.size()) {
    return Result<CharsmapNormalizer>::InvalidArgument(
        std::string(kKey) + ": a trie of " + std::to_string(trie_bytes) + " bytes leaves no room " +
        "for replacements in " + std::to_string(blob.size()) + " bytes");
  }
  if (blob.back() != 0) {
    return Result<CharsmapNormalizer>::InvalidArgument(
        std::string(kKey) + ": the replacement strings (" +
        std::to_string(blob.size() - 4 - trie_bytes) + " bytes) do not end with NUL");
  }
  CharsmapNormalizer normalizer;
  normalizer.nodes_.resize(trie_bytes / 4);
  for (size_t i = 0; i < normalizer.nodes_.size(); ++i) {
    normalizer.nodes_[i] = ReadLittleEndian32(blob.data() + 4 + 4 * i);
  }
  const uint8_t* strings = blob.data() + 4 + trie_bytes;
  normalizer.replacements_.assign(reinterpret_cast<const char*>(strings),
                                  blob.size() - 4 - trie_bytes);
  return normalizer;
}

size_t CharsmapNormalizer::Match(std::string_view text, std::string_view* replacement) const {
  if (nodes_.empty()) return 0;
  size_t best_length = 0;
  uint64_t best_offset = 0;
  uint64_t node = Base(nodes_[0]);
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<uint8_t>(text[i]);
    if (c == 0) break;
    node ^= c;
    if (node >= nodes_.size() || LabelCheck(nodes_[node]) != c) break;
    const bool leaf = IsLeaf(nodes_[node]);
    node ^= Base(nodes_[node]);
    if (leaf && node < nodes_.size() && LeafValue(nodes_[node]) < replacements_.size()) {
      best_length = i + 1;
      best_offset = LeafValue(nodes_[node]);
    }
  }
  if (best_length > 0) {
    // NUL-terminated: replacements_ ends with NUL (FromBlob).
    *replacement = std::string_view(replacements_.c_str() + best_offset);
  }
  return best_length;
}

}  // namespace kvserve
