// Which of a kernel table's two tiles a weight type runs at decode (one activation row): the usual
// tile (KernelTable::matmul_q4_k_x16, matmul_q4_0_x16, matmul_f16, ...) or its alternative
// (decode_q4_k_x16_alt: two passes on AVX2, no software prefetch on AVX-512; decode_q4_0_x16_l2,
// decode_f16_l2, ...: prefetches into L2).
// Both give the same bits; which reads memory faster depends on the CPU (on a Zen 3 VM the one-pass
// K-quant tile without software prefetch read 20-24 GB/s where the two-pass one with it read 15-17;
// on a Zen 4 VM the Q4_0 tile read 26-29 GB/s with L1 prefetches and 34-39 with L2 ones;
// docs/benchmarks.md), so the choice is made on the machine, from the model's own decode
// matmuls: after kWarmupCalls, the next 2 x kTrialCalls of each type alternate between the two
// (in the Thue-Morse order, so that a model's fixed cycle of shapes favours neither), timed, and
// then the one that took fewer seconds per weight byte runs from then on (the alternative only if
// it is faster by more than kMargin: the x16 tile is the default). Medians, because one call that
// the OS interrupts can take 10x the others; per matrix size, because sizes differ in seconds per
// byte more than the tiles do (tinyllama Q4_0 on an Intel Xeon VM: its 0.3 MB matrices about 50
// ps/B with either tile, its 2.4-6.5 MB ones 41-44 with L1 prefetches and 36-37 with L2 ones), and
// the Thue-Morse order gives each tile a model's sizes only about equally often (7 and 12 calls of
// the 0.3 MB matrices), so one plain median of all calls can move toward the small matrices' rate
// on one side (with it, the trial kept the slower tile in 2 of 7 runs). The trial costs no extra
// work (each call computes its real result) and at most half of those calls at the slower speed.
//
// Thread rules: any number of threads may call Next and Record at once (the runners of one
// backend); once a type is decided, Next is one atomic load.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include "io/ggml_type.h"
#include "kernels/cpu/kernels.h"

namespace kvserve {

class DecodeTileChooser {
 public:
  // `force`: "" or "auto" to choose by timing, "first" for the usual tiles, "alt" for the
  // alternatives (where a type has one).
  explicit DecodeTileChooser(const KernelTable& table, std::string_view force = "");

  // Untimed calls first (cold caches, first touches), then timed calls of each tile per type: 64
  // each, so that the trial spans more than one token of a small model (tinyllama: 89 matmul calls
  // a token) and a slow moment of the machine weighs less: with 32 and the medians per size, 2 of
  // 16 runs on an Intel Xeon VM still kept the Q4_0 tile that was 13% slower there; with 64, none
  // of 16.
  static constexpr int kWarmupCalls = 8;
  static constexpr int kTrialCalls = 64;
  static constexpr double kMargin = 0.03;

  struct Pick {
    MatmulTileFn fn = nullptr;  // nullptr: the type has no second tile; use the usual one
    int trial = -1;             // 0 or 1 while trying (time the call and Record it), else -1
  };
  // `usual`: the tile the caller would run (the table's tile for the weights' type and layout); an
  // alternative is offered only for that tile, so a matrix in another layout (not packed) keeps it.
  Pick Next(GgmlType type, MatmulTileFn usual);
  void Record(GgmlType type, int trial, double seconds, size_t weight_bytes);

  // The tile for 2 .. kPrefetchLevelRows activation rows (speculation's verify steps, a few
  // streams): the L2-prefetch alternative once decode has chosen it for `type`, else `usual`. No
  // trials (the choice is decode's); the K-quants' alternatives are decode forms and never taken.
  MatmulTileFn ChosenForFewRows(GgmlType type, MatmulTileFn usual) const;

  // One entry per type with two tiles: "Q4_K: one-pass 41.2 ps/B, two-pass ... (64 and 64 calls)
  // -> one-pass", "Q4_0: L1 prefetch ..., L2 prefetch ... -> L2 prefetch" ("trying"
  // before the choice; "Q4_K: two-pass (set)" when forced); types with no timed call and no forced
  // choice are left out. Empty when there is nothing to say.
  std::string Describe() const;

 private:
  // Q4_K, Q5_K, Q6_K (named by the table: one-pass or two-pass, prefetch or not); F32, F16, BF16
  // (packed: no prefetch or L2 prefetch; stored: L1 or L2), Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL,
  // MXFP4 (L1 or L2 prefetch).
  static constexpr int kTypes = 13;
  struct TimedCall {
    size_t weight_bytes;
    double seconds_per_byte;
  };
  // Each tile's seconds per byte over the trial: per matrix size that both tiles were timed on at
  // least kMinCallsPerSize times, the median of its calls, weighted by the bytes those calls read
  // (sizes with fewer calls left out; the plain medians when no size qualifies).
  static std::array<double, 2> SecondsPerByte(const std::array<std::vector<TimedCall>, 2>& timed);
  static constexpr int kMinCallsPerSize = 3;
  struct Slot {
    GgmlType type = GgmlType::kF32;
    std::array<MatmulTileFn, 2> fns{};
    std::array<const char*, 2> names{};
    bool few_rows = false;  // the alternative serves up to kPrefetchLevelRows rows too
    std::atomic<int> chosen{-1};
    std::atomic<unsigned> calls{0};
    mutable std::mutex mutex;  // guards the timings
    std::array<std::vector<TimedCall>, 2> timed;
  };
  int SlotOf(GgmlType type) const;

  std::array<Slot, kTypes> slots_;
};

}  // namespace kvserve
