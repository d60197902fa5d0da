// decode_tile_chooser_test: after its warm-up calls the chooser alternates a type's two tiles for
// kTrialCalls timed calls each, keeps the one with fewer seconds per byte (medians per matrix
// size, weighted by bytes; the alternative only by more than the margin), can be forced, and leaves
// types without a second tile, and matrices whose tile is not the one it has an alternative for,
// alone. (That both tiles give the same bits: kquant_simd_test.)
#include "kernels/cpu/decode_tile_chooser.h"

#include <gtest/gtest.h>

#include <array>
#include <set>
#include <thread>
#include <vector>

namespace kvserve {
namespace {

void TileA(const MatmulTile&) {}
void TileB(const MatmulTile&) {}
void TileC(const MatmulTile&) {}

KernelTable TwoTileTable() {
  KernelTable table{};
  table.isa = "test";
  table.matmul_q4_k_x16 = TileA;
  table.decode_q4_k_x16_alt = TileB;
  table.kquant_decode_first_name = "one-pass";
  table.kquant_decode_alt_name = "two-pass";
  table.matmul_q6_k_x16 = TileA;  // no alternative for Q6_K
  return table;
}

// Runs the trial for Q4_K with `seconds_a` / `seconds_b` per call (bytes alike); returns the tile
// kept.
MatmulTileFn RunTrial(DecodeTileChooser& chooser, double seconds_a, double seconds_b) {
  for (int call = 0; call < 4 * DecodeTileChooser::kTrialCalls; ++call) {
    const DecodeTileChooser::Pick pick = chooser.Next(GgmlType::kQ4_K, TileA);
    if (pick.trial < 0 && call < DecodeTileChooser::kWarmupCalls) {
      EXPECT_EQ(pick.fn, &TileA);  // warm-up: the x16 tile, untimed
      continue;
    }
    if (pick.trial < 0) return pick.fn;
    EXPECT_EQ(pick.fn, pick.trial == 0 ? &TileA : &TileB);
    chooser.Record(GgmlType::kQ4_K, pick.trial, pick.trial == 0 ? seconds_a : seconds_b, 1000);
  }
  return nullptr;
}

TEST(DecodeTileChooser, KeepsTheFasterTileAfterTheTrial) {
  const KernelTable table = TwoTileTable();
  DecodeTileChooser slow_alt(table);
  EXPECT_EQ(RunTrial(slow_alt, 1e-6, 2e-6), &TileA);
  DecodeTileChooser fast_alt(table);
  EXPECT_EQ(RunTrial(fast_alt, 2e-6, 1e-6), &TileB);
  EXPECT_NE(fast_alt.Describe().find("Q4_K: one-pass 2000.0 ps/B"), std::string::npos)
      << fast_alt.Describe();
  EXPECT_NE(fast_alt.Describe().find("-> two-pass"), std::string::npos) << fast_alt.Describe();
  // Decided: every later call gets the kept tile, untimed.
  for (int i = 0; i < 5; ++i) {
    const DecodeTileChooser::Pick pick = fast_alt.Next(GgmlType::kQ4_K, TileA);
    EXPECT_EQ(pick.fn, &TileB);
    EXPECT_EQ(pick.trial, -1);
  }
}

TEST(DecodeTileChooser, ComparesSecondsPerByte) {
  // The second tile took longer per call but read 4x the bytes per call: it is the faster.
  const KernelTable table = TwoTileTable();
  DecodeTileChooser chooser(table);
  for (int call = 0; call < DecodeTileChooser::kWarmupCalls + 2 * DecodeTileChooser::kTrialCalls;
       ++call) {
    const DecodeTileChooser::Pick pick = chooser.Next(GgmlType::kQ4_K, TileA);
    if (call < DecodeTileChooser::kWarmupCalls) continue;
    ASSERT_GE(pick.trial, 0);
    chooser.Record(GgmlType::kQ4_K, pick.trial, pick.trial == 0 ? 1e-6 : 2e-6,
                   pick.trial == 0 ? 1000 : 4000);
  }
  EXPECT_EQ(chooser.Next(GgmlType::kQ4_K, TileA).fn, &TileB);
}

TEST(DecodeTileChooser, MediansAndTheMarginDecide) {
  const KernelTable table = TwoTileTable();
  // The alternative is 1% faster: inside the margin, the x16 tile stays.
  DecodeTileChooser close(table);
  EXPECT_EQ(RunTrial(close, 1.00e-6, 0.99e-6), &TileA);
  // The x16 tile is faster in most calls; a few interrupted calls 100x slower do not move it.
  DecodeTileChooser noisy(table);
  int x16_calls = 0;
  MatmulTileFn kept = nullptr;
  for (int call = 0; call < 200 && kept == nullptr; ++call) {
    const DecodeTileChooser::Pick pick = noisy.Next(GgmlType::kQ4_K, TileA);
    if (pick.trial < 0) {
      if (call >= DecodeTileChooser::kWarmupCalls) kept = pick.fn;
      continue;
    }
    double seconds = pick.trial == 0 ? 1e-6 : 1.5e-6;
    if (pick.trial == 0 && ++x16_calls % 4 == 0) seconds = 1e-4;
    noisy.Record(GgmlType::kQ4_K, pick.trial, seconds, 1000);
  }
  EXPECT_EQ(kept, &TileA) << noisy.Describe();
}

TEST(DecodeTileChooser, AModelsCycleOfShapesDoesNotDecide) {
  // Two equally fast tiles, and matrices of one type called in a cycle of two shapes, one 3x
  // slower per byte (the matrices in L3 or not, a short or a long row): each tile must be timed on
  // both shapes alike, so the usual tile stays. Strict alternation gave the alternative every fast
  // shape and kept it.
  const KernelTable table = TwoTileTable();
  DecodeTileChooser chooser(table);
  MatmulTileFn kept = nullptr;
  std::array<std::array<int, 2>, 2> timed{};  // [tile][shape]
  for (int call = 0; call < 1000 && kept == nullptr; ++call) {
    const DecodeTileChooser::Pick pick = chooser.Next(GgmlType::kQ4_K, TileA);
    const int shape = call % 2;
    if (pick.trial < 0) {
      if (call >= DecodeTileChooser::kWarmupCalls) kept = pick.fn;
      continue;
    }
    ++timed[pick.trial][shape];
    chooser.Record(GgmlType::kQ4_K, pick.trial, shape == 0 ? 3e-6 : 1e-6, 1000);
  }
  EXPECT_EQ(kept, &TileA) << chooser.Describe();
  EXPECT_EQ(timed[0][0], timed[0][1]);
  EXPECT_EQ(timed[1][0], timed[1][1]);
}

TEST(DecodeTileChooser, AnUnevenMixOfSizesDoesNotDecide) {
  // The alternative is 10% faster on each of two matrix sizes, but was timed on the small size,
  // 3x slower per byte with either tile, in half its calls where the x16 tile was in a quarter of
  // its (how the Thue-Morse order fell on tinyllama's cycle of sizes on an Intel Xeon VM). One
  // median of all calls would land among the alternative's small matrices and keep the x16 tile.
  const KernelTable table = TwoTileTable();
  DecodeTileChooser chooser(table);
  MatmulTileFn kept = nullptr;
  std::array<int, 2> calls{};
  for (int call = 0; call < 1000 && kept == nullptr; ++call) {
    const DecodeTileChooser::Pick pick = chooser.Next(GgmlType::kQ4_K, TileA);
    if (pick.trial < 0) {
      if (call >= DecodeTileChooser::kWarmupCalls) kept = pick.fn;
      continue;
    }
    const int n = ++calls[pick.trial];
    const bool small = pick.trial == 0 ? n % 4 == 0 : n % 2 == 0;
    const size_t bytes = small ? 300'000 : 6'500'000;
    const double seconds_per_byte = (small ? 3e-11 : 1e-11) * (pick.trial == 0 ? 1.0 : 0.9);
    chooser.Record(GgmlType::kQ4_K, pick.trial, seconds_per_byte * static_cast<double>(bytes),
                   bytes);
  }
  EXPECT_EQ(kept, &TileB) << chooser.Describe();
}

TEST(DecodeTileChooser, ForcedOrSingleTilesAreNotTried) {
  const KernelTable table = TwoTileTable();
  DecodeTileChooser first(table, "first");
  DecodeTileChooser alt(table, "alt");
  EXPECT_EQ(first.Next(GgmlType::kQ4_K, TileA).fn, &TileA);
  EXPECT_EQ(first.Next(GgmlType::kQ4_K, TileA).trial, -1);
  EXPECT_EQ(alt.Next(GgmlType::kQ4_K, TileA).fn, &TileB);
  // No second tile (Q6_K here), no packed tile (Q5_K), no alternative (Q8_0): the caller's tile.
  DecodeTileChooser chooser(table);
  for (GgmlType type : {GgmlType::kQ6_K, GgmlType::kQ5_K, GgmlType::kQ8_0}) {
    EXPECT_EQ(chooser.Next(type, TileA).fn, nullptr) << GgmlTypeName(type);
    EXPECT_EQ(chooser.Next(type, TileA).trial, -1) << GgmlTypeName(type);
  }
  EXPECT_EQ(chooser.Describe().find("Q6_K"), std::string::npos) << chooser.Describe();
}

TEST(DecodeTileChooser, OffersTheAlternativeOnlyForTheUsualTile) {
  // A matrix in another layout (Q4_0 not packed: the stored tile) keeps the caller's tile, and its
  // calls do not count towards the trial.
  KernelTable table{};
  table.isa = "test";
  table.matmul_q4_0_x16 = TileA;
  table.decode_q4_0_x16_l2 = TileB;
  DecodeTileChooser chooser(table);
  for (int call = 0; call < 100; ++call) {
    EXPECT_EQ(chooser.Next(GgmlType::kQ4_0, TileC).fn, nullptr);
    EXPECT_EQ(chooser.Next(GgmlType::kQ4_0, nullptr).fn, nullptr);
  }
  EXPECT_EQ(chooser.Describe(), "");
  // The packed tile is tried against its L2-prefetch form, named so.
  for (int call = 0; call < 4 * DecodeTileChooser::kTrialCalls; ++call) {
    const DecodeTileChooser::Pick pick = chooser.Next(GgmlType::kQ4_0, TileA);
    if (call < DecodeTileChooser::kWarmupCalls) {
      EXPECT_EQ(pick.fn, &TileA);
      continue;
    }
    if (pick.trial < 0) break;
    chooser.Record(GgmlType::kQ4_0, pick.trial, pick.trial == 0 ? 2e-6 : 1e-6, 1000);
  }
  EXPECT_EQ(chooser.Next(GgmlType::kQ4_0, TileA).fn, &TileB);
  EXPECT_NE(chooser.Describe().find("Q4_0: L1 prefetch 2000.0 ps/B, L2 prefetch 1000.0 ps/B"),
            std::string::npos)
      << chooser.Describe();
  EXPECT_NE(chooser.Describe().find("-> L2 prefetch"), std::string::npos) << chooser.Describe();
}

TEST(DecodeTileChooser, FewRowsTakeTheL2FormOnceDecodeChoseIt) {
  KernelTable table = TwoTileTable();
  table.matmul_q4_0_x16 = TileA;
  table.decode_q4_0_x16_l2 = TileB;
  // Undecided: the usual tile, and asking counts no call towards the trial.
  DecodeTileChooser chooser(table);
  for (int call = 0; call < 100; ++call) {
    EXPECT_EQ(chooser.ChosenForFewRows(GgmlType::kQ4_0, TileA), &TileA);
  }
  EXPECT_EQ(chooser.Next(GgmlType::kQ4_0, TileA).trial, -1);  // still a warm-up call
  // Decode chose the L2 form: few rows take it too, for the usual tile only.
  DecodeTileChooser alt(table, "alt");
  EXPECT_EQ(alt.ChosenForFewRows(GgmlType::kQ4_0, TileA), &TileB);
  EXPECT_EQ(alt.ChosenForFewRows(GgmlType::kQ4_0, TileC), &TileC);
  // The K-quants' alternatives are decode forms (passes, prefetch or not): never for few rows.
  EXPECT_EQ(alt.Next(GgmlType::kQ4_K, TileA).fn, &TileB);
  EXPECT_EQ(alt.ChosenForFewRows(GgmlType::kQ4_K, TileA), &TileA);
  // Decode kept the L1 form, or the type has no second tile: the usual tile.
  DecodeTileChooser first(table, "first");
  EXPECT_EQ(first.ChosenForFewRows(GgmlType::kQ4_0, TileA), &TileA);
  EXPECT_EQ(alt.ChosenForFewRows(GgmlType::kQ8_0, TileA), &TileA);
}

TEST(DecodeTileChooser, ManyThreadsAtOnceAgreeOnOneTile) {
  const KernelTable table = TwoTileTable();
  DecodeTileChooser chooser(table);
  std::vector<std::thread> threads;
  std::vector<std::set<MatmulTileFn>> kept(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int call = 0; call < 200; ++call) {
        const DecodeTileChooser::Pick pick = chooser.Next(GgmlType::kQ4_K, TileA);
        if (pick.trial >= 0) {
          chooser.Record(GgmlType::kQ4_K, pick.trial, pick.trial == 0 ? 3e-6 : 1e-6, 1000);
        } else if (call > 150) {
          kept[t].insert(pick.fn);
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (const auto& k : kept) EXPECT_EQ(k, std::set<MatmulTileFn>{&TileB});
}

}  // namespace
}  // namespace kvserve
