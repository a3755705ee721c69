// Every public header, compiled with full debug information for check_abi.py, which reads the
// layouts of the types they declare back from it (gdb's ptype /o): what programs compile in.
// Never linked or run. The UCX and libfabric headers are included when their packages are
// there (check_abi.py defines PINPOOL_ABI_UCX / PINPOOL_ABI_FABRIC).
#include "pinpool/pinpool.h"
#include "pinpool/pinpool_c.h"
#include "pinpool/provider.h"
#include "pinpool/verbs_remote_access.h"
#ifdef PINPOOL_ABI_UCX
#include "pinpool/ucx.h"
#endif
#ifdef PINPOOL_ABI_FABRIC
#include "pinpool/fabric.h"
#endif
