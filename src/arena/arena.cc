#include "arena/arena.h"

#include <bit>
#include <chrono>
#include <utility>

#include "absl/strings/str_format.h"
#include "domain/memlock.h"
#include "util/bytes.h"
#include "util/check.h"
#include "util/status_macros.h"

namespace pinpool::internal {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Arena>> Arena::Create(ArenaConfig config) {
  PINPOOL_DCHECK(IsPowerOfTwo(config.chunk_size) && config.max_chunks >= 1 &&
                 !config.domains.empty() && config.domains.size() <= kMaxDomains);
  PINPOOL_ASSIGN_OR_RETURN(os::Range range,
                           os::Reserve(config.max_chunks * config.chunk_size, config.chunk_size));
  return std::unique_ptr<Arena>(new Arena(std::move(config), range));
}

Arena::Arena(ArenaConfig config, os::Range range)
    : config_(std::move(config)),
      range_(range),
      base_(reinterpret_cast<std::uintptr_t>(range.base)),
      chunk_shift_(static_cast<unsigned>(std::countr_zero(config_.chunk_size))),
      max_chunks_(config_.max_chunks),
      table_(new std::atomic<std::uintptr_t>[max_chunks_]),
      carved_end_(new std::atomic<std::size_t>[max_chunks_]),
      domain_counters_(config_.domains.size()) {
  for (std::size_t d = 0; d < config_.domains.size(); ++d) {
    domain_counters_[d].name = config_.domains[d]->name();
    domain_counters_[d].kind = config_.domains[d]->kind();
    domain_counters_[d].pinning = config_.domains[d]->pinning();
  }
  for (std::size_t i = 0; i < max_chunks_; ++i) {
    table_[i].store(kSlowFreeTag, std::memory_order_relaxed);
    carved_end_[i].store(0, std::memory_order_relaxed);
  }
  chunks_.reserve(max_chunks_);
}

Arena::~Arena() {
  MutexLock lock(&mu_);
  for (auto it = chunks_.rbegin(); it != chunks_.rend(); ++it) {
    ChunkInfo& c = **it;
    table_[c.index].store(kSlowFreeTag, std::memory_order_release);
    for (std::size_t d = c.domain_count; d-- > 0;) config_.domains[d]->Deregister(c.keys[d]);
  }
  const std::size_t chunk_bytes = chunks_.size() * config_.chunk_size;
  chunks_.clear();
  os::Release(range_, chunk_bytes);  // unmaps every chunk with the reservation
}

std::size_t Arena::DomainsThatPin(Pinning kind) const noexcept {
  std::size_t n = 0;
  for (const auto& d : config_.domains) n += d->pinning() == kind ? 1 : 0;
  return n;
}

absl::Status Arena::RegisterLocked(ChunkInfo& c) {
  for (std::size_t d = 0; d < config_.domains.size(); ++d) {
    const auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<Keys> keys =
        config_.domains[d]->Register(reinterpret_cast<void*>(c.base), c.size);
    const double seconds = SecondsSince(t0);
    if (!keys.ok()) {
      for (std::size_t undo = d; undo-- > 0;) {
        config_.domains[undo]->Deregister(c.keys[undo]);
        domain_counters_[undo].registered_bytes -= c.size;
      }
      c.domain_count = 0;
      return absl::Status(
          keys.status().code(),
          absl::StrFormat("registering a %s chunk with domain %d (%s): %s", FormatBytes(c.size), d,
                          config_.domains[d]->name(), keys.status().message()));
    }
    c.keys[d] = *keys;
    c.domain_count = static_cast<std::uint32_t>(d + 1);
    ArenaStats::DomainCounters& dc = domain_counters_[d];
    ++dc.registrations;
    dc.registered_bytes += c.size;
    dc.seconds += seconds;
    if (seconds > dc.max_seconds) dc.max_seconds = seconds;
  }
  return absl::OkStatus();
}

absl::Status Arena::GrowLocked() {
  const std::size_t size = config_.chunk_size;
  if (chunks_.size() >= max_chunks_) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the pool's budget of %s is used up (%d chunks of %s): raise PoolOptions::budget",
        FormatBytes(max_chunks_ * size), chunks_.size(), FormatBytes(size)));
  }
  // Each long-term pin of the chunk adds to VmPin (two pinning domains pin it twice); mlock adds
  // to VmLck once, however many domains lock it.
  const std::size_t pin = size * DomainsThatPin(Pinning::kLongTerm);
  const std::size_t lock = DomainsThatPin(Pinning::kResident) != 0 ? size : 0;
  if (pin != 0 || lock != 0) {
    PINPOOL_RETURN_IF_ERROR(CheckMemlockHeadroom(pin, lock, os::QueryMemlock()));
  }

  auto chunk = std::make_unique<ChunkInfo>();
  chunk->index = static_cast<std::uint32_t>(chunks_.size());
  chunk->base = base_ + std::uintptr_t{chunk->index} * size;
  chunk->size = size;
  void* at = reinterpret_cast<void*>(chunk->base);
  PINPOOL_ASSIGN_OR_RETURN(
      os::MappedChunk mapped,
      os::MapChunk(at, size, config_.page_size, config_.require_page_size, config_.populate));
  chunk->page_size = mapped.page_size;
  chunk->huge_bytes = mapped.huge_bytes;
  if (absl::Status s = RegisterLocked(*chunk); !s.ok()) {
    os::UnmapChunk(at, size);
    return s;
  }
  table_[chunk->index].store(reinterpret_cast<std::uintptr_t>(chunk.get()),
                             std::memory_order_release);
  chunks_.push_back(std::move(chunk));
  carved_.push_back(0);
  return absl::OkStatus();
}

void Arena::SetGranted(const void* p, bool granted) noexcept {
  const std::uintptr_t index = (reinterpret_cast<std::uintptr_t>(p) - base_) >> chunk_shift_;
  PINPOOL_DCHECK(index < max_chunks_ && EntryChunk(table_[index].load()) != nullptr);
  if (granted) {
    table_[index].fetch_or(kSlowFreeTag, std::memory_order_release);
  } else {
    table_[index].fetch_and(~kSlowFreeTag, std::memory_order_release);
  }
}

void* Arena::Carve(std::size_t size, std::size_t alignment) {
  if (size == 0 || size > config_.chunk_size || !IsPowerOfTwo(alignment) ||
      alignment > config_.chunk_size) {
    return nullptr;
  }
  MutexLock lock(&mu_);
  for (std::size_t i = 0;; ++i) {
    if (i == chunks_.size()) {
      if (absl::Status s = GrowLocked(); !s.ok()) {
        ++growth_failures_;
        last_growth_error_ = std::move(s);
        return nullptr;
      }
    }
    const ChunkInfo& c = *chunks_[i];
    const std::uintptr_t end = c.base + c.size;
    const std::uintptr_t start = (c.base + carved_[i] + alignment - 1) & ~(alignment - 1);
    if (start <= end && size <= end - start) {
      carved_[i] = start + size - c.base;
      carved_end_[i].store(carved_[i], std::memory_order_release);
      return reinterpret_cast<void*>(start);
    }
  }
}

absl::Status Arena::Reserve(std::size_t bytes) {
  MutexLock lock(&mu_);
  while (chunks_.size() * config_.chunk_size < bytes) {
    if (absl::Status s = GrowLocked(); !s.ok()) {
      ++growth_failures_;
      last_growth_error_ = s;
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status Arena::last_growth_error() const {
  MutexLock lock(&mu_);
  return last_growth_error_;
}

ArenaStats Arena::Stats() const {
  MutexLock lock(&mu_);
  ArenaStats s;
  s.reserved_bytes = range_.length;
  s.chunk_size = config_.chunk_size;
  s.max_chunks = max_chunks_;
  s.growth_failures = growth_failures_;
  const std::size_t mapped = chunks_.size() * config_.chunk_size;
  s.pinned_bytes = DomainsThatPin(Pinning::kLongTerm) != 0 ? mapped : 0;
  s.locked_bytes = DomainsThatPin(Pinning::kResident) != 0 ? mapped : 0;
  s.chunks.reserve(chunks_.size());
  for (const auto& c : chunks_) s.chunks.push_back(*c);
  s.domains = domain_counters_;
  return s;
}

}  // namespace pinpool::internal
