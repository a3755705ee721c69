// libFuzzer target: the sharing description's decoder (src/wire/share_message.h), which reads bytes
// from another process. The first input byte is the number of descriptors that "came with" the
// message, the rest the message. Properties: Decode never crashes or reads out of bounds (ASan);
// what it accepts is within its own limits (every chunk inside the pool's range and of a generation
// other than 0, every live block inside one chunk and of such a generation, paths only for file
// backings), and encodes back to the same bytes. Seeds: tests/fuzz/share_message_seeds (checked
// to decode by share_message_test).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "wire/share_message.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t fds = data[0];
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data + 1), size - 1);
  absl::StatusOr<pinpool::internal::WireMessage> m = pinpool::internal::Decode(bytes, fds);
  if (!m.ok()) return 0;
  if (m->chunks.size() != fds) std::abort();
  for (const auto& c : m->chunks) {
    if (c.index >= m->max_chunks || c.generation == 0) std::abort();
    if ((m->backing == pinpool::internal::WireMessage::Backing::kFiles) == c.path.empty()) {
      std::abort();
    }
  }
  for (const auto& h : m->live) {
    if (h.chunk >= m->max_chunks || h.generation == 0 || h.size == 0 ||
        h.offset + h.size > m->chunk_size || h.offset + h.size < h.offset) {
      std::abort();
    }
  }
  const std::vector<std::byte> again = pinpool::internal::Encode(*m);
  if (again.size() != bytes.size() || std::memcmp(again.data(), bytes.data(), bytes.size()) != 0) {
    std::abort();
  }
  return 0;
}
