#include "kernels/cpu/decode_tile_chooser.h"

#include <algorithm>
#include <cstdio>

namespace kvserve {

namespace {

constexpr GgmlType kSlotTypes[] = {GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};
constexpr const char* kTileNames[] = {"one-pass", "two-pass"};

double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

}  // namespace

DecodeTileChooser::DecodeTileChooser(const KernelTable& table, std::string_view force) {
  const MatmulTileFn first[kTypes] = {table.matmul_q4_k_x16, table.matmul_q5_k_x16,
                                      table.matmul_q6_k_x16};
  const MatmulTileFn alt[kTypes] = {table.decode_q4_k_x16_alt, table.decode_q5_k_x16_alt,
                                    table.decode_q6_k_x16_alt};
  for (int i = 0; i < kTypes; ++i) {
    slots_[i].fns = {first[i], alt[i]};
    if (first[i] == nullptr || alt[i] == nullptr) continue;
    if (force == "first") slots_[i].chosen = 0;
    if (force == "alt") slots_[i].chosen = 1;
  }
}

int DecodeTileChooser::SlotOf(GgmlType type) {
  for (int i = 0; i < kTypes; ++i) {
    if (kSlotTypes[i] == type) return i;
  }
  return -1;
}

DecodeTileChooser::Pick DecodeTileChooser::Next(GgmlType type) {
  const int i = SlotOf(type);
  if (i < 0 || slots_[i].fns[1] == nullptr || slots_[i].fns[0] == nullptr) return {};
  Slot& slot = slots_[i];
  const int chosen = slot.chosen.load(std::memory_order_acquire);
  if (chosen >= 0) return {slot.fns[chosen], -1};
  const unsigned call = slot.calls.fetch_add(1, std::memory_order_relaxed);
  if (call < kWarmupCalls) return {slot.fns[0], -1};
  const int trial = static_cast<int>(call % 2);
  return {slot.fns[trial], trial};
}

void DecodeTileChooser::Record(GgmlType type, int trial, double seconds, size_t weight_bytes) {
  const int i = SlotOf(type);
  if (i < 0 || trial < 0 || trial > 1) return;
  Slot& slot = slots_[i];
  std::lock_guard<std::mutex> lock(slot.mutex);
  if (slot.chosen.load(std::memory_order_relaxed) >= 0 || weight_bytes == 0) return;
  slot.rates[trial].push_back(seconds / static_cast<double>(weight_bytes));
  if (slot.rates[0].size() < kTrialCalls || slot.rates[1].size() < kTrialCalls) return;
  const bool alt = Median(slot.rates[1]) < Median(slot.rates[0]) * (1.0 - kMargin);
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
    auto ps_per_byte = [&](int t) { return Median(slot.rates[t]) * 1e12; };
    const int timed[2] = {static_cast<int>(slot.rates[0].size()),
                          static_cast<int>(slot.rates[1].size())};
    if (timed[0] == 0 && timed[1] == 0 && chosen < 0) continue;  // no decode matmul timed yet
    if (timed[0] == 0 && timed[1] == 0) {
      std::snprintf(line, sizeof(line), "%s: %s (set)", GgmlTypeName(kSlotTypes[i]),
                    kTileNames[chosen]);
    } else {
      std::snprintf(
          line, sizeof(line), "%s: %s %.1f ps/B, %s %.1f ps/B (medians of %d and %d calls) -> %s",
          GgmlTypeName(kSlotTypes[i]), kTileNames[0], ps_per_byte(0), kTileNames[1], ps_per_byte(1),
          timed[0], timed[1], chosen >= 0 ? kTileNames[chosen] : "trying");
    }
    if (!out.empty()) out += "; ";
    out += line;
  }
  return out;
}

}  // namespace kvserve
