// SPDX-License-Identifier: MIT
// The C API (uraid/uraid.h) beyond the request path: member handles,
// member management, jobs and progress, grow, events and log callbacks,
// the control server, md's pure arithmetic, the superblock codec, the
// struct_size rules and the errno of a locked member. Everything here goes
// through the C functions only; the C++ API appears only as the oracle
// (Geometry for the map).

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "uraid/geometry.h"
#include "uraid/status_errno.h"
#include "uraid/uraid.h"
#include "uraid/version.h"

namespace {

using ::testing::HasSubstr;

constexpr uint64_t kChunk = 64 * 1024;
constexpr uint64_t kOffset = 1 << 20;
constexpr uint64_t kMemberBytes = 48 * kChunk;
constexpr uint64_t kRaw = kOffset + kMemberBytes;

std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 7 + seed);
  return v;
}

// Memory members and an array over them, freed at the end of the test.
class CApiTest : public ::testing::Test {
 protected:
  ~CApiTest() override {
    if (array_ != nullptr) uraid_close(array_, nullptr, 0);
    for (uraid_member* m : members_) uraid_member_free(m);
  }

  uraid_member* NewMember(const std::string& name) {
    uraid_member* m = nullptr;
    EXPECT_EQ(uraid_member_new_memory(name.c_str(), kRaw, &m, nullptr, 0), 0);
    members_.push_back(m);
    return m;
  }

  // n members named m0..; creates the array over them into array_.
  std::vector<uraid_member*> Create(int n, const char* layout = nullptr,
                                    int level = 0) {
    std::vector<uraid_member*> m;
    for (int i = 0; i < n; ++i) m.push_back(NewMember("m" + std::to_string(i)));
    uraid_create_options o;
    URAID_INIT(&o);
    o.chunk_bytes = kChunk;
    o.data_offset_bytes = kOffset;
    o.member_bytes = kMemberBytes;
    o.assume_clean = 1;
    o.layout = layout;
    o.level = level;
    o.bitmap = URAID_BITMAP_NONE;
    char err[256] = "";
    EXPECT_EQ(
        uraid_create_from(m.data(), m.size(), &o, &array_, err, sizeof err), 0)
        << err;
    return m;
  }

  void WriteAll(uint32_t seed) {
    std::vector<uint8_t> d = Pattern(uraid_size(array_), seed);
    ASSERT_EQ(uraid_write(array_, d.data(), d.size(), 0, 0, nullptr, 0), 0);
  }
  void ExpectAll(uint32_t seed, uint64_t bytes) {
    std::vector<uint8_t> got(bytes);
    char err[256] = "";
    ASSERT_EQ(uraid_read(array_, got.data(), bytes, 0, err, sizeof err), 0)
        << err;
    EXPECT_TRUE(got == Pattern(bytes, seed));
  }

  uraid_array* array_ = nullptr;
  std::vector<uraid_member*> members_;
};

TEST_F(CApiTest, VersionMatchesHeader) {
  EXPECT_STREQ(uraid_version(), URAID_VERSION_STRING);
}

TEST_F(CApiTest, FailReplaceAndProgress) {
  Create(4);
  WriteAll(1);
  uraid_member* spare = NewMember("spare");
  char err[256] = "";
  ASSERT_EQ(uraid_add(array_, spare, err, sizeof err), 0) << err;
  uraid_info info;
  URAID_INIT(&info);
  ASSERT_EQ(uraid_get_info(array_, &info), 0);
  EXPECT_EQ(info.spares, 1);
  EXPECT_EQ(info.struct_size, sizeof(uraid_info));
  uraid_member_info mi;
  URAID_INIT(&mi);
  ASSERT_EQ(uraid_get_member(array_, 4, &mi), 0);
  EXPECT_EQ(mi.state, URAID_SLOT_SPARE);
  EXPECT_EQ(mi.slot, -1);
  EXPECT_STREQ(mi.name, "spare");
  EXPECT_EQ(uraid_get_member(array_, 5, &mi), -ENOENT);

  // An active member cannot be removed; fail it and the spare rebuilds.
  EXPECT_EQ(uraid_remove(array_, "m2", err, sizeof err), -EPERM);
  EXPECT_EQ(uraid_fail(array_, "nosuch", err, sizeof err), -ENOENT);
  ASSERT_EQ(uraid_fail(array_, "m2", err, sizeof err), 0) << err;
  EXPECT_EQ(uraid_fail(array_, "m1", err, sizeof err), -EPERM)
      << "a second failure would fail the array";
  ASSERT_EQ(uraid_wait_job(array_, err, sizeof err), 0) << err;
  uraid_progress p;
  URAID_INIT(&p);
  ASSERT_EQ(uraid_get_progress(array_, &p), 0);
  EXPECT_EQ(p.kind, URAID_JOB_NONE);
  EXPECT_STREQ(p.kind_name, "idle");
  EXPECT_EQ(p.last_kind, URAID_JOB_RECOVER);
  EXPECT_STREQ(p.last_result, "completed");
  ASSERT_EQ(uraid_get_member(array_, 2, &mi), 0);
  EXPECT_STREQ(mi.name, "spare");
  EXPECT_EQ(mi.state, URAID_SLOT_ACTIVE);
  ExpectAll(1, uraid_size(array_));

  // Replace m0 with a fresh member, no degraded window.
  uraid_member* fresh = NewMember("fresh");
  ASSERT_EQ(uraid_replace(array_, "m0", fresh, err, sizeof err), 0) << err;
  ASSERT_EQ(uraid_wait_job(array_, err, sizeof err), 0) << err;
  ASSERT_EQ(uraid_get_progress(array_, &p), 0);
  EXPECT_EQ(p.last_kind, URAID_JOB_REPLACE);
  ASSERT_EQ(uraid_get_member(array_, 0, &mi), 0);
  EXPECT_STREQ(mi.name, "fresh");
  ExpectAll(1, uraid_size(array_));
}

// RAID6 through the C API: created under a RAID6-only layout name, two
// members failed under it and every byte still read, a third refused.
TEST_F(CApiTest, Raid6CreatesUnderItsLayoutsAndSurvivesTwoFailures) {
  for (const char* layout : {"ddf-N-continue", "left-asymmetric-6", "18"}) {
    SCOPED_TRACE(layout);
    if (array_ != nullptr) {
      ASSERT_EQ(uraid_close(array_, nullptr, 0), 0);
    }
    array_ = nullptr;
    Create(6, layout, 6);
    ASSERT_NE(array_, nullptr);
    uraid_info info;
    URAID_INIT(&info);
    ASSERT_EQ(uraid_get_info(array_, &info), 0);
    EXPECT_EQ(info.level, 6);
    EXPECT_EQ(info.layout, uraid_parse_layout_level(layout, 6));
    EXPECT_EQ(uraid_size(array_), 4 * kMemberBytes);
    WriteAll(6);
    char err[256] = "";
    ASSERT_EQ(uraid_fail_slot(array_, 1, err, sizeof err), 0) << err;
    ASSERT_EQ(uraid_fail_slot(array_, 4, err, sizeof err), 0) << err;
    ExpectAll(6, uraid_size(array_));
    EXPECT_EQ(uraid_fail(array_, "m0", err, sizeof err), -EPERM)
        << "a third failure would fail the array";
    ExpectAll(6, uraid_size(array_));
  }
  // A RAID6-only layout at level 5 is refused, naming it.
  uraid_member* m[4];
  for (auto& x : m) x = NewMember("r5");
  uraid_create_options o;
  URAID_INIT(&o);
  o.layout = "parity-first-6";
  o.level = 5;
  o.chunk_bytes = kChunk;
  o.member_bytes = kMemberBytes;
  uraid_array* a = nullptr;
  char err[256] = "";
  EXPECT_EQ(uraid_create_from(m, 4, &o, &a, err, sizeof err), -EINVAL);
  EXPECT_THAT(err, HasSubstr("parity-first-6"));
}

// uraid_grow reads --layout at the level the array will have: a RAID6
// name converts a RAID5 to RAID6 (level 6 asked) and restripes a RAID6
// (the array's level), then back to RAID5. Parsed at level 5, the "-6"
// names are unknown and each grow is refused.
TEST_F(CApiTest, GrowParsesTheLayoutAtTheTargetLevel) {
  Create(4, "right-asymmetric", 5);
  WriteAll(12);
  const uint64_t bytes = uraid_size(array_);
  uraid_member* q = NewMember("q");
  char err[256] = "";
  const auto info = [&] {
    uraid_info i;
    URAID_INIT(&i);
    EXPECT_EQ(uraid_get_info(array_, &i), 0);
    return i;
  };
  uraid_grow_options g;
  URAID_INIT(&g);
  g.level = 6;
  g.raid_devices = 5;
  g.layout = "right-asymmetric-6";
  g.add = &q;
  g.n_add = 1;
  ASSERT_EQ(uraid_grow(array_, &g, err, sizeof err), 0) << err;
  ASSERT_EQ(uraid_wait_job(array_, err, sizeof err), 0) << err;
  EXPECT_EQ(info().level, 6);
  EXPECT_STREQ(info().layout_name, "right-asymmetric-6");
  ExpectAll(12, bytes);
  // The array's level (6) when none is asked: md's RAID6 names restripe.
  URAID_INIT(&g);
  g.layout = "left-symmetric-6";
  g.manual = 1;
  ASSERT_EQ(uraid_grow(array_, &g, err, sizeof err), 0) << err;
  int done = 0;
  for (int steps = 0; !done && steps < 10000; ++steps) {
    ASSERT_EQ(uraid_reshape_step(array_, &done, err, sizeof err), 0) << err;
  }
  EXPECT_STREQ(info().layout_name, "left-symmetric-6");
  ExpectAll(12, bytes);
  // A RAID6-only name with level 5 asked is refused, naming it.
  URAID_INIT(&g);
  g.level = 5;
  g.layout = "left-symmetric-6";
  EXPECT_EQ(uraid_grow(array_, &g, err, sizeof err), -EINVAL);
  EXPECT_THAT(err, HasSubstr("left-symmetric-6"));
  g.layout = "left-symmetric";
  ASSERT_EQ(uraid_grow(array_, &g, err, sizeof err), 0) << err;
  EXPECT_EQ(info().level, 5);
  EXPECT_EQ(info().raid_disks, 4);
  ExpectAll(12, bytes);
}

// Level 6 in uraid_progress: a check names the stripe and the slot of a
// chunk P and Q locate, and a rebuild of two slots names both.
TEST_F(CApiTest, Raid6ProgressNamesTheLocatedChunkAndThePair) {
  std::vector<uraid_member*> m = Create(6, "left-symmetric", 6);
  WriteAll(13);
  uraid_info info;
  URAID_INIT(&info);
  ASSERT_EQ(uraid_get_info(array_, &info), 0);
  // Array byte 3 chunks + 5 stripes in: corrupt 4 KiB of it on its member.
  uraid_geometry geo;
  URAID_INIT(&geo);
  geo.level = 6;
  geo.layout = info.layout;
  geo.chunk_bytes = kChunk;
  geo.raid_disks = 6;
  geo.member_bytes = kMemberBytes;
  uraid_location where[2];
  char err[256] = "";
  ASSERT_EQ(uraid_map(&geo, (5 * 4 + 3) * kChunk, &where[0], err, sizeof err),
            0)
      << err;
  ASSERT_EQ(uraid_map(&geo, (9 * 4 + 1) * kChunk, &where[1], err, sizeof err),
            0)
      << err;
  const std::vector<uint8_t> junk(4096, 0x5a);
  for (const uraid_location& w : where) {
    ASSERT_EQ(
        uraid_member_write(m[w.disk], junk.data(), junk.size(),
                           kOffset + w.member_offset + 8192, err, sizeof err),
        0)
        << err;
  }
  ASSERT_EQ(uraid_check(array_, 0, err, sizeof err), 0) << err;
  ASSERT_EQ(uraid_wait_job(array_, err, sizeof err), 0) << err;
  uraid_progress p;
  URAID_INIT(&p);
  ASSERT_EQ(uraid_get_progress(array_, &p), 0);
  EXPECT_EQ(p.struct_size, sizeof p);
  EXPECT_EQ(p.last_kind, URAID_JOB_CHECK);
  EXPECT_EQ(p.last_mismatches, 2u);
  EXPECT_EQ(p.last_located_mismatches, 2u);
  ASSERT_EQ(p.last_n_located, 2);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(p.last_located_stripes[i], where[i].stripe);
    EXPECT_EQ(p.last_located_slots[i], where[i].disk);
  }
  EXPECT_EQ(p.second_slot, -1) << "idle";
  // Repair rewrites the located chunks: the data reads right again.
  ASSERT_EQ(uraid_check(array_, 1, err, sizeof err), 0) << err;
  ASSERT_EQ(uraid_wait_job(array_, err, sizeof err), 0) << err;
  ExpectAll(13, uraid_size(array_));
  EXPECT_EQ(p.last_slot, -1) << "a check has no slot";
  // Slots 1 and 4 left out at assembly, two spares given: one pass
  // rebuilds both (md adds every spare before recovery starts).
  for (const char* name : {"s0", "s1"}) {
    ASSERT_EQ(uraid_add(array_, NewMember(name), err, sizeof err), 0) << err;
  }
  ASSERT_EQ(uraid_close(array_, err, sizeof err), 0) << err;
  array_ = nullptr;
  std::vector<uraid_member*> given = {m[0], m[2], m[3], m[5]};
  given.insert(given.end(), members_.end() - 2, members_.end());
  uraid_assemble_options ao;
  URAID_INIT(&ao);
  ao.run = 1;
  ASSERT_EQ(uraid_assemble_from(given.data(), given.size(), &ao, &array_, err,
                                sizeof err),
            0)
      << err;
  ASSERT_EQ(uraid_wait_job(array_, err, sizeof err), 0) << err;
  ASSERT_EQ(uraid_get_progress(array_, &p), 0);
  EXPECT_EQ(p.last_kind, URAID_JOB_RECOVER);
  EXPECT_STREQ(p.last_result, "completed");
  EXPECT_EQ(std::min(p.last_slot, p.last_second_slot), 1);
  EXPECT_EQ(std::max(p.last_slot, p.last_second_slot), 4);
  ExpectAll(13, uraid_size(array_));
}

TEST_F(CApiTest, ScrubSpeedAndCache) {
  Create(3);
  WriteAll(2);
  char err[256] = "";
  ASSERT_EQ(uraid_check(array_, 0, err, sizeof err), 0) << err;
  ASSERT_EQ(uraid_wait_job(array_, err, sizeof err), 0) << err;
  uraid_progress p;
  URAID_INIT(&p);
  ASSERT_EQ(uraid_get_progress(array_, &p), 0);
  EXPECT_EQ(p.last_kind, URAID_JOB_CHECK);
  EXPECT_EQ(p.last_mismatches, 0u);
  EXPECT_EQ(uraid_stop_job(array_, err, sizeof err), 0);
  EXPECT_EQ(uraid_set_speed(array_, 2000, 1000, err, sizeof err), -EINVAL);
  EXPECT_EQ(uraid_set_speed(array_, 1000, 50000, err, sizeof err), 0);
  EXPECT_EQ(uraid_set_cache_bytes(array_, 0), 0);
  // Degraded: a scrub is refused.
  ASSERT_EQ(uraid_fail(array_, "m1", err, sizeof err), 0);
  EXPECT_EQ(uraid_check(array_, 1, err, sizeof err), -EPERM);
}

TEST_F(CApiTest, GrowAddsADiskAndKeepsData) {
  Create(4);
  WriteAll(3);
  uint64_t before = uraid_size(array_);
  uraid_member* extra = NewMember("m4");
  uraid_grow_options g;
  URAID_INIT(&g);
  g.raid_devices = 5;
  g.add = &extra;
  g.n_add = 1;
  char err[256] = "";
  ASSERT_EQ(uraid_grow(array_, &g, err, sizeof err), 0) << err;
  ASSERT_EQ(uraid_wait_job(array_, err, sizeof err), 0) << err;
  uraid_info info;
  URAID_INIT(&info);
  ASSERT_EQ(uraid_get_info(array_, &info), 0);
  EXPECT_EQ(info.raid_disks, 5);
  EXPECT_FALSE(info.reshaping);
  EXPECT_GT(uraid_size(array_), before);
  ExpectAll(3, before);
  // A shrink is not a reshape md does.
  g.raid_devices = 4;
  g.n_add = 0;
  g.add = nullptr;
  EXPECT_EQ(uraid_grow(array_, &g, err, sizeof err), -EINVAL);
}

TEST_F(CApiTest, ManualReshapeStepsToTheEnd) {
  Create(4, "left-symmetric");
  WriteAll(4);
  uraid_grow_options g;
  URAID_INIT(&g);
  g.layout = "right-asymmetric";
  g.manual = 1;
  char err[256] = "";
  ASSERT_EQ(uraid_grow(array_, &g, err, sizeof err), 0) << err;
  int done = 0;
  int steps = 0;
  while (!done && steps < 10000) {
    ASSERT_EQ(uraid_reshape_step(array_, &done, err, sizeof err), 0) << err;
    ++steps;
  }
  EXPECT_TRUE(done);
  uraid_info info;
  URAID_INIT(&info);
  ASSERT_EQ(uraid_get_info(array_, &info), 0);
  EXPECT_STREQ(info.layout_name, "right-asymmetric");
  ExpectAll(4, uraid_size(array_));
}

struct Seen {
  std::mutex mu;
  std::vector<std::string> names;
  std::vector<std::string> json;
  std::atomic<int> warnings{0};
};

void OnEvent(void* user, const uraid_event* e) {
  auto* s = static_cast<Seen*>(user);
  std::lock_guard<std::mutex> l(s->mu);
  s->names.push_back(e->name);
  s->json.push_back(e->json);
}

void OnLog(void* user, int level, const char* /*message*/) {
  if (level >= URAID_LOG_WARNING) static_cast<Seen*>(user)->warnings++;
}

TEST_F(CApiTest, EventsAndLogReachTheCallbacks) {
  Seen seen;
  std::vector<uraid_member*> m;
  for (int i = 0; i < 3; ++i) m.push_back(NewMember("e" + std::to_string(i)));
  uraid_create_options o;
  URAID_INIT(&o);
  o.chunk_bytes = kChunk;
  o.assume_clean = 1;
  o.log = OnLog;
  o.log_user = &seen;
  char err[256] = "";
  ASSERT_EQ(uraid_create_from(m.data(), 3, &o, &array_, err, sizeof err), 0)
      << err;
  EXPECT_EQ(uraid_add_event_listener(array_, nullptr, nullptr, nullptr),
            -EINVAL);
  uint64_t id = 0;
  ASSERT_EQ(uraid_add_event_listener(array_, OnEvent, &seen, &id), 0);
  ASSERT_EQ(uraid_fail(array_, "e1", err, sizeof err), 0);
  uraid_remove_event_listener(array_, id);
  ASSERT_EQ(uraid_fail_slot(array_, 2, err, sizeof err), 0);
  std::lock_guard<std::mutex> l(seen.mu);
  ASSERT_FALSE(seen.names.empty());
  EXPECT_EQ(seen.names[0], "Fail");
  EXPECT_THAT(seen.json[0], HasSubstr("\"event\":\"Fail\""));
  EXPECT_THAT(seen.json[0], HasSubstr("\"member\":\"e1\""));
  for (const std::string& n : seen.names) EXPECT_NE(n, "ArrayFailed");
  EXPECT_GT(seen.warnings.load(), 0) << "a member failure logs a warning";
}

TEST_F(CApiTest, ControlServerStartsAndStops) {
  Create(3);
  std::string dir =
      ::testing::TempDir() + "/capi_ctl." + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::string sock = dir + "/c.sock";
  uraid_control* c = nullptr;
  char err[256] = "";
  ASSERT_EQ(uraid_control_start(array_, sock.c_str(), &c, err, sizeof err), 0)
      << err;
  EXPECT_TRUE(std::filesystem::exists(sock));
  uraid_control* second = nullptr;
  EXPECT_EQ(uraid_control_start(array_, sock.c_str(), &second, err, sizeof err),
            -EPERM)
      << "a live socket is refused";
  uraid_control_stop(c);
  EXPECT_FALSE(std::filesystem::exists(sock));
  uraid_control_stop(nullptr);
  std::filesystem::remove_all(dir);
}

// uraid_map of every offset step of `level`/`layout` over `disks` agrees
// with Geometry (the oracle), uraid_unmap inverts it, and the stripe's
// parity bytes (P, and Q at level 6) are parity to uraid_unmap.
void ExpectMapAgrees(int level, int layout, int disks) {
  SCOPED_TRACE(testing::Message() << "level " << level << " layout " << layout
                                  << " disks " << disks);
  uraid_geometry g;
  URAID_INIT(&g);
  g.level = level;
  g.layout = layout;
  g.chunk_bytes = 4096;
  g.raid_disks = disks;
  g.member_bytes = 64 * 4096;
  auto oracle = uraid::Geometry::Make(level, static_cast<uraid::Layout>(layout),
                                      4096, disks, 64 * 4096);
  ASSERT_TRUE(oracle.ok()) << oracle.status();
  for (uint64_t off = 0; off < oracle->array_bytes(); off += 4096 + 17) {
    uraid_location loc;
    char err[256] = "";
    ASSERT_EQ(uraid_map(&g, off, &loc, err, sizeof err), 0) << err;
    uraid::Location want = oracle->Map(off);
    EXPECT_EQ(loc.stripe, want.stripe);
    EXPECT_EQ(loc.data_index, want.data_index);
    EXPECT_EQ(loc.disk, want.disk);
    EXPECT_EQ(loc.parity_disk, want.parity_disk);
    EXPECT_EQ(loc.member_offset, want.member_offset);
    uint64_t back = 0;
    ASSERT_EQ(uraid_unmap(&g, loc.disk, loc.member_offset, &back, nullptr, 0),
              0);
    EXPECT_EQ(back, off);
    for (int parity : {loc.parity_disk, oracle->QDisk(loc.stripe)}) {
      if (parity < 0) continue;  // no Q below level 6
      EXPECT_EQ(uraid_unmap(&g, parity, loc.member_offset, &back, nullptr, 0),
                -ENOENT);
    }
  }
}

TEST(CApiPure, MapAgreesWithGeometryAndUnmapInverts) {
  for (int layout = 0; layout <= 3; ++layout) {
    for (int disks : {3, 5, 8}) ExpectMapAgrees(5, layout, disks);
  }
  uraid_geometry bad;
  URAID_INIT(&bad);
  bad.chunk_bytes = 3000;
  bad.raid_disks = 4;
  char err[256] = "";
  uraid_location loc;
  EXPECT_EQ(uraid_map(&bad, 0, &loc, err, sizeof err), -EINVAL);
  EXPECT_THAT(err, HasSubstr("chunk"));
  EXPECT_EQ(uraid_parse_layout("ls"), URAID_LAYOUT_LEFT_SYMMETRIC);
  EXPECT_EQ(uraid_parse_layout("parity-first"), URAID_LAYOUT_PARITY_FIRST);
  EXPECT_EQ(uraid_parse_layout("zigzag"), -EINVAL);
}

// Level 6: every md RAID6 layout number maps as Geometry does (P in
// parity_disk), unmap inverts, and P's and Q's bytes are parity.
TEST(CApiPure, MapsEveryRaid6Layout) {
  for (int layout : {0, 1, 2, 3, 4, 5, 8, 9, 10, 16, 17, 18, 19, 20}) {
    for (int disks : {4, 5, 8}) ExpectMapAgrees(6, layout, disks);
  }
  // Numbers md has for no level, and RAID6's at level 5, are refused.
  uraid_geometry g;
  URAID_INIT(&g);
  g.chunk_bytes = 4096;
  g.raid_disks = 5;
  uraid_location loc;
  char err[256] = "";
  for (int level : {5, 6}) {
    for (int layout : {-1, 6, 7, 11, 21}) {
      g.level = level;
      g.layout = layout;
      EXPECT_EQ(uraid_map(&g, 0, &loc, err, sizeof err), -EINVAL) << layout;
    }
  }
  g.level = 5;
  g.layout = 8;
  EXPECT_EQ(uraid_map(&g, 0, &loc, err, sizeof err), -EINVAL);
  EXPECT_THAT(err, HasSubstr("layout 8"));
  // mdadm's RAID6 names, by level.
  const std::pair<const char*, int> kRaid6Names[] = {
      {"ddf-zero-restart", URAID_LAYOUT_DDF_ZERO_RESTART},
      {"ddf-N-restart", URAID_LAYOUT_DDF_N_RESTART},
      {"ddf-n-continue", URAID_LAYOUT_DDF_N_CONTINUE},
      {"left-asymmetric-6", URAID_LAYOUT_LEFT_ASYMMETRIC_6},
      {"right-asymmetric-6", URAID_LAYOUT_RIGHT_ASYMMETRIC_6},
      {"left-symmetric-6", URAID_LAYOUT_LEFT_SYMMETRIC_6},
      {"right-symmetric-6", URAID_LAYOUT_RIGHT_SYMMETRIC_6},
      {"parity-first-6", URAID_LAYOUT_PARITY_FIRST_6}};
  for (const auto& [name, number] : kRaid6Names) {
    EXPECT_EQ(uraid_parse_layout_level(name, 6), number) << name;
  }
  EXPECT_EQ(uraid_parse_layout_level("20", 6), URAID_LAYOUT_PARITY_FIRST_6);
  EXPECT_EQ(uraid_parse_layout_level("ls", 6), URAID_LAYOUT_LEFT_SYMMETRIC);
  EXPECT_EQ(uraid_parse_layout_level("ls", 0), URAID_LAYOUT_LEFT_SYMMETRIC);
  EXPECT_EQ(uraid_parse_layout_level("parity-first-6", 5), -EINVAL);
  EXPECT_EQ(uraid_parse_layout_level("8", 5), -EINVAL);
  EXPECT_EQ(uraid_parse_layout_level("ls", 7), -EINVAL);
  EXPECT_EQ(uraid_parse_layout_level(nullptr, 6), -EINVAL);
}

TEST(CApiPure, SuperblockRoundTripsAndRejectsCorruption) {
  uraid_superblock sb;
  URAID_INIT(&sb);
  std::vector<uint8_t> block(URAID_SB_BYTES);
  sb.level = 5;
  sb.layout = 2;
  sb.chunksize = 128;
  sb.raid_disks = 3;
  sb.size = 2048;
  sb.data_offset = 2048;
  sb.data_size = 2048;
  sb.super_offset = 8;
  sb.events = 42;
  sb.resync_offset = UINT64_MAX;
  std::strcpy(sb.set_name, "sbtest");
  sb.n_roles = 3;
  sb.dev_roles[0] = 0;
  sb.dev_roles[1] = 1;
  sb.dev_roles[2] = URAID_ROLE_FAULTY;
  char err[256] = "";
  ASSERT_EQ(
      uraid_superblock_encode(&sb, block.data(), block.size(), err, sizeof err),
      0)
      << err;
  uraid_superblock back;
  URAID_INIT(&back);
  ASSERT_EQ(uraid_superblock_decode(block.data(), block.size(), &back, err,
                                    sizeof err),
            0)
      << err;
  EXPECT_EQ(back.events, 42u);
  EXPECT_EQ(back.raid_disks, 3u);
  EXPECT_STREQ(back.set_name, "sbtest");
  EXPECT_EQ(back.n_roles, 3u);
  EXPECT_EQ(back.dev_roles[2], URAID_ROLE_FAULTY);
  EXPECT_NE(back.sb_csum, 0u);
  std::vector<uint8_t> again(URAID_SB_BYTES);
  ASSERT_EQ(
      uraid_superblock_encode(&back, again.data(), again.size(), nullptr, 0),
      0);
  EXPECT_TRUE(again == block) << "decode then encode gives the same bytes";
  block[100] ^= 1;  // the checksum no longer matches
  EXPECT_LT(uraid_superblock_decode(block.data(), block.size(), &back, err,
                                    sizeof err),
            0);
  EXPECT_THAT(err, HasSubstr("checksum"));
  EXPECT_EQ(uraid_superblock_encode(&sb, again.data(), 100, nullptr, 0),
            -EINVAL);
}

TEST(CApiStructs, SizeRulesForOptions) {
  uraid_member* m[3];
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(uraid_member_new_memory(nullptr, kRaw, &m[i], nullptr, 0), 0);
  }
  // A caller from a newer header: unknown trailing bytes must be zero.
  struct Newer {
    uraid_create_options o;
    uint64_t future_field;
  } newer{};
  newer.o.struct_size = sizeof(newer);
  newer.o.chunk_bytes = kChunk;
  newer.o.assume_clean = 1;
  newer.future_field = 1;
  uraid_array* a = nullptr;
  char err[256] = "";
  EXPECT_EQ(uraid_create_from(m, 3, &newer.o, &a, err, sizeof err), -E2BIG);
  EXPECT_THAT(err, HasSubstr("struct_size"));
  newer.future_field = 0;
  ASSERT_EQ(uraid_create_from(m, 3, &newer.o, &a, err, sizeof err), 0) << err;
  // An info struct from an older header: only its bytes are written.
  struct {
    uraid_info info;
    uint8_t guard[8];
  } small;
  std::memset(&small, 0xAB, sizeof small);
  small.info.struct_size = offsetof(uraid_info, spares);
  ASSERT_EQ(uraid_get_info(a, &small.info), 0);
  EXPECT_EQ(small.info.struct_size, offsetof(uraid_info, spares));
  EXPECT_EQ(small.info.raid_disks, 3);
  const auto* raw = reinterpret_cast<const uint8_t*>(&small.info);
  EXPECT_EQ(raw[offsetof(uraid_info, spares)], 0xAB) << "wrote past its size";
  small.info.struct_size = 4;
  EXPECT_EQ(uraid_get_info(a, &small.info), -EINVAL);
  uraid_close(a, nullptr, 0);
  for (uraid_member* x : m) uraid_member_free(x);
}

// The ABI of the public structs: sizes and the offsets of the first and
// last fields on LP64. A change here breaks every program compiled against
// the header: append fields only, and update the numbers with the change.
TEST(CApiStructs, LayoutIsStable) {
  static_assert(sizeof(void*) == 8, "numbers below are for LP64");
  EXPECT_EQ(offsetof(uraid_create_options, struct_size), 0u);
  EXPECT_EQ(offsetof(uraid_assemble_options, struct_size), 0u);
  EXPECT_EQ(offsetof(uraid_info, struct_size), 0u);
  EXPECT_EQ(sizeof(uraid_create_options), 120u);
  EXPECT_EQ(sizeof(uraid_assemble_options), 72u);
  EXPECT_EQ(sizeof(uraid_info), 536u);
  EXPECT_EQ(sizeof(uraid_member_info), 1048u);
  EXPECT_EQ(sizeof(uraid_progress), 584u);
  EXPECT_EQ(sizeof(uraid_grow_options), 64u);
  EXPECT_EQ(sizeof(uraid_event), 48u);
  EXPECT_EQ(sizeof(uraid_geometry), 40u);
  EXPECT_EQ(sizeof(uraid_location), 32u);
  EXPECT_EQ(sizeof(uraid_superblock), 4072u);
  EXPECT_EQ(sizeof(uraid_member_ops), 40u);
  EXPECT_EQ(sizeof(uraid_member_desc), 32u);
}

TEST(CApiErrno, LockedMemberIsEbusy) {
  std::string path = ::testing::TempDir() + "/capi_locked." +
                     std::to_string(::getpid()) + ".img";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, kRaw), 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);  // another "process"
  uraid_member* m = nullptr;
  char err[256] = "";
  // flock locks belong to the open file description: a second open is
  // refused even within one process.
  EXPECT_EQ(uraid_member_open(path.c_str(), 0, &m, err, sizeof err), -EBUSY);
  EXPECT_THAT(err, HasSubstr("locked"));
  EXPECT_EQ(uraid_member_open(path.c_str(), URAID_MEMBER_NO_LOCK, &m, err,
                              sizeof err),
            0)
      << err;
  EXPECT_EQ(uraid_member_size(m), kRaw);
  EXPECT_EQ(std::string(uraid_member_name(m)), path);
  uraid_member_free(m);
  ::close(fd);
  ::unlink(path.c_str());
  EXPECT_EQ(uraid::StatusToErrno(
                uraid::WithErrno(absl::FailedPreconditionError("x"), EBUSY)),
            EBUSY);
  EXPECT_EQ(uraid::StatusToErrno(absl::FailedPreconditionError("x")), EPERM);
}

TEST(CApiFaulty, RangeAndAfterRulesFailIo) {
  uraid_member* mem[3];
  uraid_member* f[3];
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(uraid_member_new_memory(("f" + std::to_string(i)).c_str(), kRaw,
                                      &mem[i], nullptr, 0),
              0);
    ASSERT_EQ(uraid_member_new_faulty(mem[i], &f[i], nullptr, 0), 0);
  }
  EXPECT_EQ(uraid_member_set_failed(mem[0], 1), -EINVAL) << "not faulty";
  EXPECT_STREQ(uraid_member_name(f[1]), "f1");
  uraid_create_options o;
  URAID_INIT(&o);
  o.chunk_bytes = kChunk;
  o.data_offset_bytes = kOffset;
  o.assume_clean = 1;
  o.bitmap = URAID_BITMAP_NONE;
  uraid_array* a = nullptr;
  ASSERT_EQ(uraid_create_from(f, 3, &o, &a, nullptr, 0), 0);
  std::vector<uint8_t> buf(2 * kChunk);
  // Reads of f1's first data chunk fail once: rebuilt from parity and
  // rewritten (md's read-error correction), so the read succeeds.
  ASSERT_EQ(uraid_member_fail_range(f[1], URAID_OP_READ, kOffset, 4096, 1), 0);
  EXPECT_EQ(uraid_member_fail_range(f[1], 7, 0, 1, 1), -EINVAL);
  ASSERT_EQ(uraid_read(a, buf.data(), buf.size(), 0, nullptr, 0), 0);
  uraid_info info;
  URAID_INIT(&info);
  ASSERT_EQ(uraid_get_info(a, &info), 0);
  EXPECT_FALSE(info.degraded);
  // f2 fails after its next I/O: the array goes degraded, data still reads.
  ASSERT_EQ(uraid_member_fail_after(f[2], 0), 0);
  std::vector<uint8_t> all(uraid_size(a));
  ASSERT_EQ(uraid_read(a, all.data(), all.size(), 0, nullptr, 0), 0);
  ASSERT_EQ(uraid_get_info(a, &info), 0);
  EXPECT_TRUE(info.degraded);
  EXPECT_EQ(info.slot_state[2], URAID_SLOT_FAULTY);
  uraid_close(a, nullptr, 0);
  for (int i = 0; i < 3; ++i) {
    uraid_member_free(f[i]);
    uraid_member_free(mem[i]);
  }
}

}  // namespace
