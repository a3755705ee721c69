// NUMA placement of chunks: which nodes this machine has, binding a fresh mapping to one node
// before its first touch (mbind MPOL_BIND), moving the calling thread onto a node's CPUs, and
// verifying where the pages really are (move_pages with no target nodes: a query). Raw syscalls,
// no libnuma. A kernel without NUMA support (ENOSYS) has one node, 0, and nothing to bind.
//
// Facts this relies on (measured in the two-node soft-RoCE guest: docs/softroce.md, "NUMA mode",
// and docs/growth.md, "NUMA placement"): a mapping bound before first touch is populated on that
// node by MADV_POPULATE_WRITE and by a registration's pinning faults alike; pinned pages then
// refuse migration. hugetlb pages come from the node's own pool
// (/sys/devices/system/node/nodeN/hugepages), not the global count.
//
// Thread-safe: only the calling thread's affinity changes (RunOnNodeCpus).
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "os/os.h"
#include "util/bytes.h"

namespace pinpool::internal::os {
namespace {

constexpr int kMpolBind = 2;
constexpr unsigned kMpolMfStrict = 1u << 0;
constexpr std::size_t kMaxNodes = 1024;  // the nodemask passed to the kernel covers this many

// "0-3,8,10-11" -> {0,1,2,3,8,10,11}. Empty on a malformed list.
std::vector<int> ParseList(std::string_view text) {
  std::vector<int> out;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  if (text.empty()) return out;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view part = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const std::size_t dash = part.find('-');
    int lo = 0, hi = 0;
    const std::string_view a = part.substr(0, dash);
    if (std::from_chars(a.data(), a.data() + a.size(), lo).ec != std::errc()) return {};
    hi = lo;
    if (dash != std::string_view::npos) {
      const std::string_view b = part.substr(dash + 1);
      if (std::from_chars(b.data(), b.data() + b.size(), hi).ec != std::errc()) return {};
    }
    for (int v = lo; v <= hi; ++v) out.push_back(v);
  }
  return out;
}

}  // namespace

std::vector<int> OnlineNodes() {
  absl::StatusOr<std::string> text = ReadKernelFile("/sys/devices/system/node/online");
  if (!text.ok()) return {0};  // no NUMA support: one node
  std::vector<int> nodes = ParseList(*text);
  if (nodes.empty()) return {0};
  return nodes;
}

std::vector<int> NodeCpus(int node) {
  absl::StatusOr<std::string> text =
      ReadKernelFile(absl::StrFormat("/sys/devices/system/node/node%d/cpulist", node).c_str());
  if (!text.ok()) return {};
  return ParseList(*text);
}

std::size_t NodeFreeHugePages(int node, std::size_t page_bytes) {
  absl::StatusOr<std::string> text = ReadKernelFile(
      absl::StrFormat("/sys/devices/system/node/node%d/hugepages/hugepages-%dkB/free_hugepages",
                      node, page_bytes >> 10)
          .c_str());
  std::size_t v = 0;
  if (!text.ok() ||
      std::from_chars(text->data(), text->data() + text->size(), v).ec != std::errc()) {
    return 0;
  }
  return v;
}

absl::Status CheckNode(int node) {
  const std::vector<int> nodes = OnlineNodes();
  for (int n : nodes) {
    if (n == node) return absl::OkStatus();
  }
  std::string list;
  for (int n : nodes) list += (list.empty() ? "" : ",") + std::to_string(n);
  return absl::InvalidArgumentError(absl::StrFormat(
      "PoolOptions::numa_node is %d, but this machine's online NUMA nodes are %s "
      "(/sys/devices/system/node/online): choose one of them, or kNoNumaNode to place chunks "
      "wherever the kernel puts them",
      node, list));
}

int BindToNode(void* at, std::size_t length, int node) noexcept {
  if (node < 0 || static_cast<std::size_t>(node) >= kMaxNodes) return EINVAL;
  if (const int injected = InjectedFault(Call::kBindNode, length); injected != 0) return injected;
  unsigned long mask[kMaxNodes / (8 * sizeof(unsigned long))] = {};
  mask[node / (8 * sizeof(unsigned long))] = 1ul << (node % (8 * sizeof(unsigned long)));
  if (::syscall(SYS_mbind, at, length, kMpolBind, mask, kMaxNodes + 1, kMpolMfStrict) == 0) {
    return 0;
  }
  // ENOSYS: a kernel without NUMA, where node 0 is all there is.
  return errno == ENOSYS && node == 0 ? 0 : errno;
}

bool RunOnNodeCpus(int node) noexcept {
  const std::vector<int> cpus = NodeCpus(node);
  if (cpus.empty()) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  }
  return ::sched_setaffinity(0, sizeof(set), &set) == 0;
}

absl::StatusOr<NodePlacement> QueryPlacement(const void* at, std::size_t length,
                                             std::size_t page_bytes) {
  // One address per page, at most kSamples of them spread evenly over the range: enough to see a
  // chunk split over nodes, cheap for a 1 GiB chunk of 4 KiB pages.
  constexpr std::size_t kSamples = 4096;
  const std::size_t pages = length / page_bytes;
  const std::size_t step = pages > kSamples ? pages / kSamples : 1;
  std::vector<void*> addrs;
  for (std::size_t i = 0; i < pages; i += step) {
    addrs.push_back(const_cast<char*>(static_cast<const char*>(at)) + i * page_bytes);
  }
  std::vector<int> status(addrs.size(), -1);
  if (::syscall(SYS_move_pages, 0, addrs.size(), addrs.data(), nullptr, status.data(), 0) != 0) {
    if (errno == ENOSYS) {
      return NodePlacement{.node = 0, .sampled = addrs.size(), .on_node = addrs.size()};
    }
    return absl::InternalError(absl::StrFormat("move_pages (query) on a %s chunk: %s",
                                               FormatBytes(length), std::strerror(errno)));
  }
  NodePlacement p;
  p.sampled = addrs.size();
  int first = -1;
  bool mixed = false;
  for (int s : status) {
    if (s < 0) {
      ++p.not_present;
      continue;
    }
    if (first < 0) first = s;
    if (s != first) mixed = true;
  }
  p.node = mixed ? -1 : first;
  for (int s : status) p.on_node += (s >= 0 && s == p.node) ? 1 : 0;
  return p;
}

}  // namespace pinpool::internal::os
