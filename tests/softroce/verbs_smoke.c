/* verbs_smoke: the smallest proof that a real kernel RDMA provider pins and keys memory here.
 *
 * Opens the first verbs device, allocates a protection domain, registers a 1 MiB buffer with
 * ibv_reg_mr (local write, remote read, remote write), prints the device name and the keys the
 * provider handed out, deregisters and tears everything down. Output (stdout, one line):
 * "verbs_smoke: device=<name> lkey=0x<hex> rkey=0x<hex> length=1048576". Exit status: 0 on success;
 * 77 (the automake/ctest "skipped" code) with "no RDMA device: <reason>" on stderr when there is no
 * usable device; 1 when a device exists but a verbs call fails. Single-threaded; owns every
 * resource it creates and releases them on all paths.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kBufferBytes = 1 << 20, kBufferAlign = 4096, kSkip = 77 };

static int skip(const char* reason, int err) {
  if (err != 0) {
    fprintf(stderr, "no RDMA device: %s (%s)\n", reason, strerror(err));
  } else {
    fprintf(stderr, "no RDMA device: %s\n", reason);
  }
  return kSkip;
}

static int fail(const char* what, int err) {
  fprintf(stderr, "verbs_smoke: %s failed: %s\n", what, strerror(err));
  return 1;
}

/* Registers, reports and deregisters one buffer in pd. */
static int register_buffer(struct ibv_pd* pd, const char* device_name) {
  void* buffer = NULL;
  int err = posix_memalign(&buffer, kBufferAlign, kBufferBytes);
  if (err != 0) return fail("posix_memalign", err);
  memset(buffer, 0, kBufferBytes);

  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
  struct ibv_mr* mr = ibv_reg_mr(pd, buffer, kBufferBytes, access);
  int rc = 0;
  if (mr == NULL) {
    rc = fail("ibv_reg_mr", errno);
  } else {
    printf("verbs_smoke: device=%s lkey=0x%x rkey=0x%x length=%zu\n", device_name, mr->lkey,
           mr->rkey, mr->length);
    err = ibv_dereg_mr(mr);
    if (err != 0) rc = fail("ibv_dereg_mr", err);
  }
  free(buffer);
  return rc;
}

int main(void) {
  int num_devices = 0;
  struct ibv_device** devices = ibv_get_device_list(&num_devices);
  if (devices == NULL) return skip("ibv_get_device_list failed", errno);
  if (num_devices == 0) {
    ibv_free_device_list(devices);
    return skip("ibv_get_device_list found no devices", 0);
  }

  const char* name = ibv_get_device_name(devices[0]);
  struct ibv_context* context = ibv_open_device(devices[0]);
  if (context == NULL) {
    int err = errno;
    ibv_free_device_list(devices);
    return skip("ibv_open_device failed on the first device", err);
  }

  int rc;
  struct ibv_pd* pd = ibv_alloc_pd(context);
  if (pd == NULL) {
    rc = fail("ibv_alloc_pd", errno);
  } else {
    rc = register_buffer(pd, name);
    int err = ibv_dealloc_pd(pd);
    if (err != 0 && rc == 0) rc = fail("ibv_dealloc_pd", err);
  }
  ibv_close_device(context);
  ibv_free_device_list(devices);
  return rc;
}
