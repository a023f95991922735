// SPDX-License-Identifier: MIT
#include "serve_threads.h"

#include <linux/magic.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace uraid::tool {
namespace {

namespace fs = std::filesystem;

bool OnMemoryFs(const std::string& dir) {
  struct statfs st;
  return statfs(dir.c_str(), &st) == 0 &&
         (st.f_type == TMPFS_MAGIC || st.f_type == RAMFS_MAGIC);
}

// A file made in `dir`, removed with the fixture.
class ServeThreadsTest : public ::testing::Test {
 protected:
  std::string MakeFile(const std::string& dir) {
    const std::string p = dir + "/serve_threads_test." +
                          std::to_string(getpid()) + "." +
                          std::to_string(made_.size());
    std::ofstream(p) << "x";
    made_.push_back(p);
    return p;
  }
  void TearDown() override {
    for (const std::string& p : made_) std::remove(p.c_str());
  }
  std::vector<std::string> made_;
};

TEST_F(ServeThreadsTest, FilesOnTmpfsAreMemory) {
  if (!OnMemoryFs("/dev/shm")) GTEST_SKIP() << "/dev/shm is not tmpfs here";
  EXPECT_TRUE(IsMemoryMember(MakeFile("/dev/shm")));
}

TEST_F(ServeThreadsTest, FilesOnADiskFilesystemAreNot) {
  const std::string here = fs::current_path().string();
  if (OnMemoryFs(here)) GTEST_SKIP() << here << " is a memory filesystem";
  EXPECT_FALSE(IsMemoryMember(MakeFile(here)));
}

TEST_F(ServeThreadsTest, UrisMissingPathsAndOtherFilesAreNot) {
  EXPECT_FALSE(IsMemoryMember("nbd+unix:///m0?socket=/dev/shm/m0.sock"));
  EXPECT_FALSE(IsMemoryMember("nbd://localhost/m0"));
  EXPECT_FALSE(IsMemoryMember("/dev/shm/no-such-member-of-serve-threads"));
  EXPECT_FALSE(IsMemoryMember("/dev/shm"));   // a directory
  EXPECT_FALSE(IsMemoryMember("/dev/null"));  // a character device
}

// Every block device this machine has a node for (its sysfs name under
// /sys/block, the node /dev/NAME) is memory exactly when its name says so:
// read through the device number, as serve does for member=/dev/...
TEST_F(ServeThreadsTest, BlockDevicesAreMemoryByTheirKernelName) {
  int seen = 0;
  std::error_code ec;
  for (const fs::directory_entry& e :
       fs::directory_iterator("/sys/block", ec)) {
    const std::string name = e.path().filename().string();
    const std::string node = "/dev/" + name;
    if (!fs::is_block_file(node, ec)) continue;
    const bool memory = name.starts_with("ram") || name.starts_with("zram") ||
                        name.starts_with("pmem");
    EXPECT_EQ(IsMemoryMember(node), memory) << node;
    ++seen;
  }
  if (seen == 0) GTEST_SKIP() << "no block device nodes under /dev";
}

TEST_F(ServeThreadsTest, CpusWhenEveryMemberIsMemory) {
  if (!OnMemoryFs("/dev/shm")) GTEST_SKIP() << "/dev/shm is not tmpfs here";
  const std::vector<std::string> memory = {
      MakeFile("/dev/shm"), MakeFile("/dev/shm"), MakeFile("/dev/shm")};
  EXPECT_EQ(DefaultThreads(memory, 8), 8);
  EXPECT_EQ(DefaultThreads(memory, 2), 2);
  // Never one: a held stream write needs a thread left to receive the
  // request that fills its stripe.
  EXPECT_EQ(DefaultThreads(memory, 1), 2);
  // One member that is not memory keeps nbdkit's default.
  std::vector<std::string> mixed = memory;
  mixed.push_back("nbd+unix:///m3?socket=/dev/shm/m3.sock");
  EXPECT_EQ(DefaultThreads(mixed, 8), std::nullopt);
  EXPECT_EQ(DefaultThreads({}, 8), std::nullopt);
}

TEST_F(ServeThreadsTest, AvailableCpusIsAtLeastOne) {
  EXPECT_GE(AvailableCpus(), 1);
}

}  // namespace
}  // namespace uraid::tool
