// The process's resident memory, for the benchmarks' memory check (Linux /proc; elsewhere the
// functions report that they cannot tell).
#pragma once

#include <cstdint>
#include <optional>

namespace kvserve {

// Peak resident set size (VmHWM) since start or since the last successful ResetPeakResident().
std::optional<uint64_t> PeakResidentBytes();
// Makes the peak start again from the current resident size (writes 5 to /proc/self/clear_refs).
bool ResetPeakResident();

}  // namespace kvserve
