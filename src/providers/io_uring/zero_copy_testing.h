// The switch that shows why IoUringZeroCopy holds blocks: off, a send's block is not held, and a
// free before the notification lets the block be reused while the kernel still reads it (the
// zero-copy test sees the corruption). For that test only; never exported.
#ifndef PINPOOL_PROVIDERS_IO_URING_ZERO_COPY_TESTING_H_
#define PINPOOL_PROVIDERS_IO_URING_ZERO_COPY_TESTING_H_

namespace pinpool::internal {

// Whether sends tracked from now on hold their blocks (true unless a test says otherwise).
void SetZeroCopyHoldForTesting(bool hold);

}  // namespace pinpool::internal

#endif  // PINPOOL_PROVIDERS_IO_URING_ZERO_COPY_TESTING_H_
