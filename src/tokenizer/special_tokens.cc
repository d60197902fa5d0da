#include "tokenizer/special_tokens.h"

#include <algorithm>

namespace kvserve {

namespace {

// The texts llama.cpp (llama-vocab.cpp at 3f545becc) treats as control tokens whatever their
// stored type: its end-of-turn, end-of-message, end-of-generation and fill-in-the-middle
// (prefix, suffix, middle, pad, repository, file separator) markers. llama.cpp skips a FIM
// category when the file names its id (tokenizer.ggml.fim_*_token_id); kvserve does not, so a
// FIM marker is never read out of plain text.
constexpr std::string_view kControlLookingTexts[] = {
    // end of turn / message / generation
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<｜end▁of▁sentence｜>", "[e~[",
    // fill in the middle: prefix, suffix, middle
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
    "<|code_prefix|>", "<|prefix|>", "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
    "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>", "<|fim_middle|>",
    "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>",
    "<|middle|>",
    // fill in the middle: pad, repository, file separator
    "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", "<|fim_repo|>", "<|repo_name|>",
    "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>"};

bool IsControlLooking(std::string_view text) {
  return std::find(std::begin(kControlLookingTexts), std::end(kControlLookingTexts), text) !=
         std::end(kControlLookingTexts);
}

}  // namespace

SpecialTokens SpecialTokens::FromVocab(const Vocab& vocab) {
  SpecialTokens out;
  for (int32_t id = 0; id < vocab.size(); ++id) {
    const TokenData& token = vocab.token(id);
    if (token.text.empty()) continue;
    const bool control = token.type == TokenType::kControl || IsControlLooking(token.text);
    const bool unknown = token.type == TokenType::kUnknown;
    if (!control && !unknown && token.type != TokenType::kUserDefined) continue;
    out.entries_.push_back(
        Entry{.id = id, .text = token.text, .needs_parse_special = control || unknown});
  }
  std::stable_sort(out.entries_.begin(), out.entries_.end(),
                   [](const Entry& a, const Entry& b) { return a.text.size() > b.text.size(); });
  return out;
}

bool SpecialTokens::Cut(const Entry& entry, std::string_view text, const Fragment& fragment,
                        std::vector<Fragment>& out) {
  const size_t end = fragment.begin + fragment.length;
  const std::string_view searched = text.substr(0, end);  // finds stay inside the fragment
  size_t begin = fragment.begin;
  bool found = false;
  for (size_t hit = searched.find(entry.text, begin); hit != std::string_view::npos;
       hit = searched.find(entry.text, begin)) {
    found = true;
    if (hit > begin) out.push_back(Fragment{kNoToken, begin, hit - begin});
    out.push_back(Fragment{entry.id, 0, 0});
    begin = hit + entry.text.size();
  }
  if (begin < end) out.push_back(Fragment{kNoToken, begin, end - begin});
  return found;
}

std::vector<SpecialTokens::Fragment> SpecialTokens::Split(std::string_view text,
                                                          bool parse_special) const {
  std::vector<Fragment> fragments;
  if (!text.empty()) fragments.push_back(Fragment{kNoToken, 0, text.size()});
  std::vector<Fragment> next;
  for (const Entry& entry : entries_) {
    if (entry.needs_parse_special && !parse_special) continue;
    next.clear();
    bool found = false;
    for (const Fragment& fragment : fragments) {
      if (fragment.token != kNoToken) {
        next.push_back(fragment);
      } else {
        found |= Cut(entry, text, fragment, next);
      }
    }
    if (found) fragments.swap(next);
  }
  return fragments;
}

}  // namespace kvserve
