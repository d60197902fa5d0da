#include "grammar/grammar_vocab.h"

#include <algorithm>

namespace kvserve {

std::shared_ptr<const GrammarVocab> GrammarVocab::FromTokenizer(const Tokenizer& tokenizer) {
  std::vector<std::string> pieces(static_cast<size_t>(tokenizer.n_vocab()));
  std::vector<int32_t> ends;
  for (int32_t id = 0; id < tokenizer.n_vocab(); ++id) {
    if (tokenizer.IsEndOfGeneration(id)) {
      ends.push_back(id);
    } else if (!tokenizer.IsControl(id)) {
      pieces[static_cast<size_t>(id)] = tokenizer.TokenPiece(id, false);
    }
  }
  return std::make_shared<const GrammarVocab>(std::move(pieces), std::move(ends));
}

GrammarVocab::GrammarVocab(std::vector<std::string> pieces, std::vector<int32_t> end_tokens)
    : pieces_(std::move(pieces)), end_tokens_(std::move(end_tokens)), is_end_(pieces_.size()) {
  for (int32_t id : end_tokens_) {
    is_end_[static_cast<size_t>(id)] = true;
    pieces_[static_cast<size_t>(id)].clear();
  }
  for (size_t id = 0; id < pieces_.size(); ++id) {
    if (!pieces_[id].empty()) order_.push_back(static_cast<int32_t>(id));
  }
  std::sort(order_.begin(), order_.end(),
            [&](int32_t a, int32_t b) { return pieces_[a] < pieces_[b]; });
  sorted_offsets_.push_back(0);
  for (int32_t id : order_) {
    sorted_bytes_ += pieces_[id];
    sorted_offsets_.push_back(sorted_bytes_.size());
  }
  sorted_chars_.resize(order_.size());
  by_chars_.resize(order_.size());
  for (size_t i = 0; i < order_.size(); ++i) {
    for (char c : pieces_[order_[i]]) sorted_chars_[i] += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
    by_chars_[i] = static_cast<uint32_t>(i);
  }
  std::stable_sort(by_chars_.begin(), by_chars_.end(),
                   [&](uint32_t a, uint32_t b) { return sorted_chars_[a] > sorted_chars_[b]; });
  std::vector<uint32_t> shared(order_.size());
  for (size_t i = 1; i < order_.size(); ++i) {
    const std::string& a = pieces_[order_[i - 1]];
    const std::string& b = pieces_[order_[i]];
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    shared[i] = static_cast<uint32_t>(n);
  }
  const auto n_order = static_cast<uint32_t>(order_.size());
  links_.assign(order_.size(), TrieLink{.shared = 0, .skip = n_order});
  for (size_t i = order_.size(); i-- > 0;) {
    uint32_t k = static_cast<uint32_t>(i) + 1;
    while (k < n_order && shared[k] >= shared[i]) k = links_[k].skip;
    links_[i] = TrieLink{.shared = shared[i], .skip = k};
  }
  after_first_byte_.assign(256, n_order);
  size_t below = 0;                             // after_first_byte_[0, below) are set
  for (size_t i = 0; i < order_.size(); ++i) {  // pieces are not empty, and sorted
    const auto first = static_cast<uint8_t>(pieces_[order_[i]][0]);
    while (below < first) after_first_byte_[below++] = static_cast<uint32_t>(i);
  }
}

std::vector<uint32_t> GrammarVocab::LongerThan(uint32_t n) const {
  auto end = std::partition_point(by_chars_.begin(), by_chars_.end(),
                                  [&](uint32_t i) { return sorted_chars_[i] > n; });
  const auto count = static_cast<size_t>(end - by_chars_.begin());
  std::vector<uint32_t> out;
  out.reserve(count);
  if (count > order_.size() / 16) {  // many: one pass in order costs less than sorting them
    for (size_t i = 0; i < order_.size(); ++i) {
      if (sorted_chars_[i] > n) out.push_back(static_cast<uint32_t>(i));
    }
    return out;
  }
  out.assign(by_chars_.begin(), end);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace kvserve
