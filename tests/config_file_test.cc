// SPDX-License-Identifier: MIT
// Tests for the uraid.conf parser: table tests of accepted files (what each
// keyword yields) and of refused ones (the exact "file:line: why").

#include "discover/config_file.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "uraid/superblock.h"

namespace uraid {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kUuidA[] = "0123abcd:4567ef01:89abcdef:01234567";
constexpr char kUuidB[] = "ffffffff-00000000-11111111-22222222";

TEST(ParseUuid, AcceptsMdadmAndBlkidSpellings) {
  for (const char* text : {"0123abcd:4567ef01:89abcdef:01234567",
                           "0123abcd-4567-ef01-89ab-cdef01234567",
                           "0123ABCD4567EF0189ABCDEF01234567",
                           "0123abcd.4567ef01.89abcdef.01234567"}) {
    absl::StatusOr<std::array<uint8_t, 16>> u = ParseUuid(text);
    ASSERT_TRUE(u.ok()) << text << ": " << u.status();
    EXPECT_EQ(FormatUuid(*u), kUuidA) << text;
  }
}

TEST(ParseUuid, RefusesWrongLengthAndNonHex) {
  for (const char* text : {"", "0123", "0123abcd:4567ef01:89abcdef:0123456",
                           "0123abcd:4567ef01:89abcdef:012345678",
                           "0123abcd:4567ef01:89abcdef:0123456g"}) {
    EXPECT_FALSE(ParseUuid(text).ok()) << text;
  }
}

TEST(ParseConfig, EveryKeyword) {
  const std::string text =
      std::string(
          "# uraid.conf\n"
          "DEVICE /srv/raid/*.img /dev/disk/by-id/*  # two\n"
          "device nbd://host/export\n"
          "ARRAY home uuid=") +
      kUuidA +
      " bitmap=/var/lib/uraid/home.bitmap\n"
      "   socket=/run/home.sock control=/run/home.ctl\n"
      "\tcache=64M readonly\n"
      "\n"
      "arr media UUID=" +
      kUuidB +
      "\n"
      "MAILADDR root admin@example.org\n"
      "PROG /usr/local/bin/alert\n";
  absl::StatusOr<ConfigFile> c = ParseConfig(text, "uraid.conf");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->devices, ElementsAre("/srv/raid/*.img", "/dev/disk/by-id/*",
                                      "nbd://host/export"));
  ASSERT_EQ(c->arrays.size(), 2u);
  const ConfigArray& home = c->arrays[0];
  EXPECT_EQ(home.name, "home");
  EXPECT_EQ(FormatUuid(home.uuid), kUuidA);
  EXPECT_EQ(home.bitmap, "/var/lib/uraid/home.bitmap");
  EXPECT_EQ(home.socket, "/run/home.sock");
  EXPECT_EQ(home.control, "/run/home.ctl");
  EXPECT_EQ(home.cache_bytes, 64u << 20);
  EXPECT_TRUE(home.readonly);
  EXPECT_EQ(home.line, 4);
  const ConfigArray& media = c->arrays[1];
  EXPECT_EQ(media.name, "media");
  EXPECT_EQ(FormatUuid(media.uuid), "ffffffff:00000000:11111111:22222222");
  EXPECT_TRUE(media.bitmap.empty());
  EXPECT_FALSE(media.cache_bytes.has_value());
  EXPECT_FALSE(media.readonly);
  EXPECT_EQ(media.line, 8);
  EXPECT_THAT(c->mailaddr, ElementsAre("root", "admin@example.org"));
  EXPECT_EQ(c->program, "/usr/local/bin/alert");

  EXPECT_EQ(FindConfigArray(*c, "media"), &c->arrays[1]);
  EXPECT_EQ(FindConfigArray(*c, "0123abcd-4567-ef01-89ab-cdef01234567"),
            &c->arrays[0]);
  EXPECT_EQ(FindConfigArray(*c, "nosuch"), nullptr);
}

TEST(ParseConfig, EmptyCommentsQuotesAndCrlf) {
  absl::StatusOr<ConfigFile> c = ParseConfig("", "u.conf");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->devices.empty());
  EXPECT_TRUE(c->arrays.empty());
  c = ParseConfig(
      "  \n# only a comment\nDEVICE \"/srv/my raid/*.img\" a#b #c d\r\n",
      "u.conf");
  ASSERT_TRUE(c.ok()) << c.status();
  // '#' starts a comment only at the start of a word (mdadm's rule).
  EXPECT_THAT(c->devices, ElementsAre("/srv/my raid/*.img", "a#b"));
}

struct BadCase {
  const char* text;
  const char* error;  // the whole message
};

class ParseConfigRefuses : public ::testing::TestWithParam<BadCase> {};

TEST_P(ParseConfigRefuses, NamingFileAndLine) {
  absl::StatusOr<ConfigFile> c = ParseConfig(GetParam().text, "uraid.conf");
  ASSERT_FALSE(c.ok()) << GetParam().text;
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(), GetParam().error);
}

#define UA "0123abcd:4567ef01:89abcdef:01234567"
#define UB "ffffffff:00000000:11111111:22222222"

INSTANTIATE_TEST_SUITE_P(
    Table, ParseConfigRefuses,
    ::testing::Values(
        BadCase{"DEVICE /a\n\n\n\n\n\nARRY x uuid=" UA "\n",
                "uraid.conf:7: unknown keyword 'ARRY' (expected DEVICE, "
                "ARRAY, MAILADDR or PROGRAM)"},
        BadCase{"AR x uuid=" UA "\n",
                "uraid.conf:1: unknown keyword 'AR' (expected DEVICE, ARRAY, "
                "MAILADDR or PROGRAM)"},
        BadCase{"HOMEHOST <system>\n",
                "uraid.conf:1: unknown keyword 'HOMEHOST' (expected DEVICE, "
                "ARRAY, MAILADDR or PROGRAM)"},
        BadCase{"ARRAY x uuid=0123\n",
                "uraid.conf:1: bad uuid '0123' (4 hex digits; expected 32)"},
        BadCase{"ARRAY x uuid=zz23abcd:4567ef01:89abcdef:01234567\n",
                "uraid.conf:1: bad uuid "
                "'zz23abcd:4567ef01:89abcdef:01234567' (expected 32 hex "
                "digits, e.g. as uraid examine prints it)"},
        BadCase{"ARRAY x\n",
                "uraid.conf:1: ARRAY x has no uuid= (uraid "
                "examine --scan prints the line to use)"},
        BadCase{"ARRAY uuid=" UA "\n",
                "uraid.conf:1: ARRAY needs a NAME first: ARRAY NAME "
                "uuid=UUID [...]"},
        BadCase{"ARRAY\n",
                "uraid.conf:1: ARRAY needs a NAME first: ARRAY "
                "NAME uuid=UUID [...]"},
        BadCase{"ARRAY a/b uuid=" UA "\n",
                "uraid.conf:1: bad array name 'a/b' (letters, digits, '.', "
                "'_', '-', '+'; not starting with '.' or '-')"},
        BadCase{"ARRAY x uuid=" UA "\nARRAY x uuid=" UB "\n",
                "uraid.conf:2: array name 'x' is already used on line 1"},
        BadCase{"ARRAY x uuid=" UA "\n# c\nARRAY y\n  uuid=" UA "\n",
                "uraid.conf:3: uuid " UA " is already array 'x' on line 1"},
        BadCase{
            "ARRAY x uuid=" UA " level=5\n",
            "uraid.conf:1: unknown ARRAY tag 'level=' "
            "(expected uuid=, bitmap=, socket=, control=, cache=, readonly, "
            "control-group=, spares=, timeout=, cache-age=, log=, run, "
            "direct, metadata=, name=)"},
        BadCase{
            "ARRAY x uuid=" UA " ro\n",
            "uraid.conf:1: unknown ARRAY word 'ro' "
            "(expected uuid=, bitmap=, socket=, control=, cache=, readonly, "
            "control-group=, spares=, timeout=, cache-age=, log=, run, "
            "direct, metadata=, name=)"},
        BadCase{"ARRAY x uuid=" UA " metadata=0.90\n",
                "uraid.conf:1: metadata=0.90: uraid reads md's v1.2 "
                "superblocks only (metadata=1.2)"},
        BadCase{"ARRAY x uuid=" UA " spares=65\n",
                "uraid.conf:1: spares=: '65' is more than 64"},
        BadCase{"ARRAY x uuid=" UA " timeout=0\n",
                "uraid.conf:1: timeout=0: give milliseconds, 1 or more"},
        BadCase{"ARRAY x uuid=" UA " log=file\n",
                "uraid.conf:1: log=file: expected auto, stderr, syslog or "
                "journal"},
        BadCase{"ARRAY x uuid=" UA " run=yes\n",
                "uraid.conf:1: 'run' takes no value (write it alone)"},
        BadCase{"ARRAY /dev/md/a/b uuid=" UA "\n",
                "uraid.conf:1: bad array name 'a/b' (letters, digits, '.', "
                "'_', '-', '+'; not starting with '.' or '-')"},
        BadCase{"ARRAY x uuid=" UA " uuid=" UB "\n",
                "uraid.conf:1: 'uuid' given twice"},
        BadCase{"ARRAY x uuid=" UA " socket=\n",
                "uraid.conf:1: 'socket=' has no value"},
        BadCase{"ARRAY x uuid=" UA " readonly=yes\n",
                "uraid.conf:1: 'readonly' takes no value (write it alone)"},
        BadCase{"ARRAY x uuid=" UA " cache=1.5M\n",
                "uraid.conf:1: cache=: bad size '1.5M' (expected bytes, or a "
                "number with K, M, G, T)"},
        BadCase{"ARRAY x uuid=" UA " cache=99999999999999999999\n",
                "uraid.conf:1: cache=: size '99999999999999999999' is too "
                "large"},
        BadCase{"ARRAY x uuid=" UA " cache=20000000T\n",
                "uraid.conf:1: cache=: size '20000000T' is too large"},
        BadCase{"DEVICE\n",
                "uraid.conf:1: DEVICE needs at least one path, "
                "glob or NBD URI"},
        BadCase{"MAILADDR\n",
                "uraid.conf:1: MAILADDR needs at least one address"},
        BadCase{"PROGRAM /a\nPROGRAM /b\n",
                "uraid.conf:2: a second PROGRAM (the first is on line 1)"},
        BadCase{"PROGRAM /a /b\n", "uraid.conf:1: PROGRAM takes one path"},
        BadCase{"# c\n  /dev/sda\n",
                "uraid.conf:2: '/dev/sda': a line starting with whitespace "
                "continues the previous one, and there is none"},
        BadCase{"DEVICE \"/a b\n", "uraid.conf:1: unterminated \" quote"}));

// The plugin's keys as tags, and mdadm's own ARRAY lines as mdadm
// --detail --scan prints them.
TEST(ParseConfig, PluginKeysAndMdadmLines) {
  absl::StatusOr<ConfigFile> c = ParseConfig(
      "DEVICE partitions /srv/*.img\n"
      "ARRAY x uuid=" UA
      " control-group=mon spares=2 timeout=5000\n"
      "  cache-age=50 log=syslog run direct\n"
      "ARRAY /dev/md/home metadata=1.2 UUID=" UB
      " name=host:home\n"
      "ARRAY /dev/md0 uuid=fedcba98:76543210:fedcba98:76543210\n",
      "u.conf");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->devices, ElementsAre("partitions", "/srv/*.img"));
  ASSERT_EQ(c->arrays.size(), 3u);
  const ConfigArray& x = c->arrays[0];
  EXPECT_EQ(x.control_group, "mon");
  EXPECT_EQ(x.spares, 2);
  EXPECT_EQ(x.timeout_ms, 5000u);
  EXPECT_EQ(x.cache_age_ms, 50u);
  EXPECT_EQ(x.log, "syslog");
  EXPECT_TRUE(x.run);
  EXPECT_TRUE(x.direct);
  EXPECT_FALSE(x.readonly);
  EXPECT_EQ(c->arrays[1].name, "home");
  EXPECT_EQ(c->arrays[1].md_name, "host:home");
  EXPECT_EQ(FormatUuid(c->arrays[1].uuid), UB);
  EXPECT_FALSE(c->arrays[1].spares.has_value());
  EXPECT_EQ(c->arrays[2].name, "md0");
}

TEST(ConfigControlSocket, InTheRunDirectory) {
  ConfigArray a;
  a.name = "home";
  setenv("URAID_RUN_DIR", "/tmp/run-here", 1);
  EXPECT_EQ(DefaultRunDir(), "/tmp/run-here");
  EXPECT_EQ(ConfigControlSocket(a), "/tmp/run-here/home.ctl");
  unsetenv("URAID_RUN_DIR");
  EXPECT_EQ(ConfigControlSocket(a), "/run/uraid/home.ctl");
  a.control = "/elsewhere.ctl";
  EXPECT_EQ(ConfigControlSocket(a), "/elsewhere.ctl");
}

TEST(ParseConfig, CacheSuffixes) {
  for (const auto& [text, bytes] :
       std::vector<std::pair<std::string, uint64_t>>{{"4096", 4096},
                                                     {"512K", 512 << 10},
                                                     {"512k", 512 << 10},
                                                     {"64MiB", 64 << 20},
                                                     {"1G", 1ull << 30},
                                                     {"2TB", 2ull << 40},
                                                     {"0", 0}}) {
    absl::StatusOr<ConfigFile> c =
        ParseConfig("ARRAY x uuid=" UA " cache=" + text + "\n", "u.conf");
    ASSERT_TRUE(c.ok()) << text << ": " << c.status();
    EXPECT_EQ(c->arrays[0].cache_bytes, bytes) << text;
  }
}

TEST(ValidArrayName, Table) {
  for (const char* ok : {"home", "md0", "a.b_c-d+e", "0"}) {
    EXPECT_TRUE(ValidArrayName(ok)) << ok;
  }
  for (const char* bad : {"", ".x", "-x", "a b", "a/b", "host:name", "a@b"}) {
    EXPECT_FALSE(ValidArrayName(bad)) << bad;
  }
}

TEST(LoadConfigFile, MissingFileNamesIt) {
  absl::StatusOr<ConfigFile> c = LoadConfigFile("/nonexistent/uraid.conf");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(c.status().message(), HasSubstr("/nonexistent/uraid.conf"));
}

}  // namespace
}  // namespace uraid
