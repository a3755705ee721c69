// FabricPair: two sides of a libfabric connection in one process, as two processes would have
// them: one fabric, and per side its own fabric domain, address vector, completion queue and
// reliable-datagram endpoint (FI_EP_RDM), each side knowing the other's address. The target's
// completion queue is read by a thread of its own while the pair lives: tcp and rxm move data
// only when the target calls into the provider. The one such set-up of the libfabric domain's
// tests (tests/providers) and the providers benchmark (target pinpool_fabric_pair); not part of the
// library: connecting endpoints is the application's business.
//
// Thread safety: the progress thread reads the target's CQ only, until StopTargetProgress or
// destruction; everything else belongs to the thread that drives the pair (a test's, the
// benchmark's). Completions on the target's CQ are consumed by the progress thread (no user posts
// anything on the target side).
#ifndef PINPOOL_SUPPORT_FABRIC_PAIR_H_
#define PINPOOL_SUPPORT_FABRIC_PAIR_H_

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>

namespace pinpool::testing {

inline constexpr std::uint64_t kFabricCaps =
    FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

class FabricPair {
 public:
  struct Side {
    fid_domain* domain = nullptr;
    fid_av* av = nullptr;
    fid_cq* cq = nullptr;
    fid_ep* ep = nullptr;
    fi_addr_t peer = FI_ADDR_UNSPEC;
  };

  // Opens both sides on `provider` ("tcp", "shm", "verbs", ...). Returns the first failure's text,
  // empty on success.
  std::string Open(const char* provider) {
    fi_info* hints = fi_allocinfo();
    hints->caps = kFabricCaps;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    hints->domain_attr->threading = FI_THREAD_SAFE;
    hints->fabric_attr->prov_name = strdup(provider);
    int r = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info_);
    fi_freeinfo(hints);
    if (r != 0) return std::string("fi_getinfo(") + provider + "): " + fi_strerror(-r);
    if ((r = fi_fabric(info_->fabric_attr, &fabric_, nullptr)) != 0) return Error("fi_fabric", r);
    for (Side* s : {&target, &initiator}) {
      if (std::string e = OpenSide(*s); !e.empty()) return e;
    }
    if (std::string e = Introduce(target, initiator); !e.empty()) return e;
    if (std::string e = Introduce(initiator, target); !e.empty()) return e;
    progress_ = std::thread([this] {
      fi_cq_tagged_entry e;
      while (!stop_.load(std::memory_order_relaxed)) fi_cq_read(target.cq, &e, 1);
    });
    return {};
  }

  ~FabricPair() {
    StopTargetProgress();
    for (Side* s : {&initiator, &target}) {
      if (s->ep != nullptr) fi_close(&s->ep->fid);
      if (s->av != nullptr) fi_close(&s->av->fid);
      if (s->cq != nullptr) fi_close(&s->cq->fid);
      if (s->domain != nullptr) fi_close(&s->domain->fid);
    }
    if (fabric_ != nullptr) fi_close(&fabric_->fid);
    if (info_ != nullptr) fi_freeinfo(info_);
  }

  const fi_info* info() const { return info_; }

  // Ends the target's progress thread (after a first transfer connected the sides, one-sided
  // RDMA needs no target progress; a spinning thread would only disturb measurements).
  void StopTargetProgress() {
    stop_ = true;
    if (progress_.joinable()) progress_.join();
  }

  Side target, initiator;

 private:
  static std::string Error(const char* what, int r) {
    return std::string(what) + ": " + fi_strerror(-r);
  }
  std::string OpenSide(Side& s) {
    int r;
    if ((r = fi_domain(fabric_, info_, &s.domain, nullptr)) != 0) return Error("fi_domain", r);
    fi_av_attr av{};
    av.type = FI_AV_TABLE;
    if ((r = fi_av_open(s.domain, &av, &s.av, nullptr)) != 0) return Error("fi_av_open", r);
    fi_cq_attr cq{};
    cq.format = FI_CQ_FORMAT_CONTEXT;
    cq.size = 256;
    if ((r = fi_cq_open(s.domain, &cq, &s.cq, nullptr)) != 0) return Error("fi_cq_open", r);
    if ((r = fi_endpoint(s.domain, info_, &s.ep, nullptr)) != 0) return Error("fi_endpoint", r);
    if ((r = fi_ep_bind(s.ep, &s.av->fid, 0)) != 0) return Error("fi_ep_bind(av)", r);
    if ((r = fi_ep_bind(s.ep, &s.cq->fid, FI_TRANSMIT | FI_RECV)) != 0) {
      return Error("fi_ep_bind(cq)", r);
    }
    if ((r = fi_enable(s.ep)) != 0) return Error("fi_enable", r);
    return {};
  }
  // `from` learns `to`'s address.
  static std::string Introduce(Side& from, const Side& to) {
    char name[256];
    std::size_t len = sizeof(name);
    if (int r = fi_getname(&to.ep->fid, name, &len); r != 0) return Error("fi_getname", r);
    if (fi_av_insert(from.av, name, 1, &from.peer, 0, nullptr) != 1) return "fi_av_insert failed";
    return {};
  }

  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  std::thread progress_;
  std::atomic<bool> stop_{false};
};

}  // namespace pinpool::testing

#endif  // PINPOOL_SUPPORT_FABRIC_PAIR_H_
