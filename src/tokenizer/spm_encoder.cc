#include "tokenizer/spm_encoder.h"

#include <algorithm>
#include <cstdio>

#include "tokenizer/utf8.h"

namespace kvserve {

namespace {

constexpr std::string_view kSpaceEscape = "\xE2\x96\x81";  // ▁ U+2581

// A run of the text being merged: bytes [start, start + size) and a doubly linked list.
struct Symbol {
  uint32_t start;
  uint32_t size;  // 0 once merged into its left neighbour
  int32_t prev;
  int32_t next;
};

// A candidate merge of symbols[left] and symbols[right], valid while their sizes add up to `size`.
struct Pair {
  float score;
  int32_t left;
  int32_t right;
  uint32_t size;
};

// Heap order: the top is the highest score, then the leftmost position.
bool PairBefore(const Pair& a, const Pair& b) {
  return a.score < b.score || (a.score == b.score && a.left > b.left);
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::string SpmEncoder::EscapeWhitespace(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  for (char c : text) {
    if (c == ' ') {
      out.append(kSpaceEscape);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string SpmEncoder::UnescapeWhitespace(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t offset = 0;
  while (offset < text.size()) {
    if (text.substr(offset, kSpaceEscape.size()) == kSpaceEscape) {
      out.push_back(' ');
      offset += kSpaceEscape.size();
    } else {
      out.push_back(text[offset++]);
    }
  }
  return out;
}

int SpmEncoder::ParseByteToken(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  const int high = HexDigit(text[3]);
  const int low = HexDigit(text[4]);
  if (high < 0 || low < 0) return -1;
  return high * 16 + low;
}

SpmEncoder::SpmEncoder(const Vocab& vocab) : vocab_(&vocab) {
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    const int32_t id = vocab.Find(name);
    byte_token_[b] = id != kNoToken && vocab.type(id) == TokenType::kByte ? id : kNoToken;
  }
}

int32_t SpmEncoder::FindMergeable(std::string_view text) const {
  const int32_t id = vocab_->Find(text);
  if (id == kNoToken) return kNoToken;
  switch (vocab_->type(id)) {
    case TokenType::kNormal:
    case TokenType::kUserDefined:
    case TokenType::kUndefined:
      return id;
    default:
      return kNoToken;
  }
}

void SpmEncoder::EmitSymbol(std::string_view text, std::vector<int32_t>& out) const {
  const int32_t id = FindMergeable(text);
  if (id != kNoToken) {
    out.push_back(id);
    return;
  }
  for (char c : text) {
    const int32_t byte_id = byte_token_[static_cast<uint8_t>(c)];
    if (byte_id != kNoToken) {
      out.push_back(byte_id);
    } else if (vocab_->unk() != kNoToken) {
      out.push_back(vocab_->unk());
    }
  }
}

void SpmEncoder::Encode(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  // One symbol per UTF-8 character; each byte of invalid UTF-8 is a symbol of its own.
  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t offset = 0; offset < text.size();) {
    size_t length = DecodeUtf8(text.substr(offset));
    if (length == 0) length = 1;
    const int32_t index = static_cast<int32_t>(symbols.size());
    symbols.push_back(
        Symbol{static_cast<uint32_t>(offset), static_cast<uint32_t>(length), index - 1, index + 1});
    offset += length;
  }
  symbols.back().next = -1;

  std::vector<Pair> heap;
  heap.reserve(symbols.size());
  const auto push = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const uint32_t size = symbols[left].size + symbols[right].size;
    const int32_t id = FindMergeable(text.substr(symbols[left].start, size));
    if (id == kNoToken) return;
    heap.push_back(Pair{vocab_->token(id).score, left, right, size});
    std::push_heap(heap.begin(), heap.end(), PairBefore);
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) push(i, i + 1);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), PairBefore);
    const Pair pair = heap.back();
    heap.pop_back();
    Symbol& left = symbols[pair.left];
    Symbol& right = symbols[pair.right];
    // Stale: a side was merged away, or grew, since the pair was queued.
    if (left.size == 0 || right.size == 0 || left.size + right.size != pair.size) continue;
    left.size += right.size;
    right.size = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = pair.left;
    push(left.prev, pair.left);
    push(pair.left, left.next);
  }

  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    EmitSymbol(text.substr(symbols[i].start, symbols[i].size), out);
  }
}

}  // namespace kvserve
