// Writes a llama.cpp reference case for a t5 file (an encoder-decoder; the program uses only
// llama.cpp's API): the encoder input is encoded in one llama_encode, then the decoder is fed
// [decoder_start, d1..dk] in one llama_decode and greedy tokens one per decode, as
// make_reference.cc does for a decoder-only prompt. Files:
//   <out>.enc.f32         the encoder's output, [n_enc, n_embd] float32: after enc.output_norm,
//                         what the decoder's cross-attention reads (llama_context::encode copies
//                         the same rows into its cross state)
//   <out>.logits.f32      the decoder's logits at every prefix row, [k + 1, n_vocab], one decode
//   <out>.gen.logits.f32  row i: the logits after feeding greedy_tokens[i], one token per decode
//   <out>.json            {"n_vocab", "n_embd", "encoder_tokens", "decoder_start_token",
//                         "decoder_prompt_tokens" (the prefix, its first the start token),
//                         "greedy_tokens", "llama_variation"}
// llama_variation: a second run in a fresh context encodes the input again and feeds the prefix
// token by token, then the same greedy tokens; it holds the largest |difference| from the first
// run over the encoder output, the prefix rows and the generated rows, and the largest |value|
// of the first run's encoder output and logits for scale.
// The decoder start token is the file's decoder_start_token_id (llama_model_decoder_start_token;
// BOS where the file has none, as llama.cpp's tools do). CPU backend, 2 threads, F32 KV cache,
// flash attention off, context 512.
//
// Our program, built against a llama.cpp checkout beside the project (never part of the build),
// in one command:
//   c++ -std=c++17 -O2 make_t5_reference.cc -I$LLAMA/include -I$LLAMA/ggml/include
//       -L$LLAMA/build/bin -lllama -lggml -lggml-base -Wl,-rpath,$LLAMA/build/bin
//       -o make_t5_reference
//   ./make_t5_reference MODEL.gguf OUT_PREFIX N_GREEDY ENC_TOKEN,... DEC_TOKEN,...
// (DEC_TOKEN,...: d1..dk, after the start token.)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"
#include "reference_io.h"

namespace {

llama_context_params ContextParams() {
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 512;
  cp.n_batch = 512;
  cp.n_ubatch = 512;
  cp.n_threads = 2;
  cp.n_threads_batch = 2;
  cp.type_k = GGML_TYPE_F32;
  cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  return cp;
}

// "1,2,3" -> {1, 2, 3}.
std::vector<llama_token> ParseIds(const char* text) {
  std::vector<llama_token> ids;
  std::stringstream s(text);
  std::string item;
  while (std::getline(s, item, ',')) ids.push_back(std::atoi(item.c_str()));
  return ids;
}

// tokens at positions [begin, end), one sequence, every row's output wanted.
llama_batch MakeBatch(const std::vector<llama_token>& tokens, int begin, int end) {
  llama_batch batch = llama_batch_init(end - begin, 0, 1);
  batch.n_tokens = end - begin;
  for (int i = 0; i < batch.n_tokens; ++i) {
    batch.token[i] = tokens[begin + i];
    batch.pos[i] = begin + i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  return batch;
}

// One llama_encode of the whole input; its output rows [n_enc, n_embd] into `enc`. Embeddings are
// switched on for the encode only (a t5 context keeps its embedding buffer either way).
bool Encode(llama_context* ctx, const std::vector<llama_token>& tokens, int n_embd,
            std::vector<float>& enc) {
  const int n = static_cast<int>(tokens.size());
  llama_batch batch = MakeBatch(tokens, 0, n);
  llama_set_embeddings(ctx, true);
  const bool ok = llama_encode(ctx, batch) == 0;
  const float* rows = ok ? llama_get_embeddings(ctx) : nullptr;
  if (rows != nullptr) enc.assign(rows, rows + static_cast<size_t>(n) * n_embd);
  llama_set_embeddings(ctx, false);
  llama_batch_free(batch);
  return rows != nullptr;
}

// Decodes tokens [begin, end) of `tokens` at their positions, every row's logits wanted, and
// appends those rows to `logits`.
bool DecodeRange(llama_context* ctx, const std::vector<llama_token>& tokens, int begin, int end,
                 int n_vocab, std::vector<float>& logits) {
  llama_batch batch = MakeBatch(tokens, begin, end);
  const bool ok = llama_decode(ctx, batch) == 0;
  for (int i = 0; ok && i < batch.n_tokens; ++i) {
    const float* row = llama_get_logits_ith(ctx, i);
    logits.insert(logits.end(), row, row + n_vocab);
  }
  llama_batch_free(batch);
  return ok;
}

struct Run {
  std::vector<float> enc;            // [n_enc, n_embd]
  std::vector<float> prefix_logits;  // [k + 1, n_vocab]
  std::vector<float> gen_logits;     // [n_greedy, n_vocab]
};

// One run in a fresh context: the encode, the decoder prefix in one decode (`stepped`: one token
// per decode), then the generated tokens one per decode. `greedy` empty: they are picked here,
// greedily, and returned in it; else the given ones are fed.
bool RunOnce(llama_model* model, const std::vector<llama_token>& input,
             const std::vector<llama_token>& prefix, bool stepped, int n_greedy,
             std::vector<llama_token>& greedy, Run& run) {
  llama_context* ctx = llama_init_from_model(model, ContextParams());
  if (ctx == nullptr) return false;
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  const int n_prefix = static_cast<int>(prefix.size());
  bool ok = Encode(ctx, input, llama_model_n_embd(model), run.enc);
  for (int begin = 0; ok && begin < n_prefix; begin = stepped ? begin + 1 : n_prefix) {
    ok =
        DecodeRange(ctx, prefix, begin, stepped ? begin + 1 : n_prefix, n_vocab, run.prefix_logits);
  }
  const bool pick = greedy.empty();
  if (ok && pick) greedy.push_back(Argmax(&run.prefix_logits[(n_prefix - 1) * n_vocab], n_vocab));
  for (int step = 0; ok && step < n_greedy; ++step) {
    std::vector<llama_token> all = prefix;
    all.insert(all.end(), greedy.begin(), greedy.begin() + step + 1);
    ok = DecodeRange(ctx, all, n_prefix + step, n_prefix + step + 1, n_vocab, run.gen_logits);
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

bool WriteJson(const std::string& path, const llama_model* model,
               const std::vector<llama_token>& input, const std::vector<llama_token>& prefix,
               const std::vector<llama_token>& greedy, const Run& batched, const Run& stepped) {
  FILE* json = std::fopen(path.c_str(), "w");
  if (json == nullptr) return false;
  std::fprintf(
      json,
      "{\"n_vocab\": %d, \"n_embd\": %d, \"encoder_tokens\": [%s], \"decoder_start_token\": %d, "
      "\"decoder_prompt_tokens\": [%s], \"greedy_tokens\": [%s], \"llama_variation\": "
      "{\"max_abs_enc\": %.3g, \"max_abs_logit\": %.3g, \"token_by_token\": {\"enc\": %.3g, "
      "\"prompt\": %.3g, \"gen\": %.3g}}}\n",
      llama_vocab_n_tokens(llama_model_get_vocab(model)), llama_model_n_embd(model),
      JoinIds(input).c_str(), prefix[0], JoinIds(prefix).c_str(), JoinIds(greedy).c_str(),
      MaxAbs(batched.enc), std::max(MaxAbs(batched.prefix_logits), MaxAbs(batched.gen_logits)),
      MaxAbsDiff(stepped.enc, batched.enc),
      MaxAbsDiff(stepped.prefix_logits, batched.prefix_logits),
      MaxAbsDiff(stepped.gen_logits, batched.gen_logits));
  return std::fclose(json) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s MODEL OUT_PREFIX N_GREEDY ENC_TOKEN,... DEC_TOKEN,...\n",
                 argv[0]);
    return 2;
  }
  const std::string out = argv[2];
  const int n_greedy = std::atoi(argv[3]);
  const std::vector<llama_token> input = ParseIds(argv[4]);
  if (n_greedy < 1 || input.empty()) return 2;

  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (model == nullptr || !llama_model_has_encoder(model)) return 1;
  llama_token start = llama_model_decoder_start_token(model);
  if (start == LLAMA_TOKEN_NULL) start = llama_vocab_bos(llama_model_get_vocab(model));
  std::vector<llama_token> prefix = {start};
  for (llama_token t : ParseIds(argv[5])) prefix.push_back(t);

  std::vector<llama_token> greedy;
  Run batched, stepped;
  if (!RunOnce(model, input, prefix, false, n_greedy, greedy, batched) ||
      !RunOnce(model, input, prefix, true, n_greedy, greedy, stepped)) {
    return 1;
  }
  if (!WriteJson(out + ".json", model, input, prefix, greedy, batched, stepped) ||
      !WriteFloats(out + ".enc.f32", batched.enc) ||
      !WriteFloats(out + ".logits.f32", batched.prefix_logits) ||
      !WriteFloats(out + ".gen.logits.f32", batched.gen_logits)) {
    return 1;
  }
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
