// Memory that a backend owns: a Buffer is a move-only span of bytes that returns itself to the
// allocator that made it. The KV cache and the forward pass's workspace get their memory this way,
// so a GPU backend can hand out device memory without the model or the engine knowing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

namespace kvserve {

class BufferAllocator;

class Buffer {
 public:
  Buffer() = default;
  Buffer(uint8_t* data, size_t size, BufferAllocator* owner)
      : data_(data), size_(size), owner_(owner) {}
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { Reset(); }

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  void Reset();

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  BufferAllocator* owner_ = nullptr;
};

class BufferAllocator {
 public:
  virtual ~BufferAllocator() = default;
  // `bytes` zeroed bytes, 64-byte aligned. Throws std::bad_alloc when there is no room.
  virtual Buffer AllocateZeroed(size_t bytes) = 0;
  virtual void Free(uint8_t* data, size_t bytes) = 0;
  // Copies `bytes` between host memory and memory this allocator made (device memory on a GPU
  // backend), as the disk tier moves KV blocks; the range lies within one of its Buffers.
  virtual void CopyToHost(const uint8_t* src, size_t bytes, uint8_t* host) const = 0;
  virtual void CopyFromHost(const uint8_t* host, size_t bytes, uint8_t* dst) const = 0;
  // The largest one AllocateZeroed may give (a GPU driver's limit per allocation); no limit by
  // default. Whoever needs more splits it (KvCache: one allocation per pool).
  virtual uint64_t max_allocation_bytes() const { return UINT64_MAX; }
};

// Host memory from AllocateLarge (large_memory.h): huge pages for the big KV pools.
class HostAllocator final : public BufferAllocator {
 public:
  Buffer AllocateZeroed(size_t bytes) override;
  void Free(uint8_t* data, size_t bytes) override;
  void CopyToHost(const uint8_t* src, size_t bytes, uint8_t* host) const override;
  void CopyFromHost(const uint8_t* host, size_t bytes, uint8_t* dst) const override;
};

}  // namespace kvserve
