// The UCX domain (pinpool/ucx.h): maps each chunk once with ucp_mem_map on the application's
// context, at the chunk's own address, and (only for trusted peers) packs its rkey once.
//
// Owns: one UcxChunk per mapped chunk (allocated by Register, freed by Deregister) and the
// packed rkey buffer inside it (UCX's allocation, released with ucp_rkey_buffer_release). The
// context is the application's.
//
// Part of libpinpool_ucx, not of the core library: it uses the users' headers and the
// implementer's one (pinpool/provider.h: the memlock wording, the checked chunk records and
// their counters), nothing of the core's internals.
//
// Thread safety: Register and Deregister touch immutable fields, UCX calls that lock the context
// themselves (ucp_mem_map, ucp_rkey_pack, ucp_mem_unmap) and ChunkHandles' atomic counters.
#include <atomic>
#include <cerrno>
#include <utility>

#include "absl/strings/str_format.h"
#include "pinpool/provider.h"
#include "pinpool/ucx.h"

namespace pinpool {
PINPOOL_ABI_BEGIN
namespace {

std::atomic<unsigned> next_domain_number{0};

// `real()`, unless a test's fault hook fails this call (pinpool/provider.h): then the status of
// the errno it chose.
template <typename F>
ucs_status_t Faulting(ProviderCall call, std::size_t length, F real) {
  switch (InjectedProviderFault(call, length)) {
    case 0:
      return real();
    case ENOMEM:
      return UCS_ERR_NO_MEMORY;
    case EAGAIN:
      return UCS_ERR_NO_RESOURCE;
    default:
      return UCS_ERR_IO_ERROR;
  }
}

bool UcxHonoursMemhForRma() {
  unsigned major = 0, minor = 0, release = 0;
  ucp_get_version(&major, &minor, &release);
  return major > 1 || (major == 1 && minor >= 15);
}

}  // namespace

absl::Status UcxError(ucs_status_t status, const std::string& what) {
  const std::string text = absl::StrFormat("%s: %s", what, ucs_status_string(status));
  switch (status) {
    case UCS_OK:
      return absl::OkStatus();
    case UCS_ERR_NO_MEMORY:
    case UCS_ERR_NO_RESOURCE:
    case UCS_ERR_EXCEEDS_LIMIT:
      return absl::ResourceExhaustedError(text);
    case UCS_ERR_INVALID_PARAM:
    case UCS_ERR_INVALID_ADDR:
      return absl::InvalidArgumentError(text);
    case UCS_ERR_UNSUPPORTED:
    case UCS_ERR_NOT_IMPLEMENTED:
      return absl::UnimplementedError(text);
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_NO_DEVICE:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_TIMED_OUT:
    case UCS_ERR_REJECTED:
      return absl::UnavailableError(text);
    case UCS_ERR_OUT_OF_RANGE:
      return absl::OutOfRangeError(text);
    case UCS_ERR_CANCELED:
      return absl::CancelledError(text);
    default:
      break;
  }
  return absl::InternalError(text);
}

UcxDomain::UcxDomain(ucp_context_h context, const UcxDomainOptions& options)
    : context_(context),
      options_(options),
      name_(absl::StrFormat("ucx%d", next_domain_number.fetch_add(1))),
      memh_used_for_rma_(UcxHonoursMemhForRma()),
      chunks_(std::make_unique<ChunkHandles<UcxChunk>>("UCX mapping")) {}

UcxDomain::~UcxDomain() = default;

std::uint64_t UcxDomain::live_registrations() const noexcept { return chunks_->live(); }
std::uint64_t UcxDomain::total_registrations() const noexcept { return chunks_->total(); }
std::uint64_t UcxDomain::failed_deregistrations() const noexcept { return chunks_->failed(); }

absl::StatusOr<std::shared_ptr<UcxDomain>> UcxDomain::Wrap(ucp_context_h context,
                                                           const UcxDomainOptions& options) {
  if (context == nullptr) return absl::InvalidArgumentError("UcxDomain::Wrap: null ucp_context");
  return std::shared_ptr<UcxDomain>(new UcxDomain(context, options));
}

absl::StatusOr<Keys> UcxDomain::Register(void* base, std::size_t length) {
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  params.address = base;
  params.length = length;
  ucp_mem_h memh = nullptr;
  if (const ucs_status_t s = Faulting(ProviderCall::kUcxMap, length,
                                      [&] { return ucp_mem_map(context_, &params, &memh); });
      s != UCS_OK) {
    // UCX reports a refused pin (RLIMIT_MEMLOCK) as "Out of memory", as libibverbs does ENOMEM.
    if (s == UCS_ERR_NO_MEMORY && options_.pinning == Pinning::kLongTerm) {
      return PinRefusedError("ucp_mem_map", ENOMEM, length);
    }
    return UcxError(
        s, absl::StrFormat("ucp_mem_map of a %s chunk with %s", FormatBytes(length), name_));
  }
  auto chunk = std::make_unique<UcxChunk>();
  chunk->memh = memh;
  chunk->base = reinterpret_cast<std::uintptr_t>(base);
  chunk->length = length;
  if (options_.trusted_whole_chunk) {
    void* packed = nullptr;
    std::size_t size = 0;
    if (const ucs_status_t s =
            Faulting(ProviderCall::kUcxPack, length,
                     [&] { return ucp_rkey_pack(context_, memh, &packed, &size); });
        s != UCS_OK) {
      ucp_mem_unmap(context_, memh);
      return UcxError(s, absl::StrFormat("ucp_rkey_pack of a chunk mapped with %s", name_));
    }
    chunk->packed_rkey = static_cast<const std::byte*>(packed);
    chunk->packed_rkey_size = size;
  }
  return chunks_->Publish(std::move(chunk));
}

void UcxDomain::Deregister(const Keys& keys) noexcept {
  const std::unique_ptr<UcxChunk> chunk = chunks_->Take(keys, name_);
  if (chunk == nullptr) return;  // not a mapping of this domain: reported and counted
  if (chunk->packed_rkey != nullptr) {
    ucp_rkey_buffer_release(const_cast<std::byte*>(chunk->packed_rkey));
  }
  if (const ucs_status_t s = ucp_mem_unmap(context_, chunk->memh); s != UCS_OK) {
    chunks_->ReleaseFailed(name_, "ucp_mem_unmap", *chunk, ucs_status_string(s));
  }
}

absl::StatusOr<UcxPeerBlock> ToUcxPeerBlock(const Block& block, std::size_t domain) {
  if (absl::Status s = CheckBlockDomain("ToUcxPeerBlock", block, domain); !s.ok()) return s;
  const UcxChunk& chunk = UcxChunkOf(block, domain);
  if (chunk.packed_rkey == nullptr) {
    return absl::FailedPreconditionError(
        "ToUcxPeerBlock: the UCX domain was not created with trusted_whole_chunk, so no rkey was "
        "packed: UCX rkeys open a whole chunk, not one block (pinpool/ucx.h)");
  }
  return UcxPeerBlock{.address = reinterpret_cast<std::uintptr_t>(block.data()),
                      .length = block.size(),
                      .packed_rkey = chunk.rkey()};
}

PINPOOL_ABI_END
}  // namespace pinpool
