// ByteWriter and ByteReader: little-endian integers and raw bytes in a byte buffer, whatever the
// host's byte order: the one encoding of pinpool's wire formats (the descriptor-passing frame,
// the sharing description, the compact descriptors).
//
// The reader is bounded: it never reads past its buffer. A read that does not fit fails the
// reader for good (ok() false, every later read 0 and no bytes copied), so a decoder reads a
// whole record and tests ok() once, instead of testing the room left before every field; a
// decoder of untrusted input still checks counts against left() before it allocates for them.
//
// Thread safety: a reader or writer is one decoder's or encoder's; the buffer must not change
// under a reader.
#ifndef PINPOOL_WIRE_BYTES_H_
#define PINPOOL_WIRE_BYTES_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace pinpool::internal {

class ByteWriter {
 public:
  explicit ByteWriter(std::vector<std::byte>& out) noexcept : out_(out) {}
  // The low `bytes` (1..8) bytes of `v`, least significant first.
  void Put(std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out_.push_back(static_cast<std::byte>(v >> (8 * i)));
  }
  void PutBytes(const void* p, std::size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    out_.insert(out_.end(), b, b + n);
  }

 private:
  std::vector<std::byte>& out_;
};

class ByteReader {
 public:
  explicit ByteReader(std::span<const std::byte> in) noexcept : in_(in) {}

  // False once a read did not fit.
  bool ok() const noexcept { return ok_; }
  // Bytes not read yet (0 once failed).
  std::size_t left() const noexcept { return ok_ ? in_.size() - at_ : 0; }
  std::size_t position() const noexcept { return at_; }

  // `bytes` (1..8) bytes as an unsigned integer; 0 and failed when they are not there.
  std::uint64_t Get(int bytes) noexcept {
    if (!Take(static_cast<std::size_t>(bytes))) return 0;
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) {
      v |= std::uint64_t{std::to_integer<std::uint8_t>(in_[at_ + i])} << (8 * i);
    }
    at_ += static_cast<std::size_t>(bytes);
    return v;
  }
  // Copies `n` bytes to `p`; copies nothing and fails when they are not there.
  void GetBytes(void* p, std::size_t n) noexcept {
    if (!Take(n)) return;
    if (n != 0) std::memcpy(p, in_.data() + at_, n);
    at_ += n;
  }
  // Moves to byte `at` of the buffer (at most its size; else fails).
  void Seek(std::size_t at) noexcept {
    if (!ok_ || at > in_.size()) {
      ok_ = false;
      return;
    }
    at_ = at;
  }

 private:
  bool Take(std::size_t n) noexcept {
    if (ok_ && n <= in_.size() - at_) return true;
    ok_ = false;
    return false;
  }

  std::span<const std::byte> in_;
  std::size_t at_ = 0;
  bool ok_ = true;
};

}  // namespace pinpool::internal

#endif  // PINPOOL_WIRE_BYTES_H_
