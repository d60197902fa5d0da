// SentencePiece's precompiled normalization map (tokenizer.ggml.precompiled_charsmap in a GGUF, a
// .model file's normalizer_spec.precompiled_charsmap): it rewrites the longest prefix of the text
// that it knows, e.g. under nmt_nfkc "ﬁ" -> "fi", "Ａ" -> "A", U+00A0 -> " ", U+0001 -> "".
//
// The blob, little-endian: a uint32 n, the size in bytes of the trie; n / 4 uint32 trie nodes (an
// XOR-compressed compact double array over UTF-8 bytes, Kanda 2018, "Space- and Time-Efficient
// String Dictionaries"); then the replacement strings, each ending with NUL, that the leaves name
// by byte offset. A node: BASE in bits 10..30 (shifted left by 8 more when bit 9 is set), LEAF in
// bit 8, LCHECK (the byte that leads to the node; bit 31 set never matches a byte) in bits 0..7
// and 31; the child of node s for byte c is s ^ BASE(s) ^ c, and a leaf's BASE names the node whose
// bits 0..30 are the offset of its replacement.
//
// Immutable after FromBlob; Match may be called from many threads at once.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace kvserve {

class CharsmapNormalizer {
 public:
  // Copies `blob`. Errors name tokenizer.ggml.precompiled_charsmap and the sizes: shorter than its
  // 4-byte header, a trie size that leaves no replacement bytes (llama.cpp's own check), or
  // replacements that do not end with NUL (llama.cpp fails only when such an entry is used).
  static Result<CharsmapNormalizer> FromBlob(std::span<const uint8_t> blob);

  CharsmapNormalizer() = default;  // matches nothing

  bool empty() const { return nodes_.empty(); }

  // The length in bytes of the longest prefix of `text` that the map rewrites (0 when none) and,
  // in *replacement, what it becomes (a view into this object, possibly empty). The walk stops at
  // a NUL byte, at a node index past the trie, and a leaf whose offset is past the replacements
  // does not count (llama.cpp throws in those two cases; no real charsmap has them).
  size_t Match(std::string_view text, std::string_view* replacement) const;

 private:
  std::vector<uint32_t> nodes_;  // [n / 4] packed trie nodes
  std::string replacements_;     // NUL-terminated strings, back to back; ends with NUL
};

}  // namespace kvserve
