/* The preload shim's test (bench/preload_shim.cc): run with LD_PRELOAD=libpinpool_preload.so (ctest
 * sets it). Checks that malloc is the shim's, that every entry point hands out memory that keeps
 * what is written to it (calloc's zeroed, realloc's contents moved, alignments honoured), blocks
 * freed by another thread than allocated them, glibc's own pointers (from __libc_malloc) freed,
 * resized and measured through the shim, a realloc past the largest pool block (glibc takes the
 * block over), and that a forked child stops at once with the shim's message. Prints "ok" and
 * exits 0, or names the first failed check and exits 1. Plain C: an unmodified C program is what
 * the shim is for. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

void* __libc_malloc(size_t);

#define CHECK(cond)                                                          \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "preload_shim_test:%d: %s failed\n", __LINE__, #cond); \
      exit(1);                                                               \
    }                                                                        \
  } while (0)

static void fill(unsigned char* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; ++i) p[i] = (unsigned char)(seed + i * 7);
}
static int holds(const unsigned char* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != (unsigned char)(seed + i * 7)) return 0;
  }
  return 1;
}

enum { kBlocks = 2000 };
static void* handed[kBlocks];
static size_t handed_size[kBlocks];

/* Allocates blocks of many sizes for the main thread to check and free. */
static void* producer(void* arg) {
  (void)arg;
  for (int i = 0; i < kBlocks; ++i) {
    handed_size[i] = 1 + ((size_t)i * 131) % 100000;
    handed[i] = malloc(handed_size[i]);
    if (handed[i] != NULL) fill(handed[i], handed_size[i], (unsigned)i);
  }
  return NULL;
}

int main(void) {
  Dl_info info;
  CHECK(dladdr(dlsym(RTLD_DEFAULT, "malloc"), &info) != 0 &&
        strstr(info.dli_fname, "pinpool_preload") != NULL);

  /* malloc, calloc, realloc growing and shrinking, malloc(0), usable size */
  unsigned char* p = malloc(100);
  CHECK(p != NULL && malloc_usable_size(p) >= 100);
  fill(p, 100, 1);
  p = realloc(p, 5000);
  CHECK(p != NULL && holds(p, 100, 1));
  fill(p, 5000, 2);
  p = realloc(p, 300000); /* above the inline path's sizes */
  CHECK(p != NULL && holds(p, 5000, 2));
  p = realloc(p, 10);
  CHECK(p != NULL && holds(p, 10, 2));
  free(p);
  void* zero = malloc(0);
  CHECK(zero != NULL);
  free(zero);
  for (int round = 0; round < 2; ++round) { /* the second round reuses dirty blocks */
    unsigned char* z = calloc(1000, 33);
    CHECK(z != NULL);
    for (size_t i = 0; i < 33000; ++i) CHECK(z[i] == 0);
    memset(z, 0xab, 33000);
    free(z);
  }
  volatile size_t huge = SIZE_MAX / 2; /* the product overflows */
  errno = 0;
  CHECK(calloc(huge, 3) == NULL && errno == ENOMEM);

  /* alignments: posix_memalign, aligned_alloc, memalign, valloc */
  for (size_t align = 8; align <= (size_t)1 << 20; align <<= 1) {
    void* a = NULL;
    CHECK(posix_memalign(&a, align, 3 * align) == 0 && ((uintptr_t)a & (align - 1)) == 0);
    memset(a, 1, 3 * align);
    free(a);
    a = aligned_alloc(align, align);
    CHECK(a != NULL && ((uintptr_t)a & (align - 1)) == 0);
    free(a);
    a = memalign(align, 17);
    CHECK(a != NULL && ((uintptr_t)a & (align - 1)) == 0);
    free(a);
  }
  void* bad = NULL;
  CHECK(posix_memalign(&bad, 24, 10) == EINVAL);
  void* v = valloc(10);
  CHECK(v != NULL && ((uintptr_t)v & 4095) == 0);
  free(v);

  /* blocks freed by another thread than allocated them */
  pthread_t t;
  CHECK(pthread_create(&t, NULL, producer, NULL) == 0 && pthread_join(t, NULL) == 0);
  for (int i = 0; i < kBlocks; ++i) {
    CHECK(handed[i] != NULL && holds(handed[i], handed_size[i], (unsigned)i));
    free(handed[i]);
  }

  /* glibc's own pointers go back to glibc */
  unsigned char* g = __libc_malloc(64);
  CHECK(g != NULL && malloc_usable_size(g) >= 64);
  fill(g, 64, 3);
  g = realloc(g, 100000);
  CHECK(g != NULL && holds(g, 64, 3));
  free(g);

  /* past the largest block of the shim's pool (7/8 of a chunk: 14 MiB by default): glibc takes it
   * over */
  const size_t big = (size_t)60 << 20;
  unsigned char* b = malloc(1 << 20);
  CHECK(b != NULL);
  fill(b, 1 << 20, 4);
  b = realloc(b, big);
  CHECK(b != NULL && holds(b, 1 << 20, 4));
  b[big - 1] = 5;
  free(b);
  b = malloc(big);
  CHECK(b != NULL);
  b[big - 1] = 5;
  free(b);

  /* fork: the child has no pool memory and stops at once, saying so */
  fflush(NULL);
  const pid_t child = fork();
  if (child == 0) _exit(0); /* not reached: the shim's handler aborts first */
  int status = 0;
  CHECK(child > 0 && waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);

  printf("ok\n");
  return 0;
}
