// std::allocator that places every allocation on an `Alignment`-byte boundary (a power of two), so
// that kernels can read rows of a std::vector with aligned full-width vector loads.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace kvserve {

template <typename T, size_t Alignment>
struct AlignedAllocator {
  static_assert(Alignment >= alignof(T) && (Alignment & (Alignment - 1)) == 0);
  using value_type = T;
  template <typename U>
  struct rebind {
    using other = AlignedAllocator<U, Alignment>;
  };

  AlignedAllocator() = default;
  template <typename U>
  AlignedAllocator(const AlignedAllocator<U, Alignment>&) {}

  T* allocate(size_t n) {
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{Alignment}));
  }
  void deallocate(T* p, size_t) { ::operator delete (p, std::align_val_t{Alignment}); }

  template <typename U>
  bool operator==(const AlignedAllocator<U, Alignment>&) const {
    return true;
  }
};

// A float vector whose data starts on a 64-byte (cache line, one AVX-512 register) boundary.
using AlignedFloats = std::vector<float, AlignedAllocator<float, 64>>;

}  // namespace kvserve
