#include "tokenizer/bpe_encoder.h"

#include <algorithm>

#include "tokenizer/spm_encoder.h"
#include "tokenizer/utf8.h"

namespace kvserve {

namespace {

constexpr std::string_view kMergesKey = "tokenizer.ggml.merges";

bool IsPrintableLatin1(int byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
         (byte >= 0xAE && byte <= 0xFF);
}

struct ByteTables {
  std::array<char32_t, 256> to_cp{};
  std::array<int16_t, 512> from_cp{};  // the table's code points are all below U+0200
  ByteTables() {
    from_cp.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      to_cp[b] = IsPrintableLatin1(b) ? static_cast<char32_t>(b) : next++;
      from_cp[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteTables& Tables() {
  static const ByteTables tables;
  return tables;
}

uint64_t PairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

// A candidate merge of symbols[left] and symbols[right] (adjacent when queued).
struct Pair {
  int32_t rank;
  int32_t left;
  int32_t right;
  int32_t left_id;
  int32_t right_id;
  int32_t result;
};

// Heap order: the top is the lowest rank, then the leftmost position.
bool PairAfter(const Pair& a, const Pair& b) {
  return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
}

}  // namespace

char32_t BpeEncoder::ByteToCodePoint(uint8_t byte) { return Tables().to_cp[byte]; }

int BpeEncoder::CodePointToByte(char32_t cp) {
  return cp < Tables().from_cp.size() ? Tables().from_cp[cp] : -1;
}

std::string BpeEncoder::UnmapBytes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t offset = 0;
  while (offset < text.size()) {
    char32_t cp = 0;
    size_t length = DecodeUtf8(text.substr(offset), &cp);
    if (length == 0) {  // not UTF-8: keep the byte
      out.push_back(text[offset++]);
      continue;
    }
    const int byte = CodePointToByte(cp);
    if (byte >= 0) {
      out.push_back(static_cast<char>(byte));
    } else {
      out.append(text.substr(offset, length));
    }
    offset += length;
  }
  return out;
}

Result<BpeEncoder> BpeEncoder::Create(const GgufFile& file, const Vocab& vocab) {
  const bool raw_utf8 = vocab.model() == VocabModel::kGemma4;
  std::vector<std::string_view> stages(vocab.pre_stages().begin(), vocab.pre_stages().end());
  // gemma4 splits on newlines itself (EncodeRawRun's caller); the pattern is only for patterns().
  auto pre = raw_utf8         ? PreTokenizer::FromPattern(R"([^\n]+|[\n]+)")
             : stages.empty() ? PreTokenizer::ForName(vocab.pre())
                              : PreTokenizer::FromStages(stages);
  if (!pre.ok()) return pre.status();
  BpeEncoder encoder(vocab, std::move(*pre));
  encoder.raw_utf8_ = raw_utf8;
  // tiktoken's vocabularies: a pre-token that is itself a token is that token, as tiktoken's
  // encoder looks it up before merging (some tokens cannot be reached by merges). llama.cpp does
  // this for llama-bpe only; for gpt-4o (o200k) kvserve follows tiktoken, which trained the model.
  encoder.ignore_merges_ =
      vocab.pre() == "llama-bpe" || vocab.pre() == "llama3" || vocab.pre() == "gpt-4o";

  for (int b = 0; b < 256; ++b) {
    std::string text;
    if (raw_utf8) {
      constexpr char kHex[] = "0123456789ABCDEF";
      text = std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">";
    } else {
      AppendUtf8(ByteToCodePoint(static_cast<uint8_t>(b)), text);
    }
    encoder.byte_token_[b] = vocab.Find(text);
  }

  auto merges = file.GetStringArray(kMergesKey);
  if (!merges.ok()) return merges.status();
  if (merges->size() > static_cast<size_t>(INT32_MAX)) {
    return Result<BpeEncoder>::InvalidArgument(std::string(kMergesKey) + ": too many merges (" +
                                               std::to_string(merges->size()) + ")");
  }
  encoder.merges_.reserve(merges->size());
  std::string merged;
  for (size_t rank = 0; rank < merges->size(); ++rank) {
    const std::string_view line = (*merges)[rank];
    const auto where = [&] {
      return std::string(kMergesKey) + "[" + std::to_string(rank) + "] '" + std::string(line) + "'";
    };
    // The separator is the first space after the first character (byte-level texts hold no raw
    // spaces, but a one-character left side may itself be a space in other vocabularies).
    const size_t space = line.size() > 1 ? line.find(' ', 1) : std::string_view::npos;
    if (space == std::string_view::npos) {
      return Result<BpeEncoder>::InvalidArgument(where() +
                                                 ": expected two pieces separated by a space");
    }
    const std::string_view left = line.substr(0, space);
    const std::string_view right = line.substr(space + 1);
    const int32_t left_id = vocab.Find(left);
    const int32_t right_id = vocab.Find(right);
    merged.assign(left);
    merged.append(right);
    const int32_t result = vocab.Find(merged);
    for (const auto& [piece, id] :
         {std::pair{std::string_view(left), left_id}, std::pair{std::string_view(right), right_id},
          std::pair{std::string_view(merged), result}}) {
      if (id == kNoToken) {
        return Result<BpeEncoder>::InvalidArgument(where() + ": piece '" + std::string(piece) +
                                                   "' is not in tokenizer.ggml.tokens");
      }
    }
    // The first (lowest) rank of a repeated pair wins.
    encoder.merges_.try_emplace(PairKey(left_id, right_id),
                                Merge{static_cast<int32_t>(rank), result});
  }
  return encoder;
}

const BpeEncoder::Merge* BpeEncoder::FindMerge(int32_t left, int32_t right) const {
  if (left < 0 || right < 0) return nullptr;
  auto it = merges_.find(PairKey(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeEncoder::Encode(std::string_view text, std::vector<int32_t>& out) const {
  if (!raw_utf8_) {
    for (std::string_view piece : pre_.Split(text)) EncodePiece(piece, out);
    return;
  }
  // gemma4: escape, read as llama.cpp does, then split into runs of '\n' and of anything else
  // (the pattern [^\n]+|[\n]+; a newline byte never occurs inside a re-encoded character).
  const std::string escaped = ReencodeUtf8AsLlamaCpp(SpmEncoder::EscapeWhitespace(text));
  const std::string_view all(escaped);
  size_t begin = 0;
  while (begin < all.size()) {
    const bool newlines = all[begin] == '\n';
    size_t end = begin + 1;
    while (end < all.size() && (all[end] == '\n') == newlines) ++end;
    const std::string_view run = all.substr(begin, end - begin);
    const int32_t whole = newlines ? vocab_->Find(run) : kNoToken;
    if (whole != kNoToken) {
      out.push_back(whole);
    } else {
      EncodeRawRun(run, out);
    }
    begin = end;
  }
}

void BpeEncoder::EncodeRawRun(std::string_view run, std::vector<int32_t>& out) const {
  std::vector<Symbol> symbols;
  symbols.reserve(run.size());
  for (size_t offset = 0; offset < run.size();) {
    // llama.cpp's unicode_len_utf8: the length the lead byte announces, cut at the run's end.
    const auto lead = static_cast<uint8_t>(run[offset]);
    const size_t announced = lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    const size_t length = std::min(announced, run.size() - offset);
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back(Symbol{vocab_->Find(run.substr(offset, length)), index - 1, index + 1,
                             static_cast<uint32_t>(offset), static_cast<uint32_t>(length), true});
    offset += length;
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;
  MergeSymbols(symbols);
  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    const Symbol& symbol = symbols[i];
    if (symbol.id != kNoToken) {
      out.push_back(symbol.id);
      continue;
    }
    for (char byte : run.substr(symbol.begin, symbol.length)) {
      const int32_t id = byte_token_[static_cast<uint8_t>(byte)];
      if (id != kNoToken) out.push_back(id);
    }
  }
}

void BpeEncoder::EncodePiece(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    std::string mapped;
    for (char c : piece) AppendUtf8(ByteToCodePoint(static_cast<uint8_t>(c)), mapped);
    const int32_t id = vocab_->Find(mapped);
    if (id != kNoToken) {
      out.push_back(id);
      return;
    }
  }
  if (piece.size() == 1) {
    const int32_t id = byte_token_[static_cast<uint8_t>(piece[0])];
    if (id != kNoToken) {
      out.push_back(id);
    } else if (vocab_->unk() != kNoToken) {
      out.push_back(vocab_->unk());
    }
    return;
  }

  const int32_t n = static_cast<int32_t>(piece.size());
  std::vector<Symbol> symbols(piece.size());
  for (int32_t i = 0; i < n; ++i) {
    symbols[i] = Symbol{byte_token_[static_cast<uint8_t>(piece[i])],
                        i - 1,
                        i + 1 < n ? i + 1 : -1,
                        static_cast<uint32_t>(i),
                        1,
                        true};
  }
  MergeSymbols(symbols);

  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    if (symbols[i].id != kNoToken) {
      out.push_back(symbols[i].id);
    } else if (vocab_->unk() != kNoToken) {
      out.push_back(vocab_->unk());  // a byte whose character is missing from the vocabulary
    }
  }
}

void BpeEncoder::MergeSymbols(std::vector<Symbol>& symbols) const {
  if (symbols.empty()) return;
  std::vector<Pair> heap;
  heap.reserve(symbols.size());
  const auto push = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Merge* merge = FindMerge(symbols[left].id, symbols[right].id);
    if (merge == nullptr) return;
    heap.push_back(
        Pair{merge->rank, left, right, symbols[left].id, symbols[right].id, merge->result});
    std::push_heap(heap.begin(), heap.end(), PairAfter);
  };
  for (int32_t i = 0; i >= 0 && symbols[i].next >= 0; i = symbols[i].next) push(i, symbols[i].next);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), PairAfter);
    const Pair pair = heap.back();
    heap.pop_back();
    Symbol& left = symbols[pair.left];
    Symbol& right = symbols[pair.right];
    // Stale entries: one side was merged away or changed since the pair was queued.
    if (!left.alive || !right.alive || left.next != pair.right || left.id != pair.left_id ||
        right.id != pair.right_id) {
      continue;
    }
    left.id = pair.result;
    left.length += right.length;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = pair.left;
    push(left.prev, pair.left);
    push(pair.left, left.next);
  }
}

}  // namespace kvserve
