// Probing the transfer engines pinpool has optional domains for: is UCX installed (libucp), which
// transports and devices does it offer here; is libfabric installed, which providers does it
// offer. The libraries are loaded at run time (dlopen) and asked through their own API, so that
// pinpool-info works, and says "absent", on machines without them: installing pinpool never
// makes either mandatory. Their headers are needed at build time only for the answers' layout;
// a pinpool-info built without them says so instead (PINPOOL_INFO_UCX_HEADERS,
// PINPOOL_INFO_FABRIC_HEADERS, set by tools/pinpool_info/CMakeLists.txt).
//
// UCX transports come from UCT, the layer under UCP that lists them without creating a context:
// every component's memory domains, opened one by one, and each one's transport resources.
// Everything loaded stays loaded (dlclose of UCX or libfabric is not safe: both install hooks and
// atexit handlers); every object opened is closed before returning. Single-threaded.
#include <dlfcn.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "info.h"

#if PINPOOL_INFO_UCX_HEADERS
#include <ucp/api/ucp.h>
#include <uct/api/uct.h>
#endif
#if PINPOOL_INFO_FABRIC_HEADERS
#include <rdma/fabric.h>
#endif

namespace pinpool::info {
namespace {

// The function `name` of the loaded library `handle`, typed as `F` (the library's own
// declaration, so that a mismatch does not compile).
template <typename F>
F* Symbol(void* handle, const char* name, std::string& error) {
  void* f = dlsym(handle, name);
  if (f == nullptr && error.empty()) error = absl::StrFormat("no symbol %s", name);
  return reinterpret_cast<F*>(f);
}

ProviderInfo ProbeUcx() {
  ProviderInfo e;
  e.name = "ucx";
  e.library = "libucp.so.0";
  void* ucp = dlopen("libucp.so.0", RTLD_NOW | RTLD_LOCAL);
  void* uct = ucp != nullptr ? dlopen("libuct.so.0", RTLD_NOW | RTLD_LOCAL) : nullptr;
  if (ucp == nullptr || uct == nullptr) {
    e.error = absl::StrFormat("not installed (%s); Debian: apt-get install libucx0", dlerror());
    return e;
  }
  e.present = true;
#if PINPOOL_INFO_UCX_HEADERS
  std::string& err = e.error;
  auto version = Symbol<decltype(ucp_get_version_string)>(ucp, "ucp_get_version_string", err);
  auto query = Symbol<decltype(uct_query_components)>(uct, "uct_query_components", err);
  auto release =
      Symbol<decltype(uct_release_component_list)>(uct, "uct_release_component_list", err);
  auto component_query = Symbol<decltype(uct_component_query)>(uct, "uct_component_query", err);
  auto config_read = Symbol<decltype(uct_md_config_read)>(uct, "uct_md_config_read", err);
  auto config_release = Symbol<decltype(uct_config_release)>(uct, "uct_config_release", err);
  auto md_open = Symbol<decltype(uct_md_open)>(uct, "uct_md_open", err);
  auto md_close = Symbol<decltype(uct_md_close)>(uct, "uct_md_close", err);
  auto tl_query =
      Symbol<decltype(uct_md_query_tl_resources)>(uct, "uct_md_query_tl_resources", err);
  auto tl_release =
      Symbol<decltype(uct_release_tl_resource_list)>(uct, "uct_release_tl_resource_list", err);
  if (!err.empty()) return e;
  e.version = version();
  uct_component_h* components = nullptr;
  unsigned count = 0;
  if (query(&components, &count) != UCS_OK) {
    e.error = "uct_query_components failed";
    return e;
  }
  std::set<std::string> seen;
  for (unsigned c = 0; c < count; ++c) {
    uct_component_attr_t attr{};
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME | UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    if (component_query(components[c], &attr) != UCS_OK) continue;
    std::vector<uct_md_resource_desc_t> mds(attr.md_resource_count);
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    attr.md_resources = mds.data();
    if (mds.empty() || component_query(components[c], &attr) != UCS_OK) continue;
    for (const uct_md_resource_desc_t& md_desc : mds) {
      uct_md_config_t* config = nullptr;
      if (config_read(components[c], nullptr, nullptr, &config) != UCS_OK) continue;
      uct_md_h md = nullptr;
      if (md_open(components[c], md_desc.md_name, config, &md) == UCS_OK) {
        uct_tl_resource_desc_t* tls = nullptr;
        unsigned tl_count = 0;
        if (tl_query(md, &tls, &tl_count) == UCS_OK) {
          for (unsigned t = 0; t < tl_count; ++t) {
            const std::string name = absl::StrFormat("%s/%s", tls[t].tl_name, tls[t].dev_name);
            if (seen.insert(name).second) e.transports.push_back(name);
          }
          tl_release(tls);
        }
        md_close(md);
      }
      config_release(config);
    }
  }
  release(components);
#else
  e.error = "pinpool-info was built without UCX's headers (libucx-dev): transports not listed";
#endif
  return e;
}

ProviderInfo ProbeFabric() {
  ProviderInfo e;
  e.name = "libfabric";
  e.library = "libfabric.so.1";
  void* lib = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    e.error = absl::StrFormat("not installed (%s); Debian: apt-get install libfabric1", dlerror());
    return e;
  }
  e.present = true;
#if PINPOOL_INFO_FABRIC_HEADERS
  std::string& err = e.error;
  auto version = Symbol<decltype(fi_version)>(lib, "fi_version", err);
  auto getinfo = Symbol<decltype(fi_getinfo)>(lib, "fi_getinfo", err);
  auto freeinfo = Symbol<decltype(fi_freeinfo)>(lib, "fi_freeinfo", err);
  if (!err.empty()) return e;
  const std::uint32_t v = version();
  e.version = absl::StrFormat("%d.%d", FI_MAJOR(v), FI_MINOR(v));
  fi_info* list = nullptr;
  if (const int r = getinfo(v, nullptr, nullptr, 0, nullptr, &list); r != 0) {
    e.error = absl::StrFormat("fi_getinfo found no provider (%d)", r);
    return e;
  }
  // Per provider: its endpoint types, and whether any of them has RMA.
  std::map<std::string, std::pair<std::set<std::string>, bool>> providers;
  for (const fi_info* i = list; i != nullptr; i = i->next) {
    if (i->fabric_attr == nullptr || i->fabric_attr->prov_name == nullptr) continue;
    auto& [types, rma] = providers[i->fabric_attr->prov_name];
    if (i->ep_attr != nullptr) {
      switch (i->ep_attr->type) {
        case FI_EP_MSG:
          types.insert("msg");
          break;
        case FI_EP_RDM:
          types.insert("rdm");
          break;
        case FI_EP_DGRAM:
          types.insert("dgram");
          break;
        default:
          break;
      }
    }
    rma = rma || (i->caps & FI_RMA) != 0;
  }
  freeinfo(list);
  for (const auto& [name, offer] : providers) {
    e.providers.push_back(absl::StrFormat("%s: %s%s", name, absl::StrJoin(offer.first, " "),
                                          offer.second ? " rma" : ""));
  }
#else
  e.error =
      "pinpool-info was built without libfabric's headers (libfabric-dev): providers not "
      "listed";
#endif
  return e;
}

}  // namespace

std::vector<ProviderInfo> ProbeProviders() { return {ProbeUcx(), ProbeFabric()}; }

}  // namespace pinpool::info
