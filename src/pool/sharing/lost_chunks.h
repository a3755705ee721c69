// TakeBack: a pool's record of the chunks it gives back because their backing must go (the
// application's Pool::GiveBack, or a broken lease on a chunk's file found by the background work;
// docs/backing.md, "Taking memory back"), and of what it must tell the application. The steps are
// Pool's (pool/take_back.cc): this holds what lasts between them.
//
// A give back may wait for grants whose revocation the holders confirm only when the application
// polls their completions: then it returns kDeadlineExceeded and the chunk stays pending
// (withdrawn: nothing is handed out from it, its frees are ignored), to be finished by a later
// call or the background work.
//
// Thread safety: `give_mu` serializes give backs (one at a time per pool, held while one waits
// for revocations) and guards `pending`; `mu`, held briefly, guards the reports and the counters
// (so GetStats and TakeLostChunks never wait for a give back); lost_block_frees is counted
// lock-free by the free path. Lock order: give_mu, then the grant lock, then mu.
#ifndef PINPOOL_POOL_SHARING_LOST_CHUNKS_H_
#define PINPOOL_POOL_SHARING_LOST_CHUNKS_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "pinpool/take_back.h"
#include "util/mutex.h"

namespace pinpool::internal {

struct TakeBack {
  struct Pending {
    std::string reason;
    bool forgotten = false;       // the heap has forgotten the chunk (lost is complete)
    std::vector<LostBlock> lost;  // its live blocks, as the heap found them
  };
  Mutex give_mu;
  std::map<std::uint32_t, Pending> pending ABSL_GUARDED_BY(give_mu);  // withdrawn, not unmapped
  Mutex mu;
  std::vector<LostChunk> reports ABSL_GUARDED_BY(mu);  // for Pool::TakeLostChunks
  std::uint64_t chunks_given_back ABSL_GUARDED_BY(mu) = 0;
  std::uint64_t lost_blocks ABSL_GUARDED_BY(mu) = 0;
  std::uint64_t lost_bytes ABSL_GUARDED_BY(mu) = 0;
  std::atomic<std::uint64_t> lost_block_frees{0};
};

}  // namespace pinpool::internal

#endif  // PINPOOL_POOL_SHARING_LOST_CHUNKS_H_
