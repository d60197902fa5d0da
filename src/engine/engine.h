// The serving engine: many requests at once over one model, with a paged KV cache, automatic
// prefix caching, continuous batching, chunked prefill and preemption. One engine thread runs the
// steps; Submit/Abort/Stats may be called from any thread and never block on a step.
//
// The step (EngineCore::Step): Prepare() (context shift, draft proposals); plan =
// scheduler.Schedule(); logits = Run(plan); sampled = Sample(plan, logits); ObserveStepTime;
// Deliver(scheduler.Postprocess(plan, sampled)).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/request.h"
#include "kv/kv_format.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace kvserve {

class Proposer;  // engine/proposer.h

// kHistory: drafts from what earlier requests of the same tenant read or produced
// (engine/proposer_history.h); kNgramHistory: the sequence's own tokens first, then that history.
// kMtp: the target's own multi-token-prediction layer (engine/proposer_mtp.h).
enum class SpecMethod { kNone, kNgram, kDraft, kHistory, kNgramHistory, kMtp };
// "none", "ngram", "draft", "history", "ngram+history", "mtp" (the --spec names).
const char* SpecMethodName(SpecMethod method);

// Speculative decoding (`--spec`): drafted tokens are verified in the step's batched forward by
// replaying each request's own sampler, so the output is exactly that of plain decoding.
struct SpecOptions {
  SpecMethod method = SpecMethod::kNone;
  int max_tokens = 5;  // drafted tokens per sequence and step at most (the depth's ceiling)
  int min_tokens = 1;  // shorter drafts are not verified; the depth's floor
  int ngram_min = 1;   // kNgram: the shortest suffix looked up
  int ngram_max = 3;   // kNgram: the longest suffix looked up (tried first); history: its n-gram
  size_t history_tokens = 1 << 20;  // kHistory, kNgramHistory: tokens kept over all tenants
  // Back-off: decode plus drafted tokens per step at most; with n sequences live (running or
  // waiting) each decoding one drafts at most (batch_tokens - n) / n, so from batch_tokens / 2
  // live sequences on nothing is drafted.
  int batch_tokens = 16;
  // The cost gate (engine/draft_planner.h): keep only the drafts whose expected accepted tokens
  // pay for their verification at this machine's measured step costs (`--spec-gate cost|off`).
  bool cost_gate = true;
  const Model* draft_model = nullptr;  // kDraft: borrowed, same vocabulary as the target
  // Overrides `method` when set (tests; the bench's replay proposer).
  std::shared_ptr<Proposer> proposer;
  bool enabled() const { return method != SpecMethod::kNone || proposer != nullptr; }
};

struct EngineOptions {
  int n_threads = 0;  // 0 = one per core
  int n_ctx = 0;      // most tokens per sequence; 0 = the model's training context
  KvFormat kv_type = KvType::kF32;
  int block_size = 16;           // tokens per KV block
  uint64_t kv_memory_bytes = 0;  // KV pool size; 0 = enough for max_num_seqs full contexts
  int max_num_seqs = 16;         // running sequences at most
  int max_batched_tokens = 512;  // tokens per step at most (decode + prefill chunks)
  // Per-step time target in ms (`--max-step-ms`; 0 = off): while sequences decode, prefill
  // chunks are sized from the measured step cost so that a step stays under it (at least
  // max(16, block_size) prefill tokens a step). Never changes a token.
  double max_step_ms = 0;
  // With max_step_ms: the target is also at most this many decode-only steps
  // (`--max-step-decodes`; 0 = max_step_ms alone).
  double max_step_decodes = 0;
  bool prefix_caching = true;
  // No-cache baseline (`--no-cache`): every step recomputes each sequence from position 0. Turns
  // the prefix cache off. Same tokens, O(n²) work.
  bool recompute = false;
  int max_queue = 1024;        // waiting requests at most; Submit fails beyond
  double session_ttl_s = 300;  // how long a finished session's blocks stay pinned
  double max_pinned_fraction =
      0.5;  // pinned session blocks may hold at most this share of the pool
  SpecOptions spec;
  // A sequence that outgrows n_ctx (`--context-overflow`): kError refuses what cannot fit and
  // ends generation at the context; kShift keeps the first sink_tokens (and the request's pinned
  // prefix), rounded up to whole blocks, drops the oldest tokens after them in whole blocks (about
  // half of what follows the head) and recomputes the kept tail at its new positions
  // (engine/context_shift.h). A request may choose for itself (Request::context_overflow).
  ContextOverflow context_overflow = ContextOverflow::kError;
  int sink_tokens = 4;
  // The KV disk tier (`--kv-disk DIR --kv-disk-size SIZE`): blocks leaving the prefix cache, and
  // at shutdown every prefix block still in memory, are written to files in kv_disk_dir, read
  // back by a later prompt with that prefix (or a restarted engine). Empty: no disk tier. An
  // unusable directory or a full disk is one warning on stderr; prompts are then recomputed.
  std::string kv_disk_dir;
  uint64_t kv_disk_bytes = uint64_t{1} << 30;  // the directory's size limit (LRU deletion)
  // What names the model in the files' fingerprint; empty: its file's path, size and mtime.
  std::string kv_disk_model_id;
};

struct EngineStats {
  int running = 0;
  int waiting = 0;
  int blocks_total = 0;   // over every layer group's pool (kv_spec.h)
  uint64_t kv_bytes = 0;  // bytes of the KV pools
  // Per layer group (KvSpec::groups order): its pool's blocks, and those referenced.
  std::vector<int> group_blocks_total;
  std::vector<int> group_blocks_used;
  int blocks_used = 0;    // referenced by a sequence or a pinned session
  int blocks_cached = 0;  // unreferenced but holding reusable prefix content
  int blocks_free = 0;    // neither
  int sessions = 0;
  uint64_t prefix_queries_tokens = 0;
  uint64_t prefix_hits_tokens = 0;
  uint64_t preemptions = 0;
  uint64_t prompt_tokens = 0;      // prompt tokens computed (not served from cache)
  uint64_t generation_tokens = 0;  // tokens sampled
  uint64_t steps = 0;
  // Speculative decoding: verifies with drafts, drafted tokens, accepted tokens, and accepted
  // tokens by draft position (index 0 = the first drafted token of a verify).
  uint64_t spec_drafts = 0;
  uint64_t spec_draft_tokens = 0;
  uint64_t spec_accepted_tokens = 0;
  std::vector<uint64_t> spec_accepted_by_position;
  // Context overflow (kShift): requests that dropped tokens, tokens dropped, cuts made (prompt
  // cuts at admission and shifts during generation), and tokens recomputed after shifts (the kept
  // tails, less the one token a plain decode step would have computed anyway).
  uint64_t shifted_requests = 0;
  uint64_t shift_dropped_tokens = 0;
  uint64_t context_shifts = 0;
  uint64_t shift_recomputed_tokens = 0;
  // Constrained decoding: positions sampled under a grammar that needed a whole mask, those the
  // greedy choice decided alone (one token checked), and the milliseconds spent on both.
  uint64_t grammar_masked = 0;
  uint64_t grammar_checked = 0;
  double grammar_mask_ms = 0;
  // The KV disk tier (all 0 without one): block reads that found a valid file (hits) or none
  // (misses), payload bytes read, files written and their payload bytes, failed writes, invalid
  // files found (deleted), the directory's block files' bytes; prompt tokens restored from disk.
  bool kv_disk = false;
  uint64_t kv_disk_hits = 0;
  uint64_t kv_disk_misses = 0;
  uint64_t kv_disk_read_bytes = 0;
  uint64_t kv_disk_writes = 0;
  uint64_t kv_disk_write_bytes = 0;
  uint64_t kv_disk_write_failures = 0;
  uint64_t kv_disk_rejected = 0;
  uint64_t kv_disk_bytes_used = 0;
  uint64_t kv_disk_restored_tokens = 0;
};

class EngineCore;  // the step loop's state; lives on the engine thread
struct BlockMap;   // engine/block_map.h

class Engine {
 public:
  // `model` and `tokenizer` are borrowed and must outlive the engine.
  static Result<std::unique_ptr<Engine>> Create(const Model& model, const Tokenizer& tokenizer,
                                                const EngineOptions& options);
  ~Engine();  // aborts what is left and joins the engine thread

  // Validates and queues a request. Errors (returned at once): bad parameters, a prompt plus
  // max_tokens that can never fit the context or the KV pool, a full queue (code
  // kResourceExhausted), a duplicate id, an engine shutting down (kUnavailable); the rest are
  // kInvalidArgument.
  Result<std::shared_ptr<RequestStream>> Submit(Request request);
  // Finishes the request with reason "abort" and frees its blocks within one step. Unknown ids
  // are ignored.
  void Abort(const std::string& id);
  // Releases a session's pinned blocks now; false if there was no such session.
  bool ReleaseSession(const std::string& session_id);
  EngineStats Stats() const;
  // The block pool with each block's owners and the stats of that moment, taken by the engine
  // thread after its next step (or idle turn); waits up to `timeout`, nullptr after that.
  std::shared_ptr<const BlockMap> SnapshotBlocks(std::chrono::milliseconds timeout);
  const EngineOptions& options() const { return options_; }
  int n_ctx() const { return options_.n_ctx; }
  // Whether the engine runs requests: false for an encoder-only model (it serves embeddings).
  bool generates() const { return core_ != nullptr; }
  // Whether the model encodes the prompt (an encoder-decoder: the context bounds the encoder's
  // input and the decoder's tokens each).
  bool encoder_decoder() const { return encoder_decoder_; }
  int block_size() const { return options_.block_size; }

  // Stops admitting; returns when every live request has finished (or timeout passed: the rest
  // are aborted).
  void Drain(std::chrono::milliseconds timeout);

 private:
  Engine() = default;
  void Loop();
  void PublishStats();

  EngineOptions options_;
  int n_vocab_ = 0;
  bool recurrent_state_ = false;  // the model keeps a recurrent state (no context shift)
  bool encoder_decoder_ = false;  // the model encodes the prompt (no context shift)
  int cross_group_ = -1;          // Model::cross_group
  // An encoder-only model's refusal (Model::CheckGeneratesText): the engine has no core_ and no
  // thread, and Submit answers this.
  Status encoder_only_;
  std::unique_ptr<EngineCore> core_;
  std::thread thread_;
  mutable std::mutex mutex_;  // guards everything below
  std::condition_variable wake_;
  std::condition_variable idle_;  // signalled when live_requests_ drops to 0
  std::deque<std::pair<Request, std::shared_ptr<RequestStream>>> inbox_;
  std::vector<std::string> aborts_;
  std::vector<std::string> releases_;
  EngineStats stats_;
  std::atomic<bool> block_map_wanted_{false};  // set by SnapshotBlocks, taken by PublishStats
  std::shared_ptr<const BlockMap> block_map_;
  uint64_t block_map_serial_ = 0;  // counts the maps published
  std::condition_variable block_map_ready_;
  int live_requests_ = 0;  // submitted and not yet finished
  std::set<std::string> live_ids_;
  std::set<std::string> session_ids_;  // mirror of the core's pinned sessions
  uint64_t next_id_ = 0;
  bool stop_ = false;
  bool draining_ = false;
  bool abort_all_ = false;
};

}  // namespace kvserve
