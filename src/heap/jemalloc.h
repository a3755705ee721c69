// pinpool's private jemalloc. The build renames every public symbol of Debian's
// libjemalloc_pic.a from X to pinpool_je_X (cmake/make-private-jemalloc.sh) and hides them all
// inside libpinpool.so, so the application's malloc is never touched. This header declares the
// renamed entry points pinpool uses; jemalloc.h supplies the types and MALLOCX_* macros (its own
// unprefixed declarations are never linked: --no-undefined would catch a call to one).
// Only src/heap/ may include this file.
#ifndef PINPOOL_HEAP_JEMALLOC_H_
#define PINPOOL_HEAP_JEMALLOC_H_

#include <jemalloc/jemalloc.h>

#include <cstddef>

extern "C" {
void* pinpool_je_mallocx(size_t size, int flags);
void* pinpool_je_rallocx(void* ptr, size_t size, int flags);
size_t pinpool_je_xallocx(void* ptr, size_t size, size_t extra, int flags);
size_t pinpool_je_nallocx(size_t size, int flags);
size_t pinpool_je_sallocx(const void* ptr, int flags);
void pinpool_je_dallocx(void* ptr, int flags);
int pinpool_je_mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen);
int pinpool_je_mallctlnametomib(const char* name, size_t* mibp, size_t* miblenp);
int pinpool_je_mallctlbymib(const size_t* mib, size_t miblen, void* oldp, size_t* oldlenp,
                            void* newp, size_t newlen);
}

#endif  // PINPOOL_HEAP_JEMALLOC_H_
