#include "kernels/cpu/decode_tile_chooser.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <map>

namespace kvserve {

namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

}  // namespace

std::array<double, 2> DecodeTileChooser::SecondsPerByte(
    const std::array<std::vector<TimedCall>, 2>& timed) {
  // Seconds per byte of tile t's calls that read `weight_bytes` (all of them when 0).
  auto rates_of = [&](int t, size_t weight_bytes) {
    std::vector<double> rates;
    for (const TimedCall& call : timed[t]) {
      if (weight_bytes == 0 || call.weight_bytes == weight_bytes) {
        rates.push_back(call.seconds_per_byte);
      }
    }
    return rates;
  };
  std::map<size_t, std::array<int, 2>> calls_per_size;
  for (int t = 0; t < 2; ++t) {
    for (const TimedCall& call : timed[t]) ++calls_per_size[call.weight_bytes][t];
  }
  std::array<double, 2> weighted{};
  double total_weight = 0.0;
  for (const auto& [bytes, calls] : calls_per_size) {
    if (calls[0] < kMinCallsPerSize || calls[1] < kMinCallsPerSize) continue;
    const double weight = static_cast<double>(bytes) * (calls[0] + calls[1]);
    for (int t = 0; t < 2; ++t) weighted[t] += weight * Median(rates_of(t, bytes));
    total_weight += weight;
  }
  if (total_weight == 0.0) return {Median(rates_of(0, 0)), Median(rates_of(1, 0))};
  return {weighted[0] / total_weight, weighted[1] / total_weight};
}

DecodeTileChooser::DecodeTileChooser(const KernelTable& table, std::string_view force) {
  constexpr GgmlType kTypesTried[kTypes] = {
      GgmlType::kQ4_K, GgmlType::kQ5_K,   GgmlType::kQ6_K, GgmlType::kF32,  GgmlType::kF16,
      GgmlType::kBF16, GgmlType::kQ8_0,   GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0,
      GgmlType::kQ5_1, GgmlType::kIQ4_NL, GgmlType::kMXFP4};
  for (int i = 0; i < kTypes; ++i) {
    const GgmlType type = kTypesTried[i];
    const bool is_float =
        type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16;
    const bool is_kquant =
        type == GgmlType::kQ4_K || type == GgmlType::kQ5_K || type == GgmlType::kQ6_K;
    Slot& slot = slots_[i];
    slot.type = type;
    // Float matrices are packed where the table has x16 tiles for them (the CPU backend packs
    // them then), else stored.
    const bool packed = !is_float || PackedMatmulFor(table, type) != nullptr;
    slot.fns = {packed ? PackedMatmulFor(table, type) : MatmulFor(table, type),
                DecodeAlternativeFor(table, type, packed)};
    // The K-quants' tiles are named by the table; the others' alternatives prefetch into L2.
    const char* first_name = table.kquant_decode_first_name;
    const char* alt_name = table.kquant_decode_alt_name;
    slot.names = is_kquant
                     ? std::array<const char*, 2>{first_name != nullptr ? first_name : "first",
                                                  alt_name != nullptr ? alt_name : "alt"}
                 : is_float && packed ? std::array<const char*, 2>{"no prefetch", "L2 prefetch"}
                                      : std::array<const char*, 2>{"L1 prefetch", "L2 prefetch"};
    slot.few_rows = !is_kquant;
    if (slot.fns[0] == nullptr || slot.fns[1] == nullptr) continue;
    if (force == "first") slot.chosen = 0;
    if (force == "alt") slot.chosen = 1;
  }
}

int DecodeTileChooser::SlotOf(GgmlType type) const {
  for (int i = 0; i < kTypes; ++i) {
    if (slots_[i].type == type) return i;
  }
  return -1;
}

DecodeTileChooser::Pick DecodeTileChooser::Next(GgmlType type, MatmulTileFn usual) {
  const int i = SlotOf(type);
  if (i < 0 || slots_[i].fns[1] == nullptr || slots_[i].fns[0] != usual || usual == nullptr) {
    return {};
  }
  Slot& slot = slots_[i];
  const int chosen = slot.chosen.load(std::memory_order_acquire);
  if (chosen >= 0) return {slot.fns[chosen], -1};
  const unsigned call = slot.calls.fetch_add(1, std::memory_order_relaxed);
  if (call < kWarmupCalls) return {slot.fns[0], -1};
  // The Thue-Morse sequence, not call % 2: a model calls its matrices of one type in a fixed cycle
  // (gpt2: four F16 shapes per layer), and strict alternation would give each tile the same
  // shapes every time (gpt2's F16 trial timed only the qkv and up matrices with one tile, only the
  // output and down ones with the other). Each pair of calls here has one of each tile, and each
  // call position of a cycle of 2, 4 or 8 matrices gets both tiles equally often (of other
  // cycles, nearly so).
  const int trial = std::popcount(call - kWarmupCalls) & 1;
  return {slot.fns[trial], trial};
}

MatmulTileFn DecodeTileChooser::ChosenForFewRows(GgmlType type, MatmulTileFn usual) const {
  const int i = SlotOf(type);
  if (i < 0 || !slots_[i].few_rows || slots_[i].fns[0] != usual || usual == nullptr) return usual;
  const Slot& slot = slots_[i];
  return slot.chosen.load(std::memory_order_acquire) == 1 ? slot.fns[1] : usual;
}

void DecodeTileChooser::Record(GgmlType type, int trial, double seconds, size_t weight_bytes) {
  const int i = SlotOf(type);
  if (i < 0 || trial < 0 || trial > 1) return;
  Slot& slot = slots_[i];
  std::lock_guard<std::mutex> lock(slot.mutex);
  if (slot.chosen.load(std::memory_order_relaxed) >= 0 || weight_bytes == 0) return;
  slot.timed[trial].push_back({weight_bytes, seconds / static_cast<double>(weight_bytes)});
  if (slot.timed[0].size() < kTrialCalls || slot.timed[1].size() < kTrialCalls) return;
  const std::array<double, 2> rates = SecondsPerByte(slot.timed);
  const bool alt = rates[1] < rates[0] * (1.0 - kMargin);
  slot.chosen.store(alt ? 1 : 0, std::memory_order_release);
}

std::string DecodeTileChooser::Describe() const {
  std::string out;
  for (int i = 0; i < kTypes; ++i) {
    const Slot& slot = slots_[i];
    if (slot.fns[0] == nullptr || slot.fns[1] == nullptr) continue;
    const int chosen = slot.chosen.load(std::memory_order_acquire);
    std::lock_guard<std::mutex> lock(slot.mutex);
    char line[160];
    const std::array<double, 2> rates = SecondsPerByte(slot.timed);
    auto ps_per_byte = [&](int t) { return rates[t] * 1e12; };
    const int timed[2] = {static_cast<int>(slot.timed[0].size()),
                          static_cast<int>(slot.timed[1].size())};
    if (timed[0] == 0 && timed[1] == 0 && chosen < 0) continue;  // no decode matmul timed yet
    if (timed[0] == 0 && timed[1] == 0) {
      std::snprintf(line, sizeof(line), "%s: %s (set)", GgmlTypeName(slot.type),
                    slot.names[chosen]);
    } else {
      std::snprintf(line, sizeof(line), "%s: %s %.1f ps/B, %s %.1f ps/B (%d and %d calls) -> %s",
                    GgmlTypeName(slot.type), slot.names[0], ps_per_byte(0), slot.names[1],
                    ps_per_byte(1), timed[0], timed[1],
                    chosen >= 0 ? slot.names[chosen] : "trying");
    }
    if (!out.empty()) out += "; ";
    out += line;
  }
  return out;
}

}  // namespace kvserve
