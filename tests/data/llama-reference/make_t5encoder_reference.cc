// Writes a llama.cpp reference case for a t5encoder file (encoder-only T5; the program uses only
// llama.cpp's API): each text is tokenized by llama.cpp (special tokens added, special-token text
// parsed, as llama-embedding does) and encoded alone in one llama_encode in a fresh context,
// embeddings on. Files:
//   <out>.enc.f32   every text's rows, text after text, [sum of n_tokens, n_embd] float32: the
//                   encoder's output after enc.output_norm (pooling none, not normalized)
//   <out>.json      {"n_embd", "texts", "tokens" (per text), "decode_path_max_diff"}
// decode_path_max_diff: the largest |difference| between those rows and what llama_decode gives
// for the same batch (what llama-embedding and llama-server call): at this commit a t5encoder
// context gets a KV cache, so llama_decode runs the encoder graph with a causal mask, which T5's
// encoder does not have (the first token's row is the same whatever follows it there).
// CPU backend, 2 threads, context 512.
//
// Our program, built against a llama.cpp checkout beside the project (never part of the build):
//   c++ -std=c++17 -O2 make_t5encoder_reference.cc -I$LLAMA/include -I$LLAMA/ggml/include
//       -L$LLAMA/build/bin -lllama -lggml -lggml-base -Wl,-rpath,$LLAMA/build/bin
//       -o make_t5encoder_reference
//   ./make_t5encoder_reference MODEL.gguf OUT_PREFIX TEXT...
#include <algorithm>
#include <cmath>
#include <cstdio>
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
  cp.embeddings = true;
  cp.pooling_type = LLAMA_POOLING_TYPE_NONE;
  return cp;
}

std::vector<llama_token> Tokenize(const llama_vocab* vocab, const std::string& text) {
  std::vector<llama_token> ids(text.size() + 8);
  const int n = llama_tokenize(vocab, text.c_str(), static_cast<int>(text.size()), ids.data(),
                               static_cast<int>(ids.size()), true, true);
  ids.resize(n > 0 ? n : 0);
  return ids;
}

// The rows [n, n_embd] of one pass over `tokens` (encode: llama_encode; else llama_decode).
bool Rows(llama_model* model, const std::vector<llama_token>& tokens, bool encode,
          std::vector<float>& rows) {
  llama_context* ctx = llama_init_from_model(model, ContextParams());
  if (ctx == nullptr) return false;
  const int n = static_cast<int>(tokens.size());
  llama_batch batch = llama_batch_init(n, 0, 1);
  batch.n_tokens = n;
  for (int i = 0; i < n; ++i) {
    batch.token[i] = tokens[i];
    batch.pos[i] = i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  const bool ok = (encode ? llama_encode(ctx, batch) : llama_decode(ctx, batch)) == 0;
  const int n_embd = llama_model_n_embd(model);
  for (int i = 0; ok && i < n; ++i) {
    const float* row = llama_get_embeddings_ith(ctx, i);
    if (row == nullptr) return false;
    rows.insert(rows.end(), row, row + n_embd);
  }
  llama_batch_free(batch);
  llama_free(ctx);
  return ok;
}

std::string Quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MODEL.gguf OUT_PREFIX TEXT...\n", argv[0]);
    return 2;
  }
  llama_backend_init();
  llama_model* model = llama_model_load_from_file(argv[1], llama_model_default_params());
  if (model == nullptr) return 1;
  const llama_vocab* vocab = llama_model_get_vocab(model);
  std::vector<float> all;
  std::string texts = "[", tokens = "[";
  double max_diff = 0;
  for (int t = 3; t < argc; ++t) {
    const std::vector<llama_token> ids = Tokenize(vocab, argv[t]);
    std::vector<float> enc, dec;
    if (!Rows(model, ids, true, enc) || !Rows(model, ids, false, dec)) return 1;
    for (size_t i = 0; i < enc.size(); ++i) {
      max_diff = std::max(max_diff, std::fabs(static_cast<double>(enc[i]) - dec[i]));
    }
    all.insert(all.end(), enc.begin(), enc.end());
    texts += (t > 3 ? ", " : "") + Quoted(argv[t]);
    tokens += std::string(t > 3 ? ", " : "") + "[" + JoinIds(ids) + "]";
  }
  const std::string out = argv[2];
  if (!WriteFloats(out + ".enc.f32", all)) return 1;
  FILE* json = std::fopen((out + ".json").c_str(), "w");
  if (json == nullptr) return 1;
  std::fprintf(json,
               "{\"n_embd\": %d, \"texts\": %s], \"tokens\": %s], "
               "\"decode_path_max_diff\": %.3g}\n",
               llama_model_n_embd(model), texts.c_str(), tokens.c_str(), max_diff);
  std::fclose(json);
  llama_model_free(model);
  return 0;
}
