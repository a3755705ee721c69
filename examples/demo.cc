// The README's demo: a pool on the best domain this machine has, a few blocks with their keys,
// the page sizes the kernel actually gave, and the pool's stats.
//
// Domains: RDMA devices are listed when present; this build registers with the pin-only host
// domain (mlock), which works everywhere. Huge pages are used when reserved
// (vm.nr_hugepages), else transparent huge pages, else 4 KiB pages: the output says which.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "pinpool/pinpool.h"

namespace {

std::vector<std::string> RdmaDevices() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/sys/class/infiniband", ec)) {
    names.push_back(e.path().filename().string());
  }
  return names;
}

}  // namespace

int main() {
  std::printf("pinpool %s demo\n\n", PINPOOL_VERSION_STRING);
  const std::vector<std::string> devices = RdmaDevices();
  if (devices.empty()) {
    std::printf("RDMA devices: none (no /sys/class/infiniband); using pin-only host memory\n");
  } else {
    std::printf("RDMA devices:");
    for (const auto& d : devices) std::printf(" %s", d.c_str());
    std::printf("\n(this build registers with the pin-only host domain)\n");
  }

  pinpool::PoolOptions options;
  options.chunk_size = 8 * pinpool::kMiB;
  options.budget = 64 * pinpool::kMiB;
  options.initial_size = 8 * pinpool::kMiB;
  options.page_size = pinpool::PageSize::k2M;  // falls back to THP, then 4 KiB
  auto pool = pinpool::Pool::Create(options);
  if (!pool.ok()) {
    std::fprintf(stderr, "cannot create the pool: %s\n", pool.status().ToString().c_str());
    return 1;
  }

  std::printf("\n%-8s %-16s %-10s %-8s %-12s %s\n", "size", "address", "lkey", "domain",
              "offset", "chunk pages");
  std::vector<pinpool::Block> blocks;
  for (std::size_t size : {64ul, 4096ul, 65536ul, 1ul << 20}) {
    pinpool::Block b = (*pool)->Allocate(size);
    if (!b) {
      std::fprintf(stderr, "allocation failed: %s\n",
                   (*pool)->last_growth_error().ToString().c_str());
      return 1;
    }
    std::memset(b.data(), 0xab, b.size());
    std::printf("%-8zu %-16p %-10u %-8s %-12llu %s\n", b.size(), b.data(),
                pinpool::ToUnderlying(b.lkey()), (*pool)->GetStats().domains[0].name.c_str(),
                static_cast<unsigned long long>(b.offset()),
                pinpool::PageSizeName(b.chunk().page_size));
    blocks.push_back(b);
  }
  auto* interior = static_cast<char*>(blocks[2].data()) + 1000;
  std::optional<pinpool::Location> where = (*pool)->Lookup(interior);
  std::printf("\nlookup of an interior pointer %p: chunk %u, offset %llu\n", interior,
              where->chunk().index, static_cast<unsigned long long>(where->offset()));

  std::printf("\nstats:\n%s", (*pool)->GetStats().ToString().c_str());
  for (auto& b : blocks) (*pool)->Deallocate(b);
  return 0;
}
