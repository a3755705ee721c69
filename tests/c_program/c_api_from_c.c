/* The C API used from a plain C program: proves pinpool/pinpool_c.h is valid C (this file is
 * compiled as C11, and once more as C99 for the header alone) and that a C program links against
 * libpinpool with nothing but the library itself. Exits 0 on success, 1 on the first failure (with
 * a message naming it). Runs single-threaded. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "pinpool/pinpool_c.h"

static int failures = 0;

#define EXPECT(cond)                                                                 \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      fprintf(stderr, "%s:%d: expectation failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                                    \
    }                                                                                \
  } while (0)

#define MIB ((size_t)1 << 20)

static int in_pool(pinpool_pool_t* pool, const void* p) {
  pinpool_keys_t keys;
  return pinpool_keys(pool, p, 0, &keys) == 0;
}

int main(void) {
  pinpool_options_t options;
  pinpool_pool_t* pool = NULL;
  char err[256];
  unsigned char* p;
  unsigned char* q;
  size_t i;
  pinpool_keys_t keys;
  pinpool_keys_t interior;
  int on_stack = 0;
  int rc;

  printf("pinpool %s\n", pinpool_version());

  /* A bad option is reported, not fatal. */
  pinpool_options_init(&options);
  options.chunk_size = 3 * MIB;
  rc = pinpool_create(&options, &pool, err, sizeof err);
  EXPECT(rc == -EINVAL);
  EXPECT(pool == NULL);
  EXPECT(err[0] != '\0');

  pinpool_options_init(&options);
  options.chunk_size = 4 * MIB;
  options.budget = 16 * MIB;
  rc = pinpool_create(&options, &pool, err, sizeof err);
  if (rc != 0) {
    fprintf(stderr, "pinpool_create: %d: %s\n", rc, err);
    return 1;
  }

  /* malloc / free */
  p = pinpool_malloc(pool, 1000);
  EXPECT(p != NULL);
  EXPECT(in_pool(pool, p));
  EXPECT(pinpool_usable_size(pool, p) >= 1000);
  memset(p, 0x11, 1000);

  /* realloc keeps the contents while growing past a size class */
  p = pinpool_realloc(pool, p, 2 * MIB);
  EXPECT(p != NULL);
  for (i = 0; p != NULL && i < 1000; ++i) {
    if (p[i] != 0x11) {
      EXPECT(p[i] == 0x11);
      break;
    }
  }

  /* keys of an interior pointer: same registration, offset moved */
  EXPECT(pinpool_keys(pool, p, 0, &keys) == 0);
  EXPECT(pinpool_keys(pool, p + 12345, 0, &interior) == 0);
  EXPECT(interior.base == keys.base);
  EXPECT(interior.offset == keys.offset + 12345);
  EXPECT(keys.base + keys.offset == (uintptr_t)p);
  EXPECT(pinpool_keys(pool, &on_stack, 0, &keys) == -EINVAL);
  pinpool_free(pool, p);
  pinpool_free(pool, NULL);

  /* calloc: zeroed; overflow is ENOMEM */
  q = pinpool_calloc(pool, 1000, 4);
  EXPECT(q != NULL);
  for (i = 0; q != NULL && i < 4000; ++i) {
    if (q[i] != 0) {
      EXPECT(q[i] == 0);
      break;
    }
  }
  pinpool_free(pool, q);
  errno = 0;
  EXPECT(pinpool_calloc(pool, SIZE_MAX / 2 + 1, 2) == NULL);
  EXPECT(errno == ENOMEM);

  /* aligned_alloc */
  q = pinpool_aligned_alloc(pool, 4096, 10);
  EXPECT(q != NULL);
  EXPECT(((uintptr_t)q & 4095) == 0);
  pinpool_free(pool, q);
  errno = 0;
  EXPECT(pinpool_aligned_alloc(pool, 3, 10) == NULL);
  EXPECT(errno == EINVAL);

  /* realloc(NULL, n) allocates; realloc(p, 0) frees */
  q = pinpool_realloc(pool, NULL, 64);
  EXPECT(q != NULL);
  EXPECT(pinpool_realloc(pool, q, 0) == NULL);

  pinpool_destroy(pool);
  if (failures != 0) {
    fprintf(stderr, "%d expectation(s) failed\n", failures);
    return 1;
  }
  printf("ok\n");
  return 0;
}
