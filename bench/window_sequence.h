// The window shapes' sequences, shared by the time benchmark (alloc_compare_benchmark: window/...)
// and the instruction counts (instructions_benchmark: <form>/w16), so that both measure the same
// steps: W blocks outstanding, each step frees the block in slot[i] and allocates size[i] there,
// sizes log-uniform in [lo, hi]. Generated once from a fixed seed; the same seed gives the same
// sequence on every machine (std::mt19937_64 is specified exactly; the log-uniform draw uses
// uniform_real_distribution, the same within one standard library).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace pinpool::bench {

inline constexpr std::size_t kWindowOps = 1 << 16;  // steps before a sequence repeats

inline std::size_t LogUniform(std::mt19937_64& rng, std::size_t lo, std::size_t hi) {
  if (lo == hi) return lo;
  const double x = std::uniform_real_distribution<double>(std::log(static_cast<double>(lo)),
                                                          std::log(static_cast<double>(hi)))(rng);
  return std::clamp(static_cast<std::size_t>(std::exp(x)), lo, hi);
}

struct WindowOps {
  std::vector<std::uint32_t> initial;  // sizes of the first W blocks
  std::vector<std::uint32_t> slot;     // step i frees slot[i] ...
  std::vector<std::uint32_t> size;     // ... and allocates size[i] there
};

// A window: W = `window` blocks of `lo`..`hi` bytes outstanding.
struct WindowShape {
  const char* name;
  std::size_t lo, hi;  // sizes log-uniform in [lo, hi]
  int window;
};
// The small window (window/small), the first of alloc_compare_benchmark's shapes: its sequence
// has the first seed, kWindowSeed, and each later shape the next one.
inline constexpr WindowShape kSmallWindow = {"small", 64, 1 << 10, 16};
inline constexpr std::uint64_t kWindowSeed = 1300;

inline WindowOps MakeWindowOps(std::uint64_t seed, const WindowShape& shape) {
  std::mt19937_64 rng(seed);
  WindowOps ops;
  for (int i = 0; i < shape.window; ++i) {
    ops.initial.push_back(static_cast<std::uint32_t>(LogUniform(rng, shape.lo, shape.hi)));
  }
  for (std::size_t i = 0; i < kWindowOps; ++i) {
    ops.slot.push_back(static_cast<std::uint32_t>(rng() % static_cast<unsigned>(shape.window)));
    ops.size.push_back(static_cast<std::uint32_t>(LogUniform(rng, shape.lo, shape.hi)));
  }
  return ops;
}

}  // namespace pinpool::bench
