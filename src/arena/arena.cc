// The arena's chunks and their growth: claim a slot, build the chunk with no lock held, publish
// it (arena.h has the contract). Reserve's parallel workers live here too; the watermark
// primitives (Replenish, WaitBelowWatermark) are in growth.cc, trim in trim.cc.
#include "arena/arena.h"

#include <unistd.h>

#include <algorithm>
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

// "pinpool-<pid>-<n>", n counting the arenas this process made: the start of every chunk file's
// name, so that no two pools (of this process or another) pick the same name.
std::string NextFilePrefix() {
  static std::atomic<std::uint64_t> serial{0};
  return absl::StrFormat("pinpool-%d-%d", ::getpid(), serial.fetch_add(1));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Arena>> Arena::Create(ArenaConfig config) {
  PINPOOL_DCHECK(IsPowerOfTwo(config.chunk_size) && config.max_chunks >= 1 &&
                 !config.domains.empty() && config.domains.size() <= kMaxDomains &&
                 config.reserve_threads >= 1);
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
      records_(new const ChunkInfo*[max_chunks_]()),
      carved_end_(new std::atomic<std::size_t>[max_chunks_]),
      owners_(new std::atomic<ChunkOwner>[max_chunks_]()),
      domain_mu_(new Mutex[config_.domains.size()]),
      register_latency_(new LatencyRecorder[config_.domains.size()]),
      deregister_latency_(new LatencyRecorder[config_.domains.size()]),
      slots_(max_chunks_),
      file_prefix_(NextFilePrefix()),
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
}

Arena::~Arena() {
  MutexLock lock(&mu_);
  // Adoptions queued and never started (the pool went before its background work began them).
  for (std::uint32_t i : std::exchange(queued_, {})) DropClaimLocked(i);
  // Nobody else may use a destroyed arena, but a Reserve worker or an allocation could still be
  // building a chunk if the pool was destroyed under it (a bug): wait for them rather than unmap
  // under a registration.
  while (growing_ != 0 || trimming_ != 0) chunk_done_.Wait(&mu_);
  std::size_t chunk_bytes = 0;
  for (std::size_t i = slots_used_; i-- > 0;) {
    if (slots_[i].state != Slot::kReady && slots_[i].state != Slot::kGivingBack) continue;
    ChunkInfo& c = *slots_[i].chunk;
    table_[c.index].store(kSlowFreeTag, std::memory_order_release);
    if (!registrations_ended_) {  // else Quiesce deregistered it
      for (std::size_t d = c.domain_count; d-- > 0;) DeregisterTimed(d, c.keys[d]);
    }
    chunk_bytes += c.size;
  }
  os::Release(range_, chunk_bytes);  // unmaps every chunk with the reservation
  // Only now, with nothing mapped or registered any more: close the chunks' files (and unlink
  // those in a directory, unless a successor owns them now). An adoption that never succeeded
  // keeps its file's name: the data is the predecessor's blocks.
  for (SlotRecord& slot : slots_) {
    handed_over_ ? slot.file.Disown() : slot.file.Close();
    slot.adopting.Disown();
  }
}

std::uint32_t Arena::NextGenerationLocked(std::uint32_t index) {
  std::uint32_t& g = slots_[index].generation;
  g = g == UINT32_MAX ? 1 : g + 1;
  return g;
}

void Arena::DropClaimLocked(std::uint32_t index) {
  NextGenerationLocked(index);  // an adoption's generation is not given to a later chunk
  slots_[index].state = Slot::kEmpty;
  EndGrowingLocked();
  if (slots_[index].adopt_held) --growing_held_;
  slots_[index].adopt_held = false;
  slots_[index].adopting.Disown();  // an adoption never built: its data keeps its name
}

void Arena::DeregisterTimed(std::size_t d, const Keys& keys) {
  const auto t0 = std::chrono::steady_clock::now();
  config_.domains[d]->Deregister(keys);
  deregister_latency_[d].RecordSince(t0);
}

std::size_t Arena::DomainsThatPin(Pinning kind) const noexcept {
  std::size_t n = 0;
  for (const auto& d : config_.domains) n += d->pinning() == kind ? 1 : 0;
  return n;
}

GrowthCharge Arena::ChargePerChunk() const noexcept {
  const std::size_t size = config_.chunk_size;
  GrowthCharge c;
  c.pin = size * DomainsThatPin(Pinning::kLongTerm);
  c.lock = DomainsThatPin(Pinning::kResident) != 0 ? size : 0;
  const bool hugetlb_only = config_.require_page_size && (config_.page_size == PageSize::k1G ||
                                                          config_.page_size == PageSize::k2M);
  const bool faulted_in = config_.populate || c.pin != 0 || c.lock != 0;
  c.cgroup = cgroup_.version != 0 && faulted_in && !hugetlb_only ? size : 0;
  return c;
}

absl::Status Arena::CheckHeadroom(const GrowthCharge& total, const char* lower) const {
  const GrowthCharge mine = ChargePerChunk();
  if (mine.pin != 0 || mine.lock != 0) {
    PINPOOL_RETURN_IF_ERROR(CheckMemlockHeadroom(
        mine.pin != 0 ? total.pin : 0, mine.lock != 0 ? total.lock : 0, os::QueryMemlock(), lower));
  }
  if (mine.cgroup != 0) {
    PINPOOL_RETURN_IF_ERROR(
        CheckCgroupHeadroom(total.cgroup, os::ReadMemoryCgroup(cgroup_), lower));
  }
  return absl::OkStatus();
}

absl::Status Arena::StartGrowingLocked(const char* lower) {
  // Chunks in flight are not in VmPin, VmLck or the cgroup's usage yet: this one is checked with
  // every chunk in flight in the process, of any pool, so that parallel growth cannot overshoot
  // a limit together.
  PINPOOL_RETURN_IF_ERROR(ClaimGrowth(ChargePerChunk(), [this, lower](const GrowthCharge& total) {
    return CheckHeadroom(total, lower);
  }));
  ++growing_;
  return absl::OkStatus();
}

void Arena::EndGrowingLocked() {
  --growing_;
  UnclaimGrowth(ChargePerChunk());
}

absl::StatusOr<std::uint32_t> Arena::ClaimLocked(std::optional<std::uint32_t> want) {
  const std::size_t size = config_.chunk_size;
  if (quiesced_) {
    return absl::FailedPreconditionError(
        "the pool is quiesced (Pool::Quiesce: it is being handed over): it grows no more");
  }
  if (want && (*want >= max_chunks_ || slots_[*want].state != Slot::kEmpty)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "chunk %d cannot be adopted: %s", *want,
        *want >= max_chunks_ ? absl::StrFormat("the budget has %d chunks", max_chunks_)
                             : std::string("its slot is taken")));
  }
  const std::size_t taken = SlotsTakenLocked();
  if (taken >= max_chunks_) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the pool's budget of %s is used up (%d chunks of %s): raise PoolOptions::budget",
        FormatBytes(max_chunks_ * size), taken, FormatBytes(size)));
  }
  PINPOOL_RETURN_IF_ERROR(StartGrowingLocked("PoolOptions::budget"));
  std::uint32_t index = want.value_or(0);
  while (slots_[index].state != Slot::kEmpty) ++index;  // one is empty: taken < max_chunks_
  slots_[index].state = Slot::kGrowing;
  growing_now_.store(growing_, std::memory_order_relaxed);
  slots_taken_now_.store(SlotsTakenLocked(), std::memory_order_relaxed);
  slots_used_ = std::max<std::size_t>(slots_used_, index + 1);
  return index;
}

absl::Status Arena::RegisterAll(ChunkInfo& c, double* seconds) {
  for (std::size_t d = 0; d < config_.domains.size(); ++d) {
    Domain& domain = *config_.domains[d];
    const auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<Keys> keys;
    if (domain.concurrent_registration()) {
      keys = domain.Register(reinterpret_cast<void*>(c.base), c.size);
    } else {
      MutexLock serial(&domain_mu_[d]);
      keys = domain.Register(reinterpret_cast<void*>(c.base), c.size);
    }
    seconds[d] = SecondsSince(t0);
    if (keys.ok()) register_latency_[d].RecordSeconds(seconds[d]);
    if (!keys.ok()) {
      for (std::size_t undo = d; undo-- > 0;) {
        if (config_.domains[undo]->concurrent_registration()) {
          DeregisterTimed(undo, c.keys[undo]);
        } else {
          MutexLock serial(&domain_mu_[undo]);
          DeregisterTimed(undo, c.keys[undo]);
        }
      }
      c.domain_count = 0;
      return absl::Status(
          keys.status().code(),
          absl::StrFormat("registering a %s chunk with domain %d (%s): %s", FormatBytes(c.size), d,
                          domain.name(), keys.status().message()));
    }
    c.keys[d] = *keys;
    c.domain_count = static_cast<std::uint32_t>(d + 1);
  }
  return absl::OkStatus();
}

absl::StatusOr<Arena::Built> Arena::Build(std::uint32_t index) {
  const auto start = std::chrono::steady_clock::now();
  const std::size_t size = config_.chunk_size;
  Built built;
  built.chunk = std::make_unique<ChunkInfo>();
  ChunkInfo& c = *built.chunk;
  c.index = index;
  c.base = base_ + std::uintptr_t{index} * size;
  c.size = size;
  void* at = reinterpret_cast<void*>(c.base);
  os::BackingSpec backing = config_.backing;
  if (backing.kind != os::BackingSpec::Kind::kAnonymous) {
    backing.name = absl::StrFormat("%s-chunk-%d", file_prefix_, index);
  }
  os::ChunkFile adopted;
  {
    MutexLock lock(&mu_);
    adopted = std::move(slots_[index].adopting);
  }
  const bool adopting = adopted.fd() >= 0;
  // On any error below a new chunk's file dies with `mapped`, after the chunk is unmapped; an
  // adopted one goes back where it was (PublishLocked keeps it for another try: its data is the
  // blocks the predecessor handed over).
  const auto keep_adopted = [&](os::ChunkFile file) {
    MutexLock lock(&mu_);
    slots_[index].adopting = std::move(file);
  };
  absl::StatusOr<os::MappedChunk> got =
      adopting ? os::MapChunkFile(at, size, adopted, config_.populate)
               : os::MapChunk(at, size, config_.page_size, config_.require_page_size,
                              config_.populate, config_.numa_node, backing);
  if (!got.ok()) {
    if (adopting) keep_adopted(std::move(adopted));
    return got.status();
  }
  os::MappedChunk& mapped = *got;
  c.page_size = mapped.page_size;
  c.huge_bytes = mapped.huge_bytes;
  if (absl::Status s = RegisterAll(c, built.seconds); !s.ok()) {
    os::UnmapChunk(at, size);
    if (adopting) keep_adopted(std::move(mapped.file));
    return s;
  }
  if (config_.numa_node >= 0 && !adopting) {  // an adopted chunk's pages are where they were
    // Verified after registration: a pinning domain has faulted every page in by now, even
    // unpopulated. A page elsewhere would mean the binding did not hold: refuse the chunk.
    absl::StatusOr<os::NodePlacement> p = os::QueryPlacement(at, size, PageBytes(c.page_size));
    absl::Status bad;
    if (!p.ok()) {
      bad = p.status();
    } else {
      built.placement = {p->node, p->sampled, p->on_node, p->not_present};
      if (p->sampled != p->not_present && p->node != config_.numa_node) {
        bad = absl::InternalError(absl::StrFormat(
            "a %s chunk bound to NUMA node %d has %d of %d sampled pages elsewhere (move_pages)",
            FormatBytes(size), config_.numa_node, p->sampled - p->not_present - p->on_node,
            p->sampled - p->not_present));
      }
    }
    if (!bad.ok()) {
      for (std::size_t d = c.domain_count; d-- > 0;) {
        MutexLock serial(&domain_mu_[d]);
        DeregisterTimed(d, c.keys[d]);
      }
      os::UnmapChunk(at, size);
      return bad;
    }
  }
  built.file = std::move(mapped.file);
  built.build_seconds = SecondsSince(start);
  return built;
}

absl::Status Arena::PublishLocked(std::uint32_t index, absl::StatusOr<Built> built, Why why) {
  PINPOOL_DCHECK(slots_[index].state == Slot::kGrowing);
  EndGrowingLocked();  // published: in the kernel's counters now; or failed
  const bool held = slots_[index].adopt_held;
  slots_[index].adopt_held = false;
  if (held) --growing_held_;
  growing_now_.store(growing_, std::memory_order_relaxed);
  chunk_done_.NotifyAll();
  if (!built.ok()) {
    if (slots_[index].adopting.fd() >= 0) {
      // An adopted chunk Build could not map or register: parked with its file, its generation
      // and whether it holds blocks, for RetryAdoption. Its blocks are not lost.
      slots_[index].state = Slot::kAdoptFailed;
      slots_[index].adopt_held = held;
      ++adopt_failed_;
    } else {
      NextGenerationLocked(index);  // taken: the next chunk here is another one
      slots_[index].state = Slot::kEmpty;
    }
    slots_taken_now_.store(SlotsTakenLocked(), std::memory_order_relaxed);
    ++growth_failures_;
    last_growth_error_ = built.status();
    return built.status();
  }
  ChunkInfo* c = built->chunk.get();
  c->generation = NextGenerationLocked(index);  // before the record is published below
  growth_latency_.RecordSeconds(built->build_seconds);
  for (std::size_t d = 0; d < c->domain_count; ++d) {
    ArenaStats::DomainCounters& dc = domain_counters_[d];
    ++dc.registrations;
    dc.registered_bytes += c->size;
    dc.seconds += built->seconds[d];
    dc.max_seconds = std::max(dc.max_seconds, built->seconds[d]);
  }
  slots_[index].chunk = std::move(built->chunk);
  slots_[index].placement = built->placement;
  slots_[index].file = std::move(built->file);
  slots_[index].carved = held ? c->size : 0;  // a held chunk's blocks are the pool's to give back
  carved_end_[index].store(slots_[index].carved, std::memory_order_release);
  slots_[index].state = Slot::kReady;
  ++ready_;
  uncarved_ += c->size - slots_[index].carved;
  uncarved_now_.store(uncarved_, std::memory_order_relaxed);
  slots_taken_now_.store(SlotsTakenLocked(), std::memory_order_relaxed);
  records_[index] = c;
  // Before the table entry: whoever finds the chunk finds its owner.
  SetOwnerLocked(index, {.kind = held ? ChunkOwner::kAdopted : ChunkOwner::kUnowned});
  table_[index].store(reinterpret_cast<std::uintptr_t>(c), std::memory_order_release);
  if (why == Why::kBackground) ++growth_.background_growths;
  if (why == Why::kAllocation) ++growth_.allocation_growths;
  return absl::OkStatus();
}

absl::Status Arena::GrowOne(Why why) {
  absl::StatusOr<std::uint32_t> index = ClaimLocked();
  if (!index.ok()) {
    ++growth_failures_;
    last_growth_error_ = index.status();
    return index.status();
  }
  mu_.Unlock();
  absl::StatusOr<Built> built = Build(*index);
  mu_.Lock();
  return PublishLocked(*index, std::move(built), why);
}

void Arena::SetGranted(const void* p, bool granted) noexcept {
  const std::uintptr_t index = (reinterpret_cast<std::uintptr_t>(p) - base_) >> chunk_shift_;
  PINPOOL_DCHECK(index < max_chunks_ && EntryChunk(table_[index].load()) != nullptr);
  if (granted) {
    table_[index].fetch_or(kSlowFreeTag, std::memory_order_release);
  } else if (owners_[index].load(std::memory_order_acquire).kind != ChunkOwner::kWithdrawn) {
    // (a withdrawn chunk keeps it)
    table_[index].fetch_and(~kSlowFreeTag, std::memory_order_release);
  }
}

void* Arena::CarveLocked(std::size_t size, std::size_t alignment, ChunkOwner owner) {
  for (std::size_t i = 0; i < slots_used_; ++i) {
    if (slots_[i].state != Slot::kReady) continue;
    const ChunkInfo& c = *slots_[i].chunk;
    const std::uintptr_t end = c.base + c.size;
    const std::uintptr_t start = (c.base + slots_[i].carved + alignment - 1) & ~(alignment - 1);
    if (start <= end && size <= end - start) {
      const std::size_t new_carved = start + size - c.base;
      uncarved_ -= new_carved - slots_[i].carved;
      uncarved_now_.store(uncarved_, std::memory_order_relaxed);
      carved_total_.fetch_add(new_carved - slots_[i].carved, std::memory_order_relaxed);
      slots_[i].carved = new_carved;
      carved_end_[i].store(slots_[i].carved, std::memory_order_release);
      if (owners_[i].load(std::memory_order_relaxed).kind == ChunkOwner::kUnowned) {
        SetOwnerLocked(i, owner);  // before the caller hands out anything of it
      }
      return reinterpret_cast<void*>(start);
    }
  }
  return nullptr;
}

void* Arena::Carve(std::size_t size, std::size_t alignment, ChunkOwner owner) {
  if (size == 0 || size > config_.chunk_size || !IsPowerOfTwo(alignment) ||
      alignment > config_.chunk_size) {
    return nullptr;
  }
  MutexLock lock(&mu_);
  for (bool waited = false;;) {
    if (void* p = CarveLocked(size, alignment, owner)) {
      if (BelowWatermarkLocked()) below_watermark_.NotifyAll();
      return p;
    }
    if (growing_ > growing_held_) {
      // A chunk is in flight (the grower's, a Reserve worker's, another allocation's): wait for
      // it rather than start one more. Its failure wakes us too; then we grow ourselves. (A held
      // adoption in flight will have no room: not worth waiting for.)
      if (!waited) ++growth_.growth_waits;
      waited = true;
      chunk_done_.Wait(&mu_);
      continue;
    }
    if (!GrowOne(Why::kAllocation).ok()) return nullptr;
  }
}

void Arena::ReturnChunk(const void* chunk_base) {
  MutexLock lock(&mu_);
  const std::uintptr_t index =
      (reinterpret_cast<std::uintptr_t>(chunk_base) - base_) >> chunk_shift_;
  if (index < max_chunks_ && slots_[index].state == Slot::kGivingBack)
    return;  // the heap forgets it
  PINPOOL_CHECK(index < max_chunks_ && slots_[index].state == Slot::kReady,
                "ReturnChunk(%p): not a ready chunk of this arena", chunk_base);
  uncarved_ += slots_[index].carved;
  uncarved_now_.store(uncarved_, std::memory_order_relaxed);
  slots_[index].carved = 0;
  carved_end_[index].store(0, std::memory_order_release);
  SetOwnerLocked(index, {.kind = ChunkOwner::kUnowned});
}

bool Arena::HoldArrayRun(const void* chunk_base) {
  MutexLock lock(&mu_);
  const std::uintptr_t index =
      (reinterpret_cast<std::uintptr_t>(chunk_base) - base_) >> chunk_shift_;
  PINPOOL_DCHECK(index < max_chunks_);
  const ChunkOwner now = owners_[index].load(std::memory_order_relaxed);
  if (now.kind == ChunkOwner::kWithdrawn) return false;
  PINPOOL_CHECK(now.kind == ChunkOwner::kArray,
                "internal: HoldArrayRun(%p) of a chunk no array has", chunk_base);
  SetOwnerLocked(index, {.kind = ChunkOwner::kArrayHeld});
  return true;
}

absl::Status Arena::BuildClaimedLocked(const std::vector<std::uint32_t>& claimed,
                                       std::size_t workers, Why why,
                                       std::chrono::steady_clock::time_point* first_added,
                                       const std::atomic<bool>* cancel, std::size_t* added,
                                       bool keep_going) {
  std::vector<absl::Status> errors;
  std::size_t published = 0;
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  const auto stop = [&] {
    return (failed.load() && !keep_going) ||
           (cancel != nullptr && cancel->load(std::memory_order_relaxed));
  };
  const auto work = [&](bool on_node) {
    if (on_node && config_.numa_node >= 0) os::RunOnNodeCpus(config_.numa_node);
    for (std::size_t i; !stop() && (i = next.fetch_add(1)) < claimed.size();) {
      absl::StatusOr<Built> built = Build(claimed[i]);
      MutexLock relock(&mu_);
      if (absl::Status s = PublishLocked(claimed[i], std::move(built), why); s.ok()) {
        if (published++ == 0 && first_added != nullptr) {
          *first_added = std::chrono::steady_clock::now();
        }
      } else {
        errors.push_back(s);
        failed.store(true);
      }
    }
  };
  workers = std::min(workers, claimed.size());
  mu_.Unlock();
  std::vector<std::thread> threads;
  for (std::size_t t = 0; workers > 1 && t < workers; ++t) {
    // Fewer workers when the kernel refuses a thread; none: the caller builds them all.
    absl::StatusOr<std::thread> thread = os::StartThread([&work] { work(true); });
    if (!thread.ok()) break;
    threads.push_back(*std::move(thread));
  }
  if (threads.empty()) work(false);  // the caller's thread, whose affinity is its business
  for (std::thread& t : threads) t.join();
  mu_.Lock();
  for (std::size_t i = std::min(next.load(), claimed.size()); i < claimed.size(); ++i) {
    DropClaimLocked(claimed[i]);
  }
  growing_now_.store(growing_, std::memory_order_relaxed);
  slots_taken_now_.store(SlotsTakenLocked(), std::memory_order_relaxed);
  chunk_done_.NotifyAll();
  *added = published;
  if (!errors.empty()) return errors.front();
  if (published < claimed.size()) return absl::CancelledError("growth stopped by its owner");
  return absl::OkStatus();
}

absl::Status Arena::Reserve(std::size_t bytes, std::chrono::steady_clock::time_point* first_added,
                            const std::atomic<bool>* cancel) {
  const std::size_t want = (bytes + config_.chunk_size - 1) / config_.chunk_size;
  MutexLock lock(&mu_);
  std::size_t added = 0;
  for (;;) {
    if (ready_ >= want) return absl::OkStatus();
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
      return absl::CancelledError("Reserve stopped by its owner");
    }
    if (ready_ + growing_ >= want) {
      chunk_done_.Wait(&mu_);  // others are building the rest; a failure of theirs loops again
      continue;
    }
    // Claim what is missing, then build it on up to reserve_threads workers.
    std::vector<std::uint32_t> claimed;
    absl::Status claim_error;
    while (ready_ + growing_ < want) {
      absl::StatusOr<std::uint32_t> index = ClaimLocked();
      if (!index.ok()) {
        claim_error = index.status();
        break;
      }
      claimed.push_back(*index);
    }
    std::size_t round = 0;
    absl::Status error = BuildClaimedLocked(claimed, config_.reserve_threads, Why::kReserve,
                                            added == 0 ? first_added : nullptr, cancel, &round);
    added += round;
    if (!claim_error.ok()) {
      ++growth_failures_;  // PublishLocked counted the others
      last_growth_error_ = claim_error;
      if (error.ok()) error = claim_error;
    }
    if (absl::IsCancelled(error)) return error;
    if (!error.ok()) {
      return absl::Status(
          error.code(), absl::StrFormat("Reserve(%s): %d chunk(s) added, %s mapped now, then: %s",
                                        FormatBytes(bytes), added,
                                        FormatBytes(ready_ * config_.chunk_size), error.message()));
    }
  }
}

absl::Status Arena::last_growth_error() const {
  MutexLock lock(&mu_);
  return last_growth_error_;
}

std::size_t Arena::mapped_bytes() const {
  MutexLock lock(&mu_);
  return ready_ * config_.chunk_size;
}

ArenaStats Arena::Stats() const {
  MutexLock lock(&mu_);
  ArenaStats s;
  s.reserved_bytes = range_.length;
  s.chunk_size = config_.chunk_size;
  s.max_chunks = max_chunks_;
  s.growth_failures = growth_failures_;
  s.growth = growth_;
  s.growth.chunks_growing = growing_;
  s.growth.room_bytes = uncarved_;
  s.growth.low_watermark = config_.low_watermark;
  s.growth.numa_node = config_.numa_node;
  const std::size_t mapped = ready_ * config_.chunk_size;
  s.pinned_bytes = DomainsThatPin(Pinning::kLongTerm) != 0 ? mapped : 0;
  s.locked_bytes = DomainsThatPin(Pinning::kResident) != 0 ? mapped : 0;
  s.chunks.reserve(ready_);
  for (std::size_t i = 0; i < slots_used_; ++i) {
    if (slots_[i].state != Slot::kReady) continue;
    s.chunks.push_back(*slots_[i].chunk);
    s.placements.push_back(slots_[i].placement);
    s.backings.push_back({slots_[i].file.Describe(), slots_[i].file.sealed()});
  }
  s.domains = domain_counters_;
  for (std::size_t d = 0; d < s.domains.size(); ++d) {
    s.domains[d].register_latency = register_latency_[d].Snapshot();
    s.domains[d].deregister_latency = deregister_latency_[d].Snapshot();
  }
  s.growth.growth_latency = growth_latency_.Snapshot();
  s.growth.trim_latency = trim_latency_.Snapshot();
  return s;
}

}  // namespace pinpool::internal
