/* PINPOOL_EXPORT marks what libpinpool.so exports: the classes and functions this directory
 * declares, and nothing else. The library is compiled with hidden visibility, so its internals
 * (every pinpool::internal name, its private allocator) stay out of its ABI; the CMake target
 * and pkg-config file give consumers no way to reach them. C and C++. */
#ifndef PINPOOL_EXPORT_H_
#define PINPOOL_EXPORT_H_

#define PINPOOL_EXPORT __attribute__((visibility("default")))
/* For the private members of an exported class that only the library itself calls (those whose
 * signatures name internal types, say), so they stay out of the ABI too. */
#define PINPOOL_NO_EXPORT __attribute__((visibility("hidden")))

#endif /* PINPOOL_EXPORT_H_ */
