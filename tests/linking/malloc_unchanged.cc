// malloc_unchanged: proof that linking pinpool leaves the application's own malloc alone
// (docs/design.md's invariant "Linking pinpool does not change the application's malloc").
//
// pinpool's heap is its own code (it once carried a private jemalloc, whose unprefixed symbols a
// careless link would have made the process's malloc). This program is built by
// tests/linking/run.sh against an *installed* pinpool, like any application, and fails if:
//  (a) symbols: the malloc API and operator new/delete as the dynamic linker binds them for the
//      application (dlsym(RTLD_DEFAULT)) are not libc's / libstdc++'s own definitions, lie in
//      libpinpool.so (dladdr), or libpinpool.so's own lookup scope resolves them elsewhere;
//  (c) behaviour: with a pool alive and blocks allocated, on two threads at once, any of 10^4
//      malloc'ed pointers of assorted sizes lies in the pool (by Contains, Lookup and the chunk
//      list) or overwrites a pool block, any pool block lies outside the pool or is one malloc
//      handed out, including after frees on both sides; or glibc's malloc_usable_size and
//      mallinfo2 do not see the memory malloc returned.
// (b), the exported-symbol check of libpinpool.so, is tests/linking/check-exports.sh.
//
// Usage: malloc_unchanged [directory libpinpool.so must be loaded from]
// Prints one PASS/FAIL line per check and "malloc_unchanged: OK" at the end; exits 1 on failure.
#include <dlfcn.h>
#include <link.h>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "pinpool/pool.h"

namespace {

std::atomic<int> g_failures{0};

// Prints "PASS: what" or "FAIL: what" and counts failures.
void Check(bool ok, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void Check(bool ok, const char* fmt, ...) {
  if (!ok) g_failures.fetch_add(1);
  char message[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(message, sizeof message, fmt, args);
  va_end(args);
  std::printf("%s: %s\n", ok ? "PASS" : "FAIL", message);
}

std::string ObjectOf(const void* address) {
  Dl_info info{};
  if (address == nullptr || dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "?";
  return info.dli_fname;
}

std::string RealPath(const std::string& path) {
  char* real = realpath(path.c_str(), nullptr);
  if (real == nullptr) return path;
  std::string result(real);
  std::free(real);
  return result;
}

// Path of the loaded libpinpool.so.*, found among the process's objects (not by taking a
// function's address, which a non-PIE executable would resolve to its own PLT stub).
std::string LoadedPinpoolPath() {
  std::string path;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        if (info->dlpi_name != nullptr &&
            std::strstr(info->dlpi_name, "/libpinpool.so") != nullptr) {
          *static_cast<std::string*>(data) = info->dlpi_name;
          return 1;
        }
        return 0;
      },
      &path);
  return path;
}

// (a) Every allocator entry point the application sees is the one its C/C++ runtime defines.
void CheckSymbols(const std::string& expected_dir) {
  const std::string pinpool_path = LoadedPinpoolPath();
  Check(!pinpool_path.empty(), "libpinpool.so is loaded (%s)", pinpool_path.c_str());
  if (!expected_dir.empty()) {
    const std::string dir = RealPath(pinpool_path.substr(0, pinpool_path.rfind('/')));
    Check(dir == RealPath(expected_dir),
          "libpinpool.so is the installed copy in %s (loaded from %s)", expected_dir.c_str(),
          dir.c_str());
  }

  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  void* libstdcxx = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_NOLOAD);
  void* libpinpool =
      pinpool_path.empty() ? nullptr : dlopen(pinpool_path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  Check(libc != nullptr && libstdcxx != nullptr && libpinpool != nullptr,
        "handles on the loaded libc.so.6, libstdc++.so.6 and libpinpool.so");
  if (libc == nullptr || libstdcxx == nullptr || libpinpool == nullptr) return;

  struct Entry {
    const char* name;
    void* runtime;  // the library that must define it
  };
  const Entry entries[] = {
      {"malloc", libc},
      {"free", libc},
      {"calloc", libc},
      {"realloc", libc},
      {"posix_memalign", libc},
      {"aligned_alloc", libc},
      {"memalign", libc},
      {"valloc", libc},
      {"malloc_usable_size", libc},
      {"_Znwm", libstdcxx},                  // operator new(size_t)
      {"_Znam", libstdcxx},                  // operator new[](size_t)
      {"_ZnwmSt11align_val_t", libstdcxx},   // operator new(size_t, align_val_t)
      {"_ZdlPv", libstdcxx},                 // operator delete(void*)
      {"_ZdaPv", libstdcxx},                 // operator delete[](void*)
      {"_ZdlPvm", libstdcxx},                // operator delete(void*, size_t)
      {"_ZdlPvSt11align_val_t", libstdcxx},  // operator delete(void*, align_val_t)
  };
  for (const Entry& e : entries) {
    void* own = dlsym(e.runtime, e.name);
    void* bound = dlsym(RTLD_DEFAULT, e.name);
    void* from_pinpool = dlsym(libpinpool, e.name);  // pinpool first, then its dependencies
    const std::string bound_in = ObjectOf(bound);
    Check(own != nullptr && bound == own && from_pinpool == own &&
              bound_in.find("libpinpool") == std::string::npos,
          "%s is %s's: the application binds %p in %s, libpinpool's scope %p in %s", e.name,
          ObjectOf(own).c_str(), bound, bound_in.c_str(), from_pinpool,
          ObjectOf(from_pinpool).c_str());
  }
  // And the calls the program itself makes go there too (not only what dlsym says).
  // (Holds for the PIE executables Debian's compilers build by default.)
  void* const direct_malloc = reinterpret_cast<void*>(&malloc);
  Check(direct_malloc == dlsym(libc, "malloc"), "&malloc in this program is libc's (%p in %s)",
        direct_malloc, ObjectOf(direct_malloc).c_str());
  dlclose(libpinpool);
  dlclose(libstdcxx);
  dlclose(libc);
}

struct Range {
  std::uintptr_t begin;
  std::uintptr_t end;  // exclusive
};

bool Overlaps(const std::vector<Range>& sorted, std::uintptr_t begin, std::uintptr_t end) {
  auto it = std::upper_bound(sorted.begin(), sorted.end(), begin,
                             [](std::uintptr_t a, const Range& r) { return a < r.begin; });
  if (it != sorted.end() && it->begin < end) return true;
  return it != sorted.begin() && std::prev(it)->end > begin;
}

std::vector<Range> Sorted(std::vector<Range> ranges) {
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  return ranges;
}

// Sizes malloc sees in real programs: mostly small, some pages, a few large enough for glibc to
// mmap them (>= 128 KiB). About 35 MB per 10^4.
std::size_t MallocSize(std::mt19937_64& rng) {
  const std::uint64_t r = rng() % 1000;
  if (r < 900) return 1 + rng() % 512;
  if (r < 995) return 512 + rng() % (32 * 1024);
  return 128 * 1024 + rng() % (384 * 1024);
}

// Small blocks and some of a few pages: about 1.5 MiB per 256, well inside a 16 MiB budget.
std::size_t BlockSize(std::mt19937_64& rng) {
  return rng() % 4 == 0 ? 4096 + rng() % (28 * 1024) : 8 + rng() % 1024;
}

struct Malloced {
  unsigned char* p;
  std::size_t size;
};

// One thread's share of (c). Returns the number of failed checks (reported as they happen, up to
// a few, so a failure does not print 10^4 lines).
int RunRound(pinpool::Pool& pool, std::uint64_t seed, const char* who) {
  constexpr int kBlocks = 256;
  constexpr int kMallocs = 10000;
  std::mt19937_64 rng(seed);
  int failures = 0;
  std::map<std::string, int> failures_by_kind;  // `what` -> count, for the summary
  auto fail = [&](const char* what, const void* p, std::size_t size) {
    ++failures_by_kind[what];
    if (++failures <= 5) std::printf("FAIL: %s: %s (%p, %zu bytes)\n", who, what, p, size);
  };
  const unsigned char pattern = static_cast<unsigned char>(0x40 | (seed & 0x3f));

  // Pool blocks, written with a pattern that malloc'ed memory must never disturb.
  std::vector<pinpool::Block> blocks;
  auto allocate_blocks = [&](int n) {
    for (int i = 0; i < n; ++i) {
      pinpool::Block b = pool.Allocate(BlockSize(rng));
      if (!b) {
        fail("pool.Allocate failed", nullptr, 0);
        continue;
      }
      std::memset(b.data(), pattern, b.size());
      const auto* last = static_cast<const unsigned char*>(b.data()) + b.size() - 1;
      if (!pool.Contains(b.data()) || !pool.Contains(last)) {
        // Not the pool's memory: leaked, since freeing it through the pool would abort.
        fail("pool block not inside the pool", b.data(), b.size());
        continue;
      }
      blocks.push_back(b);
    }
  };
  allocate_blocks(kBlocks);

  // The pool's chunks as GetStats reports them: a view independent of Contains/Lookup.
  std::vector<Range> chunks;
  for (const pinpool::ChunkStats& c : pool.GetStats().chunks) {
    chunks.push_back({c.base, c.base + c.size});
  }
  auto blocks_as_ranges = [&] {
    std::vector<Range> ranges;
    for (const pinpool::Block& b : blocks) {
      const auto begin = reinterpret_cast<std::uintptr_t>(b.data());
      ranges.push_back({begin, begin + b.size()});
    }
    return Sorted(std::move(ranges));
  };

  std::vector<Malloced> mallocs;
  auto malloc_and_check = [&](int n, const std::unordered_set<const void*>& freed_blocks) {
    chunks = Sorted(chunks);
    const std::vector<Range> live_blocks = blocks_as_ranges();
    for (int i = 0; i < n; ++i) {
      const std::size_t size = MallocSize(rng);
      auto* p = static_cast<unsigned char*>(std::malloc(size));
      if (p == nullptr) {
        fail("malloc returned null", p, size);
        continue;
      }
      std::memset(p, 0x5a, size);
      const auto begin = reinterpret_cast<std::uintptr_t>(p);
      if (pool.Contains(p) || pool.Contains(p + size - 1) || pool.Lookup(p)) {
        fail("malloc returned memory inside the pool (Contains/Lookup)", p, size);
      } else if (Overlaps(chunks, begin, begin + size)) {
        fail("malloc returned memory inside a pool chunk (GetStats)", p, size);
      } else if (Overlaps(live_blocks, begin, begin + size)) {
        fail("malloc returned memory overlapping a live pool block", p, size);
      } else if (freed_blocks.count(p) != 0) {
        fail("malloc returned a freed pool block", p, size);
      }
      if (malloc_usable_size(p) < size) {
        fail("malloc_usable_size smaller than asked", p, size);
      }
      mallocs.push_back({p, size});
    }
  };
  auto blocks_intact = [&] {
    for (const pinpool::Block& b : blocks) {
      const auto* bytes = static_cast<const unsigned char*>(b.data());
      for (std::size_t i = 0; i < b.size(); ++i) {
        if (bytes[i] != pattern) {
          fail("pool block overwritten while malloc'ed memory was written", b.data(), b.size());
          break;
        }
      }
    }
  };

  malloc_and_check(kMallocs, {});
  blocks_intact();

  // Free every other block and every other malloc'ed pointer, then allocate again on both sides:
  // a free on one side must never feed the other (the trap of a thread cache shared by two
  // allocators).
  std::unordered_set<const void*> freed_blocks;
  std::unordered_set<const void*> freed_mallocs;
  std::vector<pinpool::Block> kept_blocks;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    if (i % 2 == 0) {
      freed_blocks.insert(blocks[i].data());
      pool.Deallocate(blocks[i]);
    } else {
      kept_blocks.push_back(blocks[i]);
    }
  }
  blocks = std::move(kept_blocks);
  std::vector<Malloced> kept_mallocs;
  for (std::size_t i = 0; i < mallocs.size(); ++i) {
    if (i % 2 == 0) {
      freed_mallocs.insert(mallocs[i].p);
      std::free(mallocs[i].p);
    } else {
      kept_mallocs.push_back(mallocs[i]);
    }
  }
  mallocs = std::move(kept_mallocs);

  const std::size_t before = blocks.size();
  allocate_blocks(kBlocks);
  for (std::size_t i = before; i < blocks.size(); ++i) {
    if (freed_mallocs.count(blocks[i].data()) != 0) {
      fail("pool.Allocate returned memory just freed with free()", blocks[i].data(),
           blocks[i].size());
    }
  }
  for (const pinpool::ChunkStats& c : pool.GetStats().chunks) {
    chunks.push_back({c.base, c.base + c.size});  // the pool may have grown
  }
  malloc_and_check(kMallocs, freed_blocks);
  blocks_intact();

  for (const Malloced& m : mallocs) std::free(m.p);
  for (const pinpool::Block& b : blocks) pool.Deallocate(b);
  for (const auto& [what, count] : failures_by_kind) {
    std::printf("FAIL: %s: %d x %s\n", who, count, what.c_str());
  }
  return failures;
}

// (c) With a pool alive, malloc and the pool never hand out each other's memory.
void CheckBehaviour() {
  pinpool::PoolOptions options;
  options.chunk_size = 4 * pinpool::kMiB;
  options.budget = 16 * pinpool::kMiB;
  absl::StatusOr<std::unique_ptr<pinpool::Pool>> created =
      pinpool::Pool::Create(std::move(options));
  Check(created.ok(), "Pool::Create(chunk 4 MiB, budget 16 MiB): %s",
        created.ok() ? "OK" : created.status().ToString().c_str());
  if (!created.ok()) return;
  pinpool::Pool& pool = **created;

  std::atomic<int> other_failures{0};
  std::thread other([&] { other_failures = RunRound(pool, 2, "thread 2"); });
  const int main_failures = RunRound(pool, 1, "thread 1");
  other.join();
  Check(
      main_failures == 0 && other_failures == 0,
      "2 threads x 2 rounds of 10^4 malloc'ed pointers (1 B - 512 KiB) never in the pool, 2 x 512 "
      "pool blocks never from malloc, none overwrote another (%d + %d failures)",
      main_failures, other_failures.load());
  const pinpool::PoolStats stats = pool.GetStats();
  Check(stats.mapped_bytes > 0 && !stats.chunks.empty(),
        "the pool really held memory meanwhile (%zu bytes mapped in %zu chunks)",
        stats.mapped_bytes, stats.chunks.size());
}

// (c) glibc, the application's malloc, is the one serving malloc(): its own accounting sees the
// bytes (jemalloc in its place would leave mallinfo2 unchanged).
void CheckGlibcServesMalloc() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  constexpr int kCount = 1000;
  constexpr std::size_t kSize = 256;
  const std::size_t before = mallinfo2().uordblks;
  std::vector<void*> pointers(kCount);
  for (void*& p : pointers) {
    p = std::malloc(kSize);
    std::memset(p, 1, kSize);
  }
  const std::size_t after = mallinfo2().uordblks;
  Check(after >= before + kCount * kSize,
        "glibc's mallinfo2 counts %d x malloc(%zu) (in use %zu -> %zu bytes)", kCount, kSize,
        before, after);
  bool usable_ok = true;
  for (void* p : pointers) usable_ok = usable_ok && malloc_usable_size(p) >= kSize;
  Check(usable_ok, "malloc_usable_size works on malloc'ed pointers");
  for (void* p : pointers) std::free(p);
#else
  Check(false, "built against a C library other than glibc >= 2.33: adapt this check");
#endif
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::string expected_dir = argc > 1 ? argv[1] : "";
  CheckSymbols(expected_dir);
  CheckBehaviour();
  CheckGlibcServesMalloc();
  if (g_failures.load() != 0) {
    std::printf("malloc_unchanged: %d check(s) FAILED\n", g_failures.load());
    return 1;
  }
  std::printf("malloc_unchanged: OK\n");
  return 0;
}
