// Byte-level BPE (GPT-2, Llama 3, Qwen2 vocabularies): the text is split by the pre-tokenizer,
// each piece's bytes become tokens through GPT-2's byte -> unicode table, and adjacent tokens are
// merged lowest merge rank first (leftmost on ties) until no listed merge applies.
//
// Merging runs on a linked list of symbols with a binary heap of candidate pairs, so a piece of n
// bytes costs O(n log n), not the O(n^2) of rescanning for the best pair after every merge.
//
// The gemma4 model (llama.cpp's LLAMA_VOCAB_PRE_TYPE_GEMMA4) merges the same way over raw UTF-8:
// spaces become ▁ (U+2581), the text is read as llama.cpp reads it (ReencodeUtf8AsLlamaCpp) and
// split into runs of newlines and runs of other characters; a run of newlines that is itself a
// token is that token (llama.cpp's PR 21343), any other run starts as one symbol per character.
// After merging, a symbol that is not a token becomes the <0xNN> tokens of its bytes; a byte
// without one is dropped (never <unk>), as in llama.cpp.
// Immutable after Create; Encode may be called from many threads at once.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "io/gguf_reader.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/vocab.h"
#include "util/status.h"

namespace kvserve {

class BpeEncoder {
 public:
  // Reads tokenizer.ggml.merges ("left right" per rank) and the pre-tokenizer named by
  // tokenizer.ggml.pre. `vocab` is borrowed and must outlive the encoder.
  static Result<BpeEncoder> Create(const GgufFile& file, const Vocab& vocab);

  // Appends the ids of `text` (no special-token handling) to `out`.
  void Encode(std::string_view text, std::vector<int32_t>& out) const;

  // GPT-2's reversible byte <-> unicode mapping: printable Latin-1 bytes map to themselves, the
  // others to U+0100 and up, so every byte has a visible, non-space character.
  static char32_t ByteToCodePoint(uint8_t byte);
  // Inverse of ByteToCodePoint; -1 for code points outside the table.
  static int CodePointToByte(char32_t cp);
  // The bytes a byte-level token text stands for. Characters outside the table are kept as their
  // own UTF-8 (added tokens are sometimes stored unmapped).
  static std::string UnmapBytes(std::string_view text);

 private:
  struct Merge {
    int32_t rank;
    int32_t result;  // id of the merged token
  };
  // One symbol of the piece being merged: a token id (kNoToken for a character that is not a
  // token), its bytes [begin, begin + length) in the piece, and a doubly linked list.
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    uint32_t begin;
    uint32_t length;
    bool alive;
  };
  BpeEncoder(const Vocab& vocab, PreTokenizer pre) : vocab_(&vocab), pre_(std::move(pre)) {}

  void EncodePiece(std::string_view piece, std::vector<int32_t>& out) const;
  // gemma4: one run of newlines or of other characters, already ▁-escaped and re-encoded.
  void EncodeRawRun(std::string_view run, std::vector<int32_t>& out) const;
  // Merges adjacent symbols, lowest rank first (leftmost on ties), until no listed merge applies.
  void MergeSymbols(std::vector<Symbol>& symbols) const;
  const Merge* FindMerge(int32_t left, int32_t right) const;

  const Vocab* vocab_;  // borrowed
  PreTokenizer pre_;
  std::array<int32_t, 256> byte_token_{};       // id of each byte's mapped character
  std::unordered_map<uint64_t, Merge> merges_;  // key: left id << 32 | right id
  bool ignore_merges_ = false;  // Llama 3: a piece that is a whole token is taken as is
  bool raw_utf8_ = false;       // the gemma4 model (see above); byte_token_ then holds <0xNN> ids
};

}  // namespace kvserve
