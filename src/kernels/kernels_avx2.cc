// AVX2 + FMA + F16C kernels. Placeholder table until the SIMD kernels land: the entries fall back
// to the scalar twins so dispatch and tests are exercised on every build.
#include "kernels/kernels.h"

namespace kvserve {

const KernelTable* Avx2Kernels() { return nullptr; }

}  // namespace kvserve
