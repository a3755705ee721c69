// GrantLock: the public face of a pool's GrantRegistry and its mutex (see pinpool/grant_lock.h).
#include "pinpool/grant_lock.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "heap/heap.h"
#include "pinpool/pool.h"
#include "pool/arrays.h"
#include "pool/grants/registry.h"
#include "util/latency.h"

namespace pinpool {
PINPOOL_ABI_BEGIN

GrantLock::GrantLock(Pool& pool) : pool_(pool), registry_(*pool.grants_) { registry_.mu().Lock(); }

GrantLock::~GrantLock() {
  const std::vector<internal::GrantRegistry::Released> released = registry_.TakeReleasedLocked();
  registry_.mu().Unlock();
  for (const auto& r : released) {
    if (pool_.arrays_->ReleaseHeld(r.block)) continue;  // a freed array's run, no longer granted
    if (r.size == 0) {
      pool_.Deallocate(r.block);
    } else {
      pool_.Deallocate(r.block, r.size);
    }
  }
}

void GrantLock::Begin(const Block& block, GrantHolder& holder, std::uint64_t id) {
  registry_.AddLocked(block.data(), block.size(), &holder, id);
}

void GrantLock::End(void* block, GrantHolder& holder, std::uint64_t id) {
  registry_.EndLocked(block, &holder, id);
}

bool GrantLock::Held(const void* block) const { return registry_.HeldLocked(block); }

absl::Status GrantLock::CheckLive(const Block& block) const {
  if (!block || !pool_.Contains(block.data())) {
    return absl::InvalidArgumentError(
        absl::StrFormat("block %p is not memory of this pool", block.data()));
  }
  using Owner = internal::ChunkOwner;
  const Owner owner = pool_.arena_->OwnerOf(block.data());
  if (owner.kind == Owner::kWithdrawn) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "block %p is in a chunk being given back (Pool::GiveBack, a broken file lease)",
        block.data()));
  }
  if (registry_.HeldLocked(block.data())) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "block %p was freed (it is held until its grants are revoked)", block.data()));
  }
  if (owner.kind == Owner::kAdopted && pool_.Reclaimed(block.data())) {
    return absl::OkStatus();  // handed over, still live
  }
  if (pool_.arrays_->IsLiveRun(block.data(), block.size())) return absl::OkStatus();
  switch (pool_.HeapOf(block.data()).Inspect(block.data())) {
    case internal::Heap::BlockState::kLive:
      return absl::OkStatus();
    case internal::Heap::BlockState::kFree:
      return absl::FailedPreconditionError(
          absl::StrFormat("block %p was freed: grant a live block", block.data()));
    case internal::Heap::BlockState::kNotABlock:
      break;
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "%p is not the start of a block of this pool (an interior pointer?)", block.data()));
}

GrantStats& GrantLock::counters() { return registry_.countersLocked(); }

void GrantLock::Count(std::string_view name, std::string_view help, std::uint64_t n) {
  std::vector<Figure>& figures = registry_.countersLocked().figures;
  for (Figure& f : figures) {
    if (f.name == name) {
      f.value += n;
      return;
    }
  }
  figures.push_back(
      {.name = std::string(name), .value = n, .counter = true, .help = std::string(help)});
}

void GrantLock::Record(std::string_view name, std::string_view help, double seconds) {
  std::vector<HistogramFigure>& histograms = registry_.countersLocked().histograms;
  auto it = std::find_if(histograms.begin(), histograms.end(),
                         [&](const HistogramFigure& h) { return h.name == name; });
  if (it == histograms.end()) {
    histograms.push_back({.name = std::string(name), .help = std::string(help), .histogram = {}});
    it = histograms.end() - 1;
  }
  internal::AddEvent(it->histogram, seconds);
}

void GrantLock::AddHolder() { registry_.AddHolderLocked(); }

void GrantLock::RemoveHolder() { registry_.RemoveHolderLocked(); }

absl::Status GrantSlices(const Array& array, std::size_t first, std::size_t count,
                         std::string_view who,
                         absl::FunctionRef<absl::Status(const ArraySlice&)> grant,
                         absl::FunctionRef<void()> undo) {
  const std::vector<ArraySlice> slices = array.Slices(first, count);
  if (slices.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: elements [%zu, +%zu) of an array of %zu",
                                                      who, first, count, array.size()));
  }
  for (std::size_t i = 0; i < slices.size(); ++i) {
    const ArraySlice& slice = slices[i];
    if (absl::Status s = grant(slice); !s.ok()) {
      undo();
      return absl::Status(
          s.code(),
          absl::StrFormat("%s: run %zu of the array (elements [%zu, %zu)), after %zu "
                          "runs granted and now revoked: %s",
                          who, slice.run, slice.first, slice.first + slice.count, i, s.message()));
    }
  }
  return absl::OkStatus();
}

PINPOOL_ABI_END
}  // namespace pinpool
