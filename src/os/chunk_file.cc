// The files behind memfd- and file-backed chunks (os.h: BackingSpec, ChunkFile, FilesystemOf):
// creating one (memfd_create or open(O_CREAT | O_EXCL, 0600)), sizing it, sealing a memfd,
// and giving it back (close, unlink). docs/backing.md says what each backing is and what can
// take its memory back.
//
// Invariant: a chunk's file exists exactly as long as the ChunkFile that owns it; every error
// path of CreateChunkFile leaves no descriptor open and no file on disk.
// Thread-safe: each ChunkFile has one owner; the functions here keep no state.
#include "os/chunk_file.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "os/lease.h"
#include "util/bytes.h"
#include "util/status_macros.h"

#ifndef MFD_HUGE_SHIFT
#define MFD_HUGE_SHIFT 26
#endif
#ifndef MFD_HUGE_2MB
#define MFD_HUGE_2MB (21U << MFD_HUGE_SHIFT)
#endif
#ifndef MFD_HUGE_1GB
#define MFD_HUGE_1GB (30U << MFD_HUGE_SHIFT)
#endif

namespace pinpool::internal::os {

ChunkFile& ChunkFile::operator=(ChunkFile&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    other.path_.clear();
    sealed_ = std::exchange(other.sealed_, false);
    hugetlb_page_bytes_ = std::exchange(other.hugetlb_page_bytes_, 0);
    leased_ = std::exchange(other.leased_, false);
  }
  return *this;
}

void ChunkFile::Close() noexcept {
  if (leased_) ReleaseLease(fd_);  // a breaker waiting on it proceeds, whoever else holds the fd
  leased_ = false;
  if (!path_.empty()) ::unlink(path_.c_str());
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  path_.clear();
  sealed_ = false;
  hugetlb_page_bytes_ = 0;
}

void ChunkFile::Disown() noexcept {
  path_.clear();
  Close();
}

std::string ChunkFile::Describe() const {
  if (fd_ < 0) return "anonymous";
  if (!path_.empty()) return "file " + path_;
  if (hugetlb_page_bytes_ != 0) {
    return hugetlb_page_bytes_ == (std::size_t{1} << 30) ? "memfd hugetlb 1G" : "memfd hugetlb 2M";
  }
  return "memfd";
}

absl::StatusOr<Filesystem> FilesystemOf(const std::string& directory) {
  struct stat st = {};
  if (::stat(directory.c_str(), &st) != 0) {
    const int err = errno;
    const std::string msg = absl::StrFormat("%s: %s", directory, std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(msg + " (it does not exist)");
    if (err == EACCES) return absl::PermissionDeniedError(msg);
    return absl::InvalidArgumentError(msg);
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrFormat("%s is not a directory", directory));
  }
  struct statfs fs = {};
  if (::statfs(directory.c_str(), &fs) != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("statfs(%s): %s", directory, std::strerror(errno)));
  }
  Filesystem out;
  out.magic = static_cast<std::uint64_t>(fs.f_type);
  if (out.magic == TMPFS_MAGIC) {
    out.kind = Filesystem::Kind::kTmpfs;
  } else if (out.magic == HUGETLBFS_MAGIC) {
    out.kind = Filesystem::Kind::kHugetlbfs;
    out.hugetlb_page_bytes = static_cast<std::size_t>(fs.f_bsize);  // the mount's page size
  }
  return out;
}

absl::StatusOr<Filesystem> CheckBackingDirectory(const std::string& directory, PageSize largest,
                                                 bool require, std::size_t chunk_size) {
  if (directory.empty()) {
    return absl::InvalidArgumentError(
        "PoolOptions::backing.directory is empty: name a directory on tmpfs or hugetlbfs (such as "
        "/dev/shm or a hugetlbfs mount), or use BackingKind::kMemfd");
  }
  absl::StatusOr<Filesystem> fs = FilesystemOf(directory);
  if (!fs.ok()) {
    const absl::StatusCode code = fs.status().code() == absl::StatusCode::kPermissionDenied
                                      ? absl::StatusCode::kFailedPrecondition
                                      : absl::StatusCode::kInvalidArgument;
    return absl::Status(
        code, absl::StrFormat("PoolOptions::backing.directory: %s", fs.status().message()));
  }
  if (::access(directory.c_str(), W_OK | X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "PoolOptions::backing.directory %s is not writable by this process (access: %s): chunks "
        "are files created in it",
        directory, std::strerror(errno)));
  }
  if (fs->kind == Filesystem::Kind::kOther) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "PoolOptions::backing.directory %s is on a filesystem (statfs type %#x) whose pages "
        "cannot be long-term pinned for write: the kernel refuses FOLL_LONGTERM write pins of "
        "ordinary page-cache files (ext4, xfs, ...) and of fsdax mounts, so no device could "
        "register these chunks: use a directory on tmpfs (/dev/shm) or hugetlbfs, or "
        "BackingKind::kMemfd",
        directory, fs->magic));
  }
  if (fs->kind == Filesystem::Kind::kHugetlbfs) {
    const std::size_t page = fs->hugetlb_page_bytes;
    const PageSize mount = page == PageBytes(PageSize::k1G) ? PageSize::k1G : PageSize::k2M;
    if (page != PageBytes(PageSize::k1G) && page != PageBytes(PageSize::k2M)) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "PoolOptions::backing.directory %s is a hugetlbfs mount of %s pages; pinpool maps 2 MiB "
          "or 1 GiB pages: mount one with -o pagesize=2M or 1G",
          directory, FormatBytes(page)));
    }
    if (chunk_size % page != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "PoolOptions::backing.directory %s is a hugetlbfs mount of %s pages, larger than "
          "chunk_size %s: raise chunk_size or use a mount with smaller pages",
          directory, FormatBytes(page), FormatBytes(chunk_size)));
    }
    // PageSize is ordered largest first: `largest` > mount means a smaller limit.
    if (largest > mount || (require && largest != mount)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "PoolOptions::backing.directory %s is a hugetlbfs mount, whose files have %s pages "
          "only, but PoolOptions::page_size is %s%s: set page_size to %s, or use a tmpfs "
          "directory or a memfd",
          directory, PageSizeName(mount), PageSizeName(largest), require ? " (required)" : "",
          PageSizeName(mount)));
    }
  } else if (require && (largest == PageSize::k1G || largest == PageSize::k2M)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "PoolOptions::backing.directory %s is on tmpfs, which has no hugetlb pages, but "
        "PoolOptions::page_size requires %s: use a hugetlbfs mount, BackingKind::kMemfd "
        "(MFD_HUGETLB), or PageSize::kTransparent",
        directory, PageSizeName(largest)));
  }
  return fs;
}

absl::StatusOr<ChunkFile> CreateChunkFile(const BackingSpec& backing, std::size_t length,
                                          std::size_t hugetlb_page_bytes) {
  ChunkFile file;
  if (const int injected = InjectedFault(Call::kCreateFile, length); injected != 0) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "cannot create the file of a %s chunk: %s", FormatBytes(length), std::strerror(injected)));
  }
  if (backing.kind == BackingSpec::Kind::kMemfd) {
    unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING;
    if (hugetlb_page_bytes != 0) {
      flags |= MFD_HUGETLB |
               (hugetlb_page_bytes == (std::size_t{1} << 30) ? MFD_HUGE_1GB : MFD_HUGE_2MB);
    }
    const int fd = ::memfd_create(backing.name.c_str(), flags);
    if (fd < 0) {
      const int err = errno;
      // EINVAL with MFD_HUGETLB: a kernel without hugetlb memfds (before 4.14) or this size.
      return absl::FailedPreconditionError(absl::StrFormat(
          "memfd_create(%s%s) for a %s chunk: %s", backing.name,
          hugetlb_page_bytes != 0 ? ", MFD_HUGETLB" : "", FormatBytes(length), std::strerror(err)));
    }
    file = ChunkFile(fd, "");
  } else {
    std::string path = backing.directory;
    if (path.empty() || path.back() != '/') path += '/';
    path += backing.name;
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
      const int err = errno;
      const std::string msg = absl::StrFormat("cannot create the file of a %s chunk: open(%s): %s",
                                              FormatBytes(length), path, std::strerror(err));
      if (err == EEXIST) {
        return absl::AlreadyExistsError(
            msg +
            " (another pool, or a process that died, left it there: remove it if nothing "
            "uses it)");
      }
      if (err == EACCES || err == EPERM || err == EROFS) return absl::PermissionDeniedError(msg);
      if (err == ENOSPC || err == EDQUOT) return absl::ResourceExhaustedError(msg);
      return absl::FailedPreconditionError(msg);
    }
    file = ChunkFile(fd, std::move(path));  // from here on, an error unlinks it
  }
  // Nobody else can have it yet: a new file, this process's own description. Without the lock a
  // later handover could be adopted twice: refused (ENOLCK: the kernel's lock table is full).
  if (const int err = LockOwnership(file.fd()); err != 0) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("taking the ownership lock (flock) of a %s chunk's file (%s): %s",
                        FormatBytes(length), file.Describe(), std::strerror(err)));
  }
  file.set_hugetlb_page_bytes(hugetlb_page_bytes);
  const int truncate_err = InjectedFault(Call::kTruncateFile, length);
  if (truncate_err != 0 || ::ftruncate(file.fd(), static_cast<off_t>(length)) != 0) {
    const int err = truncate_err != 0 ? truncate_err : errno;
    return absl::ResourceExhaustedError(absl::StrFormat("ftruncate of a %s chunk's file (%s): %s",
                                                        FormatBytes(length), file.Describe(),
                                                        std::strerror(err)));
  }
  if (backing.kind == BackingSpec::Kind::kMemfd) {
    // Truncation is refused from now on, to everyone: a shrink would take pages from under a
    // registration. F_SEAL_SEAL keeps anyone from adding or (kernel rule) removing seals later.
    // A hole punch is NOT refused by these seals (docs/backing.md).
    const int seal_err = InjectedFault(Call::kSealFile, length);
    if (seal_err != 0 ||
        ::fcntl(file.fd(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
      return absl::InternalError(
          absl::StrFormat("sealing a %s chunk's memfd: fcntl(F_ADD_SEALS): %s", FormatBytes(length),
                          std::strerror(seal_err != 0 ? seal_err : errno)));
    }
    file.set_sealed(true);
  } else {
    // Nothing seals a file in a directory: a lease is how pinpool learns that someone wants its
    // pages, before the kernel lets them have them (os/lease.h).
    PINPOOL_RETURN_IF_ERROR(TakeWriteLease(file.fd(), file.Describe().c_str()));
    file.set_leased(true);
  }
  return file;
}

void UnlockOwnership(int fd) noexcept { ::flock(fd, LOCK_UN); }
int LockOwnership(int fd) noexcept {
  if (const int injected = InjectedFault(Call::kLockFile, 0); injected != 0) return injected;
  return ::flock(fd, LOCK_EX | LOCK_NB) == 0 ? 0 : errno;
}

absl::StatusOr<ChunkFileFacts> CheckChunkFile(int fd, const std::string& path, std::size_t length) {
  struct stat st {};
  struct statfs sfs {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || ::fstatfs(fd, &sfs) != 0 ||
      (sfs.f_type != TMPFS_MAGIC && sfs.f_type != HUGETLBFS_MAGIC)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "descriptor %d is not a chunk's file: not a regular file on tmpfs or hugetlbfs (a memfd, "
        "or a file in a directory a pool's chunks can live in)",
        fd));
  }
  if (static_cast<std::size_t>(st.st_size) != length) {
    return absl::InvalidArgumentError(
        absl::StrFormat("a chunk's file of %d bytes where the description says %s: the wrong file",
                        st.st_size, FormatBytes(length)));
  }
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (path.empty() &&
      (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW))) {
    return absl::InvalidArgumentError(
        "a memfd chunk without the shrink and grow seals: not a pool's chunk (pinpool seals every "
        "memfd it makes)");
  }
  if (!path.empty()) {
    struct stat named {};
    if (::stat(path.c_str(), &named) != 0 || named.st_dev != st.st_dev ||
        named.st_ino != st.st_ino) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "the chunk's file %s is not the file its descriptor names (removed or replaced since)",
          path));
    }
  }
  return ChunkFileFacts{.sealed = seals >= 0 && (seals & F_SEAL_SHRINK) != 0,
                        .hugetlb_page_bytes = sfs.f_type == HUGETLBFS_MAGIC
                                                  ? static_cast<std::size_t>(sfs.f_bsize)
                                                  : 0};
}

absl::StatusOr<ChunkFile> AdoptChunkFile(int fd, const std::string& path, std::size_t length) {
  PINPOOL_ASSIGN_OR_RETURN(const ChunkFileFacts facts, CheckChunkFile(fd, path, length));
  // Our own description: the ownership lock is per open file description, and the received one
  // is the previous owner's.
  const std::string reopen = path.empty() ? absl::StrFormat("/proc/self/fd/%d", fd) : path;
  const int reopen_err = InjectedFault(Call::kReopenFile, length);
  const int own = reopen_err != 0 ? -1 : ::open(reopen.c_str(), O_RDWR | O_CLOEXEC);
  if (own < 0) {
    const int err = reopen_err != 0 ? reopen_err : errno;
    return absl::Status(
        err == EMFILE || err == ENFILE || err == ENOMEM ? absl::StatusCode::kResourceExhausted
                                                        : absl::StatusCode::kPermissionDenied,
        absl::StrFormat("reopening a chunk's file (%s): %s", reopen, std::strerror(err)));
  }
  if (const int err = LockOwnership(own); err != 0) {
    ::close(own);
    if (err != EWOULDBLOCK) {
      return absl::ResourceExhaustedError(
          absl::StrFormat("taking the ownership lock (flock) of the chunk's file %s: %s",
                          path.empty() ? "(a memfd)" : path, std::strerror(err)));
    }
    return absl::FailedPreconditionError(absl::StrFormat(
        "the chunk's file %s is owned by another process (its ownership lock is held: %s): a pool "
        "is adopted once, by one successor",
        path.empty() ? "(a memfd)" : path, std::strerror(err)));
  }
  ChunkFile file(own, path);  // the name is ours now: our Close unlinks it
  file.set_sealed(facts.sealed);
  file.set_hugetlb_page_bytes(facts.hugetlb_page_bytes);
  return file;
}

}  // namespace pinpool::internal::os
