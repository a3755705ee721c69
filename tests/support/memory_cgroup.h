// A memory cgroup of a test's own (preflight_test's cgroup cases, the soak's memory pressure):
// made under the hierarchy this process sees, v1's memory controller or cgroup2 (mounted at
// /sys/fs/cgroup first when none is, as root: the soft-RoCE guest's init mounts none), with the
// memory controller enabled for it; its limit set and lifted at will; removed by Remove. No
// GoogleTest in it (the soak is a plain program): why_not() says why none could be made.
#ifndef PINPOOL_TESTS_SUPPORT_MEMORY_CGROUP_H_
#define PINPOOL_TESTS_SUPPORT_MEMORY_CGROUP_H_

#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "os/cgroup.h"

namespace pinpool::testing {

class MemoryCgroup {
 public:
  // A cgroup named `name` under the memory hierarchy's mount point; none when why_not() is not
  // empty.
  explicit MemoryCgroup(const std::string& name) {
    internal::os::MemoryCgroupLocation where = internal::os::FindMemoryCgroup();
    if (where.version == 0) where = MountCgroup2(where.note);
    if (where.version == 0) return;
    if (where.version == 2 &&
        Read(where.mount + "/cgroup.subtree_control").find("memory") == std::string::npos &&
        !Write(where.mount + "/cgroup.subtree_control", "+memory")) {
      why_not_ = "cannot enable +memory in " + where.mount + "/cgroup.subtree_control";
      return;
    }
    const std::string dir = where.mount + "/" + name;
    if (::mkdir(dir.c_str(), 0755) != 0) {
      why_not_ = "cannot create " + dir + ": " + std::strerror(errno);
      return;
    }
    dir_ = dir;
    version_ = where.version;
  }
  MemoryCgroup(const MemoryCgroup&) = delete;
  MemoryCgroup& operator=(const MemoryCgroup&) = delete;

  const std::string& why_not() const { return why_not_; }
  int version() const { return version_; }  // 0: none
  const std::string& dir() const { return dir_; }

  // Moves the calling process in.
  bool Enter() const { return Write(dir_ + "/cgroup.procs", std::to_string(::getpid())); }
  // Sets the limit (memory.limit_in_bytes or memory.max), or lifts it (nullopt).
  bool Limit(std::optional<std::uint64_t> bytes) const {
    if (version_ == 1)
      return Write(dir_ + "/memory.limit_in_bytes", bytes ? std::to_string(*bytes) : "-1");
    return Write(dir_ + "/memory.max", bytes ? std::to_string(*bytes) : "max");
  }
  // What it is charged now.
  std::uint64_t Usage() const {
    std::ifstream f(dir_ + (version_ == 1 ? "/memory.usage_in_bytes" : "/memory.current"));
    std::uint64_t v = 0;
    f >> v;
    return v;
  }
  // SIGKILLs every process still in it (what a failed run leaves: the children of an owner that
  // died) and waits up to a second for them to leave.
  void KillAll() const {
    if (dir_.empty()) return;
    for (int i = 0; i < 100; ++i) {
      std::ifstream procs(dir_ + "/cgroup.procs");
      bool any = false;
      for (pid_t pid; procs >> pid; any = true) ::kill(pid, SIGKILL);
      if (!any) return;
      ::usleep(10000);
    }
  }
  // Removes it (no process may be in it any more); true when removed, or there was none.
  bool Remove() {
    if (dir_.empty()) return true;
    if (::rmdir(dir_.c_str()) != 0) return false;
    dir_.clear();
    return true;
  }

  static bool Write(const std::string& path, const std::string& text) {
    std::ofstream f(path);
    f << text;
    f.flush();
    return static_cast<bool>(f);
  }
  static std::string Read(const std::string& path) {
    std::ifstream f(path);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }

 private:
  // No cgroup file system mounted (the guest's init mounts none): cgroup2 where systemd would.
  internal::os::MemoryCgroupLocation MountCgroup2(const std::string& note) {
    if (::geteuid() != 0) {
      why_not_ = "no memory cgroup here (" + note + ") and mounting one needs root";
      return {};
    }
    if (::mount("cgroup2", "/sys/fs/cgroup", "cgroup2", 0, nullptr) != 0) {
      why_not_ = "no memory cgroup here (" + note +
                 ") and mount -t cgroup2 failed: " + std::strerror(errno);
      return {};
    }
    internal::os::MemoryCgroupLocation where = internal::os::FindMemoryCgroup();
    if (where.version == 0) why_not_ = "cgroup2 mounted but not found: " + where.note;
    return where;
  }

  int version_ = 0;
  std::string dir_;
  std::string why_not_;
};

}  // namespace pinpool::testing

#endif  // PINPOOL_TESTS_SUPPORT_MEMORY_CGROUP_H_
