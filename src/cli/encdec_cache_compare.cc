#include "cli/encdec_cache_compare.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <string>

#include "kv/kv_cache.h"
#include "model/forward_batch.h"

namespace kvserve {

namespace {

constexpr int kBlockSize = 16;

int BlocksFor(int positions) { return std::max(1, (positions + kBlockSize - 1) / kBlockSize); }

// One sequence's KV cache and scratch for GenerateEncDec: identity block tables, so the slot of
// position p is p in every group.
class EncDecRun {
 public:
  EncDecRun(const Model& model, std::span<const int32_t> input, int length, const KvFormat& format,
            Workspace& ws)
      : model_(model),
        ws_(ws),
        input_(input.begin(), input.end()),
        kv_(model.kv_spec(), format, kBlockSize, Blocks(model, input, length),
            model.backend().allocator()),
        encoded_(input.size() * static_cast<size_t>(model.config().n_embd)),
        logits_(model.config().n_vocab) {}

  std::vector<int32_t> Generate(int length, EncDecCacheMode mode) {
    std::vector<int32_t> tokens{model_.decoder_start_token()};
    Encode(/*cross_only=*/false);
    for (int i = 0; i < length; ++i) {
      if (i > 0 && mode == EncDecCacheMode::kSelfOnly) Encode(/*cross_only=*/true);
      if (i > 0 && mode == EncDecCacheMode::kNone) Encode(/*cross_only=*/false);
      const int first = mode == EncDecCacheMode::kNone ? 0 : i;
      Decode(std::span(tokens).subspan(first, i + 1 - first), first);
      tokens.push_back(
          static_cast<int32_t>(std::max_element(logits_.begin(), logits_.end()) - logits_.begin()));
    }
    return std::vector<int32_t>(tokens.begin() + 1, tokens.end());
  }

 private:
  // Per group: the cross group holds the input, the others the decoder's `length` positions.
  static std::vector<int> Blocks(const Model& model, std::span<const int32_t> input, int length) {
    std::vector<int> blocks(model.kv_spec().groups.size(), BlocksFor(length));
    blocks[model.cross_group()] = BlocksFor(static_cast<int>(input.size()));
    return blocks;
  }

  void Encode(bool cross_only) {
    EncodeBatch batch;
    batch.tokens = input_;
    batch.lengths = {static_cast<int32_t>(input_.size())};
    batch.cross_slots.resize(input_.size());
    std::iota(batch.cross_slots.begin(), batch.cross_slots.end(), 0);
    batch.encoder_output = encoded_.data();
    batch.cross_only = cross_only;
    model_.Encode(batch, kv_, ws_);
  }

  // Feeds `tokens` at positions first, first + 1, ...; logits_ = the last one's.
  void Decode(std::span<const int32_t> tokens, int first) {
    const int n_groups = kv_.n_groups();
    const int cross = model_.cross_group();
    ForwardBatch batch;
    batch.Clear(n_groups);
    const int n = static_cast<int>(tokens.size());
    for (int g = 0; g < n_groups; ++g) {
      std::vector<int32_t>& table = batch.kv_groups[g].block_tables.emplace_back(kv_.n_blocks(g));
      std::iota(table.begin(), table.end(), 0);
      if (g == cross) batch.kv_groups[g].key_counts = {static_cast<int32_t>(input_.size())};
      for (int i = 0; i < n; ++i) batch.kv_groups[g].slots.push_back(g == cross ? -1 : first + i);
    }
    for (int i = 0; i < n; ++i) {
      batch.tokens.push_back(tokens[i]);
      batch.positions.push_back(first + i);
      batch.seq_index.push_back(0);
    }
    batch.logit_rows = {n - 1};
    model_.Forward(batch, kv_, ws_, logits_.data());
  }

  const Model& model_;
  Workspace& ws_;
  std::vector<int32_t> input_;
  KvCache kv_;
  std::vector<float> encoded_;  // [n_input, n_embd], the encoder's output
  std::vector<float> logits_;   // [n_vocab], the last fed token's
};

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

Status CheckRun(const Model& model, std::span<const int32_t> input, int length,
                const KvFormat& format) {
  if (model.cross_group() < 0) {
    return Status::InvalidArgument("model '" + model.config().name + "' has no encoder");
  }
  if (model.decoder_start_token() < 0) {
    return Status::InvalidArgument("model '" + model.config().name +
                                   "' has no decoder start token");
  }
  if (input.empty()) return Status::InvalidArgument("the encoder input is empty");
  if (length < 1) {
    return Status::InvalidArgument("length " + std::to_string(length) + " must be positive");
  }
  return model.kv_spec().CheckFormat(format);
}

}  // namespace

Result<std::vector<int32_t>> GenerateEncDec(const Model& model, std::span<const int32_t> input,
                                            int length, EncDecCacheMode mode,
                                            const KvFormat& kv_type, Workspace& ws) {
  KVSERVE_RETURN_IF_ERROR(CheckRun(model, input, length, kv_type));
  EncDecRun run(model, input, length, kv_type, ws);
  return run.Generate(length, mode);
}

Result<EncDecCompareRow> CompareEncDecCache(const Model& model, std::span<const int32_t> input,
                                            int length, const KvFormat& kv_type, int n_threads,
                                            int repeats) {
  KVSERVE_RETURN_IF_ERROR(CheckRun(model, input, length, kv_type));
  if (repeats < 1) {
    return Status::InvalidArgument("repeats " + std::to_string(repeats) + " must be at least 1");
  }
  const std::unique_ptr<Workspace> ws = model.backend().NewWorkspace({.n_threads = n_threads});
  const EncDecCacheMode modes[3] = {EncDecCacheMode::kBoth, EncDecCacheMode::kSelfOnly,
                                    EncDecCacheMode::kNone};
  std::vector<double> seconds[3];
  std::vector<int32_t> tokens[3];
  bool same = true;
  for (int r = 0; r < repeats; ++r) {
    for (int m = 0; m < 3; ++m) {
      EncDecRun run(model, input, length, kv_type, *ws);
      const auto start = std::chrono::steady_clock::now();
      std::vector<int32_t> out = run.Generate(length, modes[m]);
      seconds[m].push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      if (r > 0) same = same && out == tokens[m];
      tokens[m] = std::move(out);
    }
  }
  return EncDecCompareRow{.length = length,
                          .both_s = Median(seconds[0]),
                          .self_only_s = Median(seconds[1]),
                          .none_s = Median(seconds[2]),
                          .same_tokens = same && tokens[0] == tokens[1] && tokens[0] == tokens[2] &&
                                         static_cast<int>(tokens[0].size()) == length};
}

}  // namespace kvserve
