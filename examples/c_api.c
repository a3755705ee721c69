/* The C API: create a pool, allocate like malloc, and get the keys a device needs for a buffer.
 * Build as C (C99 or later) and link with -lpinpool only. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "pinpool/pinpool_c.h"

int main(void) {
  pinpool_options_t options;
  pinpool_pool_t* pool = NULL;
  pinpool_keys_t keys;
  char err[256];
  char* message;
  int rc;

  pinpool_options_init(&options);
  options.chunk_size = (size_t)4 << 20; /* 4 MiB */
  options.budget = (size_t)64 << 20;    /* pin at most 64 MiB */
  rc = pinpool_create(&options, &pool, err, sizeof err);
  if (rc != 0) {
    fprintf(stderr, "pinpool_create failed (%s): %s\n", strerror(-rc), err);
    return 1;
  }
  printf("pinpool %s\n", pinpool_version());

  message = pinpool_malloc(pool, 4096);
  if (message == NULL) {
    perror("pinpool_malloc");
    pinpool_destroy(pool);
    return 1;
  }
  snprintf(message, 4096, "hello from registered memory");

  /* Any pointer into the buffer finds its registration: here the sixth byte. */
  if (pinpool_keys(pool, message + 6, 0, &keys) == 0) {
    printf(
        "'%s' at %p\n  registration base 0x%jx length %zu, offset %ju\n"
        "  lkey 0x%x rkey 0x%x buffer index %u\n",
        message + 6, (void*)(message + 6), (uintmax_t)keys.base, keys.length,
        (uintmax_t)keys.offset, (unsigned)keys.lkey, (unsigned)keys.rkey,
        (unsigned)keys.buffer_index);
  }

  message = pinpool_realloc(pool, message, (size_t)1 << 20); /* contents kept */
  if (message != NULL) printf("after realloc: '%s'\n", message);

  pinpool_free(pool, message);
  pinpool_destroy(pool);
  return 0;
}
