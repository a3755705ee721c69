// FakeChunks: a ChunkSource for the heap's unit tests: `count` chunks of `chunk_size` bytes in one
// aligned, read-write anonymous mapping (no arena, no registration), handed out in order, then
// none (a spent budget).
#ifndef PINPOOL_TESTS_SUPPORT_FAKE_CHUNKS_H_
#define PINPOOL_TESTS_SUPPORT_FAKE_CHUNKS_H_

#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "heap/page_heap.h"

namespace pinpool::testing {

class FakeChunks : public internal::ChunkSource {
 public:
  FakeChunks(std::size_t chunk_size, std::size_t count) : chunk_size_(chunk_size), count_(count) {
    length_ = chunk_size * (count + 1);
    void* p = mmap(nullptr, length_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) std::abort();
    map_ = p;
    base_ = (reinterpret_cast<std::uintptr_t>(p) + chunk_size - 1) & ~(chunk_size - 1);
  }
  ~FakeChunks() { munmap(map_, length_); }
  FakeChunks(const FakeChunks&) = delete;
  FakeChunks& operator=(const FakeChunks&) = delete;

  void* NewChunk() override {
    if (!returned_.empty() && !refuse_) {
      void* chunk = returned_.back();
      returned_.pop_back();
      return chunk;
    }
    const std::size_t i = given_.load();
    if (i == count_ || refuse_) return nullptr;
    given_.store(i + 1);
    return reinterpret_cast<void*>(base_ + i * chunk_size_);
  }

  // A chunk the page heap let go of: handed out again before any new one.
  void ReturnChunk(void* chunk) override {
    returned_.push_back(chunk);
    ++returns_;
  }
  std::size_t returns() const { return returns_; }

  std::uintptr_t base() const { return base_; }
  std::size_t chunk_size() const { return chunk_size_; }
  unsigned chunk_shift() const { return static_cast<unsigned>(__builtin_ctzll(chunk_size_)); }
  std::size_t count() const { return count_; }
  std::size_t given() const { return given_.load(); }
  void set_refuse(bool refuse) { refuse_ = refuse; }

 private:
  const std::size_t chunk_size_;
  const std::size_t count_;
  std::size_t length_ = 0;
  void* map_ = nullptr;
  std::uintptr_t base_ = 0;
  std::atomic<std::size_t> given_{0};
  bool refuse_ = false;
  std::vector<void*> returned_;
  std::size_t returns_ = 0;
};

}  // namespace pinpool::testing

#endif  // PINPOOL_TESTS_SUPPORT_FAKE_CHUNKS_H_
