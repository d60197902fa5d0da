// Writes a llama.cpp reference case for a model file, in the format of ../shared/reference/arch
// (its README): <out>.json {"n_vocab", "prompt_tokens", "greedy_tokens"}, <out>.logits.f32 (the
// logits at every prompt position, [n_prompt, n_vocab], one batched decode) and
// <out>.gen.logits.f32 (row i: the logits after feeding greedy_tokens[i], one token per decode
// with the KV cache). CPU backend, 2 threads, F32 KV cache, flash attention off, context 2048.
//
// Our program, built against a llama.cpp checkout beside the project (never part of the build):
//   c++ -std=c++17 -O2 make_reference.cc -I$LLAMA/include -I$LLAMA/ggml/include \
//       -L$LLAMA/build/bin -lllama -lggml -lggml-base -Wl,-rpath,$LLAMA/build/bin -o make_reference
//   ./make_reference MODEL.gguf OUT_PREFIX N_GREEDY TOKEN...
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "llama.h"
#include "reference_io.h"

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s MODEL OUT_PREFIX N_GREEDY TOKEN...\n", argv[0]);
    return 2;
  }
  const std::string out = argv[2];
  const int n_greedy = std::atoi(argv[3]);
  std::vector<llama_token> prompt;
  for (int i = 4; i < argc; ++i) prompt.push_back(std::atoi(argv[i]));

  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (model == nullptr) return 1;
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 2048;
  cp.n_batch = 2048;
  cp.n_ubatch = 2048;
  cp.n_threads = 2;
  cp.n_threads_batch = 2;
  cp.type_k = GGML_TYPE_F32;
  cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (ctx == nullptr) return 1;
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

  llama_batch batch = llama_batch_init(static_cast<int>(prompt.size()), 0, 1);
  batch.n_tokens = static_cast<int>(prompt.size());
  for (int i = 0; i < batch.n_tokens; ++i) {
    batch.token[i] = prompt[i];
    batch.pos[i] = i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  if (llama_decode(ctx, batch) != 0) return 1;
  std::vector<float> prompt_logits;
  for (int i = 0; i < batch.n_tokens; ++i) {
    const float* row = llama_get_logits_ith(ctx, i);
    prompt_logits.insert(prompt_logits.end(), row, row + n_vocab);
  }
  std::vector<llama_token> greedy{Argmax(llama_get_logits_ith(ctx, batch.n_tokens - 1), n_vocab)};
  std::vector<float> gen_logits;
  for (int step = 0; step < n_greedy; ++step) {
    llama_batch one = llama_batch_get_one(&greedy.back(), 1);
    if (llama_decode(ctx, one) != 0) return 1;
    const float* row = llama_get_logits_ith(ctx, -1);
    gen_logits.insert(gen_logits.end(), row, row + n_vocab);
    if (step + 1 < n_greedy) greedy.push_back(Argmax(row, n_vocab));
  }
  FILE* json = std::fopen((out + ".json").c_str(), "w");
  if (json == nullptr) return 1;
  std::fprintf(json, "{\"n_vocab\": %d, \"prompt_tokens\": [%s], \"greedy_tokens\": [%s]}\n",
               n_vocab, JoinIds(prompt).c_str(), JoinIds(greedy).c_str());
  std::fclose(json);
  if (!WriteFloats(out + ".logits.f32", prompt_logits) ||
      !WriteFloats(out + ".gen.logits.f32", gen_logits)) {
    return 1;
  }
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
