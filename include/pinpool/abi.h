// pinpool's ABI version: the one name under which everything a caller compiles in is versioned
// (docs/abi.md has the policy).
//
// What a program compiles in when it includes pinpool's headers is part of the library's ABI:
// the inline fast path (pinpool/fast_path.h: the per-thread slots, the class table's shape, the
// page map's entry encoding, the pool members it reads, fast::PoolHead), the layouts of the
// structs it builds or reads (PoolOptions, Block, Keys, ChunkInfo, the C API's structs, the
// sections of PoolStats) and the virtual tables it calls through or implements (Domain,
// GrantHolder). All of them change only with this number:
//  - every public C++ name lives in the inline namespace pinpool::abi_v<N> (PINPOOL_ABI_BEGIN),
//    so its mangled name carries the version;
//  - the libraries' symbols sit in version nodes named after it (PINPOOL_<N>, PINPOOL_FAST_<N>,
//    PINPOOL_PROVIDER_<N>; cmake/libpinpool.map.in), and their SONAME is libpinpool.so.<N>;
//  - the layouts are recorded per version (tests/abi/), and a layout that changes while the
//    number stays fails the build's ABI check.
// A program built against one version does not load with another: the loader names the missing
// library or version node, instead of the program reading a layout it does not know.
//
// PoolStats may grow within a version (new members at its end, docs/abi.md): its first member
// records the caller's size, and the library reads and writes no further.
//
// C and C++; the C API's functions are versioned by their symbol version alone.
#ifndef PINPOOL_ABI_H_
#define PINPOOL_ABI_H_

// The ABI version. A bump is this line (then record the layouts: docs/abi.md).
#define PINPOOL_ABI_VERSION 2

#define PINPOOL_ABI_PASTE2_(a, b) a##b
#define PINPOOL_ABI_PASTE_(a, b) PINPOOL_ABI_PASTE2_(a, b)
// The inline namespace every public name of pinpool:: lives in: abi_v<PINPOOL_ABI_VERSION>.
#define PINPOOL_ABI_NAMESPACE PINPOOL_ABI_PASTE_(abi_v, PINPOOL_ABI_VERSION)
// Opens and closes it, inside namespace pinpool.
#define PINPOOL_ABI_BEGIN inline namespace PINPOOL_ABI_NAMESPACE {
#define PINPOOL_ABI_END }

#endif  // PINPOOL_ABI_H_
