// os: the only room that maps and unmaps memory. Reserves aligned address ranges, maps chunks
// inside them with a page-size policy, and reports what the kernel actually gave (read back from
// /proc/self/smaps, never assumed). Knows nothing of registration or allocation.
//
// Every function is thread-safe (the kernel serializes mm changes); counters are atomic.
#ifndef PINPOOL_OS_OS_H_
#define PINPOOL_OS_OS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "pinpool/page_size.h"
#include "util/headroom.h"

namespace pinpool::internal::os {

// The base page size on every platform pinpool supports (x86-64, arm64 with 4K pages).
inline constexpr std::size_t kBasePage = std::size_t{4} << 10;

// Calls this room made into the kernel, for tests that prove the fast path makes none, and
// what is mapped now, for tests that prove a failure leaves nothing behind.
struct Counters {
  std::atomic<std::uint64_t> mmap{0};
  std::atomic<std::uint64_t> munmap{0};
  std::atomic<std::uint64_t> madvise{0};
  std::atomic<std::uint64_t> mlock{0};
  // Bytes of chunks mapped by MapChunk and not yet given back (UnmapChunk, or Release of the
  // reservation holding them).
  std::atomic<std::int64_t> chunk_bytes{0};
  // Address space reserved (Reserve) and not yet Released; metadata mapped (MapMetadata) and not
  // yet unmapped: with chunk_bytes, everything this room maps, for tests that prove a failure
  // leaves nothing behind (exactly, where VmSize moves with a sanitizer's own allocator).
  std::atomic<std::int64_t> reserved_bytes{0};
  std::atomic<std::int64_t> metadata_bytes{0};
};
Counters& counters() noexcept;

// Fault injection, for tests only. When a hook is set, every call the library makes that can fail
// asks it first: the kernel calls of this room and of the rooms above it (the domains' io_uring
// calls, the heap's membarrier, the metrics socket, threads), and the providers' backend calls
// (verbs here; UCX and libfabric through pinpool/provider.h's InjectedProviderFault). A non-zero
// return is taken as the errno of that call (for UCX and libfabric: the status that errno
// stands for), which then takes exactly the path a real failure would. Nothing in the library
// sets a hook; unset, it costs one relaxed load per call, and none of these calls is on the
// allocation fast path. tests/support/fault_sweep.h makes every one of them fail in turn.
enum class Call : std::uint8_t {
  kReserve,       // mmap of an address-space reservation
  kMapHugetlb,    // mmap of hugetlb pages (ENOMEM: the huge pages ran out)
  kMremap,        // moving hugetlb pages over the reservation
  kMapAnonymous,  // mmap of a THP or 4 KiB chunk (ENOMEM: no memory to commit)
  kPopulate,      // madvise(MADV_POPULATE_WRITE) faulting a chunk in
  kMlock,         // mlock of a chunk (resident domain; EAGAIN/ENOMEM: RLIMIT_MEMLOCK)
  kPinBuffer,     // io_uring buffer registration of a chunk: the long-term pin of the default
                  // domain and of IoUringDomain, in its own ring and in each ring it registers
                  // separately (ENOMEM: RLIMIT_MEMLOCK)
  kCloneBuffers,  // IORING_REGISTER_CLONE_BUFFERS: IoUringDomain sharing its chunks with another
                  // ring (EINVAL: the kernel refused, ENOMEM: no kernel memory)
  kMapMetadata,   // mmap of allocator metadata (MapMetadata)
  kBindNode,      // mbind of a chunk to its NUMA node (EINVAL: no such node)
  kCreateFile,    // memfd_create or open(O_CREAT | O_EXCL) of a chunk's file, and its ftruncate
  kPagemapScan,   // ioctl(PAGEMAP_SCAN) counting a chunk's huge pages (ENOTTY: a kernel before
                  // 6.7, where the answer comes from smaps instead)
  // Every other call that can fail (docs/robustness.md, "Every failure point"), in one block.
  kTruncateFile,    // ftruncate of a new chunk's file (ENOSPC: tmpfs full; EIO)
  kSealFile,        // fcntl(F_ADD_SEALS) of a new memfd (EBUSY, EPERM)
  kLeaseFile,       // fcntl(F_SETLEASE, F_WRLCK) of a chunk's file (EAGAIN: another opener)
  kLockFile,        // flock(LOCK_EX) of a chunk's file, its ownership (ENOLCK, EWOULDBLOCK)
  kReopenFile,      // open of an adopted chunk's file, by name or /proc/self/fd (EMFILE, EACCES)
  kDupFd,           // fcntl(F_DUPFD_CLOEXEC) of a chunk's file or a sharing socket (EMFILE)
  kSendMessage,     // sendmsg and send on a sharing socket (EPIPE, ENOBUFS; EINTR: retried)
  kReceiveMessage,  // recvmsg and recv on a sharing socket (ENOMEM; EINTR: retried)
  kDontFork,        // madvise(MADV_DONTFORK) of a new chunk (ENOMEM: no memory to split the VMA)
  kReadKernelFile,  // open of a /proc or /sys file (EMFILE, ENFILE)
  kMembarrier,      // membarrier(PRIVATE_EXPEDITED) of the heap's drain handshake (EPERM)
  kThread,          // a new thread: growth workers, the background work, the metrics server
                    // (EAGAIN: RLIMIT_NPROC, the cgroup's pids.max)
  kSocket,          // socket(2) and eventfd(2) of the metrics server (EMFILE, ENFILE)
  kBindSocket,      // bind, chmod and listen of the metrics socket (EACCES, EADDRINUSE)
  kRingSetup,       // io_uring_queue_init of a domain's ring (ENOMEM, EMFILE, EPERM)
  kRegisterTable,   // io_uring_register_buffers_sparse of a domain's table (ENOMEM, EMFILE)
  kVerbsRegister,   // ibv_reg_mr of a chunk or of a granted range (ENOMEM, EFAULT)
  kVerbsWindow,     // ibv_alloc_mw of a memory window (ENOMEM)
  kVerbsPost,       // ibv_post_send of a window's bind or invalidation (ENOMEM: queue full)
  kUcxMap,          // ucp_mem_map of a chunk (ENOMEM: UCS_ERR_NO_MEMORY; EIO: IO_ERROR)
  kUcxPack,         // ucp_rkey_pack of a chunk's rkey (ENOMEM)
  kFabricRegister,  // fi_mr_regattr of a chunk or of a granted range (ENOMEM, EAGAIN)
  kFabricBind,      // fi_mr_bind / fi_mr_enable of a registration to its endpoint (EINVAL)
  kFabricPost,      // fi_writemsg / fi_readmsg of a transfer (EAGAIN: queue full)
};
// The name of a Call ("kDupFd" -> "dup"), for what a fault sweep prints.
const char* CallName(Call call) noexcept;
using FaultHook = int (*)(Call call, std::size_t length);
// Installs `hook` (null removes it); returns the previous one.
FaultHook SetFaultHook(FaultHook hook) noexcept;
// 0, or the errno the installed hook chose for this call.
int InjectedFault(Call call, std::size_t length) noexcept;

// Starts `body` on a new thread: kResourceExhausted when the kernel refuses one (EAGAIN:
// RLIMIT_NPROC, the cgroup's pids.max, threads-max), never an exception. A fault point (kThread).
absl::StatusOr<std::thread> StartThread(std::function<void()> body);

struct Range {
  void* base = nullptr;
  std::size_t length = 0;
};

// Reserves `length` bytes of address space aligned to `alignment` (a power of two): PROT_NONE,
// MAP_NORESERVE, so it costs no memory. kResourceExhausted if the address space is not there.
absl::StatusOr<Range> Reserve(std::size_t length, std::size_t alignment);
// Unmaps a whole reservation, including any chunks still mapped in it (`chunk_bytes` of them,
// for the chunk_bytes counter).
void Release(Range range, std::size_t chunk_bytes = 0) noexcept;

// The page sizes MapChunk tries, in order, for a policy: from `largest` down through the smaller
// ones (1G, 2M, THP, 4K), or `largest` alone when it is required. (MapChunk also skips a size the
// chunk's address or length is not a multiple of.) pinpool-info's plan walks the same list.
std::vector<PageSize> PageSizesToTry(PageSize largest, bool require);

// What backs a chunk's pages (docs/backing.md). Anonymous: private anonymous memory. Memfd: one
// memfd per chunk (MFD_HUGETLB for hugetlb page sizes), sealed against shrinking and growing.
// File: one file per chunk, created in `directory` (tmpfs or hugetlbfs: the only filesystems
// whose pages the kernel lets a device long-term pin for write, see FilesystemOf).
struct BackingSpec {
  enum class Kind : std::uint8_t { kAnonymous, kMemfd, kFile };
  Kind kind = Kind::kAnonymous;
  std::string directory;  // kFile: where the chunk's file is created
  std::string name;       // kMemfd, kFile: the memfd's name or the file's name (no '/')
};

// The file behind one chunk (memfd or a file in a directory): the one owner of its descriptor
// and, for a file in a directory, of its name. Closing it (Close, the destructor) closes the
// descriptor and unlinks the file; the mapping keeps the pages alive until it is unmapped, so
// the owner closes after unmapping. A file in a directory is leased (os/lease.h) from its
// creation: Close releases the lease first. Empty (fd() < 0) for anonymous chunks. Movable, not
// copyable: whoever holds it decides when the chunk's memory stops being reachable by name or
// by descriptor. Not thread-safe (its owner serializes).
class ChunkFile {
 public:
  ChunkFile() = default;
  ChunkFile(int fd, std::string path) noexcept : fd_(fd), path_(std::move(path)) {}
  ChunkFile(ChunkFile&& other) noexcept { *this = std::move(other); }
  ChunkFile& operator=(ChunkFile&& other) noexcept;
  ChunkFile(const ChunkFile&) = delete;
  ChunkFile& operator=(const ChunkFile&) = delete;
  ~ChunkFile() { Close(); }

  int fd() const noexcept { return fd_; }
  // The file's path (kFile); empty for a memfd.
  const std::string& path() const noexcept { return path_; }
  // Truncation is refused by seals (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL, memfd only).
  bool sealed() const noexcept { return sealed_; }
  // The hugetlb page size of the file; 0 when its pages are not hugetlb.
  std::size_t hugetlb_page_bytes() const noexcept { return hugetlb_page_bytes_; }
  // "memfd", "memfd hugetlb 2M", "file /dev/shm/pinpool-...": what ChunkStats::backing shows.
  std::string Describe() const;

  void set_sealed(bool sealed) noexcept { sealed_ = sealed; }
  void set_hugetlb_page_bytes(std::size_t bytes) noexcept { hugetlb_page_bytes_ = bytes; }
  // A write lease is held on the file (os/lease.h): whoever polls it learns of a break.
  bool leased() const noexcept { return leased_; }
  void set_leased(bool leased) noexcept { leased_ = leased; }
  // Releases the lease (if any), closes the descriptor and unlinks the file (if it has a path).
  // Idempotent.
  void Close() noexcept;
  // Closes the descriptor but keeps the file's name: its pages now belong to whoever it was
  // handed over to (a successor adopting the pool). Idempotent.
  void Disown() noexcept;

 private:
  int fd_ = -1;
  std::string path_;
  bool sealed_ = false;
  std::size_t hugetlb_page_bytes_ = 0;
  bool leased_ = false;
};

struct MappedChunk {
  PageSize page_size = PageSize::k4K;  // verified from /proc/self/smaps
  std::size_t huge_bytes = 0;          // bytes backed by huge pages
  ChunkFile file;                      // memfd or file chunks: its file, now the caller's
};

// The filesystem a directory is on, as far as chunks care (FilesystemOf).
struct Filesystem {
  enum class Kind : std::uint8_t { kTmpfs, kHugetlbfs, kOther };
  Kind kind = Kind::kOther;
  std::uint64_t magic = 0;             // statfs f_type
  std::size_t hugetlb_page_bytes = 0;  // kHugetlbfs: the mount's page size
};
// What statfs says of `directory`. Errors: kNotFound (no such directory), kPermissionDenied,
// kInvalidArgument (not a directory).
absl::StatusOr<Filesystem> FilesystemOf(const std::string& directory);
// Whether chunks of `chunk_size` bytes with the page policy (`largest`, `require`) can be files
// in `directory`: it exists, is a directory this process can create files in, and is on tmpfs or
// hugetlbfs (the kernel refuses long-term write pins of other file pages: ordinary page-cache
// files and fsdax; docs/backing.md), whose page size, for hugetlbfs, the policy allows. Returns
// its Filesystem, or kInvalidArgument / kFailedPrecondition saying which and what to do.
absl::StatusOr<Filesystem> CheckBackingDirectory(const std::string& directory, PageSize largest,
                                                 bool require, std::size_t chunk_size);

// MapChunk populates in steps of this many bytes, one madvise(MADV_POPULATE_WRITE) each: the
// kernel holds the process's mmap lock (shared) for each call, and a thread that needs it
// exclusively meanwhile (any mmap, say the heap's metadata) waits for the whole call, and so do
// the page faults queued behind it; steps bound that wait to one step's zeroing (~0.3 ms) while a
// chunk is populated in the background.
inline constexpr std::size_t kPopulateStep = std::size_t{1} << 20;

// Maps [at, at + length) read-write inside a reservation, trying page sizes from `largest` down
// (hugetlb 1G, hugetlb 2M, THP, 4K; a size is skipped when `length` or `at` is not a multiple of
// it). With `require`, only `largest` is tried and getting less is an error. With `populate`,
// every page is faulted in before returning. With `node` >= 0 the mapping is bound to that NUMA
// node (MPOL_BIND) before any page is touched, and hugetlb sizes the node's own pool cannot
// supply are skipped. Marks the range MADV_DONTFORK. On error the range is left reserved exactly
// as before. Errors: kFailedPrecondition (required huge pages not available, with the sysctl to
// fix it), kResourceExhausted (out of memory).
//
// With a memfd or file `backing`, the chunk is one file of `length` bytes (created, sized, sealed
// if a memfd) mapped MAP_SHARED over the range, and the MappedChunk owns the file; the same page
// policy applies (hugetlb through MFD_HUGETLB or a hugetlbfs directory, whose mount fixes the
// page size; THP through shmem's MADV_HUGEPAGE), and a failure leaves neither a mapping nor a file
// (kAlreadyExists when the file exists already).
absl::StatusOr<MappedChunk> MapChunk(void* at, std::size_t length, PageSize largest, bool require,
                                     bool populate, int node = -1, const BackingSpec& backing = {});
// OK when `bytes` of hugetlb pages of `size` are free now, in `node`'s own pool when node >= 0
// (a bound mapping faults only there), else the system's less those promised to other mappings;
// otherwise kFailedPrecondition (as MapChunk's for required huge pages) with the reservation to
// make. The pool's preflight asks it for what Create maps up front; the pages can still be taken
// by others before they are mapped (MapChunk then says so).
absl::Status CheckHugePagesAvailable(PageSize size, std::size_t bytes, int node);
// Maps an existing chunk file (one adopted from a previous owner: os/chunk_file.h) over
// [at, at + length) inside a reservation, MAP_SHARED, marked MADV_DONTFORK, every page faulted in
// when `populate`, and reads back what backs it; the MappedChunk then owns the file (moved from
// `file`). Its contents are kept. On error the range is a reservation again and `file` is left as
// it was, the caller's: a failed adoption never loses the data it could not map, and may be tried
// again. Errors: kResourceExhausted (mmap or populate refused), kInternal (MADV_DONTFORK).
absl::StatusOr<MappedChunk> MapChunkFile(void* at, std::size_t length, ChunkFile& file,
                                         bool populate);
// Maps another process's chunk file (`fd`, checked: chunk_file.h) over [at, at + length) inside
// a reservation, MAP_SHARED and read-write, nothing else done to it: the view of an attached
// process (pinpool/share.h), which neither pins nor owns the pages (UnmapView, or Release of the
// reservation, unmaps it). kResourceExhausted when mmap refuses (the range is reserved again).
absl::Status MapFileView(void* at, std::size_t length, int fd);
void UnmapView(void* at, std::size_t length) noexcept;
// Gives the chunk's pages back and turns the range into a reservation again.
void UnmapChunk(void* at, std::size_t length) noexcept;

// What /proc/self/smaps says backs [at, at + length): its kernel page size and how many of its
// bytes are huge (hugetlb or THP). The range must be one chunk mapped by MapChunk.
absl::StatusOr<MappedChunk> QueryPages(const void* at, std::size_t length);
// What backs [at, at + length), a chunk of small pages (THP or 4 KiB, not hugetlb) that MapChunk
// mapped and populated: kTransparent when any of its bytes is a huge page, else k4K, with its huge
// bytes. Asks the chunk's own page tables (ScanHugeBytes) where the kernel can, so its cost does
// not grow with the process's other mappings; reads smaps (QueryPages) where it cannot.
absl::StatusOr<MappedChunk> QueryPopulatedPages(const void* at, std::size_t length);
// Bytes of [at, at + length) mapped by huge pages (a THP mapped by its PMD, or hugetlb), from
// ioctl(PAGEMAP_SCAN) on /proc/self/pagemap. nullopt when the kernel has no PAGEMAP_SCAN (before
// Linux 6.7) or the pagemap cannot be opened.
std::optional<std::size_t> ScanHugeBytes(const void* at, std::size_t length);

// NUMA (numa.cc). Nodes are the kernel's numbers; a kernel without NUMA has node 0 alone.
std::vector<int> OnlineNodes();
std::vector<int> NodeCpus(int node);  // empty when the node has no CPUs (or does not exist)
// Free hugetlb pages of `page_bytes` in node `node`'s own pool (0 when unknown).
std::size_t NodeFreeHugePages(int node, std::size_t page_bytes);
// OK when `node` is online; else kInvalidArgument naming the nodes there are.
absl::Status CheckNode(int node);
// mbind(MPOL_BIND) of a fresh mapping to `node`: 0 or errno. Counted as a fault-injection call.
int BindToNode(void* at, std::size_t length, int node) noexcept;
// Restricts the calling thread to `node`'s CPUs; false when it has none or the kernel refused.
bool RunOnNodeCpus(int node) noexcept;
// Where a chunk's pages are, asked of the kernel (move_pages without target nodes), one sample
// per page of `page_bytes`, at most 4096 samples spread over the range.
struct NodePlacement {
  int node = -1;                // the node of every present sample; -1 if they differ or none is
  std::size_t sampled = 0;      // pages asked about
  std::size_t on_node = 0;      // of which on `node`
  std::size_t not_present = 0;  // of which not faulted in yet
};
absl::StatusOr<NodePlacement> QueryPlacement(const void* at, std::size_t length,
                                             std::size_t page_bytes);
// Anonymous read-write memory for allocator metadata (the heap's page map, span records and
// stacks of free blocks): never registered, never inside a pool's range, zeroed. `length` is
// rounded up to pages. Null when the kernel (or the fault hook) refuses.
void* MapMetadata(std::size_t length) noexcept;
void UnmapMetadata(void* at, std::size_t length) noexcept;

// RLIMIT_MEMLOCK and what counts against it.
struct MemlockState {
  std::size_t limit = 0;   // soft limit in bytes; SIZE_MAX when unlimited
  std::size_t locked = 0;  // VmLck of this process (mlock)
  std::size_t pinned = 0;  // VmPin of this process (RDMA registrations, io_uring buffers)
  bool exempt = false;     // CAP_IPC_LOCK in the effective set: the limit does not apply
  // CAP_IPC_LOCK in the bounding set but not effective: granted to the container or service,
  // inert for this process (a non-root user, whose capabilities are cleared at execve unless
  // ambient or file capabilities give them back). Worth saying: people take it for exemption.
  bool bounded_not_effective = false;
  std::uint32_t uid = 0;  // the real uid, for the message

  // What may still be locked or pinned on top of `used` (util/headroom.h).
  std::optional<std::size_t> Headroom(std::size_t used) const noexcept {
    return MemlockHeadroom(limit, exempt, used);
  }
};
MemlockState QueryMemlock() noexcept;

// mlock(2) / munlock(2), counted and open to fault injection: 0 or errno.
int Mlock(void* at, std::size_t length) noexcept;
void Munlock(void* at, std::size_t length) noexcept;

// Reads a whole /proc or /sys file (they report size 0, so it reads to EOF). kNotFound when the
// file does not exist (e.g. a huge page size the CPU lacks), kPermissionDenied without the right.
absl::StatusOr<std::string> ReadKernelFile(const char* path);
// The selected word of a sysfs choice file ("always [madvise] never" -> "madvise"); "unavailable"
// when it cannot be read, "unknown" when nothing is selected.
std::string ReadSysfsChoice(const char* path);

}  // namespace pinpool::internal::os

#endif  // PINPOOL_OS_OS_H_
