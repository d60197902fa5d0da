#include "util/buffer.h"

#include <cstring>
#include <new>

#include "util/large_memory.h"

namespace kvserve {

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    owner_ = std::exchange(other.owner_, nullptr);
  }
  return *this;
}

void Buffer::Reset() {
  if (data_ != nullptr) owner_->Free(data_, size_);
  data_ = nullptr;
  size_ = 0;
  owner_ = nullptr;
}

Buffer HostAllocator::AllocateZeroed(size_t bytes) {
  // The 64-byte tail too, as full-width kernel loads may read it.
  const size_t rounded = bytes == 0 ? 64 : (bytes + 63) / 64 * 64;
  void* memory = AllocateLarge(rounded);
  if (memory == nullptr) throw std::bad_alloc();
  std::memset(memory, 0, rounded);
  return Buffer(static_cast<uint8_t*>(memory), bytes, this);
}

void HostAllocator::Free(uint8_t* data, size_t /*bytes*/) { FreeLarge(data); }

void HostAllocator::CopyToHost(const uint8_t* src, size_t bytes, uint8_t* host) const {
  std::memcpy(host, src, bytes);
}

void HostAllocator::CopyFromHost(const uint8_t* host, size_t bytes, uint8_t* dst) const {
  std::memcpy(dst, host, bytes);
}

}  // namespace kvserve
