// What the reference programs of this folder (make_reference.cc, make_assistant_reference.cc,
// make_qwen35_reference.cc, make_t5_reference.cc) share: writing float32 files, a JSON list of
// token ids, and greedy's choice.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "llama.h"

inline bool WriteFloats(const std::string& path, const std::vector<float>& v) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(v.data(), sizeof(float), v.size(), f) == v.size();
  return std::fclose(f) == 0 && ok;
}

inline std::string JoinIds(const std::vector<llama_token>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
  return s;
}

inline int Argmax(const float* row, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i) {
    if (row[i] > row[best]) best = i;
  }
  return best;
}
