// The memory cgroup's location and headroom (cgroup.h has the contract).
#include "os/cgroup.h"

#include <algorithm>
#include <charconv>
#include <string>
#include <vector>

#include "os/os.h"

namespace pinpool::internal::os {
namespace {

// `text` cut at every `sep`; with `skip_empty`, empty pieces are dropped; at most `max_pieces`
// (the last one keeps the rest).
std::vector<std::string_view> Split(std::string_view text, char sep, bool skip_empty = false,
                                    std::size_t max_pieces = SIZE_MAX) {
  std::vector<std::string_view> pieces;
  while (true) {
    const std::size_t at =
        pieces.size() + 1 >= max_pieces ? std::string_view::npos : text.find(sep);
    const std::string_view piece = text.substr(0, at);
    if (!skip_empty || !piece.empty()) pieces.push_back(piece);
    if (at == std::string_view::npos) return pieces;
    text.remove_prefix(at + 1);
  }
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

// A limit or usage file: a number, or "max" (v2) for none. nullopt when unreadable.
std::optional<std::uint64_t> ParseCgroupNumber(std::string_view text) {
  text = Trim(text);
  if (text == "max") return kCgroupUnlimited;
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// "key value" lines of memory.stat.
std::optional<std::uint64_t> StatValue(std::string_view stat, std::string_view key) {
  for (std::string_view line : Split(stat, '\n')) {
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ' ') {
      return ParseCgroupNumber(line.substr(key.size() + 1));
    }
  }
  return std::nullopt;
}

// Whether `path` is `prefix` or lies below it ("/a" holds "/a/b", not "/ab").
bool Within(std::string_view path, std::string_view prefix) {
  if (prefix == "/") return true;
  return path.substr(0, prefix.size()) == prefix &&
         (path.size() == prefix.size() || path[prefix.size()] == '/');
}

std::optional<std::string> ReadFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadKernelFile(path.c_str());
  if (!text.ok()) return std::nullopt;
  return *std::move(text);
}

}  // namespace

MemoryCgroupLocation ParseMemoryCgroup(std::string_view proc_self_cgroup,
                                       std::string_view mountinfo) {
  MemoryCgroupLocation where;
  // /proc/self/cgroup: "ID:controllers:path"; v1 memory is "N:memory:/p" (or with other
  // controllers beside it, "N:cpu,memory:/p"), v2 is "0::/p".
  std::optional<std::string> v1_path;
  std::optional<std::string> v2_path;
  for (std::string_view line : Split(proc_self_cgroup, '\n')) {
    std::vector<std::string_view> f = Split(line, ':', false, 3);
    if (f.size() != 3) continue;
    if (f[1].empty() && f[0] == "0") {
      v2_path = std::string(Trim(f[2]));
      continue;
    }
    for (std::string_view c : Split(f[1], ',')) {
      if (c == "memory") v1_path = std::string(Trim(f[2]));
    }
  }
  if (!v1_path && !v2_path) {
    where.note = "this process is in no cgroup (/proc/self/cgroup lists none)";
    return where;
  }
  const int version = v1_path ? 1 : 2;
  const std::string path = v1_path ? *v1_path : *v2_path;
  // mountinfo: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER".
  std::string best_root;
  std::string best_mount;
  bool found = false;
  for (std::string_view line : Split(mountinfo, '\n')) {
    std::vector<std::string_view> f = Split(line, ' ', true);
    const auto dash = std::find(f.begin(), f.end(), "-");
    if (f.size() < 5 || dash == f.end() || f.end() - dash < 4) continue;
    const std::string_view fstype = dash[1];
    const std::string_view super = dash[3];
    bool match = false;
    if (version == 2) {
      match = fstype == "cgroup2";
    } else if (fstype == "cgroup") {
      for (std::string_view o : Split(super, ',')) match = match || o == "memory";
    }
    if (!match) continue;
    const std::string_view root = f[3];
    if (!Within(path, root)) continue;
    if (found && root.size() <= best_root.size()) continue;
    best_root = std::string(root);
    best_mount = std::string(f[4]);
    found = true;
  }
  if (!found) {
    where.note = version == 1
                     ? "the v1 memory controller is not mounted where this process can see it"
                     : "no cgroup2 file system is mounted where this process can see it";
    return where;
  }
  where.version = version;
  where.path = path;
  where.mount = best_mount;
  const std::string_view below =
      best_root == "/" ? std::string_view(path) : std::string_view(path).substr(best_root.size());
  where.dir = best_mount;
  if (!below.empty() && below != "/") where.dir += std::string(below);
  return where;
}

MemoryCgroupLocation FindMemoryCgroup() {
  const std::optional<std::string> cgroup = ReadFile("/proc/self/cgroup");
  const std::optional<std::string> mountinfo = ReadFile("/proc/self/mountinfo");
  if (!cgroup || !mountinfo) {
    MemoryCgroupLocation where;
    where.note = "/proc/self/cgroup or /proc/self/mountinfo cannot be read";
    return where;
  }
  return ParseMemoryCgroup(*cgroup, *mountinfo);
}

MemoryCgroupState ReadMemoryCgroup(const MemoryCgroupLocation& where) {
  MemoryCgroupState state;
  state.where = where;
  if (where.version == 0) return state;
  const bool v1 = where.version == 1;
  const char* limit_file = v1 ? "/memory.limit_in_bytes" : "/memory.max";
  const char* usage_file = v1 ? "/memory.usage_in_bytes" : "/memory.current";
  const char* inactive_key = v1 ? "total_inactive_file" : "inactive_file";
  std::string dir = where.dir;
  std::string path = where.path.empty() ? "/" : where.path;
  std::optional<std::size_t> best;
  while (true) {
    ++state.levels;
    const std::optional<std::string> limit_text = ReadFile(dir + limit_file);
    const std::optional<std::uint64_t> limit =
        limit_text ? ParseCgroupNumber(*limit_text) : std::nullopt;
    // A v2 root has no memory.max; any other level without one (or with an unreadable one)
    // cannot be judged: say so rather than guess.
    if (!limit && dir != where.mount && state.error.empty()) {
      state.error = dir + limit_file + " cannot be read";
    }
    if (limit && *limit < kCgroupUnlimited) {
      const std::optional<std::string> usage_text = ReadFile(dir + usage_file);
      const std::uint64_t usage = usage_text ? ParseCgroupNumber(*usage_text).value_or(0) : 0;
      const std::optional<std::string> stat = ReadFile(dir + "/memory.stat");
      const std::uint64_t inactive = stat ? StatValue(*stat, inactive_key).value_or(0) : 0;
      MemoryCgroupState level;
      level.limited = true;
      level.limit = *limit;
      level.usage = usage;
      level.reclaimable = std::min(inactive, usage);
      const std::size_t headroom = *level.Headroom();
      if (!best || headroom < *best) {
        best = headroom;
        state.limited = true;
        state.limit_path = path;
        state.limit = level.limit;
        state.usage = level.usage;
        state.reclaimable = level.reclaimable;
      }
    }
    if (dir == where.mount || dir.size() <= where.mount.size()) break;
    const std::string parent = dir.substr(0, dir.rfind('/'));
    if (v1) {
      // A v1 parent with use_hierarchy 0 is not charged for its children (kernels before 5.16).
      const std::optional<std::string> h = ReadFile(parent + "/memory.use_hierarchy");
      if (h && Trim(*h) == "0") break;
    }
    dir = parent.empty() ? "/" : parent;
    const std::size_t slash = path.rfind('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
  return state;
}

MemoryCgroupState QueryMemoryCgroup() { return ReadMemoryCgroup(FindMemoryCgroup()); }

}  // namespace pinpool::internal::os
