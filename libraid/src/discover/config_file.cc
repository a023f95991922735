// SPDX-License-Identifier: MIT
#include "discover/config_file.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "uraid/superblock.h"

namespace uraid {
namespace {

// A logical line: its words (comments and quotes removed) and the physical
// line it starts on.
struct Line {
  int number = 0;
  std::vector<std::string> words;
};

absl::Status LineError(const std::string& path, int line,
                       absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ":", line, ": ", what));
}

// DEVICE and MAILADDR: one word or more, appended to `out` (either keyword
// may repeat). `missing` is the error for a keyword with no word.
absl::Status AppendWords(const std::string& path, const Line& line,
                         absl::string_view missing,
                         std::vector<std::string>& out) {
  if (line.words.size() < 2) return LineError(path, line.number, missing);
  out.insert(out.end(), line.words.begin() + 1, line.words.end());
  return absl::OkStatus();
}

// Splits one physical line into words. '#' at the start of a word starts a
// comment; "..." and '...' quote a word with spaces (as mdadm's conf_word).
absl::Status SplitWords(absl::string_view text, const std::string& path,
                        int number, std::vector<std::string>& words) {
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && absl::ascii_isspace(text[i])) ++i;
    if (i >= text.size() || text[i] == '#') return absl::OkStatus();
    std::string word;
    while (i < text.size() && !absl::ascii_isspace(text[i])) {
      const char c = text[i];
      if (c == '"' || c == '\'') {
        const size_t end = text.find(c, i + 1);
        if (end == absl::string_view::npos) {
          return LineError(path, number,
                           absl::StrFormat("unterminated %c quote", c));
        }
        absl::StrAppend(&word, text.substr(i + 1, end - i - 1));
        i = end + 1;
      } else {
        word.push_back(c);
        ++i;
      }
    }
    words.push_back(std::move(word));
  }
  return absl::OkStatus();
}

// mdadm's continuation rule: a line that starts with whitespace belongs to
// the previous logical line.
absl::StatusOr<std::vector<Line>> LogicalLines(absl::string_view text,
                                               const std::string& path) {
  std::vector<Line> lines;
  int number = 0;
  for (absl::string_view physical : absl::StrSplit(text, '\n')) {
    ++number;
    if (!physical.empty() && physical.back() == '\r') physical.remove_suffix(1);
    std::vector<std::string> words;
    if (absl::Status s = SplitWords(physical, path, number, words); !s.ok()) {
      return s;
    }
    if (words.empty()) continue;
    if (!absl::ascii_isspace(physical.front())) {
      lines.push_back(Line{number, std::move(words)});
      continue;
    }
    if (lines.empty()) {
      return LineError(path, number,
                       absl::StrCat("'", words.front(),
                                    "': a line starting with whitespace "
                                    "continues the previous one, and there "
                                    "is none"));
    }
    for (std::string& w : words) lines.back().words.push_back(std::move(w));
  }
  return lines;
}

enum class Keyword { kDevice, kArray, kMailaddr, kProgram };

// mdadm's match_keyword: case-insensitive, any prefix of 3 letters or more.
std::optional<Keyword> MatchKeyword(absl::string_view word) {
  static constexpr std::pair<const char*, Keyword> kKeywords[] = {
      {"DEVICE", Keyword::kDevice},
      {"ARRAY", Keyword::kArray},
      {"MAILADDR", Keyword::kMailaddr},
      {"PROGRAM", Keyword::kProgram}};
  if (word.size() < 3) return std::nullopt;
  for (const auto& [name, keyword] : kKeywords) {
    if (word.size() <= std::strlen(name) &&
        absl::EqualsIgnoreCase(word, absl::string_view(name, word.size()))) {
      return keyword;
    }
  }
  return std::nullopt;
}

// "512K", "64M", "1G", "4096": binary suffixes, as the tool's sizes.
absl::StatusOr<uint64_t> ParseConfigSize(absl::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && absl::ascii_isdigit(text[digits])) ++digits;
  if (digits == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad size '", text, "' (expected bytes, or a number with K, M, G, T)"));
  }
  uint64_t value = 0;
  for (size_t i = 0; i < digits; ++i) {
    const uint64_t d = static_cast<uint64_t>(text[i] - '0');
    if (value > (UINT64_MAX - d) / 10) {
      return absl::InvalidArgumentError(
          absl::StrCat("size '", text, "' is too large"));
    }
    value = value * 10 + d;
  }
  std::string suffix = absl::AsciiStrToUpper(text.substr(digits));
  int shift = 0;
  if (!suffix.empty()) {
    const char unit = suffix[0];
    const std::string rest = suffix.substr(1);
    shift = unit == 'K'   ? 10
            : unit == 'M' ? 20
            : unit == 'G' ? 30
            : unit == 'T' ? 40
                          : -1;
    if (shift < 0 || !(rest.empty() || rest == "B" || rest == "IB")) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad size '", text,
                       "' (expected bytes, or a number with K, M, G, "
                       "T)"));
    }
  }
  if (shift > 0 && value > (UINT64_MAX >> shift)) {
    return absl::InvalidArgumentError(
        absl::StrCat("size '", text, "' is too large"));
  }
  return value << shift;
}

// The ARRAY words the parser knows, for its refusals.
constexpr char kTags[] =
    "uuid=, bitmap=, socket=, control=, cache=, readonly, control-group=, "
    "spares=, timeout=, cache-age=, log=, run, direct, metadata=, name=";

// A plain decimal count in [0, max].
absl::StatusOr<uint64_t> ParseCount(absl::string_view text, uint64_t max) {
  uint64_t value = 0;
  if (text.empty()) return absl::InvalidArgumentError("no number");
  for (char c : text) {
    if (!absl::ascii_isdigit(c)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", text, "' is not a number"));
    }
    value = value * 10 + static_cast<uint64_t>(c - '0');
    if (value > max) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", text, "' is more than ", max));
    }
  }
  return value;
}

// mdadm names an array by its device: /dev/md/NAME is NAME, /dev/mdN is
// "mdN"; anything else is the name as written.
std::string MdadmArrayName(const std::string& word) {
  if (absl::StartsWith(word, "/dev/md/")) return word.substr(8);
  if (absl::StartsWith(word, "/dev/md")) return word.substr(5);
  return word;
}

absl::Status ParseArray(const Line& line, const std::string& path,
                        ConfigFile& config) {
  auto error = [&](absl::string_view what) {
    return LineError(path, line.number, what);
  };
  if (line.words.size() < 2 || absl::StrContains(line.words[1], "=")) {
    return error("ARRAY needs a NAME first: ARRAY NAME uuid=UUID [...]");
  }
  ConfigArray array;
  array.line = line.number;
  array.name = MdadmArrayName(line.words[1]);
  if (!ValidArrayName(array.name)) {
    return error(absl::StrCat(
        "bad array name '", array.name,
        "' (letters, digits, '.', '_', '-', '+'; not starting with '.' or "
        "'-')"));
  }
  bool have_uuid = false;
  std::vector<std::string> seen;
  for (size_t i = 2; i < line.words.size(); ++i) {
    const std::string& word = line.words[i];
    const size_t eq = word.find('=');
    const std::string key = absl::AsciiStrToLower(word.substr(0, eq));
    const std::string value =
        eq == std::string::npos ? "" : word.substr(eq + 1);
    for (const std::string& k : seen) {
      if (k == key) return error(absl::StrCat("'", key, "' given twice"));
    }
    seen.push_back(key);
    if (key == "readonly" || key == "run" || key == "direct") {
      if (eq != std::string::npos) {
        return error(
            absl::StrCat("'", key, "' takes no value (write it alone)"));
      }
      (key == "readonly" ? array.readonly
       : key == "run"    ? array.run
                         : array.direct) = true;
      continue;
    }
    if (eq == std::string::npos) {
      return error(absl::StrCat("unknown ARRAY word '", word, "' (expected ",
                                kTags, ")"));
    }
    if (value.empty()) return error(absl::StrCat("'", key, "=' has no value"));
    if (key == "uuid") {
      absl::StatusOr<std::array<uint8_t, 16>> uuid = ParseUuid(value);
      if (!uuid.ok()) return error(uuid.status().message());
      array.uuid = *uuid;
      have_uuid = true;
    } else if (key == "bitmap") {
      array.bitmap = value;
    } else if (key == "socket") {
      array.socket = value;
    } else if (key == "control") {
      array.control = value;
    } else if (key == "cache") {
      absl::StatusOr<uint64_t> size = ParseConfigSize(value);
      if (!size.ok())
        return error(absl::StrCat("cache=: ", size.status().message()));
      array.cache_bytes = *size;
    } else if (key == "control-group") {
      array.control_group = value;
    } else if (key == "spares") {
      absl::StatusOr<uint64_t> n = ParseCount(value, 64);
      if (!n.ok())
        return error(absl::StrCat("spares=: ", n.status().message()));
      array.spares = static_cast<int>(*n);
    } else if (key == "timeout" || key == "cache-age") {
      absl::StatusOr<uint64_t> ms = ParseCount(value, UINT32_MAX);
      if (!ms.ok() || (key == "timeout" && *ms == 0)) {
        return error(absl::StrCat(key, "=", value, ": give milliseconds",
                                  key == "timeout" ? ", 1 or more" : ""));
      }
      (key == "timeout" ? array.timeout_ms : array.cache_age_ms) =
          static_cast<uint32_t>(*ms);
    } else if (key == "log") {
      if (value != "auto" && value != "stderr" && value != "syslog" &&
          value != "journal") {
        return error(absl::StrCat("log=", value,
                                  ": expected auto, stderr, syslog or "
                                  "journal"));
      }
      array.log = value;
    } else if (key == "metadata") {
      // mdadm's words for v1.2: "1.2", and "1" / "1.x" / "default" for
      // whatever 1.x it finds; uraid reads 1.2 only.
      if (value != "1.2" && value != "1" && value != "1.x" &&
          value != "default") {
        return error(absl::StrCat("metadata=", value,
                                  ": uraid reads md's v1.2 superblocks "
                                  "only (metadata=1.2)"));
      }
    } else if (key == "name") {
      array.md_name = value;
    } else {
      return error(absl::StrCat("unknown ARRAY tag '", key, "=' (expected ",
                                kTags, ")"));
    }
  }
  if (!have_uuid) {
    return error(absl::StrCat("ARRAY ", array.name,
                              " has no uuid= (uraid examine --scan prints "
                              "the line to use)"));
  }
  for (const ConfigArray& other : config.arrays) {
    if (other.name == array.name) {
      return error(absl::StrCat("array name '", array.name,
                                "' is already used on line ", other.line));
    }
    if (other.uuid == array.uuid) {
      return error(absl::StrCat("uuid ", FormatUuid(array.uuid),
                                " is already array '", other.name, "' on line ",
                                other.line));
    }
  }
  config.arrays.push_back(std::move(array));
  return absl::OkStatus();
}

}  // namespace

std::string DefaultConfigPath() {
  const char* env = std::getenv("URAID_CONFIG");
  if (env != nullptr && *env != '\0') return env;
  return "/etc/uraid/uraid.conf";
}

std::string DefaultRunDir() {
  const char* env = std::getenv("URAID_RUN_DIR");
  if (env != nullptr && *env != '\0') return env;
  return "/run/uraid";
}

bool ValidArrayName(absl::string_view name) {
  if (name.empty() || name.size() > 64 || name[0] == '.' || name[0] == '-') {
    return false;
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-' &&
        c != '+') {
      return false;
    }
  }
  return true;
}

absl::StatusOr<ConfigFile> ParseConfig(absl::string_view text,
                                       const std::string& path) {
  absl::StatusOr<std::vector<Line>> lines = LogicalLines(text, path);
  if (!lines.ok()) return lines.status();
  ConfigFile config;
  config.path = path;
  int program_line = 0;
  for (const Line& line : *lines) {
    const std::optional<Keyword> keyword = MatchKeyword(line.words[0]);
    if (!keyword) {
      return LineError(path, line.number,
                       absl::StrCat("unknown keyword '", line.words[0],
                                    "' (expected DEVICE, ARRAY, MAILADDR or "
                                    "PROGRAM)"));
    }
    switch (*keyword) {
      case Keyword::kDevice:
        RETURN_IF_ERROR(AppendWords(
            path, line, "DEVICE needs at least one path, glob or NBD URI",
            config.devices));
        break;
      case Keyword::kArray:
        if (absl::Status s = ParseArray(line, path, config); !s.ok()) return s;
        break;
      case Keyword::kMailaddr:
        RETURN_IF_ERROR(AppendWords(path, line,
                                    "MAILADDR needs at least one address",
                                    config.mailaddr));
        break;
      case Keyword::kProgram:
        if (program_line != 0) {
          return LineError(path, line.number,
                           absl::StrCat("a second PROGRAM (the first is on "
                                        "line ",
                                        program_line, ")"));
        }
        if (line.words.size() != 2) {
          return LineError(path, line.number, "PROGRAM takes one path");
        }
        config.program = line.words[1];
        program_line = line.number;
        break;
    }
  }
  return config;
}

absl::StatusOr<ConfigFile> LoadConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::ErrnoToStatus(errno,
                               absl::StrCat("cannot read config file ", path));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return absl::ErrnoToStatus(errno,
                               absl::StrCat("cannot read config file ", path));
  }
  return ParseConfig(text.str(), path);
}

const ConfigArray* FindConfigArray(const ConfigFile& config,
                                   absl::string_view name_or_uuid) {
  for (const ConfigArray& a : config.arrays) {
    if (a.name == name_or_uuid) return &a;
  }
  absl::StatusOr<std::array<uint8_t, 16>> uuid =
      ParseUuid(std::string_view(name_or_uuid.data(), name_or_uuid.size()));
  if (!uuid.ok()) return nullptr;
  for (const ConfigArray& a : config.arrays) {
    if (a.uuid == *uuid) return &a;
  }
  return nullptr;
}

std::string ConfigControlSocket(const ConfigArray& array) {
  return !array.control.empty() ? array.control
                                : DefaultRunDir() + "/" + array.name + ".ctl";
}

}  // namespace uraid
