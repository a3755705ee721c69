/* pinpool C API: malloc-style access to a pinned, registered memory pool, for C programs and
 * for dropping pinpool into existing code. C99 and C++ compatible; the C++ API is
 * pinpool/pinpool.h.
 *
 * A pinpool_pool_t is an opaque handle to one pool. Pools created here use the default domain:
 * each chunk is long-term pinned (its physical addresses stay fixed, counted in VmPin), with no
 * device keys; pinpool_keys() reports a pointer's chunk and keys.
 *
 * Errors: pinpool_create() returns 0 or a negative errno code and writes an actionable message
 * ("RLIMIT_MEMLOCK is 8 MiB; ...") to errbuf. The allocation functions return NULL on failure and
 * set errno (ENOMEM, or EINVAL for a bad alignment), like their libc namesakes. They never abort
 * on exhaustion; they abort with a message when handed a pointer the pool does not own (free,
 * realloc), since that would corrupt memory.
 *
 * Thread safety: every function except pinpool_create/pinpool_destroy may be called from any
 * thread at once for the same pool; memory may be freed by another thread than allocated it.
 * Destroying a pool while it is in use is a bug.
 */
#ifndef PINPOOL_PINPOOL_C_H_
#define PINPOOL_PINPOOL_C_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinpool/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pinpool_pool pinpool_pool_t;

/* Largest page size a pool tries for its chunks (falling back to smaller ones unless
 * require_page_size is set). Same order as pinpool::PageSize. */
typedef enum pinpool_page_size {
  PINPOOL_PAGE_1G = 0,          /* hugetlb, 1 GiB pages */
  PINPOOL_PAGE_2M = 1,          /* hugetlb, 2 MiB pages */
  PINPOOL_PAGE_TRANSPARENT = 2, /* transparent huge pages (best effort by the kernel) */
  PINPOOL_PAGE_4K = 3           /* base pages */
} pinpool_page_size_t;

/* What a pool is created from; see pinpool::PoolOptions for the full meaning of each field.
 * Always start from pinpool_options_init() so that fields added later get their defaults. */
typedef struct pinpool_options {
  size_t chunk_size;             /* power of two, 2 MiB .. 1 GiB; the largest allocation is 7/8 */
  size_t budget;                 /* most bytes the pool may map and pin */
  size_t initial_size;           /* bytes mapped and registered by pinpool_create */
  pinpool_page_size_t page_size; /* largest page size to try */
  bool require_page_size;        /* fail rather than fall back to smaller pages */
  bool populate;                 /* fault every page in when a chunk is mapped */
} pinpool_options_t;

/* The registration an address lies in, for one domain of its pool. */
typedef struct pinpool_keys {
  uint32_t lkey;         /* RDMA local key (ibv_sge.lkey); 0 for non-RDMA domains */
  uint32_t rkey;         /* RDMA remote key; 0 for non-RDMA domains */
  uint32_t buffer_index; /* io_uring fixed-buffer index; 0 for other domains */
  uintptr_t base;        /* first address covered by the registration */
  size_t length;         /* bytes covered by the registration */
  uint64_t offset;       /* the address minus base */
} pinpool_keys_t;

/* Fills *options with the same defaults as pinpool::PoolOptions. */
PINPOOL_EXPORT void pinpool_options_init(pinpool_options_t* options);

/* Creates a pool. options may be NULL (defaults). On success stores the pool in *out and returns
 * 0. On failure stores NULL, returns a negative errno code and, when errlen > 0, writes the
 * reason (NUL-terminated, truncated to errlen) to errbuf:
 *   -EINVAL  an option is invalid          -ENOMEM  budget, RLIMIT_MEMLOCK or address space
 *   -EAGAIN  required huge pages missing   -EPERM   not permitted (e.g. io_uring is forbidden
 *   -ENODEV  a device was not found                 here, so nothing can be pinned long-term)
 *   -ENOSYS  unsupported (e.g. a kernel without io_uring)
 *   -EIO     anything else (the message says what) */
PINPOOL_EXPORT int pinpool_create(const pinpool_options_t* options, pinpool_pool_t** out,
                                  char* errbuf, size_t errlen);

/* Deregisters and unmaps everything the pool created; its memory becomes invalid. NULL is
 * ignored. */
PINPOOL_EXPORT void pinpool_destroy(pinpool_pool_t* pool);

/* At least `size` bytes aligned for any fundamental type, or NULL (errno ENOMEM). A size of 0
 * returns a unique pointer that must be freed, never NULL. */
PINPOOL_EXPORT void* pinpool_malloc(pinpool_pool_t* pool, size_t size);

/* Zeroed memory for n objects of `size` bytes, or NULL (errno ENOMEM, also when n * size
 * overflows). */
PINPOOL_EXPORT void* pinpool_calloc(pinpool_pool_t* pool, size_t n, size_t size);

/* realloc(3) semantics: p NULL is pinpool_malloc(size); size 0 frees p and returns NULL (unlike
 * pinpool_malloc(0)); otherwise resizes in place or moves the contents (up to the smaller size),
 * returning the new pointer. On failure returns NULL with errno ENOMEM and leaves p allocated and
 * unchanged. */
PINPOOL_EXPORT void* pinpool_realloc(pinpool_pool_t* pool, void* p, size_t size);

/* `size` bytes aligned to `alignment`, a power of two no larger than the chunk size. NULL with
 * errno EINVAL for a bad alignment, ENOMEM when out of memory. size need not be a multiple of
 * alignment. */
PINPOOL_EXPORT void* pinpool_aligned_alloc(pinpool_pool_t* pool, size_t alignment, size_t size);

/* Frees memory from this pool's allocation functions. NULL is ignored. */
PINPOOL_EXPORT void pinpool_free(pinpool_pool_t* pool, void* p);

/* Bytes usable at p (>= the size asked for); 0 for NULL or a pointer outside the pool. */
PINPOOL_EXPORT size_t pinpool_usable_size(const pinpool_pool_t* pool, const void* p);

/* The registration that address p (any address inside a live allocation) lies in, for the pool's
 * domain number `domain` (0 for pools created here). Returns 0, or -EINVAL when p is not in the
 * pool, domain is out of range, or out is NULL. */
PINPOOL_EXPORT int pinpool_keys(const pinpool_pool_t* pool, const void* p, size_t domain,
                                pinpool_keys_t* out);

/* Arrays (pinpool/array.h): `count` elements of one size and alignment allocated and freed as
 * one object that may span many chunks, no element straddling a chunk (one registration). An
 * element is found in constant time. A pinpool_array_t belongs to the pool it came from; it is
 * read-only and may be read from any thread at once. */
typedef struct pinpool_array pinpool_array_t;

/* The elements of an array that lie in one chunk (or in its one block, for a small array):
 * element `first + k` is at base + k * stride, for k < count. */
typedef struct pinpool_array_run {
  void* base;
  size_t first;
  size_t count;
  size_t stride;       /* bytes between elements: element_size rounded up to the alignment */
  size_t element_size; /* bytes in each element */
} pinpool_array_run_t;

/* Allocates an array of `count` elements of `element_size` bytes, each aligned to `alignment` (a
 * power of two, at most element_size). On success stores it in *out and returns 0; on failure
 * stores NULL, leaves nothing mapped or registered behind, returns a negative errno code and
 * writes the reason to errbuf (as pinpool_create):
 *   -EINVAL  count 0, element_size 0, a bad alignment, an element larger than the chunk size,
 *            count x stride, or the whole chunks it spans, overflowing
 *   -ENOMEM  more than the budget holds, or growth met a limit (the message names it)
 *   -EIO     anything else (the message says what) */
PINPOOL_EXPORT int pinpool_array_alloc(pinpool_pool_t* pool, size_t count, size_t element_size,
                                       size_t alignment, pinpool_array_t** out, char* errbuf,
                                       size_t errlen);
/* Frees an array of this pool and every element at once. NULL is ignored. */
PINPOOL_EXPORT void pinpool_array_free(pinpool_pool_t* pool, pinpool_array_t* array);
/* Elements in the array (0 for NULL). */
PINPOOL_EXPORT size_t pinpool_array_size(const pinpool_array_t* array);
/* The address of element i; NULL when i >= pinpool_array_size(array) or array is NULL. */
PINPOOL_EXPORT void* pinpool_array_element(const pinpool_array_t* array, size_t i);
/* The registration element i lies in, for the pool's domain number `domain`, with the element's
 * offset in it. 0, or -EINVAL when i or domain is out of range or an argument is NULL. */
PINPOOL_EXPORT int pinpool_array_keys(const pinpool_array_t* array, size_t i, size_t domain,
                                      pinpool_keys_t* out);
/* Runs in the array (one per chunk it spans; 0 for NULL), and run r, in element order. 0, or
 * -EINVAL when r is out of range or an argument is NULL. */
PINPOOL_EXPORT size_t pinpool_array_run_count(const pinpool_array_t* array);
PINPOOL_EXPORT int pinpool_array_run(const pinpool_array_t* array, size_t r,
                                     pinpool_array_run_t* out);

/* Compact descriptors (pinpool/descriptor.h), the owner's side: writes a descriptor of elements
 * [first, first + count) of `array` (count UINT64_MAX: to the end), renumbered from 0, with the
 * rkeys its chunks have in the pool's domains `domains[0 .. domain_count)` (indexes in the pool's
 * domain order), into `buf` (`buflen` bytes), and stores its length in *written. As Describe in
 * pinpool/descriptor.h, these are the chunks' own keys: the peer reaches the whole of every chunk
 * the elements lie in (for trusted peers only). Returns 0; -ENOSPC when buflen is smaller than
 * the descriptor (nothing written to buf, *written is the length needed: call with buf NULL and
 * buflen 0 to size it); -EINVAL when an argument is NULL (buf only with buflen 0 allowed), the
 * subrange is empty or out of range, there are no or too many domains, or a domain index the
 * chunks do not have (errbuf says which); -ENOMEM when memory for the encoding ran out. */
PINPOOL_EXPORT int pinpool_array_describe(const pinpool_array_t* array, const size_t* domains,
                                          size_t domain_count, uint64_t first, uint64_t count,
                                          void* buf, size_t buflen, size_t* written, char* errbuf,
                                          size_t errlen);

/* Compact descriptors (pinpool/descriptor.h), the peer's side: decodes the bytes a peer sent
 * (untrusted: every field is checked) into a handle that gives any element's remote address and
 * keys. On success stores the handle in *out and returns 0; else stores NULL, returns -EINVAL
 * (malformed: errbuf names the field) or -ENOSYS (a version this library does not read), -ENOMEM
 * when the handle cannot be made. */
typedef struct pinpool_descriptor pinpool_descriptor_t;
PINPOOL_EXPORT int pinpool_descriptor_decode(const void* bytes, size_t length,
                                             pinpool_descriptor_t** out, char* errbuf,
                                             size_t errlen);
/* NULL is ignored. */
PINPOOL_EXPORT void pinpool_descriptor_free(pinpool_descriptor_t* descriptor);
/* Elements described, bytes in each, keys per element (0 for NULL). */
PINPOOL_EXPORT uint64_t pinpool_descriptor_size(const pinpool_descriptor_t* descriptor);
PINPOOL_EXPORT uint64_t pinpool_descriptor_element_size(const pinpool_descriptor_t* descriptor);
PINPOOL_EXPORT size_t pinpool_descriptor_key_count(const pinpool_descriptor_t* descriptor);
/* Element i's remote address and its key number `key` (for verbs: the rkey). 0, or -EINVAL when
 * i or key is out of range or an argument is NULL. */
PINPOOL_EXPORT int pinpool_descriptor_element(const pinpool_descriptor_t* descriptor, uint64_t i,
                                              size_t key, uint64_t* address, uint64_t* rkey);

/* "major.minor.patch" of the library actually linked. */
PINPOOL_EXPORT const char* pinpool_version(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PINPOOL_PINPOOL_C_H_ */
