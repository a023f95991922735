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
