// Writes a llama.cpp reference case for a qwen35 or qwen35moe file (Gated DeltaNet layers between
// gated full-attention layers; the program uses only llama.cpp's API), in make_reference.cc's
// format: <out>.json {"n_vocab", "prompt_tokens", "greedy_tokens", "llama_variation"},
// <out>.logits.f32 (the logits at every prompt position, [n_prompt, n_vocab], one batched decode)
// and <out>.gen.logits.f32 (row i: the logits after feeding greedy_tokens[i], one token per decode
// with the recurrent state and the KV cache).
//
// llama.cpp's own variation, for the tests' tolerances: the prompt is decoded twice more in fresh
// contexts, token by token and in two chunks (split at SPLIT), each followed by the same greedy
// tokens; "llama_variation" holds each run's largest |logit - the batched run's logit| over the
// prompt rows and over the generated rows, and the largest |logit| of the batched run for scale.
// llama.cpp builds different graphs for many-token and one-token decodes (the Gated DeltaNet's
// chunked and autoregressive forms, matrix products of many rows or of one), so these numbers
// are its batch-against-incremental noise.
// CPU backend, 2 threads, F32 KV cache (the recurrent states are F32 always), flash attention
// off, context 2048.
//
// Our program, built against a llama.cpp checkout beside the project (never part of the build),
// in one command:
//   c++ -std=c++17 -O2 make_qwen35_reference.cc -I$LLAMA/include -I$LLAMA/ggml/include
//       -L$LLAMA/build/bin -lllama -lggml -lggml-base -Wl,-rpath,$LLAMA/build/bin
//       -o make_qwen35_reference
//   ./make_qwen35_reference MODEL.gguf OUT_PREFIX N_GREEDY SPLIT TOKEN...
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "llama.h"
#include "reference_io.h"

namespace {

llama_context_params ContextParams() {
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 2048;
  cp.n_batch = 2048;
  cp.n_ubatch = 2048;
  cp.n_threads = 2;
  cp.n_threads_batch = 2;
  cp.type_k = GGML_TYPE_F32;
  cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  return cp;
}

// Decodes tokens [begin, end) of `tokens` at their positions, every row's logits wanted, and
// appends those rows to `logits`.
bool DecodeRange(llama_context* ctx, const std::vector<llama_token>& tokens, int begin, int end,
                 int n_vocab, std::vector<float>& logits) {
  llama_batch batch = llama_batch_init(end - begin, 0, 1);
  batch.n_tokens = end - begin;
  for (int i = 0; i < batch.n_tokens; ++i) {
    batch.token[i] = tokens[begin + i];
    batch.pos[i] = begin + i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  const bool ok = llama_decode(ctx, batch) == 0;
  for (int i = 0; ok && i < batch.n_tokens; ++i) {
    const float* row = llama_get_logits_ith(ctx, i);
    logits.insert(logits.end(), row, row + n_vocab);
  }
  llama_batch_free(batch);
  return ok;
}

// One run in a fresh context: the prompt in the decodes that `cuts` delimit (cuts[0] = 0,
// cuts.back() = n_prompt), then the generated tokens one per decode. `greedy` empty: they are
// picked here, greedily, and returned in it; else the given ones are fed.
struct Run {
  std::vector<float> prompt_logits;  // [n_prompt, n_vocab]
  std::vector<float> gen_logits;     // [n_greedy, n_vocab]
};

bool RunOnce(llama_model* model, const std::vector<llama_token>& prompt,
             const std::vector<int>& cuts, int n_greedy, std::vector<llama_token>& greedy,
             Run& run) {
  llama_context* ctx = llama_init_from_model(model, ContextParams());
  if (ctx == nullptr) return false;
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  bool ok = true;
  for (size_t c = 0; ok && c + 1 < cuts.size(); ++c) {
    ok = DecodeRange(ctx, prompt, cuts[c], cuts[c + 1], n_vocab, run.prompt_logits);
  }
  const bool pick = greedy.empty();
  const int n_prompt = static_cast<int>(prompt.size());
  if (ok && pick) greedy.push_back(Argmax(&run.prompt_logits[(n_prompt - 1) * n_vocab], n_vocab));
  for (int step = 0; ok && step < n_greedy; ++step) {
    std::vector<llama_token> all = prompt;
    all.insert(all.end(), greedy.begin(), greedy.begin() + step + 1);
    ok = DecodeRange(ctx, all, n_prompt + step, n_prompt + step + 1, n_vocab, run.gen_logits);
    if (ok && pick && step + 1 < n_greedy) {
      greedy.push_back(Argmax(&run.gen_logits[step * n_vocab], n_vocab));
    }
  }
  llama_free(ctx);
  return ok;
}

float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0.0f;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return a.size() == b.size() ? m : INFINITY;
}

float MaxAbs(const std::vector<float>& a) {
  float m = 0.0f;
  for (float v : a) m = std::max(m, std::fabs(v));
  return m;
}

// {"prompt": .., "gen": ..}: `run` against the batched run.
std::string VariationJson(const Run& run, const Run& batched) {
  char text[128];
  std::snprintf(text, sizeof(text), "{\"prompt\": %.3g, \"gen\": %.3g}",
                MaxAbsDiff(run.prompt_logits, batched.prompt_logits),
                MaxAbsDiff(run.gen_logits, batched.gen_logits));
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s MODEL OUT_PREFIX N_GREEDY SPLIT TOKEN...\n", argv[0]);
    return 2;
  }
  const std::string out = argv[2];
  const int n_greedy = std::atoi(argv[3]);
  const int split = std::atoi(argv[4]);
  std::vector<llama_token> prompt;
  for (int i = 5; i < argc; ++i) prompt.push_back(std::atoi(argv[i]));
  const int n_prompt = static_cast<int>(prompt.size());
  if (n_greedy < 1 || split < 1 || split >= n_prompt) return 2;

  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (model == nullptr) return 1;
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

  std::vector<llama_token> greedy;
  Run batched, stepped, chunked;
  std::vector<int> steps;
  for (int i = 0; i <= n_prompt; ++i) steps.push_back(i);
  if (!RunOnce(model, prompt, {0, n_prompt}, n_greedy, greedy, batched) ||
      !RunOnce(model, prompt, steps, n_greedy, greedy, stepped) ||
      !RunOnce(model, prompt, {0, split, n_prompt}, n_greedy, greedy, chunked)) {
    return 1;
  }
  FILE* json = std::fopen((out + ".json").c_str(), "w");
  if (json == nullptr) return 1;
  std::fprintf(json,
               "{\"n_vocab\": %d, \"prompt_tokens\": [%s], \"greedy_tokens\": [%s], "
               "\"llama_variation\": {\"max_abs_logit\": %.3g, \"token_by_token\": %s, "
               "\"two_chunks_split\": %d, \"two_chunks\": %s}}\n",
               n_vocab, JoinIds(prompt).c_str(), JoinIds(greedy).c_str(),
               std::max(MaxAbs(batched.prompt_logits), MaxAbs(batched.gen_logits)),
               VariationJson(stepped, batched).c_str(), split,
               VariationJson(chunked, batched).c_str());
  std::fclose(json);
  if (!WriteFloats(out + ".logits.f32", batched.prompt_logits) ||
      !WriteFloats(out + ".gen.logits.f32", batched.gen_logits)) {
    return 1;
  }
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
