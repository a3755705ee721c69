// Location and Block: an address inside a pool, with the keys of the chunk it lies in.
//
// Both are small values (a pointer or two); copying them is free and they own nothing. They stay
// meaningful while the memory they describe is allocated and the pool is alive.
#ifndef PINPOOL_BLOCK_H_
#define PINPOOL_BLOCK_H_

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <span>

#include "pinpool/abi.h"
#include "pinpool/keys.h"

namespace pinpool {
PINPOOL_ABI_BEGIN

// An address inside one of a pool's chunks and that chunk's keys. What Pool::Lookup returns for
// any interior pointer.
class Location {
 public:
  Location() = default;
  Location(void* address, const ChunkInfo* chunk) noexcept : address_(address), chunk_(chunk) {}

  void* address() const noexcept { return address_; }
  const ChunkInfo& chunk() const noexcept { return *chunk_; }
  std::size_t domain_count() const noexcept { return chunk_ ? chunk_->domain_count : 0; }

  // The keys of the registration this address lies in, for the pool's domain number `domain`
  // (the order of PoolOptions::domains).
  const Keys& keys(std::size_t domain = 0) const noexcept {
    assert(domain < chunk_->domain_count);
    return chunk_->keys[domain];
  }
  LKey lkey(std::size_t domain = 0) const noexcept { return keys(domain).lkey; }
  RKey rkey(std::size_t domain = 0) const noexcept { return keys(domain).rkey; }
  BufferIndex buffer_index(std::size_t domain = 0) const noexcept {
    return keys(domain).buffer_index;
  }
  // Offset of the address from the start of that registration.
  std::uint64_t offset(std::size_t domain = 0) const noexcept {
    return reinterpret_cast<std::uintptr_t>(address_) - keys(domain).base;
  }

  explicit operator bool() const noexcept { return address_ != nullptr; }

 private:
  void* address_ = nullptr;
  const ChunkInfo* chunk_ = nullptr;
};

// What Pool::Allocate returns: `size` usable bytes at data(), inside exactly one chunk. A
// default-constructed (empty) Block means the allocation failed.
class Block : public Location {
 public:
  Block() = default;
  Block(void* data, std::size_t size, const ChunkInfo* chunk) noexcept
      : Location(data, chunk), size_(size) {}

  void* data() const noexcept { return address(); }
  std::size_t size() const noexcept { return size_; }
  std::span<std::byte> bytes() const noexcept { return {static_cast<std::byte*>(data()), size_}; }

 private:
  std::size_t size_ = 0;
};

PINPOOL_ABI_END
}  // namespace pinpool

#endif  // PINPOOL_BLOCK_H_
