// SPDX-License-Identifier: MIT
// Tests for `uraid status`'s /proc/mdstat blocks (tools/mdstat_format.h):
// the exact lines for a healthy, a degraded and a rebuilding array, md's
// progress bar at its ends, and a resync that waits.

#include "mdstat_format.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace uraid::tool {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t kMiB = 1 << 20;

ArrayInfo FourMembers() {
  ArrayInfo info{.geometry = *Geometry::Make(5, Layout::kLeftSymmetric,
                                             512 << 10, 4, 64 * kMiB)};
  for (int i = 0; i < 4; ++i) {
    SlotInfo s;
    s.slot = i;
    s.state = SlotState::kActive;
    s.name = "/srv/raid/m" + std::to_string(i) + ".img";
    s.dev_number = static_cast<uint32_t>(i);
    info.slots.push_back(s);
  }
  return info;
}

TEST(MdstatBlock, Healthy) {
  ArrayInfo info = FourMembers();
  info.bitmap.present = true;
  info.bitmap.offset_bytes = 8192;
  info.bitmap.chunks = 16;
  info.bitmap.dirty_chunks = 3;
  info.bitmap.chunk_bytes = 64 * kMiB;
  EXPECT_EQ(MdstatBlock("home", "/run/uraid/home.ctl", info),
            "home : active raid5 m0.img[0] m1.img[1] m2.img[2] m3.img[3]\n"
            "      196608 blocks super 1.2 level 5, 512k chunk, algorithm 2 "
            "[4/4] [UUUU]\n"
            "      bitmap: 3/16 chunks dirty, 65536KB chunk\n"
            "      state: clean; control /run/uraid/home.ctl\n");
}

TEST(MdstatBlock, DegradedWithFaultyMissingAndSpare) {
  ArrayInfo info = FourMembers();
  info.degraded = true;
  info.slots[1].state = SlotState::kFaulty;
  info.slots[3].state = SlotState::kMissing;
  info.slots[3].name.clear();
  SlotInfo spare;
  spare.slot = -1;
  spare.state = SlotState::kSpare;
  spare.name = "nbd://host/spare";
  spare.dev_number = 5;
  info.spares.push_back(spare);
  info.read_only = true;
  const std::string block = MdstatBlock("b", "/c", info);
  EXPECT_THAT(block, HasSubstr("b : active (read-only) raid5 m0.img[0] "
                               "m1.img[1](F) m2.img[2] "
                               "nbd://host/spare[5](S)\n"));
  EXPECT_THAT(block, HasSubstr(" [4/2] [U_U_]\n"));
  EXPECT_THAT(block, Not(HasSubstr("bitmap")));
}

TEST(MdstatJobLine, RecoveryInMdsWords) {
  ArrayInfo info = FourMembers();
  info.slots[2].state = SlotState::kRebuilding;
  info.job.kind = JobKind::kRecover;
  info.job.total_bytes = 64 * kMiB;
  info.job.done_bytes = 16 * kMiB;  // 25.0%: 5 of md's 20 steps
  info.job.bytes_per_s = 1 * kMiB;  // 48 MiB left: 48 s = 0.8 min
  EXPECT_EQ(MdstatJobLine(info),
            "[=====>...............]  recovery = 25.0% (16384/65536) "
            "finish=0.8min speed=1024K/sec");
  EXPECT_THAT(MdstatBlock("c", "/c", info),
              HasSubstr("[4/3] [UU_U]\n      [=====>"));
}

TEST(MdstatJobLine, BarEndsAndUnknownEta) {
  ArrayInfo info = FourMembers();
  info.job.kind = JobKind::kCheck;
  info.job.total_bytes = 1000;
  EXPECT_EQ(MdstatJobLine(info),
            "[>....................]  check =  0.0% (0/0) speed=0K/sec");
  info.job.done_bytes = 1000;
  info.job.kind = JobKind::kRepair;
  EXPECT_THAT(MdstatJobLine(info),
              HasSubstr("[====================>]  repair =100.0%"));
}

TEST(MdstatJobLine, PendingResyncAndIdle) {
  ArrayInfo info = FourMembers();
  EXPECT_EQ(MdstatJobLine(info), "");
  info.clean = false;  // active: being written, nothing pending
  EXPECT_EQ(MdstatJobLine(info), "");
  info.resyncing = true;  // a resync not started yet
  EXPECT_EQ(MdstatJobLine(info), "resync=PENDING");
  info.resyncing = false;
  info.read_only = true;  // dirty, served read-only
  EXPECT_EQ(MdstatJobLine(info), "resync=PENDING");
  info.resyncing = true;
  info.ppl = true;  // the log is replayed at a writable assembly instead
  EXPECT_EQ(MdstatJobLine(info), "");
}

}  // namespace
}  // namespace uraid::tool
