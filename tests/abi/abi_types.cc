// Every public header, compiled with full debug information for check_abi.py, which reads the
// layouts of the types they declare back from it (gdb's ptype /o): what programs compile in.
// Each header is named (check_abi.py fails when one of include/pinpool/ is missing here).
// Never linked or run. The UCX and libfabric headers are included when their packages are
// there (check_abi.py defines PINPOOL_ABI_UCX / PINPOOL_ABI_FABRIC).
#include "pinpool/abi.h"
#include "pinpool/allocator.h"
#include "pinpool/array.h"
#include "pinpool/block.h"
#include "pinpool/descriptor.h"
#include "pinpool/domain.h"
#include "pinpool/export.h"
#include "pinpool/fast_path.h"
#include "pinpool/grant_lock.h"
#include "pinpool/io_uring.h"
#include "pinpool/io_uring_zero_copy.h"
#include "pinpool/keys.h"
#include "pinpool/memory_resource.h"
#include "pinpool/options.h"
#include "pinpool/page_size.h"
#include "pinpool/pinpool.h"
#include "pinpool/pinpool_c.h"
#include "pinpool/pool.h"
#include "pinpool/provider.h"
#include "pinpool/share.h"
#include "pinpool/stats.h"
#include "pinpool/take_back.h"
#include "pinpool/verbs.h"
#include "pinpool/verbs_remote_access.h"
#ifdef PINPOOL_ABI_UCX
#include "pinpool/ucx.h"
#endif
#ifdef PINPOOL_ABI_FABRIC
#include "pinpool/fabric.h"
#endif
