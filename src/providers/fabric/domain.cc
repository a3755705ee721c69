// The libfabric domain (pinpool/fabric.h): registers each chunk once with the application's
// fid_domain, as the provider's mr_mode asks, and learns per chunk whether the provider shares
// registrations (a registration cache).
//
// Owns: one FabricChunk per registered chunk (allocated by Register, freed by Deregister) and
// the fid_mr in it. The fid_domain is the application's.
//
// Invariants: keys pinpool requests (providers without FI_MR_PROV_KEY) come from one counter per
// FabricDomain and are never requested twice; a key the provider reports as taken (FI_ENOKEY) is
// skipped. Range enforcement per provider is a table of measurements (kRangeEnforced), matched
// on the core provider's name; a provider not in it is reported as not enforcing.
//
// Part of libpinpool_fabric, not of the core library: it uses the users' headers and the
// implementer's one (pinpool/provider.h), nothing of the core's internals. Thread safety:
// immutable fields, atomics (ChunkHandles' counters among them), and libfabric calls on a
// thread-safe domain.
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

#include "absl/strings/str_format.h"
#include "pinpool/fabric.h"
#include "pinpool/provider.h"

namespace pinpool {
PINPOOL_ABI_BEGIN
namespace {

std::atomic<unsigned> next_domain_number{0};

// Core providers measured to keep a peer inside a registration (wrong key or out of range is
// refused): verbs (the device checks), tcp (the target drops the access; the connection then
// fails), sockets (an access error). shm with cross-memory attach, its default, was measured NOT
// to check bounds (a write crossing a registration's end lands past it). docs/providers.md has the
// measurements; tests/providers re-measure tcp, sockets and shm on every run (fabric_domain_test),
// verbs in the guest (fabric_rdma_test).
constexpr std::string_view kRangeEnforced[] = {"verbs", "tcp", "sockets"};

// "tcp;ofi_rxm" -> "tcp": the core provider of a utility stack.
std::string_view CoreProvider(std::string_view name) {
  const std::size_t semicolon = name.find(';');
  return semicolon == std::string_view::npos ? name : name.substr(0, semicolon);
}

bool EnforcesRanges(std::string_view provider) {
  const std::string_view core = CoreProvider(provider);
  for (std::string_view p : kRangeEnforced) {
    if (core == p) return true;
  }
  return false;
}

// The old enumerated modes, as the bits they stand for.
std::uint64_t ExpandMrMode(std::uint64_t mode) {
  if (mode == FI_MR_BASIC) return FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  if (mode == FI_MR_SCALABLE) return 0;
  return mode & ~std::uint64_t{FI_MR_BASIC | FI_MR_SCALABLE};
}

std::uint64_t KeyLimit(std::size_t key_size) {
  return key_size >= 8 ? UINT64_MAX : (std::uint64_t{1} << (8 * key_size)) - 1;
}

std::uint64_t RemoteAccessBits(const RemoteRights& r) {
  std::uint64_t bits = 0;
  if (r.read || r.atomic) bits |= FI_REMOTE_READ;
  if (r.write || r.atomic) bits |= FI_REMOTE_WRITE;
  return bits;
}

constexpr std::uint64_t kLocalAccess = FI_READ | FI_WRITE | FI_SEND | FI_RECV;

}  // namespace

absl::Status FabricError(int ret, const std::string& what) {
  if (ret == 0) return absl::OkStatus();
  const int err = ret < 0 ? -ret : ret;
  const std::string text = absl::StrFormat("%s: %s (%d)", what, fi_strerror(err), -err);
  switch (err) {
    case FI_EAGAIN:
      return absl::UnavailableError(text);
    case FI_ENOMEM:
    case FI_ENOSPC:
    case FI_ETOOSMALL:
      return absl::ResourceExhaustedError(text);
    case FI_EINVAL:
    case FI_EBADF:
    case FI_EKEYREJECTED:
      return absl::InvalidArgumentError(text);
    case FI_ENOSYS:
    case FI_EOPNOTSUPP:
      return absl::UnimplementedError(text);
    case FI_EACCES:
    case FI_EPERM:
      return absl::PermissionDeniedError(text);
    case FI_ENOKEY:
      return absl::AlreadyExistsError(text);
    case FI_ENOTCONN:
    case FI_ECONNRESET:
    case FI_ECONNREFUSED:
    case FI_ETIMEDOUT:
      return absl::UnavailableError(text);
    default:
      break;
  }
  return absl::InternalError(text);
}

FabricDomain::FabricDomain(fid_domain* domain, const fi_info* info,
                           const FabricDomainOptions& options, std::uint64_t mr_mode,
                           std::uint64_t first_key)
    : domain_(domain),
      options_(options),
      provider_(info->fabric_attr != nullptr && info->fabric_attr->prov_name != nullptr
                    ? info->fabric_attr->prov_name
                    : "unknown"),
      mr_mode_(mr_mode),
      key_size_(info->domain_attr->mr_key_size == 0 ? 8 : info->domain_attr->mr_key_size),
      max_msg_size_(info->ep_attr != nullptr && info->ep_attr->max_msg_size != 0
                        ? info->ep_attr->max_msg_size
                        : SIZE_MAX),
      range_enforced_(EnforcesRanges(provider_)),
      name_(absl::StrFormat("fabric%d/%s/%s", next_domain_number.fetch_add(1), provider_,
                            info->domain_attr->name != nullptr ? info->domain_attr->name : "?")),
      next_key_(first_key),
      chunks_(std::make_unique<ChunkHandles<FabricChunk>>("libfabric registration")) {}

FabricDomain::~FabricDomain() = default;

std::uint64_t FabricDomain::live_registrations() const noexcept { return chunks_->live(); }
std::uint64_t FabricDomain::total_registrations() const noexcept { return chunks_->total(); }
std::uint64_t FabricDomain::failed_deregistrations() const noexcept { return chunks_->failed(); }

absl::StatusOr<std::shared_ptr<FabricDomain>> FabricDomain::Wrap(
    fid_domain* domain, const fi_info* info, const FabricDomainOptions& options) {
  if (domain == nullptr) return absl::InvalidArgumentError("FabricDomain::Wrap: null fid_domain");
  if (info == nullptr || info->domain_attr == nullptr) {
    return absl::InvalidArgumentError(
        "FabricDomain::Wrap: null fi_info (pass the one the domain was opened from)");
  }
  const std::uint64_t mode = ExpandMrMode(info->domain_attr->mr_mode);
  if ((mode & FI_MR_RAW) != 0) {
    return absl::UnimplementedError(absl::StrFormat(
        "FabricDomain::Wrap: provider %s uses raw keys (FI_MR_RAW), longer than 64 bits; pinpool "
        "supports 64-bit keys only",
        info->fabric_attr->prov_name));
  }
  if ((mode & FI_MR_ENDPOINT) != 0 && options.endpoint == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "FabricDomain::Wrap: provider %s binds registrations to an endpoint (FI_MR_ENDPOINT): "
        "set FabricDomainOptions::endpoint",
        info->fabric_attr->prov_name));
  }
  const std::size_t key_size = info->domain_attr->mr_key_size == 0
                                   ? 8
                                   : std::min<std::size_t>(info->domain_attr->mr_key_size, 8);
  std::uint64_t first_key = options.first_key;
  if (first_key == 0) first_key = std::uint64_t{0x7070} << (8 * key_size - 16);
  if ((mode & FI_MR_PROV_KEY) == 0 && first_key > KeyLimit(key_size)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "FabricDomain::Wrap: first_key %#x does not fit the provider's %d-byte keys", first_key,
        key_size));
  }
  return std::shared_ptr<FabricDomain>(new FabricDomain(domain, info, options, mode, first_key));
}

absl::StatusOr<fid_mr*> FabricDomain::RegisterRange(const void* address, std::size_t length,
                                                    std::uint64_t access, fid_ep* endpoint) const {
  iovec iov{const_cast<void*>(address), length};
  fi_mr_attr attr{};
  attr.mr_iov = &iov;
  attr.iov_count = 1;
  attr.access = access;
  fid_mr* mr = nullptr;
  int ret = 0;
  // Keys the provider reports as taken (the application's own registrations) are skipped; a
  // bounded number, so that a provider that rejects every key cannot loop for ever.
  for (int attempt = 0; attempt < 4096; ++attempt) {
    if (!provider_keys()) {
      attr.requested_key = next_key_.fetch_add(1, std::memory_order_relaxed);
      if (attr.requested_key > KeyLimit(key_size_)) {
        return absl::ResourceExhaustedError(absl::StrFormat(
            "%s: pinpool ran out of %d-byte keys to request (the next would be %#x)", name_,
            key_size_, attr.requested_key));
      }
    }
    const int injected = InjectedProviderFault(ProviderCall::kFabricRegister, length);
    ret = injected != 0 ? -injected : fi_mr_regattr(domain_, &attr, 0, &mr);
    if (ret != -FI_ENOKEY || provider_keys()) break;
  }
  if (ret != 0) {
    if ((ret == -FI_ENOMEM || ret == -ENOMEM) && options_.pinning == Pinning::kLongTerm) {
      return PinRefusedError("fi_mr_regattr", ENOMEM, length);
    }
    return FabricError(ret,
                       absl::StrFormat("fi_mr_regattr of %s with %s", FormatBytes(length), name_));
  }
  if ((mr_mode_ & FI_MR_ENDPOINT) != 0) {
    if (endpoint == nullptr) endpoint = options_.endpoint;
    const int injected = InjectedProviderFault(ProviderCall::kFabricBind, length);
    int r = injected != 0 ? -injected : fi_mr_bind(mr, &endpoint->fid, 0);
    if (r == 0) r = fi_mr_enable(mr);
    if (r != 0) {
      fi_close(&mr->fid);
      return FabricError(r, absl::StrFormat("binding a registration of %s to its endpoint", name_));
    }
  }
  return mr;
}

absl::StatusOr<Keys> FabricDomain::Register(void* base, std::size_t length) {
  const std::uint64_t access = kLocalAccess | RemoteAccessBits(options_.trusted_whole_chunk);
  absl::StatusOr<fid_mr*> mr = RegisterRange(base, length, access, nullptr);
  if (!mr.ok()) return mr.status();
  auto chunk = std::make_unique<FabricChunk>();
  chunk->mr = *mr;
  chunk->desc = fi_mr_desc(*mr);
  chunk->key = fi_mr_key(*mr);
  chunk->base = reinterpret_cast<std::uintptr_t>(base);
  chunk->length = length;
  chunk->domain = this;
  // Does the provider share registrations? Register the chunk's first page on its own (local
  // access only): a provider that returns the chunk's key for it served it from a cache.
  // Requested keys always differ, so only provider keys can tell.
  if (provider_keys()) {
    const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    absl::StatusOr<fid_mr*> probe =
        RegisterRange(base, std::min(page, length), kLocalAccess, nullptr);
    if (probe.ok()) {
      chunk->shared = fi_mr_key(*probe) == chunk->key;
      fi_close(&(*probe)->fid);
    }
    if (chunk->shared) shared_.store(true);
  }
  return chunks_->Publish(std::move(chunk));
}

void FabricDomain::Deregister(const Keys& keys) noexcept {
  const std::unique_ptr<FabricChunk> chunk = chunks_->Take(keys, name_);
  if (chunk == nullptr) return;  // not a registration of this domain: reported and counted
  if (const int r = fi_close(&chunk->mr->fid); r != 0) {
    chunks_->ReleaseFailed(name_, "fi_close", *chunk, fi_strerror(-r));
  }
}

absl::StatusOr<FabricRemote> ToFabricRemote(const Block& block, std::size_t domain) {
  if (absl::Status s = CheckBlockDomain("ToFabricRemote", block, domain); !s.ok()) return s;
  const FabricChunk& chunk = FabricChunkOf(block, domain);
  if (!chunk.domain->options().trusted_whole_chunk.any()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "ToFabricRemote: %s registers chunks for local access only; grant the block to the peer "
        "(FabricRemoteAccess), or create the domain with trusted_whole_chunk for trusted peers",
        chunk.domain->name()));
  }
  const auto address = reinterpret_cast<std::uintptr_t>(block.data());
  return FabricRemote{
      .address = chunk.domain->virtual_addressing() ? address : address - chunk.base,
      .key = chunk.key,
      .length = block.size()};
}

PINPOOL_ABI_END
}  // namespace pinpool
