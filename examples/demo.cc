// The README's demo: a pool on the best domain this machine has, a few blocks with their keys,
// the page sizes the kernel actually gave, and the pool's stats.
//
// Domains: when an RDMA device is usable, the pool registers with it (a VerbsDomain on the first
// device with an ACTIVE port, granting peers remote read and write) and every block shows the
// lkey and rkey a work request needs. Otherwise it says why and uses the default domain, which
// takes a long-term pin of each chunk (physical addresses fixed) without any device. The output
// says what each domain does to the pages. Huge pages are used when reserved (vm.nr_hugepages),
// else transparent huge pages, else 4 KiB pages: the output says which.
//
// `pinpool_demo --json` does the same and prints only the pool's stats as JSON
// (PoolStats::ToJson, fields in docs/pinpool-info.md), for tools and tests.
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pinpool/pinpool.h"
#include "pinpool/verbs.h"

int main(int argc, char** argv) {
  const bool json = argc == 2 && std::strcmp(argv[1], "--json") == 0;
  if (argc > 2 || (argc == 2 && !json)) {
    std::fprintf(stderr, "usage: %s [--json]\n", argv[0]);
    return 2;
  }
  // With --json the report for people goes nowhere and stdout carries the JSON alone.
  std::FILE* text = json ? std::fopen("/dev/null", "w") : stdout;
  if (text == nullptr) text = stderr;
  std::fprintf(text, "pinpool %s demo\n\n", PINPOOL_VERSION_STRING);
  pinpool::PoolOptions options;
  absl::StatusOr<std::shared_ptr<pinpool::VerbsDomain>> verbs = pinpool::VerbsDomain::Open();
  if (verbs.ok()) {
    std::fprintf(text,
                 "domain: %s (verbs, local access only: peers are granted single blocks; fork "
                 "mode %s)\n",
                 (*verbs)->name().c_str(), pinpool::ForkModeName(pinpool::QueryForkMode()));
    options.domains.push_back(*verbs);
  } else {
    std::fprintf(text,
                 "domain: the default (long-term pin, no device keys), because there is no usable "
                 "RDMA device:\n  %s\n",
                 verbs.status().ToString().c_str());
  }

  options.chunk_size = 8 * pinpool::kMiB;
  options.budget = 64 * pinpool::kMiB;
  options.initial_size = 8 * pinpool::kMiB;
  options.page_size = pinpool::PageSize::k2M;  // falls back to THP, then 4 KiB
  auto pool = pinpool::Pool::Create(options);
  if (!pool.ok()) {
    std::fprintf(stderr, "cannot create the pool: %s\n", pool.status().ToString().c_str());
    return 1;
  }
  // What registration does to the pages, per domain: only a long-term pin keeps them where a
  // device can find them.
  for (const pinpool::DomainStats& d : (*pool)->GetStats().domains) {
    std::fprintf(text, "pinning by %s: %s\n", d.name.c_str(),
                 pinpool::PinningDescription(d.pinning));
  }

  std::fprintf(text, "\n%-8s %-16s %-10s %-10s %-14s %-12s %s\n", "size", "address", "lkey", "rkey",
               "domain", "offset", "chunk pages");
  std::vector<pinpool::Block> blocks;
  for (std::size_t size : {64ul, 4096ul, 65536ul, 1ul << 20}) {
    pinpool::Block b = (*pool)->Allocate(size);
    if (!b) {
      std::fprintf(stderr, "allocation failed: %s\n",
                   (*pool)->last_growth_error().ToString().c_str());
      return 1;
    }
    std::memset(b.data(), 0xab, b.size());
    // The default domain has no device keys: show a dash rather than a zero that looks like one.
    char lkey[16] = "-", rkey[16] = "-";
    if (verbs.ok()) {
      std::snprintf(lkey, sizeof(lkey), "0x%x", pinpool::ToUnderlying(b.lkey()));
      std::snprintf(rkey, sizeof(rkey), "0x%x", pinpool::ToUnderlying(b.rkey()));
    }
    std::fprintf(text, "%-8zu %-16p %-10s %-10s %-14s %-12llu %s\n", b.size(), b.data(), lkey, rkey,
                 (*pool)->GetStats().domains[0].name.c_str(),
                 static_cast<unsigned long long>(b.offset()),
                 pinpool::PageSizeName(b.chunk().page_size));
    blocks.push_back(b);
  }
  auto* interior = static_cast<char*>(blocks[2].data()) + 1000;
  std::optional<pinpool::Location> where = (*pool)->Lookup(interior);
  std::fprintf(text, "\nlookup of an interior pointer %p: chunk %u, offset %llu\n", interior,
               where->chunk().index, static_cast<unsigned long long>(where->offset()));

  if (json) {
    std::fputs((*pool)->GetStats().ToJson().c_str(), stdout);
  } else {
    std::printf("\nstats:\n%s", (*pool)->GetStats().ToString().c_str());
  }
  for (auto& b : blocks) (*pool)->Deallocate(b);
  if (text != stdout && text != stderr) std::fclose(text);
  return 0;
}
