#include "engine/engine.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "engine/block_map.h"
#include "engine/context_shift.h"
#include "engine/engine_core.h"
#include "util/crash_handler.h"

namespace kvserve {

std::optional<RequestEvent> RequestStream::Next(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!ready_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return std::nullopt;
  RequestEvent event = std::move(events_.front());
  events_.pop_front();
  return event;
}

void RequestStream::Push(RequestEvent event) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    event.time = std::chrono::steady_clock::now();
    events_.push_back(std::move(event));
  }
  ready_.notify_all();
}

const char* SpecMethodName(SpecMethod method) {
  switch (method) {
    case SpecMethod::kNone:
      return "none";
    case SpecMethod::kNgram:
      return "ngram";
    case SpecMethod::kDraft:
      return "draft";
    case SpecMethod::kHistory:
      return "history";
    case SpecMethod::kNgramHistory:
      return "ngram+history";
    case SpecMethod::kMtp:
      return "mtp";
  }
  return "none";
}

namespace {

Status ValidateSpec(const SpecOptions& spec, const Model& model) {
  if (!spec.enabled()) return Status::Ok();
  auto range = [](const char* name, int value, int lo, int hi) {
    if (value >= lo && value <= hi) return Status::Ok();
    return Status::InvalidArgument(std::string(name) + " " + std::to_string(value) +
                                   " is out of range (" + std::to_string(lo) + " to " +
                                   std::to_string(hi) + ")");
  };
  KVSERVE_RETURN_IF_ERROR(range("spec max tokens", spec.max_tokens, 1, 64));
  KVSERVE_RETURN_IF_ERROR(range("spec min tokens", spec.min_tokens, 0, spec.max_tokens));
  KVSERVE_RETURN_IF_ERROR(range("spec batch tokens", spec.batch_tokens, 1, 1 << 20));
  if (spec.method == SpecMethod::kNgram || spec.method == SpecMethod::kHistory ||
      spec.method == SpecMethod::kNgramHistory) {
    KVSERVE_RETURN_IF_ERROR(range("spec ngram min", spec.ngram_min, 1, 64));
    KVSERVE_RETURN_IF_ERROR(range("spec ngram max", spec.ngram_max, spec.ngram_min, 64));
  }
  const bool drafts_from_tokens = spec.method == SpecMethod::kNone ||
                                  spec.method == SpecMethod::kNgram || spec.proposer != nullptr;
  if (model.cross_group() >= 0 && !drafts_from_tokens) {
    return Status::InvalidArgument(
        "spec method " + std::string(SpecMethodName(spec.method)) +
        " is not supported on an encoder-decoder model (" + model.config().arch +
        "): use ngram (drafts from the decoder's output and the encoder's input) or none");
  }
  if (spec.method == SpecMethod::kMtp && spec.proposer == nullptr &&
      model.nextn_drafter() == nullptr) {
    return Status::InvalidArgument("spec method mtp: the model (" + model.config().arch +
                                   ") has no multi-token-prediction layer to draft with");
  }
  if (spec.method == SpecMethod::kDraft && spec.proposer == nullptr) {
    if (spec.draft_model == nullptr)
      return Status::InvalidArgument("spec method draft needs a draft model");
    const int n_draft = spec.draft_model->config().n_vocab;
    const int n_target = model.config().n_vocab;
    if (n_draft != n_target) {
      return Status::InvalidArgument("draft model vocabulary " + std::to_string(n_draft) +
                                     " differs from the target's " + std::to_string(n_target));
    }
    if (&spec.draft_model->backend() != &model.backend())
      return Status::InvalidArgument("the draft model is on another backend than the target");
    if (const HiddenStateDrafter* drafter = spec.draft_model->hidden_state_drafter()) {
      auto bound = drafter->Bind(model);
      if (!bound.ok()) return bound.status();
    }
  }
  return Status::Ok();
}

// Tokens per step at most on a model with a recurrent state (prefill runs in chunks of it).
constexpr int kRecurrentStepTokens = 512;

// What a model with a recurrent state (kv/recurrent_state_kind.h) or an encoder cannot do: drop
// the head of its context (the state holds the dropped tokens; every decoder token depends on
// the whole input).
Status CheckContextShift(const Model& model, const EngineOptions& o) {
  if (o.context_overflow != ContextOverflow::kShift) return Status::Ok();
  if (model.kv_spec().has_recurrent_state()) {
    return Status::InvalidArgument(
        "context shift is not supported on a model with a recurrent state: its state holds the "
        "dropped tokens (use --context-overflow error)");
  }
  if (model.cross_group() >= 0) {
    return Status::InvalidArgument(
        "context shift is not supported on an encoder-decoder model: every decoder token depends "
        "on the whole input (use --context-overflow error)");
  }
  return Status::Ok();
}

// Blocks of each layer group's pool. A group's need per sequence is its BlocksPerSequence (a
// window group: about window / block_size + 1); a window group also gets the blocks that the
// step's prefill chunks may hold beyond their windows (max_batched_tokens / block_size, plus one
// per sequence). With a byte budget, it is split between the groups by their need in bytes; one
// group takes the whole budget.
Result<std::vector<int>> PoolBlocks(const KvSpec& spec, const EngineOptions& o, int blocks_per_seq,
                                    uint64_t budget_bytes) {
  const size_t n_groups = spec.groups.size();
  std::vector<uint64_t> need(n_groups);
  std::vector<uint64_t> block_bytes(n_groups);
  double need_bytes = 0;
  for (size_t g = 0; g < n_groups; ++g) {
    const int per_seq = spec.groups[g].BlocksPerSequence(o.n_ctx, o.block_size);
    const uint64_t full = static_cast<uint64_t>(blocks_per_seq) * o.max_num_seqs;
    need[g] = static_cast<uint64_t>(per_seq) * o.max_num_seqs;
    if (per_seq < blocks_per_seq) {
      const int chunk = spec.groups[g].kind->BlocksPerChunk(o.max_batched_tokens, o.block_size);
      need[g] = std::min(full, need[g] + chunk + o.max_num_seqs);
    }
    block_bytes[g] = KvCache::BytesPerBlock(spec, o.kv_type, o.block_size, static_cast<int>(g));
    need_bytes += static_cast<double>(need[g] * block_bytes[g]);
  }
  std::vector<int> n_blocks(n_groups);
  for (size_t g = 0; g < n_groups; ++g) {
    uint64_t n = need[g];
    if (budget_bytes > 0) {
      n = n_groups == 1 ? budget_bytes / block_bytes[g]
                        : static_cast<uint64_t>(static_cast<double>(budget_bytes) *
                                                static_cast<double>(need[g]) / need_bytes);
    }
    if (n < 1) {
      return Status::InvalidArgument(
          "KV memory " + std::to_string(o.kv_memory_bytes) + " bytes holds no block" +
          (n_groups == 1 ? "" : " of layer group " + std::to_string(g)) + " (one block takes " +
          std::to_string(block_bytes[g]) + " bytes)");
    }
    n_blocks[g] = static_cast<int>(std::min<uint64_t>(n, 1u << 30));
  }
  return n_blocks;
}

// Bytes of the target's pools: n_blocks[g] blocks of each group.
uint64_t PoolBytes(const KvSpec& spec, const EngineOptions& o, const std::vector<int>& n_blocks) {
  uint64_t bytes = 0;
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    bytes += KvCache::BytesPerBlock(spec, o.kv_type, o.block_size, static_cast<int>(g)) *
             static_cast<uint64_t>(n_blocks[g]);
  }
  return bytes;
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::Create(const Model& model, const Tokenizer& tokenizer,
                                               const EngineOptions& options) {
  EngineOptions o = options;
  const ModelConfig& c = model.config();
  if (model.hidden_state_drafter() != nullptr) {
    return Status::InvalidArgument("a " + c.arch +
                                   " file drafts for a target and does not run alone: give it "
                                   "as the draft model (--spec draft --model-draft FILE)");
  }
  if (o.n_ctx <= 0) o.n_ctx = c.n_ctx_train;
  KVSERVE_RETURN_IF_ERROR(model.CheckContextSize(o.n_ctx));
  if (o.recompute) o.prefix_caching = false;
  if (o.block_size < 1 || o.block_size > 1024) {
    return Status::InvalidArgument("block size " + std::to_string(o.block_size) +
                                   " is out of range (1 to 1024)");
  }
  if (o.max_num_seqs < 1) return Status::InvalidArgument("max_num_seqs must be at least 1");
  if (o.max_batched_tokens < 1)
    return Status::InvalidArgument("max_batched_tokens must be at least 1");
  if (!(o.max_step_ms >= 0) || o.max_step_ms > 1e7) {
    return Status::InvalidArgument("max_step_ms " + std::to_string(o.max_step_ms) +
                                   " is out of range (0 to 1e7)");
  }
  if (!(o.max_step_decodes >= 0) || o.max_step_decodes > 1e6) {
    return Status::InvalidArgument("max_step_decodes " + std::to_string(o.max_step_decodes) +
                                   " is out of range (0 to 1e6)");
  }
  KVSERVE_RETURN_IF_ERROR(ValidateSpec(o.spec, model));
  KVSERVE_RETURN_IF_ERROR(CheckContextShift(model, o));
  if (model.kv_spec().has_recurrent_state()) {
    // Every block a step's chunk touches gets its state checkpoint, so the chunk bounds the
    // state pool (PoolBlocks): `run`'s whole-context chunks would ask a state per 16 tokens.
    o.max_batched_tokens = std::min(o.max_batched_tokens, kRecurrentStepTokens);
  }
  if (o.context_overflow == ContextOverflow::kDefault) o.context_overflow = ContextOverflow::kError;
  if (o.sink_tokens < 0) {
    return Status::InvalidArgument("sink tokens " + std::to_string(o.sink_tokens) +
                                   " must not be negative");
  }
  if (o.context_overflow == ContextOverflow::kShift) {
    KVSERVE_RETURN_IF_ERROR(CheckContextShiftHead(ContextShiftHead(o.sink_tokens, 0, o.block_size),
                                                  o.n_ctx, o.block_size));
  }
  if (o.spec.method == SpecMethod::kDraft && o.spec.proposer == nullptr) {
    const Status fits = o.spec.draft_model->CheckContextSize(o.n_ctx);
    if (!fits.ok()) return Status::InvalidArgument("draft model: " + fits.message());
  }
  if (model.encoder_only()) {
    // No decoder: no KV cache, no step loop; Submit refuses, the embedder serves (embedder.h).
    std::unique_ptr<Engine> engine(new Engine());
    engine->options_ = o;
    engine->n_vocab_ = c.n_vocab;
    engine->encoder_only_ = model.CheckGeneratesText();
    return engine;
  }
  const uint64_t block_bytes = KvCache::BytesPerBlock(model.kv_spec(), o.kv_type, o.block_size);
  const int blocks_per_seq = (o.n_ctx + o.block_size - 1) / o.block_size;
  uint64_t target_bytes = o.kv_memory_bytes;
  int n_draft_blocks = 0;
  if (o.spec.method == SpecMethod::kDraft && o.spec.proposer == nullptr &&
      o.spec.draft_model->hidden_state_drafter() == nullptr) {
    // The draft's pool: room for every sequence's context plus its drafts; with --kv-memory, the
    // budget is split between the two pools by their bytes per token.
    const uint64_t draft_block_bytes =
        KvCache::BytesPerBlock(o.spec.draft_model->kv_spec(), o.kv_type, o.block_size);
    const int draft_blocks_per_seq =
        (o.n_ctx + o.spec.max_tokens + o.block_size - 1) / o.block_size;
    uint64_t draft_blocks = static_cast<uint64_t>(draft_blocks_per_seq) * o.max_num_seqs;
    if (o.kv_memory_bytes > 0) {
      const uint64_t draft_bytes = static_cast<uint64_t>(
          static_cast<double>(o.kv_memory_bytes) * static_cast<double>(draft_block_bytes) /
          static_cast<double>(draft_block_bytes + block_bytes));
      draft_blocks = std::min<uint64_t>(draft_blocks, draft_bytes / draft_block_bytes);
      target_bytes = o.kv_memory_bytes - draft_blocks * draft_block_bytes;
    }
    n_draft_blocks = static_cast<int>(std::min<uint64_t>(draft_blocks, 1u << 30));
  }
  auto n_blocks = PoolBlocks(model.kv_spec(), o, blocks_per_seq, target_bytes);
  if (!n_blocks.ok()) return n_blocks.status();
  std::unique_ptr<Engine> engine(new Engine());
  engine->options_ = o;
  engine->n_vocab_ = c.n_vocab;
  engine->recurrent_state_ = model.kv_spec().has_recurrent_state();
  engine->encoder_decoder_ = model.cross_group() >= 0;
  engine->cross_group_ = model.cross_group();
  Engine* e = engine.get();
  const uint64_t pool_bytes = PoolBytes(model.kv_spec(), o, *n_blocks);
  try {
    engine->core_ = std::make_unique<EngineCore>(model, tokenizer, o, *std::move(n_blocks),
                                                 n_draft_blocks, [e](std::vector<std::string> ids) {
                                                   std::lock_guard<std::mutex> lock(e->mutex_);
                                                   e->session_ids_ = std::set<std::string>(
                                                       ids.begin(), ids.end());
                                                 });
  } catch (const std::bad_alloc&) {
    return Status::InvalidArgument(
        "the KV cache's " + std::to_string(pool_bytes >> 20) + " MiB (context " +
        std::to_string(o.n_ctx) + " x " + std::to_string(o.max_num_seqs) +
        " sequences) cannot be allocated: lower --ctx-size or --max-num-seqs, or set --kv-memory");
  }
  engine->core_->FillStats(engine->stats_);
  engine->thread_ = std::thread([e = engine.get()] { e->Loop(); });
  // Named so that tools (and the /health watchdog test) can find the step loop in /proc.
  pthread_setname_np(engine->thread_.native_handle(), "kvserve-engine");
  return engine;
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  block_map_ready_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Result<std::shared_ptr<RequestStream>> Engine::Submit(Request request) {
  using R = Result<std::shared_ptr<RequestStream>>;
  if (core_ == nullptr) return encoder_only_;
  if (request.prompt.empty()) return R::InvalidArgument("the prompt is empty");
  if (request.max_tokens < 0) {
    return R::InvalidArgument("max_tokens " + std::to_string(request.max_tokens) +
                              " must not be negative");
  }
  for (int32_t token : request.prompt) {
    if (token < 0 || token >= n_vocab_) {
      return R::InvalidArgument("prompt token id " + std::to_string(token) +
                                " is out of range (vocabulary " + std::to_string(n_vocab_) + ")");
    }
  }
  if (!request.decoder_prompt.empty() && !encoder_decoder_) {
    return R::InvalidArgument("decoder_prompt is only taken by an encoder-decoder model");
  }
  for (int32_t token : request.decoder_prompt) {
    if (token < 0 || token >= n_vocab_) {
      return R::InvalidArgument("decoder_prompt token id " + std::to_string(token) +
                                " is out of range (vocabulary " + std::to_string(n_vocab_) + ")");
    }
  }
  Status sampling = request.sampling.Validate(n_vocab_);
  if (!sampling.ok()) return sampling;
  if (request.context_overflow == ContextOverflow::kDefault)
    request.context_overflow = options_.context_overflow;
  const bool shift = request.context_overflow == ContextOverflow::kShift;
  if (shift && encoder_decoder_) {
    return R::InvalidArgument(
        "context_overflow shift is not supported on an encoder-decoder model: every decoder "
        "token's K/V depends on the encoder's input");
  }
  if (shift && recurrent_state_) {
    return R::InvalidArgument(
        "context_overflow shift is not supported on a model with a recurrent state: its state "
        "holds the dropped tokens");
  }
  if (request.pinned_prefix_tokens < 0) {
    return R::InvalidArgument("pinned_prefix_tokens " +
                              std::to_string(request.pinned_prefix_tokens) +
                              " must not be negative");
  }
  if (shift) {
    const int pinned =
        std::min(request.pinned_prefix_tokens, static_cast<int>(request.prompt.size()));
    Status room =
        CheckContextShiftHead(ContextShiftHead(options_.sink_tokens, pinned, options_.block_size),
                              options_.n_ctx, options_.block_size);
    if (!room.ok()) return room;
  }
  // An encoder-decoder's input and its decoder's tokens (the start token and the decoder prompt
  // first) are each bounded by the context.
  if (encoder_decoder_ && static_cast<int64_t>(request.prompt.size()) > options_.n_ctx) {
    return R::InvalidArgument("encoder input of " + std::to_string(request.prompt.size()) +
                              " tokens exceeds the context size " + std::to_string(options_.n_ctx));
  }
  const int64_t n_context_prompt = encoder_decoder_
                                       ? 1 + static_cast<int64_t>(request.decoder_prompt.size())
                                       : static_cast<int64_t>(request.prompt.size());
  if (!shift &&
      FitContext(n_context_prompt, request.max_tokens, options_.n_ctx) != ContextFit::kFits) {
    return R::InvalidArgument(std::string(encoder_decoder_ ? "decoder prompt of " : "prompt of ") +
                              std::to_string(n_context_prompt) + " tokens plus max_tokens " +
                              std::to_string(request.max_tokens) + " exceeds the context size " +
                              std::to_string(options_.n_ctx));
  }
  // K/V is stored for every token but the last one sampled, which is never fed back. A shifting
  // sequence holds at most the context.
  int stored = static_cast<int>(
      std::min<int64_t>(n_context_prompt + std::max(0, request.max_tokens - 1), INT32_MAX));
  if (shift) stored = std::min(stored, options_.n_ctx);
  auto stream = std::make_shared<RequestStream>();
  std::lock_guard<std::mutex> lock(mutex_);
  if (stop_ || draining_) return Status::Unavailable("the engine is shutting down");
  const int blocks_needed = (stored + options_.block_size - 1) / options_.block_size;
  if (blocks_needed > stats_.blocks_total) {
    return R::InvalidArgument("prompt plus max_tokens needs " + std::to_string(blocks_needed) +
                              " KV blocks but the pool has " + std::to_string(stats_.blocks_total));
  }
  if (encoder_decoder_) {  // the input's cross-attention blocks, all at once
    const int input_blocks =
        static_cast<int>((request.prompt.size() + options_.block_size - 1) / options_.block_size);
    const int pool = stats_.group_blocks_total.at(cross_group_);
    if (input_blocks > pool) {
      return R::InvalidArgument("encoder input needs " + std::to_string(input_blocks) +
                                " cross-attention KV blocks but their pool has " +
                                std::to_string(pool));
    }
  }
  if (live_requests_ - stats_.running >= options_.max_queue)
    return Status::ResourceExhausted("queue full");
  if (request.id.empty()) request.id = "req-" + std::to_string(next_id_++);
  if (live_ids_.count(request.id))
    return R::InvalidArgument("duplicate request id '" + request.id + "'");
  live_ids_.insert(request.id);
  ++live_requests_;
  inbox_.emplace_back(std::move(request), stream);
  wake_.notify_all();
  return stream;
}

void Engine::Abort(const std::string& id) {
  if (core_ == nullptr) return;  // encoder-only: no requests
  std::lock_guard<std::mutex> lock(mutex_);
  aborts_.push_back(id);
  wake_.notify_all();
}

bool Engine::ReleaseSession(const std::string& session_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!session_ids_.count(session_id)) return false;
  releases_.push_back(session_id);
  session_ids_.erase(session_id);  // the engine thread confirms when it releases the blocks
  wake_.notify_all();
  return true;
}

EngineStats Engine::Stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  EngineStats stats = stats_;
  stats.waiting += static_cast<int>(inbox_.size());  // submitted, not yet seen by the engine
  return stats;
}

std::shared_ptr<const BlockMap> Engine::SnapshotBlocks(std::chrono::milliseconds timeout) {
  if (core_ == nullptr) return nullptr;  // encoder-only: no blocks
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t serial = block_map_serial_;
  block_map_wanted_.store(true);
  wake_.notify_all();
  if (!block_map_ready_.wait_for(lock, timeout,
                                 [&] { return stop_ || block_map_serial_ != serial; })) {
    return nullptr;
  }
  return block_map_serial_ != serial ? block_map_ : nullptr;
}

void Engine::Drain(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  draining_ = true;
  if (!idle_.wait_for(lock, timeout, [&] { return live_requests_ == 0; })) {
    abort_all_ = true;
    wake_.notify_all();
    idle_.wait(lock, [&] { return live_requests_ == 0; });
  }
}

void Engine::Loop() {
  ArmThreadForCrashReports();
  for (;;) {
    std::deque<std::pair<Request, std::shared_ptr<RequestStream>>> inbox;
    std::vector<std::string> aborts, releases;
    bool abort_all;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (stop_) break;
      inbox.swap(inbox_);
      aborts.swap(aborts_);
      releases.swap(releases_);
      abort_all = abort_all_;
    }
    for (auto& [request, stream] : inbox) core_->Add(std::move(request), std::move(stream));
    for (const std::string& id : aborts) core_->Abort(id);
    for (const std::string& id : releases) core_->ReleaseSession(id);
    if (abort_all) core_->AbortAll(FinishReason::kAbort);
    core_->Expire(std::chrono::steady_clock::now());
    const bool worked = core_->Step();
    PublishStats();
    if (!worked) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait_for(lock, std::chrono::milliseconds(100), [&] {
        return stop_ || !inbox_.empty() || !aborts_.empty() || !releases_.empty() || abort_all_ ||
               block_map_wanted_.load();
      });
    }
  }
  core_->AbortAll(FinishReason::kAbort);
  PublishStats();
}

// Copies the core's counters and the set of live ids / sessions where other threads can read them.
void Engine::PublishStats() {
  EngineStats stats;
  core_->FillStats(stats);
  std::vector<std::string> finished = core_->TakeFinishedIds();
  std::shared_ptr<BlockMap> map;
  if (block_map_wanted_.exchange(false)) {
    map = std::make_shared<BlockMap>();
    core_->FillBlockMap(*map);
    map->stats = stats;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  stats_ = stats;
  if (map) {
    block_map_ = std::move(map);
    ++block_map_serial_;
    block_map_ready_.notify_all();
  }
  for (const std::string& id : finished) {
    live_ids_.erase(id);
    --live_requests_;
  }
  if (live_requests_ == 0) idle_.notify_all();
}

}  // namespace kvserve
