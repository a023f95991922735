// SPDX-License-Identifier: MIT
// Tests for finding an array's members by superblock: SelectMembers over
// hand-made superblocks (freshest wins, stale and faulty left out with a
// reason, copies of one slot), and ExpandDevices/ScanCandidates over real
// files in a temporary directory.

#include "discover/member_scan.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "uraid/superblock.h"

namespace uraid {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::array<uint8_t, 16> Uuid(uint8_t v) {
  std::array<uint8_t, 16> u{};
  u.fill(v);
  return u;
}

// A member of array `set` in `role` (dev_number = role for active ones),
// at `events`, whose table has `slots` active slots (+ `extra` more roles).
ScannedMember Sb(const std::string& spec, uint8_t set, uint32_t dev_number,
                 uint64_t events, std::vector<uint16_t> roles) {
  ScannedMember m;
  m.spec = spec;
  m.sb.set_uuid = Uuid(set);
  m.sb.device_uuid = Uuid(static_cast<uint8_t>(0x80 + dev_number));
  m.sb.dev_number = dev_number;
  m.sb.events = events;
  m.sb.dev_roles = std::move(roles);
  m.sb.set_name = "home";
  return m;
}

const std::vector<uint16_t> kRoles = {0, 1, 2, kRoleSpare};

TEST(SelectMembers, SlotOrderSparesLastOtherArraysIgnored) {
  std::vector<ScannedMember> s = {
      Sb("/c", 1, 2, 10, kRoles), Sb("/spare", 1, 3, 10, kRoles),
      Sb("/x", 2, 0, 99, kRoles), Sb("/a", 1, 0, 10, kRoles),
      Sb("/b", 1, 1, 10, kRoles)};
  absl::StatusOr<MemberSelection> sel = SelectMembers(s, Uuid(1));
  ASSERT_TRUE(sel.ok()) << sel.status();
  EXPECT_THAT(sel->members, ElementsAre("/a", "/b", "/c", "/spare"));
  EXPECT_THAT(sel->left_out, IsEmpty());
  EXPECT_EQ(sel->events, 10u);
  EXPECT_EQ(sel->name, "home");
}

TEST(SelectMembers, StaleLeftOutOneBehindKept) {
  std::vector<ScannedMember> s = {Sb("/a", 1, 0, 10, kRoles),
                                  Sb("/b", 1, 1, 9, kRoles),
                                  Sb("/c", 1, 2, 7, kRoles)};
  absl::StatusOr<MemberSelection> sel = SelectMembers(s, Uuid(1));
  ASSERT_TRUE(sel.ok()) << sel.status();
  EXPECT_THAT(sel->members, ElementsAre("/a", "/b"));
  ASSERT_EQ(sel->left_out.size(), 1u);
  EXPECT_THAT(sel->left_out[0],
              HasSubstr("/c: stale (events 7, the array is at 10)"));
}

TEST(SelectMembers, FaultyInNewestSuperblockLeftOut) {
  std::vector<uint16_t> roles = {0, kRoleFaulty, 2};
  std::vector<ScannedMember> s = {Sb("/a", 1, 0, 10, roles),
                                  Sb("/b", 1, 1, 10, kRoles),
                                  Sb("/c", 1, 2, 10, roles)};
  s[0].sb.events = 11;  // the newest says /b is faulty
  absl::StatusOr<MemberSelection> sel = SelectMembers(s, Uuid(1));
  ASSERT_TRUE(sel.ok()) << sel.status();
  EXPECT_THAT(sel->members, ElementsAre("/a", "/c"));
  ASSERT_EQ(sel->left_out.size(), 1u);
  EXPECT_THAT(sel->left_out[0], HasSubstr("/b: marked faulty"));
}

TEST(SelectMembers, OlderCopyOfASlotLeftOut) {
  ScannedMember copy = Sb("/a-copy", 1, 0, 9, kRoles);
  std::vector<ScannedMember> s = {copy, Sb("/a", 1, 0, 10, kRoles),
                                  Sb("/b", 1, 1, 10, kRoles)};
  absl::StatusOr<MemberSelection> sel = SelectMembers(s, Uuid(1));
  ASSERT_TRUE(sel.ok()) << sel.status();
  EXPECT_THAT(sel->members, ElementsAre("/a", "/b"));
  ASSERT_EQ(sel->left_out.size(), 1u);
  EXPECT_THAT(sel->left_out[0],
              HasSubstr("/a-copy: an older copy of slot 0 (events 9; /a has "
                        "10)"));
}

TEST(SelectMembers, EqualCopiesOfASlotRefused) {
  std::vector<ScannedMember> s = {Sb("/a", 1, 0, 10, kRoles),
                                  Sb("/a-copy", 1, 0, 10, kRoles),
                                  Sb("/b", 1, 1, 10, kRoles)};
  absl::StatusOr<MemberSelection> sel = SelectMembers(s, Uuid(1));
  ASSERT_FALSE(sel.ok());
  EXPECT_EQ(sel.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(sel.status().message(),
              HasSubstr("/a and /a-copy both hold slot 0"));
  // Two spares with one device uuid too.
  s = {Sb("/a", 1, 0, 10, kRoles), Sb("/s1", 1, 3, 10, kRoles),
       Sb("/s2", 1, 3, 10, kRoles)};
  sel = SelectMembers(s, Uuid(1));
  ASSERT_FALSE(sel.ok());
  EXPECT_THAT(sel.status().message(), HasSubstr("/s1 and /s2 both hold"));
}

TEST(SelectMembers, NoneOfTheArrayIsNotFound) {
  std::vector<ScannedMember> s = {Sb("/a", 2, 0, 10, kRoles)};
  absl::StatusOr<MemberSelection> sel = SelectMembers(s, Uuid(1));
  ASSERT_FALSE(sel.ok());
  EXPECT_EQ(sel.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(sel.status().message(), HasSubstr("among the 1 candidate"));
}

class ScanFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/member-scan-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::vector<uint8_t>& at4k,
                    size_t size) {
    const std::string path = dir_ + "/" + name;
    std::ofstream f(path, std::ios::binary);
    std::vector<uint8_t> bytes(size);
    std::copy(at4k.begin(), at4k.end(), bytes.begin() + 4096);
    f.write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return path;
  }
  // A 64 KiB member file holding slot 0 of a 3-member array `set`.
  std::string WriteMember(const std::string& name, uint8_t set) {
    Superblock sb;
    sb.set_uuid = Uuid(set);
    sb.raid_disks = 3;
    sb.chunksize = 128;
    sb.data_offset = 2048;
    sb.data_size = 4096;
    sb.size = 4096;
    sb.dev_roles = {0, 1, 2};
    return Write(name, EncodeSuperblock(sb), 64 << 10);
  }
  std::string dir_;
};

TEST_F(ScanFiles, GlobsRealpathsAndSuperblocks) {
  const std::string a = WriteMember("a.img", 7);
  const std::string junk =
      Write("junk.img", std::vector<uint8_t>(16, 0xAB), 64 << 10);
  const std::string tiny = Write("tiny.img", {}, 100);
  ASSERT_EQ(symlink(a.c_str(), (dir_ + "/link.img").c_str()), 0);
  std::filesystem::create_directory(dir_ + "/d.img");

  std::vector<std::string> specs = ExpandDevices(
      {dir_ + "/*.img", a, dir_ + "/none-*", "nbd+unix:///?socket=/x"});
  // Sorted glob, the symlink and the repeat folded into a.img, the
  // directory and the unmatched pattern dropped, the URI as given.
  EXPECT_THAT(specs, ElementsAre(a, junk, tiny, "nbd+unix:///?socket=/x"));

  std::vector<std::string> skipped;
  std::vector<ScannedMember> found =
      ScanCandidates({a, junk, tiny}, MemberOptions{}, &skipped);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].spec, a);
  EXPECT_EQ(found[0].sb.set_uuid, Uuid(7));
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_THAT(skipped[0], HasSubstr(junk + ": "));
  EXPECT_THAT(skipped[1], HasSubstr(tiny + ": too small"));
}

// The array= / `uraid serve NAME` lookup the tool and the plugin share:
// the ARRAY line by name or uuid, else a bare uuid, else NotFound.
TEST(ResolveArrayRef, NameUuidBareUuidOrNotFound) {
  ConfigFile config;
  config.path = "/etc/uraid/uraid.conf";
  ConfigArray home;
  home.name = "home";
  home.uuid = Uuid(7);
  config.arrays.push_back(home);

  absl::StatusOr<ArrayRef> by_name = ResolveArrayRef(config, "home");
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  ASSERT_TRUE(by_name->entry.has_value());
  EXPECT_EQ(by_name->entry->name, "home");
  EXPECT_EQ(by_name->uuid, Uuid(7));

  absl::StatusOr<ArrayRef> by_uuid =
      ResolveArrayRef(config, FormatUuid(Uuid(7)));
  ASSERT_TRUE(by_uuid.ok()) << by_uuid.status();
  ASSERT_TRUE(by_uuid->entry.has_value());
  EXPECT_EQ(by_uuid->entry->name, "home");

  absl::StatusOr<ArrayRef> bare = ResolveArrayRef(config, FormatUuid(Uuid(9)));
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_FALSE(bare->entry.has_value());
  EXPECT_EQ(bare->uuid, Uuid(9));

  absl::StatusOr<ArrayRef> none = ResolveArrayRef(config, "work");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(none.status().message(),
            "no ARRAY named 'work' in /etc/uraid/uraid.conf and not a uuid");
}

// The DEVICE lines expanded, scanned and selected from; the candidate
// count is given on success and on failure (the tool's message has it).
TEST_F(ScanFiles, FindConfiguredMembersCountsCandidates) {
  const std::string a = WriteMember("a.img", 7);
  Write("junk.img", std::vector<uint8_t>(16, 0xAB), 64 << 10);
  ConfigFile config;
  config.devices = {dir_ + "/*.img"};

  size_t candidates = 0;
  absl::StatusOr<MemberSelection> sel =
      FindConfiguredMembers(config, Uuid(7), MemberOptions{}, &candidates);
  ASSERT_TRUE(sel.ok()) << sel.status();
  EXPECT_THAT(sel->members, ElementsAre(a));
  EXPECT_EQ(candidates, 2u);

  candidates = 0;
  sel = FindConfiguredMembers(config, Uuid(8), MemberOptions{}, &candidates);
  ASSERT_FALSE(sel.ok());
  EXPECT_EQ(sel.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(candidates, 2u);
}

// mdadm's `DEVICE partitions` is every device of /proc/partitions, never a
// file of that name in the working directory (which a glob would take).
TEST(ExpandDevices, PartitionsIsMdadmsWordNotAGlob) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("uraid-partitions-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "partitions") << "not a device";
  const std::filesystem::path cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir);
  const std::vector<std::string> devices = ExpandDevices({"partitions"});
  std::filesystem::current_path(cwd);
  std::filesystem::remove_all(dir);
  std::ifstream proc("/proc/partitions");
  std::string listed((std::istreambuf_iterator<char>(proc)),
                     std::istreambuf_iterator<char>());
  for (const std::string& d : devices) {
    EXPECT_NE(d, (dir / "partitions").string());
    EXPECT_TRUE(std::filesystem::is_block_file(d)) << d;
  }
  // Each /dev/NAME that exists here is expanded (by its realpath).
  std::istringstream lines(listed);
  std::string line;
  size_t present = 0;
  while (std::getline(lines, line)) {
    std::istringstream w(line);
    unsigned long major, minor;
    unsigned long long blocks;
    std::string name;
    if (!(w >> major >> minor >> blocks >> name)) continue;
    if (std::filesystem::is_block_file("/dev/" + name)) ++present;
  }
  EXPECT_EQ(devices.size(), present);
}

}  // namespace
}  // namespace uraid
