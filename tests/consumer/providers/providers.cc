// A minimal application of pinpool's optional provider libraries, built out of tree against an
// *installed* pinpool by tests/consumer/providers.sh: through find_package(pinpool CONFIG
// COMPONENTS ...) and through pkg-config (pinpool-ucx, pinpool-fabric). For each provider it was
// built with (PINPOOL_CONSUMER_UCX, PINPOOL_CONSUMER_FABRIC) it opens the provider the way an
// application does (a UCX context; libfabric's tcp provider, which every host has), wraps it in
// pinpool's domain, creates a pool on it and checks that a block carries the provider's handle.
// Prints "providers consumer OK" and exits 0, or says what failed and exits 1.
#include <cstdio>
#include <cstring>
#include <memory>
#include <utility>

#include "pinpool/pinpool.h"
#if PINPOOL_CONSUMER_UCX
#include "pinpool/ucx.h"
#endif
#if PINPOOL_CONSUMER_FABRIC
#include "pinpool/fabric.h"
#endif

namespace {

int Fail(const char* what) {
  std::fprintf(stderr, "providers consumer: FAILED: %s\n", what);
  return 1;
}

absl::StatusOr<std::unique_ptr<pinpool::Pool>> MakePool(std::shared_ptr<pinpool::Domain> d) {
  pinpool::PoolOptions o;
  o.chunk_size = 2 * pinpool::kMiB;
  o.budget = 4 * pinpool::kMiB;
  o.initial_size = 2 * pinpool::kMiB;
  o.domains = {std::move(d)};
  return pinpool::Pool::Create(std::move(o));
}

}  // namespace

int main() {
  int providers = 0;
#if PINPOOL_CONSUMER_UCX
  {
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_RMA;
    ucp_context_h context = nullptr;
    if (ucp_init(&params, nullptr, &context) != UCS_OK) return Fail("ucp_init");
    auto domain = pinpool::UcxDomain::Wrap(context, {.pinning = pinpool::Pinning::kNone});
    if (!domain.ok()) return Fail("UcxDomain::Wrap");
    {
      auto pool = MakePool(*domain);
      if (!pool.ok()) return Fail(pool.status().ToString().c_str());
      pinpool::Block b = (*pool)->Allocate(1000);
      if (!b || pinpool::UcxChunkOf(b).memh == nullptr) return Fail("no UCX memory handle");
      (*pool)->Deallocate(b);
    }
    ucp_cleanup(context);
    std::printf("ucx: %s, a block carries its chunk's memory handle\n", ucp_get_version_string());
    ++providers;
  }
#endif
#if PINPOOL_CONSUMER_FABRIC
  {
    fi_info* hints = fi_allocinfo();
    hints->caps = FI_RMA;
    hints->ep_attr->type = FI_EP_RDM;
    hints->fabric_attr->prov_name = strdup("tcp");
    fi_info* info = nullptr;
    const int r = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info);
    fi_freeinfo(hints);
    if (r != 0) return Fail("fi_getinfo(tcp)");
    fid_fabric* fabric = nullptr;
    fid_domain* domain = nullptr;
    if (fi_fabric(info->fabric_attr, &fabric, nullptr) != 0 ||
        fi_domain(fabric, info, &domain, nullptr) != 0) {
      return Fail("fi_fabric/fi_domain");
    }
    auto d = pinpool::FabricDomain::Wrap(domain, info, {.pinning = pinpool::Pinning::kNone});
    if (!d.ok()) return Fail("FabricDomain::Wrap");
    {
      auto pool = MakePool(*d);
      if (!pool.ok()) return Fail(pool.status().ToString().c_str());
      pinpool::Block b = (*pool)->Allocate(1000);
      if (!b || pinpool::FabricChunkOf(b).mr == nullptr) return Fail("no libfabric registration");
      (*pool)->Deallocate(b);
    }
    fi_close(&domain->fid);
    fi_close(&fabric->fid);
    fi_freeinfo(info);
    std::printf("fabric: %s, a block carries its chunk's registration\n", (*d)->name().c_str());
    ++providers;
  }
#endif
  if (providers == 0) return Fail("built with no provider");
  std::printf("pinpool %s providers consumer OK\n", PINPOOL_VERSION_STRING);
  return 0;
}
