// pinpool: a pinned-memory pool allocator for RDMA and other kernel-bypass I/O. Include this
// header for the whole C++ API; the C API is pinpool/pinpool_c.h.
#ifndef PINPOOL_PINPOOL_H_
#define PINPOOL_PINPOOL_H_

#include "pinpool/allocator.h"
#include "pinpool/array.h"
#include "pinpool/block.h"
#include "pinpool/descriptor.h"
#include "pinpool/domain.h"
#include "pinpool/keys.h"
#include "pinpool/memory_resource.h"
#include "pinpool/options.h"
#include "pinpool/pool.h"
#include "pinpool/stats.h"
#include "pinpool/version.h"

#endif  // PINPOOL_PINPOOL_H_
