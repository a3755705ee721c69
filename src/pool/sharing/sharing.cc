// Sharing's attached processes and reclaimed blocks (sharing.h has the contract).
#include "pool/sharing/sharing.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "os/os.h"
#include "util/status_macros.h"

namespace pinpool::internal {

absl::StatusOr<os::UniqueFd> DupPeerSocket(int socket) {
  const int injected = os::InjectedFault(os::Call::kDupFd, 0);
  const int dup = injected != 0 ? -1 : ::fcntl(socket, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) {
    const int err = injected != 0 ? injected : errno;
    return absl::Status(err == EMFILE || err == ENFILE ? absl::StatusCode::kResourceExhausted
                                                       : absl::StatusCode::kInvalidArgument,
                        absl::StrFormat("duplicating the sharing socket %d to watch its peer: %s",
                                        socket, std::strerror(err)));
  }
  return os::UniqueFd(dup);
}

void Sharing::AddPeer(os::UniqueFd socket) {
  struct stat st {};
  if (::fstat(socket.get(), &st) != 0) return;
  MutexLock lock(&mu_);
  for (const os::UniqueFd& p : peers_) {
    struct stat other {};
    if (::fstat(p.get(), &other) == 0 && other.st_ino == st.st_ino && other.st_dev == st.st_dev) {
      return;  // the same socket: an update of the same process
    }
  }
  peers_.push_back(std::move(socket));
}

std::size_t Sharing::LivePeers() {
  MutexLock lock(&mu_);
  std::erase_if(peers_, [](const os::UniqueFd& p) {
    pollfd pfd{p.get(), POLLRDHUP, 0};
    return ::poll(&pfd, 1, 0) != 0 &&
           (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
  });
  return peers_.size();
}

void Sharing::AdoptBlocks(std::span<const BlockHandle> live, std::uintptr_t range_base,
                          std::size_t chunk_size) {
  MutexLock lock(&mu_);
  for (const BlockHandle& h : live) {
    const std::uintptr_t p = range_base + std::uintptr_t{h.chunk} * chunk_size + h.offset;
    reclaimed_.emplace(p, Live{h.size, h.chunk, h.generation});
    ++per_chunk_[h.chunk];
    stats_.reclaimed_live_bytes += h.size;
  }
  adopted_.assign(live.begin(), live.end());
  stats_.adopted_blocks = live.size();
  reclaimed_count_.store(reclaimed_.size(), std::memory_order_release);
}

std::vector<BlockHandle> Sharing::adopted() const {
  MutexLock lock(&mu_);
  return adopted_;
}

bool Sharing::Reclaimed(const void* p, std::size_t* size, std::uint32_t* generation) const {
  if (reclaimed_count_.load(std::memory_order_acquire) == 0) return false;
  MutexLock lock(&mu_);
  auto it = reclaimed_.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == reclaimed_.end()) return false;
  if (size != nullptr) *size = it->second.size;
  if (generation != nullptr) *generation = it->second.generation;
  return true;
}

bool Sharing::Release(const void* p, bool* chunk_empty) {
  if (reclaimed_count_.load(std::memory_order_acquire) == 0) return false;
  MutexLock lock(&mu_);
  auto it = reclaimed_.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == reclaimed_.end()) return false;
  stats_.reclaimed_live_bytes -= it->second.size;
  *chunk_empty = --per_chunk_[it->second.chunk] == 0;
  if (*chunk_empty) per_chunk_.erase(it->second.chunk);
  reclaimed_.erase(it);
  reclaimed_count_.store(reclaimed_.size(), std::memory_order_release);
  return true;
}

std::vector<std::pair<void*, std::size_t>> Sharing::ForgetChunk(std::uint32_t chunk) {
  std::vector<std::pair<void*, std::size_t>> lost;
  if (reclaimed_count_.load(std::memory_order_acquire) == 0) return lost;
  MutexLock lock(&mu_);
  for (auto it = reclaimed_.begin(); it != reclaimed_.end();) {
    if (it->second.chunk != chunk) {
      ++it;
      continue;
    }
    lost.emplace_back(reinterpret_cast<void*>(it->first), it->second.size);
    stats_.reclaimed_live_bytes -= it->second.size;
    it = reclaimed_.erase(it);
  }
  per_chunk_.erase(chunk);
  reclaimed_count_.store(reclaimed_.size(), std::memory_order_release);
  return lost;
}

SharingStats Sharing::Stats() {
  const std::size_t peers = LivePeers();
  MutexLock lock(&mu_);
  SharingStats s = stats_;
  s.attached_processes = peers;
  s.reclaimed_live_blocks = reclaimed_.size();
  s.quiesced = quiesced.load();
  std::string hex;
  for (std::uint8_t b : id_) hex += absl::StrFormat("%02x", b);
  s.pool_id = hex;
  return s;
}

}  // namespace pinpool::internal
