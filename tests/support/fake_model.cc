#include "support/fake_model.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "io/gguf_writer.h"
#include "kv/kv_layer_view.h"
#include "util/half.h"

namespace kvserve::testing {

namespace {

constexpr uint64_t kHashSeed = 0x6b76736572766521ull;  // "kvserve!"
constexpr float kSpread = 3.0f;                        // logits of non-targets lie in [0, 3)
constexpr float kTargetBonus = 3.0f;                   // the target lies in [3, 6)
constexpr uint64_t kMissingRow = 0xdeadull;            // folded for a position with no block

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "fake model: %s\n", message.c_str());
  std::abort();
}

// splitmix64's finaliser over (hash, x): a good spread for small inputs.
uint64_t Mix(uint64_t hash, uint64_t x) {
  uint64_t z = hash ^ (x + 0x9e3779b97f4a7c15ull + (hash << 6) + (hash >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A value in [0, 1) with 24 random bits, so it is exact as a float.
float Unit(uint64_t hash, int32_t v) {
  return static_cast<float>(Mix(hash, static_cast<uint64_t>(v)) >> 40) * (1.0f / 16777216.0f);
}

}  // namespace

std::string FakePiece(int32_t token) {
  if (token >= 3 && token < 29) return std::string(1, static_cast<char>('a' + (token - 3)));
  if (token >= 29 && token < 55) return std::string(1, static_cast<char>('A' + (token - 29)));
  if (token >= 55 && token < 63) return std::string(1, static_cast<char>('0' + (token - 55)));
  if (token == kFakeEosTrigger) return ".";
  if (token == kFakeUnk) return "\xE2\x96\x85";  // U+2585, as Tokenizer::TokenPiece
  return "";
}

GgufFile FakeGguf() {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {static_cast<int32_t>(TokenType::kUnknown),
                                static_cast<int32_t>(TokenType::kControl),
                                static_cast<int32_t>(TokenType::kControl)};
  for (int32_t id = kFakeFirstNormal; id < kFakeVocab; ++id) {
    tokens.push_back(FakePiece(id));
    types.push_back(static_cast<int32_t>(TokenType::kNormal));
  }
  GgufWriter writer;
  writer.SetString("general.architecture", "fake");
  writer.SetString("general.name", "fake test model");
  writer.SetString("tokenizer.ggml.model", "llama");
  writer.SetStringArray("tokenizer.ggml.tokens", tokens);
  writer.SetFloat32Array("tokenizer.ggml.scores", std::vector<float>(tokens.size(), 0.0f));
  writer.SetInt32Array("tokenizer.ggml.token_type", types);
  writer.SetUint32("tokenizer.ggml.unknown_token_id", kFakeUnk);
  writer.SetUint32("tokenizer.ggml.bos_token_id", kFakeBos);
  writer.SetUint32("tokenizer.ggml.eos_token_id", kFakeEos);
  writer.SetBool("tokenizer.ggml.add_bos_token", true);
  writer.SetBool("tokenizer.ggml.add_space_prefix", false);
  auto file = GgufFile::FromParts(writer.Serialize(), {}, nullptr, "fake-model.gguf");
  if (!file.ok()) Fail(file.message());
  return std::move(file).value();
}

std::unique_ptr<Tokenizer> FakeTokenizer() {
  auto tokenizer = Tokenizer::FromGguf(FakeGguf());
  if (!tokenizer.ok()) Fail(tokenizer.message());
  return std::move(tokenizer).value();
}

void FakeKvRows(int32_t token, int32_t position, int layer, float* k, float* v) {
  // Positions are split in two parts below 128 so that bf16 (8 significant bits) holds them.
  const float lo = static_cast<float>(position % 128);
  const float hi = static_cast<float>(position / 128);
  k[0] = static_cast<float>(token);
  k[1] = lo;
  k[2] = hi;
  k[3] = static_cast<float>(1 + layer);  // never 0: a slot nobody wrote reads as all zeros
  v[0] = static_cast<float>(1 + layer);
  v[1] = hi;
  v[2] = lo;
  v[3] = static_cast<float>(token);
}

uint64_t FakeFoldRows(uint64_t hash, const float* k, const float* v) {
  for (int i = 0; i < kFakeHeadDim; ++i) {
    hash = Mix(hash, static_cast<uint64_t>(std::lrint(k[i]) + 1000));
  }
  for (int i = 0; i < kFakeHeadDim; ++i) {
    hash = Mix(hash, static_cast<uint64_t>(std::lrint(v[i]) + 2000));
  }
  return hash;
}

uint64_t FakeHistoryHash(std::span<const int32_t> history, int n_layers) {
  uint64_t hash = kHashSeed;
  float k[kFakeHeadDim], v[kFakeHeadDim];
  for (size_t pos = 0; pos < history.size(); ++pos) {
    for (int layer = 0; layer < n_layers; ++layer) {
      FakeKvRows(history[pos], static_cast<int32_t>(pos), layer, k, v);
      hash = FakeFoldRows(hash, k, v);
    }
  }
  return hash;
}

void FakeLogitsFromHash(uint64_t hash, int32_t last, float* logits) {
  for (int32_t v = 0; v < kFakeVocab; ++v) logits[v] = kSpread * Unit(hash, v);
  const int32_t target =
      last == kFakeEosTrigger
          ? kFakeEos
          : kFakeFirstNormal +
                static_cast<int32_t>(hash % static_cast<uint64_t>(kFakeNormalTokens));
  logits[target] += kTargetBonus;
}

std::vector<float> FakeLogits(std::span<const int32_t> history, int n_layers) {
  std::vector<float> logits(kFakeVocab);
  FakeLogitsFromHash(FakeHistoryHash(history, n_layers), history.back(), logits.data());
  return logits;
}

int32_t FakeGreedyNext(std::span<const int32_t> history, int n_layers) {
  const std::vector<float> logits = FakeLogits(history, n_layers);
  int32_t best = 0;
  for (int32_t v = 1; v < kFakeVocab; ++v) {
    if (logits[v] > logits[best]) best = v;
  }
  return best;
}

std::unique_ptr<FakeModel> FakeModel::Create(const Backend& backend, FakeModelOptions options) {
  ModelConfig config;
  config.arch = "fake";
  config.name = "fake test model";
  config.n_vocab = kFakeVocab;
  config.n_embd = kFakeHeadDim;
  config.n_layers = options.n_layers;
  config.n_heads = 1;
  config.n_kv_heads = 1;
  config.head_dim = kFakeHeadDim;
  config.n_ctx_train = options.n_ctx_train;
  return std::unique_ptr<FakeModel>(
      new FakeModel(FakeGguf(), std::move(config), backend, std::move(options)));
}

void FakeModel::Forward(const ForwardBatch& batch, KvCache& kv, Workspace& ws,
                        float* logits) const {
  forwards_.fetch_add(1);
  tokens_forwarded_.fetch_add(batch.n_tokens());
  if (options_.on_forward) options_.on_forward();
  const int n_tokens = batch.n_tokens();
  const int n_layers = config_.n_layers;
  if (kv.n_layers() != n_layers) Fail("the KV cache has the wrong number of layers");

  // Store first, so that a row sees the tokens of its own chunk (as a real model's attention).
  // The rows are made on the host and written into the workspace through the backend's
  // allocator (device memory on a GPU backend, where the last layer's store may not have run).
  const size_t rows_floats = static_cast<size_t>(n_tokens) * kFakeHeadDim;
  const BufferAllocator& memory = backend_.allocator();
  float* k = ws.Floats(0, rows_floats);
  float* v = ws.Floats(1, rows_floats);
  std::vector<float> k_host(rows_floats), v_host(rows_floats);
  for (int layer = 0; layer < n_layers; ++layer) {
    for (int i = 0; i < n_tokens; ++i) {
      FakeKvRows(batch.tokens[i], batch.positions[i], layer, &k_host[i * kFakeHeadDim],
                 &v_host[i * kFakeHeadDim]);
    }
    memory.CopyFromHost(reinterpret_cast<const uint8_t*>(k_host.data()),
                        sizeof(float) * rows_floats, reinterpret_cast<uint8_t*>(k));
    memory.CopyFromHost(reinterpret_cast<const uint8_t*>(v_host.data()),
                        sizeof(float) * rows_floats, reinterpret_cast<uint8_t*>(v));
    backend_.StoreKv(kv.layer(layer), batch.slots(kv.layer(layer).group), k, v, kFakeHeadDim, ws);
  }

  // Read back every position of the row's sequence through its block table (host memory).
  for (size_t r = 0; r < batch.logit_rows.size(); ++r) {
    const int t = batch.logit_rows[r];
    // (The fake model's KV spec has one group.)
    const std::vector<int32_t>& table = batch.kv_groups[0].block_tables[batch.seq_index[t]];
    const int32_t p = batch.positions[t];
    uint64_t hash = kHashSeed;
    int32_t last = -1;
    for (int32_t pos = 0; pos <= p; ++pos) {
      // A table that does not cover the position (an engine bug) reads as a missing row.
      const size_t logical = static_cast<size_t>(pos / kv.block_size());
      if (logical >= table.size() || table[logical] < 0 || table[logical] >= kv.n_blocks()) {
        hash = Mix(hash, kMissingRow);
        continue;
      }
      const int64_t slot = KvSlot(table.data(), kv.block_size(), pos);
      for (int layer = 0; layer < n_layers; ++layer) {
        const KvLayerView& view = kv.layer(layer);
        const size_t offset = static_cast<size_t>(slot) * view.slot_bytes();
        std::vector<uint8_t> k_slot(view.slot_bytes()), v_slot(view.slot_bytes());
        memory.CopyToHost(view.k + offset, k_slot.size(), k_slot.data());
        memory.CopyToHost(view.v + offset, v_slot.size(), v_slot.data());
        float k_row[kFakeHeadDim], v_row[kFakeHeadDim];
        DecodeKvHead(view.type, k_slot.data(), kFakeHeadDim, k_row);
        DecodeKvHead(view.type, v_slot.data(), kFakeHeadDim, v_row);
        hash = FakeFoldRows(hash, k_row, v_row);
        if (pos == p && layer == 0) last = static_cast<int32_t>(std::lrint(k_row[0]));
      }
    }
    FakeLogitsFromHash(hash, last, logits + r * kFakeVocab);
  }
}

KvSpec FakeModel::kv_spec() const {
  KvSpec spec = Model::kv_spec();
  if (options_.kind) spec.groups[0].kind = options_.kind;
  return spec;
}

}  // namespace kvserve::testing
