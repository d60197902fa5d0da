#include "cli/sampling_flags.h"

namespace kvserve {

void AddSamplingFlags(Args::Spec& spec) {
  for (const char* flag :
       {"--temp", "--seed", "--top-k", "--top-p", "--min-p", "--repeat-penalty"}) {
    spec.value_flags.push_back(flag);
  }
}

Result<SamplingParams> ReadSamplingParams(const Args& args) {
  auto seed = args.GetInt("--seed", 0xC0FFEE);
  auto top_k = args.GetInt("--top-k", 0);
  auto temp = args.GetDouble("--temp", 0.8);
  auto top_p = args.GetDouble("--top-p", 1.0);
  auto min_p = args.GetDouble("--min-p", 0.0);
  auto repeat = args.GetDouble("--repeat-penalty", 1.0);
  for (const Status& s : {seed.status(), top_k.status(), temp.status(), top_p.status(),
                          min_p.status(), repeat.status()}) {
    if (!s.ok()) return s;
  }
  SamplingParams s;
  s.temperature = static_cast<float>(*temp);
  s.top_k = static_cast<int>(*top_k);
  s.top_p = static_cast<float>(*top_p);
  s.min_p = static_cast<float>(*min_p);
  s.repetition_penalty = static_cast<float>(*repeat);
  s.seed = static_cast<uint64_t>(*seed);
  return s;
}

}  // namespace kvserve
