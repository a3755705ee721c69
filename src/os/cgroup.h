// The memory cgroup as a ceiling on pinning: which memory cgroup this process is in (cgroup v1's
// memory controller or cgroup v2), where its hierarchy is mounted, and how much more memory it
// and every ancestor pinpool can see will take before the kernel's OOM killer acts. Pinned pages
// are charged to the cgroup when they are faulted in, and cannot be reclaimed while pinned, so a
// pool that populates past the limit is killed, not refused: the pool and the arena ask here
// first.
//
// Two steps: FindMemoryCgroup (parses /proc/self/cgroup and /proc/self/mountinfo: done once per
// arena) and ReadMemoryCgroup (reads the limit and usage files of the cgroup and its ancestors up
// to the mount point: done before each chunk). The sources are parameters so that tests can
// fabricate both versions in a temporary directory. Pure functions of the files they read;
// thread-safe.
#ifndef PINPOOL_OS_CGROUP_H_
#define PINPOOL_OS_CGROUP_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pinpool::internal::os {

// Where this process's memory cgroup is.
struct MemoryCgroupLocation {
  int version = 0;    // 1 (v1 memory controller), 2 (cgroup2); 0 when none was found
  std::string path;   // the cgroup in its hierarchy, as /proc/self/cgroup says ("/a/b")
  std::string mount;  // the directory the hierarchy (or the part of it visible here) is mounted on
  std::string
      dir;  // the cgroup's own directory: `mount` joined with `path` (less the mount's root)
  std::string note;  // when version is 0: why (no memory controller, not mounted, ...)
};

// Parses the texts of /proc/self/cgroup and /proc/self/mountinfo. A v1 line naming the memory
// controller wins over the v2 line (a hybrid host: the memory controller is bound to v1); a v2
// line is used when a cgroup2 file system is mounted. The mount whose root is the longest prefix
// of the cgroup's path is chosen (a container sees its own part of the hierarchy only).
MemoryCgroupLocation ParseMemoryCgroup(std::string_view proc_self_cgroup,
                                       std::string_view mountinfo);
// The same, of this process's own files.
MemoryCgroupLocation FindMemoryCgroup();

// Limit values at or above this are "no limit": v1 writes 2^63 rounded down to a page
// (9223372036854771712), v2 writes "max".
inline constexpr std::uint64_t kCgroupUnlimited = std::uint64_t{1} << 62;

// The memory cgroup's figures, at the level with the least headroom.
struct MemoryCgroupState {
  MemoryCgroupLocation where;
  bool limited = false;         // some level from the cgroup up to the mount point has a limit
  std::string limit_path;       // that level's path in the hierarchy ("/" for the mount's root)
  std::size_t limit = 0;        // memory.max or memory.limit_in_bytes there
  std::size_t usage = 0;        // memory.current or memory.usage_in_bytes there
  std::size_t reclaimable = 0;  // inactive page cache there (memory.stat), which the kernel
                                // reclaims before it invokes the OOM killer
  int levels = 0;               // cgroups read, the process's own and its ancestors
  std::string error;            // a file that should be there could not be read

  // What the cgroup can still be charged before its OOM killer acts: limit - (usage -
  // reclaimable), 0 when over; nullopt when nothing limits it (or nothing was found).
  std::optional<std::size_t> Headroom() const noexcept {
    if (!limited) return std::nullopt;
    const std::size_t working = usage > reclaimable ? usage - reclaimable : 0;
    return working >= limit ? 0 : limit - working;
  }
};

// Reads the limit, usage and inactive file pages of `where.dir` and every ancestor directory up
// to `where.mount`, keeping the level with the least headroom: an ancestor's usage holds its
// other children's too. v1: memory.limit_in_bytes, memory.usage_in_bytes, memory.stat's
// total_inactive_file, walking up only while the parent has memory.use_hierarchy 1. v2:
// memory.max, memory.current, memory.stat's inactive_file (the root has none of them).
MemoryCgroupState ReadMemoryCgroup(const MemoryCgroupLocation& where);
// FindMemoryCgroup then ReadMemoryCgroup.
MemoryCgroupState QueryMemoryCgroup();

}  // namespace pinpool::internal::os

#endif  // PINPOOL_OS_CGROUP_H_
