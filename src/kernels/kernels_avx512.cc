// AVX-512 (F, BW, VL, DQ, VNNI, BF16) kernels.
#include "kernels/kernels.h"

namespace kvserve {

const KernelTable* Avx512Kernels() { return nullptr; }

}  // namespace kvserve
