/* SPDX-License-Identifier: MIT */
/* Example (d): the C API (uraid/uraid.h).
 *
 * 1. An array over members the program implements itself (callbacks over
 *    malloc'd buffers): create, write, read back, close, assemble again in
 *    another order, and read degraded with one member left out.
 * 2. An array over member files: uraid_create, then uraid_assemble
 *    read-only.
 * 3. Errors: a negative errno plus a message naming the cause.
 *
 * Exits non-zero when a check fails (ctest runs it). */

#define _POSIX_C_SOURCE 200809L /* mkdtemp, ftruncate, fileno */

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uraid/uraid.h"

enum { kDisks = 4, kMemberBytes = 8 << 20, kChunk = 64 << 10 };

static int failures = 0;

static void check(int ok, const char* what) {
  printf("%s: %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok) ++failures;
}

/* ------------------------------------------------ a member in a buffer */

/* The callbacks run on several threads at once; a lock keeps reads that
 * overlap a write from racing on the buffer. */
typedef struct {
  pthread_mutex_t lock;
  uint8_t* data;
  int closed; /* set by the close callback */
} buffer_member;

static int buf_read(void* user, void* buf, size_t len, uint64_t offset) {
  buffer_member* m = user;
  pthread_mutex_lock(&m->lock);
  memcpy(buf, m->data + offset, len); /* the library checks the range */
  pthread_mutex_unlock(&m->lock);
  return 0;
}

static int buf_write(void* user, const void* buf, size_t len, uint64_t offset) {
  buffer_member* m = user;
  pthread_mutex_lock(&m->lock);
  memcpy(m->data + offset, buf, len);
  pthread_mutex_unlock(&m->lock);
  return 0;
}

static int buf_discard(void* user, size_t len, uint64_t offset) {
  buffer_member* m = user;
  pthread_mutex_lock(&m->lock);
  memset(m->data + offset, 0, len); /* discarded ranges must read as 0 */
  pthread_mutex_unlock(&m->lock);
  return 0;
}

/* The buffers outlive the arrays here (they are assembled again), so close
 * only records that the library let go of the member. */
static void buf_close(void* user) { ((buffer_member*)user)->closed++; }

static const uraid_member_ops kBufferOps = {
    .read = buf_read,
    .write = buf_write,
    .flush = NULL, /* memory: nothing to make durable */
    .discard = buf_discard,
    .close = buf_close,
};

static void fill(uint8_t* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; ++i) p[i] = (uint8_t)(i * 31 + seed + (i >> 12));
}

static void callback_members(void) {
  char err[256] = "";
  buffer_member mem[kDisks];
  uraid_member_desc desc[kDisks];
  static const char* const names[kDisks] = {"buf0", "buf1", "buf2", "buf3"};
  for (int i = 0; i < kDisks; ++i) {
    pthread_mutex_init(&mem[i].lock, NULL);
    mem[i].data = calloc(1, kMemberBytes);
    mem[i].closed = 0;
    desc[i] = (uraid_member_desc){.name = names[i],
                                  .size = kMemberBytes,
                                  .ops = &kBufferOps,
                                  .user = &mem[i]};
  }

  uraid_create_options co = {0}; /* zero = defaults */
  co.chunk_bytes = kChunk;
  co.name = "c-example";
  co.assume_clean = 1; /* calloc'd members: parity already holds */
  uraid_array* a = NULL;
  int rc = uraid_create_members(desc, kDisks, &co, &a, err, sizeof err);
  check(rc == 0, "create over callback members");
  if (rc != 0) {
    fprintf(stderr, "c_example: %s (%d)\n", err, rc);
    exit(1);
  }

  uraid_info info = {0}; /* struct_size 0: this header's version */
  check(uraid_get_info(a, &info) == 0, "get info");
  printf("array %s \"%s\": raid%d %s, %d disks, %" PRIu64 " KiB chunk, %" PRIu64
         " bytes\n",
         info.uuid_string, info.name, info.level, info.layout_name,
         info.raid_disks, info.chunk_bytes >> 10, info.array_bytes);
  check(info.array_bytes == uraid_size(a), "info size == uraid_size");
  check(info.level == 5 && strcmp(info.layout_name, "left-symmetric") == 0,
        "defaults: raid5, left-symmetric");

  /* An unaligned write across chunk boundaries, read back. */
  const size_t len = 3 * kChunk + 1000;
  const uint64_t off = 5 * kChunk + 123;
  uint8_t* in = malloc(len);
  uint8_t* out = malloc(len);
  fill(in, len, 7);
  rc = uraid_write(a, in, len, off, URAID_FUA, err, sizeof err);
  check(rc == 0, "write (FUA)");
  rc = uraid_read(a, out, len, off, err, sizeof err);
  check(rc == 0 && memcmp(in, out, len) == 0, "read back");

  /* Errors: past the end. */
  rc = uraid_read(a, out, 4096, uraid_size(a) - 100, err, sizeof err);
  printf("read past the end: %d (%s)\n", rc, err);
  check(rc == -EINVAL && strstr(err, "past the end") != NULL,
        "read past the end is -EINVAL with a message");

  check(uraid_close(a, err, sizeof err) == 0, "close");
  int all_closed = 1;
  for (int i = 0; i < kDisks; ++i) all_closed &= mem[i].closed == 1;
  check(all_closed, "close called once per member");

  /* Assemble from the superblocks: order does not matter. A member left
   * out that the superblocks list as active is refused by name (md's
   * rule), and with run set the array runs degraded without it. */
  uraid_member_desc three[3] = {desc[3], desc[0], desc[2]};
  uraid_assemble_options ao = {0};
  rc = uraid_assemble_members(three, 3, &ao, &a, err, sizeof err);
  printf("assemble three of four without run: %d (%s)\n", rc, err);
  check(rc != 0 && strstr(err, "slot 1 (device 1) not given") != NULL,
        "a member left out is refused without run, naming its slot");
  ao.run = 1;
  rc = uraid_assemble_members(three, 3, &ao, &a, err, sizeof err);
  check(rc == 0, "assemble three of four members with run");
  if (rc == 0) {
    check(uraid_get_info(a, &info) == 0 && info.degraded &&
              info.slot_state[1] == URAID_SLOT_MISSING,
          "degraded, slot 1 missing");
    memset(out, 0, len);
    rc = uraid_read(a, out, len, off, err, sizeof err);
    check(rc == 0 && memcmp(in, out, len) == 0, "degraded read back");
    check(uraid_get_info(a, &info) == 0 && info.reconstructions > 0,
          "pieces were rebuilt from parity");
    check(uraid_close(a, err, sizeof err) == 0, "close degraded");
  }

  /* Two members missing: refused, and close still runs for both. */
  for (int i = 0; i < kDisks; ++i) mem[i].closed = 0;
  rc = uraid_assemble_members(desc, 2, &ao, &a, err, sizeof err);
  printf("assemble two of four: %d (%s)\n", rc, err);
  check(rc < 0 && a == NULL, "two of four members are refused");
  check(mem[0].closed == 1 && mem[1].closed == 1,
        "close called on a failed assemble");

  free(in);
  free(out);
  for (int i = 0; i < kDisks; ++i) {
    free(mem[i].data);
    pthread_mutex_destroy(&mem[i].lock);
  }
}

/* ------------------------------------------------------ member files */

static void file_members(void) {
  char err[256] = "";
  char dir[] = "/tmp/uraid-c-example.XXXXXX";
  if (mkdtemp(dir) == NULL) {
    perror("mkdtemp");
    exit(1);
  }
  char paths[kDisks][64];
  const char* list[kDisks];
  for (int i = 0; i < kDisks; ++i) {
    snprintf(paths[i], sizeof paths[i], "%s/m%d.img", dir, i);
    FILE* f = fopen(paths[i], "w");
    if (f == NULL || ftruncate(fileno(f), 16 << 20) != 0) {
      perror(paths[i]);
      exit(1);
    }
    fclose(f);
    list[i] = paths[i];
  }

  uraid_create_options co = {0};
  co.layout = "right-asymmetric";
  co.chunk_bytes = 128 << 10;
  uraid_array* a = NULL;
  int rc = uraid_create(list, kDisks, &co, &a, err, sizeof err);
  check(rc == 0, "create over member files");
  if (rc != 0) fprintf(stderr, "c_example: %s (%d)\n", err, rc);
  uint8_t block[4096];
  fill(block, sizeof block, 99);
  if (rc == 0) {
    check(uraid_write(a, block, sizeof block, 1 << 20, 0, err, sizeof err) == 0,
          "write to files");
    check(uraid_close(a, err, sizeof err) == 0, "close files");
  }

  /* Read-only, unlocked: what a backup or recovery tool does. */
  uraid_assemble_options ao = {.read_only = 1, .no_lock = 1};
  const char* reversed[kDisks] = {list[3], list[2], list[1], list[0]};
  rc = uraid_assemble(reversed, kDisks, &ao, &a, err, sizeof err);
  check(rc == 0, "assemble member files read-only");
  if (rc == 0) {
    uint8_t back[4096];
    uraid_info info = {0};
    check(uraid_read(a, back, sizeof back, 1 << 20, err, sizeof err) == 0 &&
              memcmp(back, block, sizeof back) == 0,
          "read back from files");
    check(uraid_get_info(a, &info) == 0 && info.read_only && info.layout == 1 &&
              info.chunk_bytes == (128 << 10),
          "read-only, right-asymmetric, 128 KiB");
    rc = uraid_write(a, block, sizeof block, 0, 0, err, sizeof err);
    printf("write to a read-only array: %d (%s)\n", rc, err);
    check(rc == -EPERM, "write to a read-only array is -EPERM");
    check(uraid_close(a, err, sizeof err) == 0, "close read-only");
  }

  const char* bogus[1] = {"/nonexistent/uraid-member.img"};
  rc = uraid_assemble(bogus, 1, NULL, &a, err, sizeof err);
  printf("assemble a missing file: %d (%s)\n", rc, err);
  check(rc == -ENOENT && strstr(err, "/nonexistent/uraid-member.img") != NULL,
        "a missing member file is -ENOENT naming the path");

  for (int i = 0; i < kDisks; ++i) unlink(paths[i]);
  rmdir(dir);
}

int main(void) {
  callback_members();
  file_members();
  if (failures > 0) {
    printf("c_example: %d check(s) failed\n", failures);
    return 1;
  }
  printf("c_example: all checks passed\n");
  return 0;
}
