#include "engine/draft_planner.h"

#include <algorithm>
#include <chrono>

#include "engine/proposer_assistant.h"
#include "engine/proposer_draft.h"
#include "engine/proposer_history.h"
#include "engine/proposer_mtp.h"
#include "engine/proposer_ngram.h"

namespace kvserve {

namespace {

std::shared_ptr<Proposer> MakeProposer(const EngineOptions& options, int n_draft_blocks,
                                       const Model& target, KvCache& target_kv) {
  const SpecOptions& spec = options.spec;
  if (spec.proposer) return spec.proposer;
  if (spec.method == SpecMethod::kNgram) {
    return std::make_shared<NgramProposer>(spec.ngram_min, spec.ngram_max);
  }
  if (spec.method == SpecMethod::kHistory || spec.method == SpecMethod::kNgramHistory) {
    return std::make_shared<HistoryProposer>(
        HistoryProposerOptions{.ngram = spec.ngram_max,
                               .max_tokens = spec.history_tokens,
                               .prompt_lookup = spec.method == SpecMethod::kNgramHistory,
                               .prompt_ngram_min = spec.ngram_min,
                               .prompt_ngram_max = spec.ngram_max,
                               .block_size = options.prefix_caching ? options.block_size : 0});
  }
  if (spec.method == SpecMethod::kMtp && target.nextn_drafter() != nullptr) {
    return std::make_shared<MtpProposer>(target, target_kv, options.n_threads);
  }
  if (spec.method == SpecMethod::kDraft && spec.draft_model != nullptr &&
      spec.draft_model->hidden_state_drafter() != nullptr) {
    auto bound = spec.draft_model->hidden_state_drafter()->Bind(target);
    if (!bound.ok()) return nullptr;  // Engine::Create checked it: not reached
    return std::make_shared<AssistantProposer>(*spec.draft_model, *bound, target_kv,
                                               options.n_threads);
  }
  if (spec.method == SpecMethod::kDraft && spec.draft_model != nullptr) {
    // The draft model's cache: the target's type where uniform, else its first group's.
    return std::make_shared<DraftProposer>(*spec.draft_model, options.kv_type.group(0),
                                           options.block_size, std::max(1, n_draft_blocks),
                                           options.n_threads);
  }
  return nullptr;
}

}  // namespace

std::vector<int> KeptDraftTokens(std::span<const double> p, std::span<const int> lengths,
                                 int n_decoding, const BatchCostTable& costs,
                                 std::span<const int> rollback_tokens, double draft_ms_per_token,
                                 const StepCost& line) {
  std::vector<int> kept(lengths.begin(), lengths.end());
  const int n = std::max(1, n_decoding);
  // T(n + j): the table's timed means, else the fitted line.
  const auto predict = [&](int tokens) -> std::optional<double> {
    if (std::optional<double> ms = costs.Predict(tokens)) return ms;
    if (line.known()) return line.Predict(tokens);
    return std::nullopt;
  };
  const std::optional<double> base_ms = predict(n);
  if (!base_ms || *base_ms <= 0) return kept;  // nothing timed yet: draft, and learn the cost
  // A step of more tokens never costs less: the timed means, made monotone (a noisy table can
  // time 2-token steps under 1-token ones, which would make a draft look free).
  const auto step_ms = [&](int extra_tokens) {
    double ms = *base_ms;
    for (int j = 1; j <= extra_tokens; ++j) ms = std::max(ms, *predict(n + j));
    return ms;
  };
  struct Candidate {
    double gain;      // expected accepted tokens: p^j for a draft's j-th token
    double extra_ms;  // drafting it, and the recompute should the draft fail there
    size_t seq;
  };
  std::vector<Candidate> candidates;
  for (size_t i = 0; i < lengths.size(); ++i) {
    const int r = i < rollback_tokens.size() ? rollback_tokens[i] : 0;
    // The line's slope where it is a line (a fixed part fitted); through the origin it is a
    // whole step per token, far above a recomputed token's cost.
    const double recompute_ms =
        line.known() && line.fixed_ms > 0 ? r * line.ms_per_token : step_ms(r) - *base_ms;
    double gain = 1;
    for (int j = 0; j < lengths[i]; ++j) {
      const double before = gain;
      gain *= p[i];
      candidates.push_back({gain, draft_ms_per_token + (before - gain) * recompute_ms, i});
    }
  }
  // A sequence's gains fall with j, so the best k candidates are a prefix of each one's draft.
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.gain > b.gain; });
  double best_rate = n_decoding / *base_ms, expected = n_decoding, extra_ms = 0;
  size_t best_k = 0;
  for (size_t k = 1; k <= candidates.size(); ++k) {
    expected += candidates[k - 1].gain;
    extra_ms += candidates[k - 1].extra_ms;
    const double ms = step_ms(static_cast<int>(k)) + extra_ms;
    const double rate = expected / std::max(ms, 1e-9);
    if (rate > best_rate) best_rate = rate, best_k = k;
  }
  std::fill(kept.begin(), kept.end(), 0);
  for (size_t k = 0; k < best_k; ++k) ++kept[candidates[k].seq];
  return kept;
}

DraftPlanner::DraftPlanner(const EngineOptions& options, int n_draft_blocks, const Model& target,
                           KvCache& target_kv)
    : spec_(options.spec),
      n_ctx_(options.n_ctx),
      recompute_(options.recompute),
      proposer_(MakeProposer(options, n_draft_blocks, target, target_kv)) {}

void DraftPlanner::Plan(const Scheduler& scheduler) {
  if (!proposer_) return;
  int n_decoding = 0;
  for (const auto& seq : scheduler.running()) {
    seq->draft.clear();
    if (seq->decoding()) ++n_decoding;
  }
  if (n_decoding == 0 || recompute_) return;
  // Back-off: every live sequence (prefilling or waiting ones soon decode too) counts as load.
  const int n_live = static_cast<int>(scheduler.running().size() + scheduler.waiting().size());
  const int share = (spec_.batch_tokens - n_live) / n_live;
  const int floor = std::max(1, spec_.min_tokens);
  if (share < floor) return;
  std::vector<Sequence*> seqs;
  std::vector<int> max_tokens;
  for (const auto& owned : scheduler.running()) {
    Sequence* seq = owned.get();
    if (!seq->decoding() || !seq->request.speculative) continue;
    if (seq->spec_depth == 0) seq->spec_depth = spec_.max_tokens;
    // Drafts past max_tokens or the context would only follow a finish.
    const int k = std::min({seq->spec_depth, share, spec_.max_tokens,
                            seq->request.max_tokens - seq->n_generated() - 1,
                            n_ctx_ - static_cast<int>(seq->tokens.size())});
    if (k < floor) continue;
    seqs.push_back(seq);
    max_tokens.push_back(k);
  }
  if (seqs.empty()) return;
  if (proposer_->drafts_after_scheduling()) {
    // Placeholders the scheduler places; Fill writes the drafts (the pending token repeated is
    // never read: Fill replaces or cuts every one the step verifies).
    for (size_t i = 0; i < seqs.size(); ++i) {
      seqs[i]->draft.assign(max_tokens[i], seqs[i]->tokens.back());
    }
  } else {
    ProposeTimed(seqs, max_tokens);
  }
  for (size_t i = 0; i < seqs.size(); ++i) {
    std::vector<int32_t>& draft = seqs[i]->draft;
    if (static_cast<int>(draft.size()) > max_tokens[i]) draft.resize(max_tokens[i]);
  }
  if (spec_.cost_gate) Gate(scheduler, seqs, n_decoding);
  for (Sequence* seq : seqs) {
    if (static_cast<int>(seq->draft.size()) < floor) seq->draft.clear();
  }
}

void DraftPlanner::Fill(StepPlan& plan) {
  if (!proposer_ || !proposer_->drafts_after_scheduling()) return;
  std::vector<Sequence*> seqs;
  std::vector<int> max_tokens;
  for (ScheduledChunk& chunk : plan.chunks) {
    chunk.seq->draft.clear();
    if (chunk.n_draft == 0) continue;
    seqs.push_back(chunk.seq);
    max_tokens.push_back(chunk.n_draft);
  }
  if (!seqs.empty()) ProposeTimed(seqs, max_tokens);
  for (ScheduledChunk& chunk : plan.chunks) {
    const int got = std::min(chunk.n_draft, static_cast<int>(chunk.seq->draft.size()));
    chunk.seq->draft.resize(got);
    const int cut = chunk.n_draft - got;
    chunk.n_draft = got;
    chunk.n_tokens -= cut;
    plan.n_tokens -= cut;
  }
}

void DraftPlanner::ProposeTimed(std::span<Sequence* const> seqs, std::span<const int> max_tokens) {
  size_t before = 0;
  for (const Sequence* seq : seqs) before += seq->draft.size();
  const auto start = std::chrono::steady_clock::now();
  proposer_->Propose(seqs, max_tokens);
  const std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start;
  size_t after = 0;
  for (const Sequence* seq : seqs) after += seq->draft.size();
  if (after <= before) return;
  constexpr double kKeep = 0.8;  // of the mean so far, per propose
  const double per_token = ms.count() / static_cast<double>(after - before);
  draft_ms_per_token_ =
      draft_ms_per_token_ == 0 ? per_token : kKeep * draft_ms_per_token_ + (1 - kKeep) * per_token;
}

void DraftPlanner::ObserveDecodeStep(int n_tokens, int n_recomputed, double ms) {
  if (n_recomputed == 0) step_costs_.Observe(n_tokens, ms);
  step_line_.Observe(n_tokens + n_recomputed, ms);
}

void DraftPlanner::Gate(const Scheduler& scheduler, std::span<Sequence* const> seqs,
                        int n_decoding) {
  std::vector<double> p;
  std::vector<int> lengths, rollback;
  for (const Sequence* seq : seqs) {
    p.push_back(seq->spec_acceptance.p());
    lengths.push_back(static_cast<int>(seq->draft.size()));
    rollback.push_back(scheduler.RollbackTokens(*seq));
  }
  const std::vector<int> kept = KeptDraftTokens(p, lengths, n_decoding, step_costs_, rollback,
                                                draft_ms_per_token_, step_line_.cost());
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (kept[i] == 0 && lengths[i] > 0) seqs[i]->spec_acceptance.Idle();
    seqs[i]->draft.resize(kept[i]);
  }
}

void DraftPlanner::Observe(Sequence& seq, int n_draft, int n_accepted) const {
  if (n_draft == 0) return;
  seq.spec_acceptance.Verified(n_draft, n_accepted);
  seq.spec_depth =
      NextSpecDepth(seq.spec_depth, n_draft, n_accepted, spec_.min_tokens, spec_.max_tokens);
}

void DraftPlanner::Forget(const Sequence& seq) {
  if (proposer_) proposer_->Forget(seq);
}

}  // namespace kvserve
