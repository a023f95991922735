/* SPDX-License-Identifier: MIT */
/* Example (e): a member failure survived end to end through the C API
 * alone (uraid/uraid.h), as a storage program embedding the engine would:
 *
 *   create a 4-member RAID5 over in-memory members (fault injectors), write
 *   a pattern, fail one member's I/O underneath the array, read degraded,
 *   add a spare, wait for the rebuild (progress and events), verify every
 *   byte, scrub (check: no mismatches), close, assemble again from the
 *   surviving members and verify once more.
 *
 * Exits non-zero when a check fails (ctest runs it). */

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uraid/uraid.h"

enum { kDisks = 4, kMemberBytes = 8 << 20, kChunk = 64 << 10 };

static int failures = 0;

static void check(int ok, const char* what) {
  printf("%s: %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok) ++failures;
}

/* Events arrive on the library's threads: count them under a lock. */
static pthread_mutex_t event_lock = PTHREAD_MUTEX_INITIALIZER;
static int saw_fail, saw_rebuild_finished, saw_spare_active;

static void on_event(void* user, const uraid_event* e) {
  (void)user;
  pthread_mutex_lock(&event_lock);
  if (strcmp(e->name, "Fail") == 0) ++saw_fail;
  if (strcmp(e->name, "RebuildFinished") == 0) ++saw_rebuild_finished;
  if (strcmp(e->name, "SpareActive") == 0) ++saw_spare_active;
  pthread_mutex_unlock(&event_lock);
}

static int log_lines;
static void on_log(void* user, int level, const char* message) {
  (void)user;
  (void)level;
  (void)message;
  __atomic_add_fetch(&log_lines, 1, __ATOMIC_RELAXED);
}

static uint8_t pattern(uint64_t i) { return (uint8_t)(i * 131 + (i >> 12)); }

static int verify(uraid_array* a, uint64_t size, const char* what) {
  uint8_t* buf = malloc(size);
  char err[256] = "";
  int rc = uraid_read(a, buf, size, 0, err, sizeof err);
  int ok = rc == 0;
  for (uint64_t i = 0; ok && i < size; ++i) ok = buf[i] == pattern(i);
  if (rc != 0) printf("  read: %s (%d)\n", err, rc);
  check(ok, what);
  free(buf);
  return ok;
}

int main(void) {
  char err[256] = "";
  uraid_member* mem[kDisks + 1];
  uraid_member* faulty[kDisks];
  for (int i = 0; i <= kDisks; ++i) {
    char name[16];
    snprintf(name, sizeof name, "m%d", i);
    if (uraid_member_new_memory(name, kMemberBytes, &mem[i], err, sizeof err) !=
        0) {
      fprintf(stderr, "memory member: %s\n", err);
      return 1;
    }
  }
  for (int i = 0; i < kDisks; ++i) {
    if (uraid_member_new_faulty(mem[i], &faulty[i], err, sizeof err) != 0) {
      fprintf(stderr, "faulty member: %s\n", err);
      return 1;
    }
  }

  uraid_create_options o;
  URAID_INIT(&o);
  o.chunk_bytes = kChunk;
  o.assume_clean = 1; /* fresh memory members are zeros */
  o.log = on_log;
  o.log_level = URAID_LOG_INFO;
  uraid_array* a = NULL;
  int rc = uraid_create_from(faulty, kDisks, &o, &a, err, sizeof err);
  check(rc == 0, "create over 4 fault-injecting memory members");
  if (rc != 0) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  uint64_t id = 0;
  check(uraid_add_event_listener(a, on_event, NULL, &id) == 0,
        "event listener added");

  uint64_t size = uraid_size(a);
  uint8_t* data = malloc(size);
  for (uint64_t i = 0; i < size; ++i) data[i] = pattern(i);
  check(uraid_write(a, data, size, 0, URAID_FUA, err, sizeof err) == 0,
        "pattern written");
  free(data);

  /* Member 1's device dies: its next I/O fails, the array fails it. */
  uraid_member_set_failed(faulty[1], 1);
  verify(a, size, "degraded read returns the pattern");
  uraid_info info;
  URAID_INIT(&info);
  uraid_get_info(a, &info);
  check(info.degraded && info.slot_state[1] == URAID_SLOT_FAULTY,
        "slot 1 faulty, array degraded");

  /* md's --remove then --add: the spare is rebuilt into slot 1. */
  uraid_member_info mi;
  URAID_INIT(&mi);
  check(uraid_get_member(a, 1, &mi) == 0 && strcmp(mi.name, "m1") == 0,
        "slot 1 is named m1");
  rc = uraid_remove(a, mi.name, err, sizeof err);
  check(rc == 0, "faulty m1 removed");
  rc = uraid_add(a, mem[kDisks], err, sizeof err);
  check(rc == 0, "spare m4 added");
  if (rc != 0) printf("  add: %s\n", err);
  rc = uraid_wait_job(a, err, sizeof err);
  check(rc == 0, "rebuild completed");
  uraid_progress p;
  URAID_INIT(&p);
  uraid_get_progress(a, &p);
  printf("  last job: %d (%s)\n", p.last_kind, p.last_result);
  check(p.last_kind == URAID_JOB_RECOVER &&
            strcmp(p.last_result, "completed") == 0,
        "progress reports the recovery completed");
  URAID_INIT(&info);
  uraid_get_info(a, &info);
  check(!info.degraded && info.slot_state[1] == URAID_SLOT_ACTIVE,
        "array whole again");
  verify(a, size, "data after the rebuild");

  /* Fail another member: the rebuilt one must now carry its share. */
  uraid_member_set_failed(faulty[2], 1);
  verify(a, size, "degraded read with the rebuilt member in use");
  uraid_member_set_failed(faulty[2], 0);

  pthread_mutex_lock(&event_lock);
  check(saw_fail >= 1 && saw_rebuild_finished == 1 && saw_spare_active == 1,
        "events: Fail, RebuildFinished, SpareActive");
  pthread_mutex_unlock(&event_lock);
  check(__atomic_load_n(&log_lines, __ATOMIC_RELAXED) > 0, "log lines seen");
  uraid_remove_event_listener(a, id);
  check(uraid_close(a, err, sizeof err) == 0, "closed");

  /* Assemble from the survivors (slot 2 recorded faulty is left out). */
  uraid_member* again[] = {mem[0], mem[kDisks], mem[3]};
  uraid_assemble_options ao;
  URAID_INIT(&ao);
  rc = uraid_assemble_from(again, 3, &ao, &a, err, sizeof err);
  check(rc == 0, "assembled again from the survivors");
  if (rc == 0) {
    verify(a, size, "data after reassembly");
    uraid_close(a, NULL, 0);
  } else {
    printf("  assemble: %s\n", err);
  }

  for (int i = 0; i < kDisks; ++i) uraid_member_free(faulty[i]);
  for (int i = 0; i <= kDisks; ++i) uraid_member_free(mem[i]);
  printf("%s\n", failures ? "FAILED" : "all checks passed");
  return failures ? 1 : 0;
}
