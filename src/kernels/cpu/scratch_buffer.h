// A growable 64-byte-aligned buffer for a kernel's per-thread scratch, owned by the caller's
// workspace (one TileScratch per thread) and passed down in MatmulTile::scratch. Every member is
// defined out of line in scratch_buffer.cc, which is compiled without instruction-set flags, so the
// per-ISA translation units can share the class without sharing any inline code (see
// kernels_avx512.cc on why that matters).
#pragma once

#include <cstddef>

namespace kvserve {

class ScratchBuffer {
 public:
  ScratchBuffer();
  ~ScratchBuffer();
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;

  // At least `bytes` bytes, 64-byte aligned; nullptr if the allocation failed. Growing does not
  // keep the contents.
  void* Get(size_t bytes);
  // The same, counted in floats.
  float* GetFloats(size_t n_floats);

 private:
  void* data_;
  size_t bytes_;
};

// The scratch of one thread's matmul tile calls; what each buffer holds is the kernel's business.
struct TileScratch {
  ScratchBuffer x, w, acc;
};

}  // namespace kvserve
