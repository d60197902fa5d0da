#include "kernels/cpu/scratch_buffer.h"

#include <cstdlib>

namespace kvserve {

ScratchBuffer::ScratchBuffer() : data_(nullptr), bytes_(0) {}

ScratchBuffer::~ScratchBuffer() { std::free(data_); }

void* ScratchBuffer::Get(size_t bytes) {
  if (bytes > bytes_) {
    std::free(data_);
    bytes = (bytes + 63) / 64 * 64;
    data_ = std::aligned_alloc(64, bytes);
    bytes_ = data_ != nullptr ? bytes : 0;
  }
  return data_;
}

float* ScratchBuffer::GetFloats(size_t n_floats) {
  return static_cast<float*>(Get(sizeof(float) * n_floats));
}

}  // namespace kvserve
