// The grammar engine on hostile input: the first byte picks what the rest is (GBNF text, a JSON
// Schema, a regex pattern), compiled with the server's limits; a grammar that compiles is then
// walked for a few tokens of a small vocabulary (single bytes, split UTF-8 characters, JSON
// pieces), each mask compared with the slow reference and a token chosen by the input. Anything
// but a clean error or a finished walk (a crash, a hang past -timeout, a leak, a mask that differs
// from the reference) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "grammar/grammar_cache.h"
#include "grammar/regex_gbnf.h"

namespace {

std::shared_ptr<const kvserve::GrammarVocab> SmallVocab() {
  std::vector<std::string> pieces;
  for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, static_cast<char>(b)));
  for (const char* p : {"{\"", "\":", "\",", "\"}", "true", "null", "12", "\xC3\xA9", "\xE2\x82",
                        "ab", "\\u00", " [", "],", "}}"}) {
    pieces.emplace_back(p);
  }
  pieces.emplace_back("</s>");
  const auto end = static_cast<int32_t>(pieces.size() - 1);
  return std::make_shared<const kvserve::GrammarVocab>(std::move(pieces),
                                                       std::vector<int32_t>{end});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvserve;
  if (size < 2) return 0;
  static const auto vocab = SmallVocab();
  const uint8_t mode = data[0] % 3;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  GrammarCache cache(vocab);
  Result<std::shared_ptr<TokenMasker>> masker = Status::InvalidArgument("none");
  if (mode == 0) {
    masker = cache.Get(GrammarSource::kGbnf, text);
  } else if (mode == 1) {
    masker = cache.Get(GrammarSource::kJsonSchema, text);
  } else {
    auto body = RegexToGbnf(text);
    if (body.ok()) masker = cache.Get(GrammarSource::kGbnf, "root ::= " + *body + "\n");
  }
  if (!masker.ok()) return 0;
  GrammarMatcher matcher((*masker)->grammar());
  TokenMask fast, slow;
  for (size_t step = 0; step < 8; ++step) {
    (*masker)->FillMask(matcher, fast);
    (*masker)->FillMaskByEveryToken(matcher, slow);
    if (!(fast == slow)) std::abort();
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < fast.n_vocab(); ++id) {
      if (fast.Test(id) && !vocab->is_end(id)) allowed.push_back(id);
    }
    if (allowed.empty()) break;
    const int32_t id = allowed[data[step % size] % allowed.size()];
    if (!matcher.Accept(vocab->piece(id))) std::abort();
  }
  return 0;
}
