/* PINPOOL_EXPORT marks what pinpool's libraries export: the classes and functions this directory
 * declares, and nothing else. libpinpool.so and the provider libraries (libpinpool_ucx.so,
 * libpinpool_fabric.so) are compiled with hidden visibility and linked with a version script
 * each (made from cmake/libpinpool.map.in and libpinpool_provider.map.in), so their internals
 * (every pinpool::internal name, the private allocator, the providers' own helpers, the standard
 * library's and Abseil's template instances) stay out of their ABI; the CMake targets and
 * pkg-config files give consumers no way to reach them. C and C++. */
#ifndef PINPOOL_EXPORT_H_
#define PINPOOL_EXPORT_H_

#define PINPOOL_EXPORT __attribute__((visibility("default")))
/* For the private members of an exported class that only the library itself calls (those whose
 * signatures name internal types, say), so they stay out of the ABI too. */
#define PINPOOL_NO_EXPORT __attribute__((visibility("hidden")))

#endif /* PINPOOL_EXPORT_H_ */
