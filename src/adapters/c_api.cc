// The C API (pinpool/pinpool_c.h) over pinpool::Pool.
//
// A pinpool_pool_t* is a pinpool::Pool* in disguise: struct pinpool_pool is never defined, the
// handle is only ever cast back, so the C API adds no indirection to the fast path. Every entry
// point is noexcept: nothing thrown below (std::bad_alloc from building options or Pool::Create)
// may unwind into C; it becomes an error code instead. Allocation failures set errno as libc does.
// Thread safety is Pool's.
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "pinpool/array.h"
#include "pinpool/block.h"
#include "pinpool/descriptor.h"
#include "pinpool/keys.h"
#include "pinpool/options.h"
#include "pinpool/pinpool_c.h"
#include "pinpool/pool.h"
#include "pinpool/version.h"
#include "util/bytes.h"

namespace pinpool {
PINPOOL_ABI_BEGIN
namespace {

static_assert(PINPOOL_PAGE_1G == static_cast<int>(PageSize::k1G));
static_assert(PINPOOL_PAGE_2M == static_cast<int>(PageSize::k2M));
static_assert(PINPOOL_PAGE_TRANSPARENT == static_cast<int>(PageSize::kTransparent));
static_assert(PINPOOL_PAGE_4K == static_cast<int>(PageSize::k4K));

Pool* AsPool(pinpool_pool_t* pool) noexcept { return reinterpret_cast<Pool*>(pool); }
const Pool* AsPool(const pinpool_pool_t* pool) noexcept {
  return reinterpret_cast<const Pool*>(pool);
}

// Copies `message` into errbuf, truncated and always NUL-terminated when errlen > 0.
void SetError(char* errbuf, std::size_t errlen, absl::string_view message) noexcept {
  if (errbuf == nullptr || errlen == 0) return;
  const std::size_t n = message.size() < errlen - 1 ? message.size() : errlen - 1;
  std::memcpy(errbuf, message.data(), n);
  errbuf[n] = '\0';
}

int ErrnoFor(absl::StatusCode code) noexcept {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return -EINVAL;
    case absl::StatusCode::kResourceExhausted:
      return -ENOMEM;
    case absl::StatusCode::kFailedPrecondition:  // required huge pages missing: fix, then retry
    case absl::StatusCode::kUnavailable:
      return -EAGAIN;
    case absl::StatusCode::kPermissionDenied:  // e.g. io_uring forbidden: no long-term pin
      return -EPERM;
    case absl::StatusCode::kNotFound:
      return -ENODEV;
    case absl::StatusCode::kUnimplemented:
      return -ENOSYS;
    default:
      return -EIO;
  }
}

int Create(const pinpool_options_t* c_options, pinpool_pool_t** out, char* errbuf,
           std::size_t errlen) {
  PoolOptions options;
  if (c_options != nullptr) {
    // Read as an int: a C caller may store any int here, and loading an out-of-range value
    // through the enum type is undefined behaviour in C++.
    static_assert(sizeof(pinpool_page_size_t) == sizeof(int));
    int page_size;
    std::memcpy(&page_size, &c_options->page_size, sizeof page_size);
    if (page_size < PINPOOL_PAGE_1G || page_size > PINPOOL_PAGE_4K) {
      SetError(errbuf, errlen,
               "pinpool_options_t.page_size is not one of PINPOOL_PAGE_1G, PINPOOL_PAGE_2M, "
               "PINPOOL_PAGE_TRANSPARENT, PINPOOL_PAGE_4K (start from pinpool_options_init)");
      return -EINVAL;
    }
    options.chunk_size = c_options->chunk_size;
    options.budget = c_options->budget;
    options.initial_size = c_options->initial_size;
    options.page_size = static_cast<PageSize>(page_size);
    options.require_page_size = c_options->require_page_size;
    options.populate = c_options->populate;
  }
  absl::StatusOr<std::unique_ptr<Pool>> pool = Pool::Create(std::move(options));
  if (!pool.ok()) {
    SetError(errbuf, errlen, pool.status().message());
    return ErrnoFor(pool.status().code());
  }
  *out = reinterpret_cast<pinpool_pool_t*>(pool->release());
  SetError(errbuf, errlen, "");
  return 0;
}

// What pinpool_keys and pinpool_array_keys report for `location`, for domain `domain`.
int FillKeys(const Location& location, std::size_t domain, pinpool_keys_t* out) noexcept {
  if (!location || domain >= location.domain_count()) return -EINVAL;
  const Keys& keys = location.keys(domain);
  *out = pinpool_keys_t{};
  out->lkey = ToUnderlying(keys.lkey);
  out->rkey = ToUnderlying(keys.rkey);
  out->buffer_index = ToUnderlying(keys.buffer_index);
  out->base = keys.base;
  out->length = keys.length;
  out->offset = location.offset(domain);
  return 0;
}

const Array* AsArray(const pinpool_array_t* array) noexcept {
  return reinterpret_cast<const Array*>(array);
}

const Descriptor* AsDescriptor(const pinpool_descriptor_t* d) noexcept {
  return reinterpret_cast<const Descriptor*>(d);
}

void* Allocate(Pool* pool, std::size_t size, std::size_t alignment) noexcept {
  // Pool refuses size 0; malloc(0) here returns a unique pointer so that NULL always means
  // failure. The default alignment takes Pool's one-argument fast path.
  if (size == 0) size = 1;
  const Block block = alignment == alignof(std::max_align_t) ? pool->Allocate(size)
                                                             : pool->Allocate(size, alignment);
  if (!block) {
    errno = ENOMEM;
    return nullptr;
  }
  return block.data();
}

}  // namespace

PINPOOL_ABI_END
namespace internal {

// pinpool_malloc: Pool's inline fast path without building a Block (a C caller wants the pointer
// alone: no chunk table load), one call from the C program into the library. pinpool_free is
// Pool::Deallocate itself.
struct CApi {
  PINPOOL_FAST_INLINE static void* Malloc(Pool* pool, std::size_t size) noexcept {
    if (__builtin_expect(size - 1 < fast::kMaxFastSize, 1)) {
      if (void* p = fast::TryPop(pool->head_.heap_id, size)) return p;
    }
    return Allocate(pool, size, alignof(std::max_align_t));
  }
};

}  // namespace internal
}  // namespace pinpool

extern "C" {

void pinpool_options_init(pinpool_options_t* options) {
  if (options == nullptr) return;
  const pinpool::PoolOptions defaults;
  *options = pinpool_options_t{};
  options->chunk_size = defaults.chunk_size;
  options->budget = defaults.budget;
  options->initial_size = defaults.initial_size;
  options->page_size = static_cast<pinpool_page_size_t>(defaults.page_size);
  options->require_page_size = defaults.require_page_size;
  options->populate = defaults.populate;
}

int pinpool_create(const pinpool_options_t* options, pinpool_pool_t** out, char* errbuf,
                   size_t errlen) {
  if (out == nullptr) {
    pinpool::SetError(errbuf, errlen, "pinpool_create: `out` is NULL");
    return -EINVAL;
  }
  *out = nullptr;
  try {
    return pinpool::Create(options, out, errbuf, errlen);
  } catch (const std::bad_alloc&) {
    pinpool::SetError(errbuf, errlen, "pinpool_create: out of memory while creating the pool");
    return -ENOMEM;
  } catch (const std::exception& e) {
    pinpool::SetError(errbuf, errlen, e.what());
    return -EIO;
  } catch (...) {
    pinpool::SetError(errbuf, errlen, "pinpool_create: unknown error");
    return -EIO;
  }
}

void pinpool_destroy(pinpool_pool_t* pool) {
  // ~Pool is noexcept (destructors are by default).
  delete pinpool::AsPool(pool);
}

void* pinpool_malloc(pinpool_pool_t* pool, size_t size) {
  return pinpool::internal::CApi::Malloc(pinpool::AsPool(pool), size);
}

void* pinpool_calloc(pinpool_pool_t* pool, size_t n, size_t size) {
  if (size != 0 && n > std::numeric_limits<size_t>::max() / size) {
    errno = ENOMEM;
    return nullptr;
  }
  const size_t bytes = n * size;
  void* p = pinpool::Allocate(pinpool::AsPool(pool), bytes, alignof(std::max_align_t));
  // Pool memory is recycled, never fresh from the kernel: it must be cleared.
  if (p != nullptr) std::memset(p, 0, bytes);
  return p;
}

void* pinpool_realloc(pinpool_pool_t* pool, void* p, size_t size) {
  pinpool::Pool* const cxx_pool = pinpool::AsPool(pool);
  if (p == nullptr) return pinpool::Allocate(cxx_pool, size, alignof(std::max_align_t));
  if (size == 0) {
    cxx_pool->Deallocate(p);
    return nullptr;
  }
  const pinpool::Block moved = cxx_pool->Reallocate(p, size);
  if (!moved) {
    errno = ENOMEM;
    return nullptr;
  }
  return moved.data();
}

void* pinpool_aligned_alloc(pinpool_pool_t* pool, size_t alignment, size_t size) {
  pinpool::Pool* const cxx_pool = pinpool::AsPool(pool);
  if (!pinpool::internal::IsPowerOfTwo(alignment) || alignment > cxx_pool->chunk_size()) {
    errno = EINVAL;
    return nullptr;
  }
  return pinpool::Allocate(cxx_pool, size, alignment);
}

void pinpool_free(pinpool_pool_t* pool, void* p) {
  pinpool::AsPool(pool)->Deallocate(p);  // null is ignored
}

size_t pinpool_usable_size(const pinpool_pool_t* pool, const void* p) {
  const pinpool::Pool* const cxx_pool = pinpool::AsPool(pool);
  if (p == nullptr || !cxx_pool->Contains(p)) return 0;
  return cxx_pool->UsableSize(p);
}

int pinpool_keys(const pinpool_pool_t* pool, const void* p, size_t domain, pinpool_keys_t* out) {
  if (pool == nullptr || out == nullptr) return -EINVAL;
  const std::optional<pinpool::Location> location = pinpool::AsPool(pool)->Lookup(p);
  if (!location.has_value()) return -EINVAL;
  return pinpool::FillKeys(*location, domain, out);
}

// An array handle is a heap-allocated pinpool::Array (nothrow: nothing may unwind into C).
int pinpool_array_alloc(pinpool_pool_t* pool, size_t count, size_t element_size, size_t alignment,
                        pinpool_array_t** out, char* errbuf, size_t errlen) {
  if (out == nullptr) return -EINVAL;
  *out = nullptr;
  if (pool == nullptr) {
    pinpool::SetError(errbuf, errlen, "pinpool_array_alloc: pool is NULL");
    return -EINVAL;
  }
  try {
    absl::StatusOr<pinpool::Array> array =
        pinpool::AsPool(pool)->AllocateArray(count, element_size, alignment);
    if (!array.ok()) {
      pinpool::SetError(errbuf, errlen, array.status().message());
      return pinpool::ErrnoFor(array.status().code());
    }
    auto* handle = new (std::nothrow) pinpool::Array(std::move(*array));
    if (handle == nullptr) {
      pinpool::AsPool(pool)->Deallocate(std::move(*array));
      pinpool::SetError(errbuf, errlen, "pinpool_array_alloc: out of memory for the handle");
      return -ENOMEM;
    }
    *out = reinterpret_cast<pinpool_array_t*>(handle);
    pinpool::SetError(errbuf, errlen, "");
    return 0;
  } catch (const std::bad_alloc&) {  // the run list (malloc) could not be made
    pinpool::SetError(errbuf, errlen, "pinpool_array_alloc: out of memory for the run list");
    return -ENOMEM;
  }
}

void pinpool_array_free(pinpool_pool_t* pool, pinpool_array_t* array) {
  if (array == nullptr) return;
  auto* a = reinterpret_cast<pinpool::Array*>(array);
  pinpool::AsPool(pool)->Deallocate(std::move(*a));
  delete a;
}

size_t pinpool_array_size(const pinpool_array_t* array) {
  return array == nullptr ? 0 : pinpool::AsArray(array)->size();
}

void* pinpool_array_element(const pinpool_array_t* array, size_t i) {
  return array == nullptr ? nullptr : pinpool::AsArray(array)->Element(i).data();
}

int pinpool_array_keys(const pinpool_array_t* array, size_t i, size_t domain, pinpool_keys_t* out) {
  if (array == nullptr || out == nullptr) return -EINVAL;
  return pinpool::FillKeys(pinpool::AsArray(array)->Element(i), domain, out);
}

size_t pinpool_array_run_count(const pinpool_array_t* array) {
  return array == nullptr ? 0 : pinpool::AsArray(array)->runs().size();
}

int pinpool_array_run(const pinpool_array_t* array, size_t r, pinpool_array_run_t* out) {
  if (array == nullptr || out == nullptr) return -EINVAL;
  const pinpool::Array& a = *pinpool::AsArray(array);
  if (r >= a.runs().size()) return -EINVAL;
  const pinpool::ArrayRun& run = a.runs()[r];
  *out = pinpool_array_run_t{run.base, run.first, run.count, a.stride(), a.element_size()};
  return 0;
}

// A descriptor handle is a heap-allocated pinpool::Descriptor.
int pinpool_array_describe(const pinpool_array_t* array, const size_t* domains, size_t domain_count,
                           uint64_t first, uint64_t count, void* buf, size_t buflen,
                           size_t* written, char* errbuf, size_t errlen) {
  if (array == nullptr || written == nullptr || (domains == nullptr && domain_count != 0) ||
      (buf == nullptr && buflen != 0)) {
    pinpool::SetError(errbuf, errlen,
                      "pinpool_array_describe: array, written, domains or buf is NULL");
    return -EINVAL;
  }
  *written = 0;
  try {
    absl::StatusOr<std::vector<std::byte>> bytes =
        pinpool::Describe(*pinpool::AsArray(array),
                          std::span<const std::size_t>(domains, domain_count), first, count);
    if (!bytes.ok()) {
      pinpool::SetError(errbuf, errlen, bytes.status().message());
      return pinpool::ErrnoFor(bytes.status().code());
    }
    *written = bytes->size();
    if (buflen < bytes->size()) {
      pinpool::SetError(errbuf, errlen,
                        "pinpool_array_describe: the buffer is smaller than the descriptor "
                        "(*written is the length needed)");
      return -ENOSPC;
    }
    std::memcpy(buf, bytes->data(), bytes->size());
    pinpool::SetError(errbuf, errlen, "");
    return 0;
  } catch (const std::bad_alloc&) {
    pinpool::SetError(errbuf, errlen, "pinpool_array_describe: out of memory for the encoding");
    return -ENOMEM;
  }
}

int pinpool_descriptor_decode(const void* bytes, size_t length, pinpool_descriptor_t** out,
                              char* errbuf, size_t errlen) {
  if (out == nullptr) return -EINVAL;
  *out = nullptr;
  if (bytes == nullptr && length != 0) {
    pinpool::SetError(errbuf, errlen, "pinpool_descriptor_decode: bytes is NULL");
    return -EINVAL;
  }
  try {
    absl::StatusOr<pinpool::Descriptor> d = pinpool::Descriptor::Decode(
        std::span<const std::byte>(static_cast<const std::byte*>(bytes), length));
    if (!d.ok()) {
      pinpool::SetError(errbuf, errlen, d.status().message());
      return pinpool::ErrnoFor(d.status().code());
    }
    auto* handle = new (std::nothrow) pinpool::Descriptor(std::move(*d));
    if (handle == nullptr) {
      pinpool::SetError(errbuf, errlen, "pinpool_descriptor_decode: out of memory");
      return -ENOMEM;
    }
    *out = reinterpret_cast<pinpool_descriptor_t*>(handle);
    pinpool::SetError(errbuf, errlen, "");
    return 0;
  } catch (const std::bad_alloc&) {  // the runs (malloc) could not be held
    pinpool::SetError(errbuf, errlen, "pinpool_descriptor_decode: out of memory for the runs");
    return -ENOMEM;
  }
}

void pinpool_descriptor_free(pinpool_descriptor_t* descriptor) {
  delete reinterpret_cast<pinpool::Descriptor*>(descriptor);
}

uint64_t pinpool_descriptor_size(const pinpool_descriptor_t* d) {
  return d == nullptr ? 0 : pinpool::AsDescriptor(d)->size();
}

uint64_t pinpool_descriptor_element_size(const pinpool_descriptor_t* d) {
  return d == nullptr ? 0 : pinpool::AsDescriptor(d)->element_size();
}

size_t pinpool_descriptor_key_count(const pinpool_descriptor_t* d) {
  return d == nullptr ? 0 : pinpool::AsDescriptor(d)->key_count();
}

int pinpool_descriptor_element(const pinpool_descriptor_t* d, uint64_t i, size_t key,
                               uint64_t* address, uint64_t* rkey) {
  if (d == nullptr || address == nullptr || rkey == nullptr) return -EINVAL;
  const std::optional<pinpool::RemoteElement> e = pinpool::AsDescriptor(d)->Element(i);
  if (!e.has_value() || key >= pinpool::AsDescriptor(d)->key_count()) return -EINVAL;
  *address = e->address;
  *rkey = e->keys[key];
  return 0;
}

const char* pinpool_version(void) { return PINPOOL_VERSION_STRING; }

}  // extern "C"
