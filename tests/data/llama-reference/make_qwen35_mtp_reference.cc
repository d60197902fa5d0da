// Writes a llama.cpp reference case for the MTP (nextn) layer of a qwen35 or qwen35moe file, as
// llama.cpp's speculative driver runs it (common/speculative.cpp, draft-mtp with one trained head):
// <out>.json {"n_vocab", "prompt_tokens", "rounds": [{"n_past", "id_last", "draft_tokens"}],
// "llama_commit", "model", "llama_variation", ...} and <out>.mtp.logits.f32 (float32
// [ROUNDS * DRAFT, n_vocab], round-major: every draft step's full MTP logits).
//
// Two contexts on one model loaded with load_mtp: the target (embeddings_nextn on, every row: its
// h_nextn is the last layer's output after output_norm) and an MTP context (ctx_type MTP, its own
// KV cache of the MTP layer). The target decodes the prompt; the MTP context then decodes the same
// tokens at the same positions, token p paired with the target's h_nextn row p - 1 (row 0 with
// zeros: the driver's pending_h before any decode), as process() does; the target's last row is
// kept as the pending h. Then ROUNDS rounds: id_last = argmax of the target's last logits; DRAFT
// chained MTP steps, step 0 = (id_last, n_past, pending h), step j = (draft j - 1, n_past + j, the
// MTP's own h_nextn of step j - 1, after nextn.shared_head_norm), each step's draft its argmax;
// then the MTP cache loses positions >= n_past, the target decodes id_last at n_past (one token),
// the MTP context catches up with (id_last, n_past, the pending h) and the pending h becomes the
// target's new row; n_past + 1. The target's id_last run is greedy decoding.
//
// llama.cpp's own variation, for the tests' tolerances: the same run twice more in fresh contexts,
// the prompt fed token by token and in two chunks (split at SPLIT; target and MTP catch-up alike),
// with the batched run's id_last and draft tokens forced; "llama_variation" holds each run's
// largest |MTP logit - the batched run's| and the largest |MTP logit| for scale. The model is also
// loaded without load_mtp (the MTP tensors skipped) and the target's prompt logits compared with
// the load_mtp run's ("target_without_mtp": largest |difference|).
// CPU backend, 2 threads, F32 KV cache, flash attention off, context 2048, as
// make_qwen35_reference.cc.
//
// Our program, built against a llama.cpp checkout beside the project (never part of the build);
// it uses llama.cpp's staging API (src/llama-ext.h: llama_set_embeddings_nextn,
// llama_get_embeddings_nextn_ith), exported by libllama:
//   c++ -std=c++17 -O2 make_qwen35_mtp_reference.cc -I$LLAMA/include -I$LLAMA/src
//       -I$LLAMA/ggml/include -L$LLAMA/build/bin -lllama -lggml -lggml-base
//       -Wl,-rpath,$LLAMA/build/bin -o make_qwen35_mtp_reference
//   ./make_qwen35_mtp_reference MODEL OUT_PREFIX ROUNDS DRAFT SPLIT 'SYNTH COMMAND' SHA256
//       TOKEN...
// (SYNTH COMMAND and SHA256 only go into the json: how MODEL was made, and its sha256.)
// llama.cpp commit 3f545beccee69d9975f466ec7e45fd9aacd8ba90 (mirror ngxson/llama.cpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "llama-ext.h"
#include "llama.h"
#include "reference_io.h"

namespace {

llama_context_params ContextParams(bool mtp) {
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 2048;
  cp.n_batch = 2048;
  cp.n_ubatch = 2048;
  cp.n_threads = 2;
  cp.n_threads_batch = 2;
  cp.type_k = GGML_TYPE_F32;
  cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  if (mtp) cp.ctx_type = LLAMA_CONTEXT_TYPE_MTP;
  return cp;
}

// A batch with both token ids and hidden rows (llama_batch_init makes one or the other).
struct MtpBatch {
  llama_batch batch;
  MtpBatch(int n, int n_embd) : batch(llama_batch_init(n, n_embd, 1)) {
    batch.token = static_cast<llama_token*>(std::malloc(sizeof(llama_token) * n));
  }
  ~MtpBatch() {
    std::free(batch.token);
    batch.token = nullptr;
    llama_batch_free(batch);
  }
  void Add(llama_token token, llama_pos pos, const float* h, int n_embd, bool output) {
    const int i = batch.n_tokens++;
    batch.token[i] = token;
    batch.pos[i] = pos;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = output;
    std::memcpy(batch.embd + static_cast<size_t>(i) * n_embd, h, sizeof(float) * n_embd);
  }
};

// What one run gives: the target's prompt logits, the MTP steps' logits and tokens.
struct Run {
  std::vector<float> target_prompt_logits;  // [n_prompt, n_vocab]
  std::vector<float> mtp_logits;            // [rounds * draft, n_vocab]
  std::vector<llama_token> id_last;         // [rounds]
  std::vector<llama_token> drafts;          // [rounds * draft]
  std::vector<int> n_past;                  // [rounds]
  float min_gap = INFINITY;                 // smallest top-2 gap of the argmaxes taken
};

float Top2Gap(const float* row, int n) {
  float a = -INFINITY, b = -INFINITY;
  for (int i = 0; i < n; ++i) {
    if (row[i] > a) {
      b = a;
      a = row[i];
    } else if (row[i] > b) {
      b = row[i];
    }
  }
  return a - b;
}

class Driver {
 public:
  Driver(llama_model* model, int n_vocab, int n_embd)
      : n_vocab_(n_vocab), n_embd_(n_embd), pending_(n_embd, 0.0f) {
    tgt_ = llama_init_from_model(model, ContextParams(false));
    mtp_ = llama_init_from_model(model, ContextParams(true));
    if (tgt_ != nullptr) llama_set_embeddings_nextn(tgt_, true, /*masked=*/false);
    if (mtp_ != nullptr) llama_set_embeddings_nextn(mtp_, true, /*masked=*/true);
  }
  ~Driver() {
    if (mtp_ != nullptr) llama_free(mtp_);
    if (tgt_ != nullptr) llama_free(tgt_);
  }
  bool ok() const { return tgt_ != nullptr && mtp_ != nullptr; }

  // The target decodes tokens [begin, end) at their positions (every row's logits; the last
  // row's kept); then the MTP context catches up on them with the target's rows shifted by one.
  bool Feed(const std::vector<llama_token>& tokens, int begin, int end,
            std::vector<float>* all_logits) {
    const int n = end - begin;
    llama_batch batch = llama_batch_init(n, 0, 1);
    batch.n_tokens = n;
    for (int i = 0; i < n; ++i) {
      batch.token[i] = tokens[begin + i];
      batch.pos[i] = begin + i;
      batch.n_seq_id[i] = 1;
      batch.seq_id[i][0] = 0;
      batch.logits[i] = 1;
    }
    bool ok = llama_decode(tgt_, batch) == 0;
    llama_batch_free(batch);
    if (!ok) return false;
    if (all_logits != nullptr) {
      for (int i = 0; i < n; ++i) {
        const float* row = llama_get_logits_ith(tgt_, i);
        all_logits->insert(all_logits->end(), row, row + n_vocab_);
      }
    }
    const float* last = llama_get_logits_ith(tgt_, n - 1);
    last_logits_.assign(last, last + n_vocab_);
    MtpBatch catch_up(n, n_embd_);
    for (int i = 0; i < n; ++i) {
      const float* h = i == 0 ? pending_.data() : llama_get_embeddings_nextn_ith(tgt_, i - 1);
      catch_up.Add(tokens[begin + i], begin + i, h, n_embd_, false);
    }
    ok = llama_decode(mtp_, catch_up.batch) == 0;
    const float* h_last = llama_get_embeddings_nextn_ith(tgt_, n - 1);
    pending_.assign(h_last, h_last + n_embd_);
    return ok;
  }

  // One round at n_past: DRAFT chained MTP steps from id_last (forced when `force` holds the
  // round's tokens), the MTP cache cut back to n_past, then id_last fed to both.
  bool Round(int n_past, int n_draft, const llama_token* force_id, const llama_token* force_drafts,
             Run& run) {
    const llama_token id_last =
        force_id != nullptr ? *force_id : Argmax(last_logits_.data(), n_vocab_);
    run.min_gap = std::min(run.min_gap, Top2Gap(last_logits_.data(), n_vocab_));
    run.id_last.push_back(id_last);
    run.n_past.push_back(n_past);
    std::vector<float> h = pending_;
    llama_token token = id_last;
    for (int j = 0; j < n_draft; ++j) {
      MtpBatch step(1, n_embd_);
      step.Add(token, n_past + j, h.data(), n_embd_, true);
      if (llama_decode(mtp_, step.batch) != 0) return false;
      const float* logits = llama_get_logits_ith(mtp_, 0);
      run.mtp_logits.insert(run.mtp_logits.end(), logits, logits + n_vocab_);
      run.min_gap = std::min(run.min_gap, Top2Gap(logits, n_vocab_));
      token = force_drafts != nullptr ? force_drafts[j] : Argmax(logits, n_vocab_);
      run.drafts.push_back(token);
      const float* h_next = llama_get_embeddings_nextn_ith(mtp_, 0);
      h.assign(h_next, h_next + n_embd_);
    }
    if (!llama_memory_seq_rm(llama_get_memory(mtp_), 0, n_past, -1)) return false;
    const std::vector<llama_token> one(n_past + 1, id_last);  // only index n_past is read
    return Feed(one, n_past, n_past + 1, nullptr);
  }

 private:
  int n_vocab_, n_embd_;
  llama_context* tgt_ = nullptr;
  llama_context* mtp_ = nullptr;
  std::vector<float> pending_;      // the target's h_nextn row of its last token
  std::vector<float> last_logits_;  // the target's logits of its last token
};

// A run in fresh contexts: the prompt in the decodes that `cuts` delimit, then `rounds` rounds of
// `n_draft` steps; `forced` (a run's tokens) decides id_last and the drafts when given.
bool RunOnce(llama_model* model, int n_vocab, int n_embd, const std::vector<llama_token>& prompt,
             const std::vector<int>& cuts, int rounds, int n_draft, const Run* forced, Run& run) {
  Driver d(model, n_vocab, n_embd);
  if (!d.ok()) return false;
  for (size_t c = 0; c + 1 < cuts.size(); ++c) {
    if (!d.Feed(prompt, cuts[c], cuts[c + 1], &run.target_prompt_logits)) return false;
  }
  const int n_prompt = static_cast<int>(prompt.size());
  for (int r = 0; r < rounds; ++r) {
    const llama_token* id = forced != nullptr ? &forced->id_last[r] : nullptr;
    const llama_token* drafts = forced != nullptr ? &forced->drafts[r * n_draft] : nullptr;
    if (!d.Round(n_prompt + r, n_draft, id, drafts, run)) return false;
  }
  return true;
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

llama_model* Load(const char* path, bool load_mtp) {
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  mp.load_mtp = load_mtp;
  return llama_model_load_from_file(path, mp);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 9) {
    std::fprintf(stderr,
                 "usage: %s MODEL OUT_PREFIX ROUNDS DRAFT SPLIT 'SYNTH COMMAND' SHA256 TOKEN...\n",
                 argv[0]);
    return 2;
  }
  const std::string out = argv[2];
  const int rounds = std::atoi(argv[3]);
  const int n_draft = std::atoi(argv[4]);
  const int split = std::atoi(argv[5]);
  const std::string synth_command = argv[6];
  const std::string sha256 = argv[7];
  std::vector<llama_token> prompt;
  for (int i = 8; i < argc; ++i) prompt.push_back(std::atoi(argv[i]));
  const int n_prompt = static_cast<int>(prompt.size());
  if (rounds < 1 || n_draft < 1 || split < 1 || split >= n_prompt) return 2;

  llama_backend_init();
  llama_model* model = Load(argv[1], true);
  if (model == nullptr) return 1;
  if (llama_model_n_layer_nextn(model) != 1) {
    std::fprintf(stderr, "%s: %d nextn layers, not 1\n", argv[1], llama_model_n_layer_nextn(model));
    return 1;
  }
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  const int n_embd = llama_model_n_embd_out(model);

  Run batched, stepped, chunked;
  std::vector<int> steps;
  for (int i = 0; i <= n_prompt; ++i) steps.push_back(i);
  if (!RunOnce(model, n_vocab, n_embd, prompt, {0, n_prompt}, rounds, n_draft, nullptr, batched) ||
      !RunOnce(model, n_vocab, n_embd, prompt, steps, rounds, n_draft, &batched, stepped) ||
      !RunOnce(model, n_vocab, n_embd, prompt, {0, split, n_prompt}, rounds, n_draft, &batched,
               chunked)) {
    std::fprintf(stderr, "a decode failed\n");
    return 1;
  }
  // Without load_mtp: the target alone, whose logits must not change.
  llama_model* trunk = Load(argv[1], false);
  if (trunk == nullptr) return 1;
  std::vector<float> trunk_logits;
  {
    llama_context* ctx = llama_init_from_model(trunk, ContextParams(false));
    if (ctx == nullptr) return 1;
    llama_batch batch = llama_batch_init(n_prompt, 0, 1);
    batch.n_tokens = n_prompt;
    for (int i = 0; i < n_prompt; ++i) {
      batch.token[i] = prompt[i];
      batch.pos[i] = i;
      batch.n_seq_id[i] = 1;
      batch.seq_id[i][0] = 0;
      batch.logits[i] = 1;
    }
    if (llama_decode(ctx, batch) != 0) return 1;
    for (int i = 0; i < n_prompt; ++i) {
      const float* row = llama_get_logits_ith(ctx, i);
      trunk_logits.insert(trunk_logits.end(), row, row + n_vocab);
    }
    llama_batch_free(batch);
    llama_free(ctx);
  }
  llama_model_free(trunk);

  FILE* json = std::fopen((out + ".json").c_str(), "w");
  if (json == nullptr) return 1;
  std::string rounds_json;
  for (int r = 0; r < rounds; ++r) {
    const std::vector<llama_token> drafts(batched.drafts.begin() + r * n_draft,
                                          batched.drafts.begin() + (r + 1) * n_draft);
    char text[256];
    std::snprintf(text, sizeof(text), "%s{\"n_past\": %d, \"id_last\": %d, \"draft_tokens\": [%s]}",
                  r ? ", " : "", batched.n_past[r], batched.id_last[r], JoinIds(drafts).c_str());
    rounds_json += text;
  }
  std::fprintf(json,
               "{\"n_vocab\": %d, \"prompt_tokens\": [%s], \"rounds\": [%s], \"n_draft\": %d, "
               "\"llama_commit\": \"3f545becc\", "
               "\"model\": {\"synth\": \"%s\", \"sha256\": \"%s\"}, "
               "\"min_top2_gap\": %.3g, \"target_without_mtp\": %.3g, "
               "\"llama_variation\": {\"max_abs_logit\": %.3g, \"token_by_token\": %.3g, "
               "\"two_chunks_split\": %d, \"two_chunks\": %.3g}}\n",
               n_vocab, JoinIds(prompt).c_str(), rounds_json.c_str(), n_draft,
               synth_command.c_str(), sha256.c_str(), batched.min_gap,
               MaxAbsDiff(trunk_logits, batched.target_prompt_logits), MaxAbs(batched.mtp_logits),
               MaxAbsDiff(stepped.mtp_logits, batched.mtp_logits), split,
               MaxAbsDiff(chunked.mtp_logits, batched.mtp_logits));
  std::fclose(json);
  if (!WriteFloats(out + ".mtp.logits.f32", batched.mtp_logits)) return 1;
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
