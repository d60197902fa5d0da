// The kernel-table entries of the recurrent layers' hot loops (kernels.h: DeltaRuleStep,
// ConvRows), one per ISA: the plain C++ in recurrent_ops.cc (the scalar table's, and the reference
// every other table must equal bit for bit), recurrent_rows_avx2.cc and recurrent_rows_avx512.cc.
#pragma once

#include "kernels/cpu/kernels.h"

namespace kvserve {

// ConvRows::width is at most this (ShortConvRuns hands out channel chunks of this size).
constexpr int kMaxConvWidth = 64;

namespace scalar {
void DeltaRule(const DeltaRuleStep& step);
void ShortConvRows(const ConvRows& rows);
void MatAccumulate(const MatAcc& p);
}  // namespace scalar

namespace avx2 {
void DeltaRule(const DeltaRuleStep& step);
void ShortConvRows(const ConvRows& rows);
void MatAccumulate(const MatAcc& p);
}  // namespace avx2

namespace avx512 {
void DeltaRule(const DeltaRuleStep& step);
void ShortConvRows(const ConvRows& rows);
void MatAccumulate(const MatAcc& p);
}  // namespace avx512

}  // namespace kvserve
