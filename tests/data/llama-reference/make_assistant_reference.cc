// Writes a llama.cpp reference of a Gemma 4 assistant drafting for its target, as llama.cpp's
// speculative decoding drives it (common/speculative.cpp, the shared-memory MTP mode): the
// target decodes the prompt, then at each of N_STEPS steps greedy-picks its pending token, the
// assistant drafts N_DRAFT tokens from (pending token, the target's hidden row) at the pending
// token's position, each next one from (the draft, the assistant's own next hidden row) at the
// same position, and the target then decodes the pending token. Outputs:
//   <out>.json         {"n_vocab", "prompt_tokens", "pending_tokens", "draft_tokens"}
//   <out>.draft.logits.f32  [N_STEPS * N_DRAFT, n_vocab]: the assistant's logits, in order
// CPU backend, 2 threads, F32 KV cache, flash attention off, context 2048.
//
// Our program, built against a llama.cpp checkout beside the project (never part of the build):
//   c++ -std=c++17 -O2 make_assistant_reference.cc -I$LLAMA/include -I$LLAMA/ggml/include \
//       -L$LLAMA/build/bin -lllama -lggml -lggml-base -Wl,-rpath,$LLAMA/build/bin -o make_asst
//   ./make_asst TARGET.gguf ASSISTANT.gguf OUT_PREFIX N_STEPS N_DRAFT TOKEN...
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "llama.h"
#include "reference_io.h"

// From llama.cpp's src/llama-ext.h (exported, C++ linkage).
void llama_set_embeddings_nextn(llama_context* ctx, bool value, bool masked);
float* llama_get_embeddings_nextn_ith(llama_context* ctx, int32_t i);

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

// Decodes `tokens` at positions first.. on the target; the last row's logits are wanted.
bool DecodeTarget(llama_context* ctx, const std::vector<llama_token>& tokens, int first) {
  llama_batch batch = llama_batch_init(static_cast<int>(tokens.size()), 0, 1);
  batch.n_tokens = static_cast<int>(tokens.size());
  for (int i = 0; i < batch.n_tokens; ++i) {
    batch.token[i] = tokens[i];
    batch.pos[i] = first + i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = i + 1 == batch.n_tokens;
  }
  const bool ok = llama_decode(ctx, batch) == 0;
  llama_batch_free(batch);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: %s TARGET ASSISTANT OUT_PREFIX N_STEPS N_DRAFT TOKEN...\n",
                 argv[0]);
    return 2;
  }
  const std::string out = argv[3];
  const int n_steps = std::atoi(argv[4]);
  const int n_draft = std::atoi(argv[5]);
  std::vector<llama_token> prompt;
  for (int i = 6; i < argc; ++i) prompt.push_back(std::atoi(argv[i]));

  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* target = llama_model_load_from_file(argv[1], mp);
  llama_model* assistant = llama_model_load_from_file(argv[2], mp);
  if (target == nullptr || assistant == nullptr) return 1;
  llama_context* ctx_t = llama_init_from_model(target, ContextParams());
  if (ctx_t == nullptr) return 1;
  llama_context_params ap = ContextParams();
  ap.ctx_other = ctx_t;
  llama_context* ctx_a = llama_init_from_model(assistant, ap);
  if (ctx_a == nullptr) return 1;
  llama_set_embeddings_nextn(ctx_t, true, false);
  llama_set_embeddings_nextn(ctx_a, true, true);
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(target));
  const int n_embd = llama_model_n_embd(target);

  if (!DecodeTarget(ctx_t, prompt, 0)) return 1;
  int n_past = static_cast<int>(prompt.size());
  int last_row = n_past - 1;  // the target batch's row whose logits give the pending token
  std::vector<llama_token> pending, drafts;
  std::vector<float> logits;
  llama_batch batch = llama_batch_init(1, n_embd, 1);
  batch.token = static_cast<llama_token*>(std::malloc(sizeof(llama_token)));
  for (int step = 0; step < n_steps; ++step) {
    const llama_token next = Argmax(llama_get_logits_ith(ctx_t, -1), n_vocab);
    pending.push_back(next);
    std::vector<float> h(llama_get_embeddings_nextn_ith(ctx_t, last_row),
                         llama_get_embeddings_nextn_ith(ctx_t, last_row) + n_embd);
    llama_token token = next;
    for (int d = 0; d < n_draft; ++d) {
      batch.n_tokens = 1;
      batch.token[0] = token;
      std::memcpy(batch.embd, h.data(), sizeof(float) * n_embd);
      batch.pos[0] = n_past;
      batch.n_seq_id[0] = 1;
      batch.seq_id[0][0] = 0;
      batch.logits[0] = 1;
      if (llama_decode(ctx_a, batch) != 0) return 1;
      const float* row = llama_get_logits_ith(ctx_a, 0);
      logits.insert(logits.end(), row, row + n_vocab);
      token = Argmax(row, n_vocab);
      drafts.push_back(token);
      const float* h_next = llama_get_embeddings_nextn_ith(ctx_a, 0);
      h.assign(h_next, h_next + n_embd);
    }
    if (!DecodeTarget(ctx_t, {next}, n_past)) return 1;
    ++n_past;
    last_row = 0;
  }
  FILE* json = std::fopen((out + ".json").c_str(), "w");
  if (json == nullptr) return 1;
  std::fprintf(json,
               "{\"n_vocab\": %d, \"prompt_tokens\": [%s], \"pending_tokens\": [%s], "
               "\"draft_tokens\": [%s]}\n",
               n_vocab, JoinIds(prompt).c_str(), JoinIds(pending).c_str(),
               JoinIds(drafts).c_str());
  std::fclose(json);
  if (!WriteFloats(out + ".draft.logits.f32", logits)) return 1;
  llama_free(ctx_a);
  llama_free(ctx_t);
  llama_model_free(assistant);
  llama_model_free(target);
  llama_backend_free();
  return 0;
}
