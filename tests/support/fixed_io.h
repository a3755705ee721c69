// What the io_uring tests share to move a block's bytes through the device path: a scratch file
// on a filesystem io_uring does real I/O on (never tmpfs, whose reads would be page-cache copies
// only), and one READ_FIXED / WRITE_FIXED of a whole block through its fixed-buffer index. Used
// by tests/domain/io_uring_test.cc and tests/os/backing_test.cc. Not thread-safe: one test
// thread each.
#ifndef PINPOOL_TESTS_SUPPORT_FIXED_IO_H_
#define PINPOOL_TESTS_SUPPORT_FIXED_IO_H_

#include <fcntl.h>
#include <liburing.h>
#include <linux/magic.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <string>

#include "pinpool/block.h"
#include "pinpool/keys.h"

namespace pinpool::testing {

// A scratch file in the working directory, else /var/tmp, on a filesystem that is not tmpfs;
// removed when destroyed. fd() is -1 when no such filesystem was found.
class ScratchFile {
 public:
  explicit ScratchFile(const std::string& name) {
    for (const std::string& dir : {std::string("."), std::string("/var/tmp")}) {
      struct statfs fs;
      if (statfs(dir.c_str(), &fs) != 0 || fs.f_type == TMPFS_MAGIC) continue;
      path_ = dir + "/" + name + "." + std::to_string(getpid());
      fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
      if (fd_ >= 0) return;
      path_.clear();
    }
  }
  ~ScratchFile() {
    if (fd_ >= 0) close(fd_);
    if (!path_.empty()) unlink(path_.c_str());
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  int fd() const { return fd_; }

 private:
  std::string path_;
  int fd_ = -1;
};

// One fixed-buffer read (write false) or write of the whole block `b` at file `offset`, through
// the buffer index of the pool's domain number `domain`; the CQE's result (bytes, or -errno).
inline int FixedIo(io_uring* ring, bool write, int fd, const Block& b, std::size_t domain,
                   off_t offset) {
  io_uring_sqe* sqe = io_uring_get_sqe(ring);
  if (sqe == nullptr) return -EBUSY;
  const int index = static_cast<int>(ToUnderlying(b.buffer_index(domain)));
  if (write) {
    io_uring_prep_write_fixed(sqe, fd, b.data(), static_cast<unsigned>(b.size()), offset, index);
  } else {
    io_uring_prep_read_fixed(sqe, fd, b.data(), static_cast<unsigned>(b.size()), offset, index);
  }
  if (io_uring_submit(ring) != 1) return -EIO;
  io_uring_cqe* cqe = nullptr;
  if (io_uring_wait_cqe(ring, &cqe) != 0) return -EIO;
  const int res = cqe->res;
  io_uring_cqe_seen(ring, cqe);
  return res;
}

}  // namespace pinpool::testing

#endif  // PINPOOL_TESTS_SUPPORT_FIXED_IO_H_
