// SPDX-License-Identifier: MIT
// libFuzzer target for md's write-intent bitmap: the bitmap_super_t codec
// and WriteIntentBitmap's protocol.
//
// Codec, on the input's first 256 bytes (as given, and again with a valid
// magic and version patched in so the later field checks are reached):
//  * DecodeBitmapSuper never crashes or hits UB, and fails only with the
//    documented codes and a message.
//  * Whatever it accepts re-encodes to the bytes it read (the 136 bytes of
//    fields; the pad re-encodes as zero) and decodes again to the same.
//
// Protocol: a small bitmap (chunk size, chunk count, daemon_sleep, bits
// already set, clean or not: from the input's tail) under a decoded
// sequence of StartWrite, EndWrite (ok or failed), Tick (flush ok or
// failing), clock steps, SetDegraded, SetEvents, ClearChunk, MarkAllDirty,
// Sync and persist failures (clean or torn), against a model of what may
// happen:
//  * a StartWrite that returns OK has every bit of its range on "disk";
//  * a bit goes 1 -> 0 on disk only for a chunk with no write in progress,
//    not pinned (failed write, found dirty, MarkAllDirty) since its last
//    ClearChunk, not while degraded, whose last EndWrite came before a
//    flush that succeeded, and with events_cleared == events on disk;
//  * every persist call is page-aligned inside the area, and the header on
//    disk always decodes;
//  * after a successful Sync the disk equals AreaImage().

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fuzz_check.h"
#include "fuzzer/FuzzedDataProvider.h"
#include "uraid/bitmap.h"

namespace {

using uraid::BitmapSuper;
using uraid::WriteIntentBitmap;

constexpr size_t kFieldBytes = 136;  // magic .. cluster_name

void CheckDecode(std::span<const uint8_t> in) {
  absl::StatusOr<BitmapSuper> sb = uraid::DecodeBitmapSuper(in);
  if (!sb.ok()) {
    const absl::StatusCode code = sb.status().code();
    FUZZ_CHECK(code == absl::StatusCode::kDataLoss ||
               code == absl::StatusCode::kInvalidArgument ||
               code == absl::StatusCode::kUnimplemented);
    FUZZ_CHECK(!sb.status().message().empty());
    FUZZ_CHECK(code != absl::StatusCode::kInvalidArgument ||
               in.size() < uraid::kBitmapSuperBytes);
    return;
  }
  FUZZ_CHECK(uraid::CheckBitmapSuper(*sb).ok());
  FUZZ_CHECK(sb->cluster_name.size() <= 64);
  const std::vector<uint8_t> enc = uraid::EncodeBitmapSuper(*sb);
  FUZZ_CHECK(enc.size() == uraid::kBitmapSuperBytes);
  FUZZ_CHECK(std::memcmp(enc.data(), in.data(), kFieldBytes) == 0);
  for (size_t i = kFieldBytes; i < enc.size(); ++i) FUZZ_CHECK(enc[i] == 0);

  absl::StatusOr<BitmapSuper> again = uraid::DecodeBitmapSuper(enc);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->uuid == sb->uuid);
  FUZZ_CHECK(again->events == sb->events);
  FUZZ_CHECK(again->sync_size == sb->sync_size);
  FUZZ_CHECK(again->cluster_name == sb->cluster_name);
  FUZZ_CHECK(uraid::EncodeBitmapSuper(*again) == enc);
  // The geometry helpers never overflow or divide by zero on what decodes.
  const uint64_t chunks = uraid::BitmapChunks(*sb);
  FUZZ_CHECK(chunks >= 1);
  FUZZ_CHECK(uraid::BitmapAreaSectors(chunks) * 512 >=
             uraid::BitmapAreaBytes(chunks));
}

// What the protocol may do, tracked beside it; see the file comment.
struct Model {
  uint64_t chunks = 0;
  uint64_t chunk_bytes = 0;
  std::vector<uint32_t> active;  // StartWrites not yet ended, per chunk
  std::vector<bool> pinned;
  std::vector<uint64_t> last_end;  // op number of the chunk's last EndWrite
  uint64_t op = 0;
  uint64_t flushed_op = 0;  // op number when the last good flush ran
  bool degraded = false;
  bool fail_persist = false;
  bool torn_writes = false;  // failing writes land in part
  uint64_t events = 0;
  std::vector<uint8_t> disk;  // the area as persisted
};

bool DiskBit(const std::vector<uint8_t>& area, uint64_t chunk) {
  return (area[uraid::kBitmapSuperBytes + chunk / 8] >> (chunk % 8)) & 1;
}

absl::Status Persist(Model& m, uint64_t offset,
                     std::span<const uint8_t> bytes) {
  FUZZ_CHECK(offset % uraid::kBitmapPageBytes == 0);
  FUZZ_CHECK(!bytes.empty());
  FUZZ_CHECK(offset + bytes.size() <= m.disk.size());
  FUZZ_CHECK(bytes.size() % 512 == 0);
  if (m.fail_persist && !m.torn_writes) {
    return absl::UnavailableError("injected write error");
  }
  // A torn write lands its first sectors, then fails.
  const size_t landed =
      m.fail_persist ? bytes.size() / 1024 * 512 : bytes.size();
  std::vector<uint64_t> cleared;  // chunks going 1 -> 0
  for (size_t i = 0; i < landed; ++i) {
    const uint64_t pos = offset + i;
    const uint8_t gone = m.disk[pos] & static_cast<uint8_t>(~bytes[i]);
    m.disk[pos] = bytes[i];
    if (pos < uraid::kBitmapSuperBytes || gone == 0) continue;
    for (int bit = 0; bit < 8; ++bit) {
      const uint64_t c = (pos - uraid::kBitmapSuperBytes) * 8 + bit;
      if (((gone >> bit) & 1) && c < m.chunks) cleared.push_back(c);
    }
  }
  absl::StatusOr<BitmapSuper> header = uraid::DecodeBitmapSuper(m.disk);
  FUZZ_CHECK(header.ok());
  for (uint64_t c : cleared) {
    FUZZ_CHECK(m.active[c] == 0);
    FUZZ_CHECK(!m.pinned[c]);
    FUZZ_CHECK(!m.degraded);
    FUZZ_CHECK(m.last_end[c] <= m.flushed_op);
    FUZZ_CHECK(header->events_cleared == header->events);
  }
  if (m.fail_persist) return absl::UnavailableError("injected torn write");
  return absl::OkStatus();
}

// Chunks [first, last] of a byte range inside the bitmap.
std::pair<uint64_t, uint64_t> ChunkRange(const Model& m, uint64_t off,
                                         uint64_t len) {
  return {off / m.chunk_bytes, (off + len - 1) / m.chunk_bytes};
}

void RunProtocol(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Model m;
  BitmapSuper sb;
  sb.chunksize = 512u << in.ConsumeIntegralInRange<int>(0, 3);
  m.chunk_bytes = sb.chunksize;
  const uint64_t chunks = in.ConsumeIntegralInRange<uint64_t>(1, 70000);
  const uint64_t chunk_sectors = sb.chunksize / 512;
  sb.sync_size = chunks * chunk_sectors -
                 in.ConsumeIntegralInRange<uint64_t>(0, chunk_sectors - 1);
  sb.daemon_sleep = in.ConsumeIntegralInRange<uint32_t>(1, 10);
  sb.events = m.events = in.ConsumeIntegralInRange<uint64_t>(0, 100);
  sb.events_cleared = in.ConsumeIntegralInRange<uint64_t>(0, sb.events);
  if (in.ConsumeBool()) sb.state |= uraid::kBitmapStateStale;
  m.chunks = uraid::BitmapChunks(sb);
  FUZZ_CHECK(m.chunks == chunks);
  m.active.assign(m.chunks, 0);
  m.pinned.assign(m.chunks, false);
  m.last_end.assign(m.chunks, 0);

  uraid::WriteIntentBitmapOptions options;
  options.array_clean = in.ConsumeBool();
  std::vector<uint8_t> area(uraid::BitmapAreaSectors(m.chunks) * 512, 0);
  const std::vector<uint8_t> header = uraid::EncodeBitmapSuper(sb);
  std::copy(header.begin(), header.end(), area.begin());
  const int preset = in.ConsumeIntegralInRange<int>(0, 8);
  for (int i = 0; i < preset; ++i) {
    const uint64_t c = in.ConsumeIntegralInRange<uint64_t>(0, m.chunks - 1);
    area[uraid::kBitmapSuperBytes + c / 8] |= 1 << (c % 8);
    if (!options.array_clean) m.pinned[c] = true;
  }
  m.disk = area;
  int64_t now_ms = 0;
  options.clock = [&now_ms] {
    return WriteIntentBitmap::Clock::time_point(
        std::chrono::milliseconds(now_ms));
  };
  absl::StatusOr<std::unique_ptr<WriteIntentBitmap>> made =
      WriteIntentBitmap::Create(
          sb, std::span<const uint8_t>(area).subspan(uraid::kBitmapSuperBytes),
          [&m](uint64_t offset, std::span<const uint8_t> bytes) {
            return Persist(m, offset, bytes);
          },
          options);
  FUZZ_CHECK(made.ok());
  WriteIntentBitmap& bm = **made;
  FUZZ_CHECK(bm.chunks() == m.chunks);

  struct Write {
    uint64_t off, len;
  };
  std::vector<Write> writes;  // accepted, not yet ended
  const uint64_t sync_bytes = sb.sync_size * 512;
  for (int ops = 0; ops < 200 && in.remaining_bytes() > 0; ++ops) {
    ++m.op;
    switch (in.ConsumeIntegralInRange<int>(0, 11)) {
      case 0:
      case 1: {  // StartWrite, mostly inside the bitmap
        const uint64_t off =
            in.ConsumeIntegralInRange<uint64_t>(0, sync_bytes + 4096);
        const uint64_t len =
            in.ConsumeIntegralInRange<uint64_t>(0, 4 * m.chunk_bytes + 1);
        const absl::Status s = bm.StartWrite(off, len);
        const bool inside = off < sync_bytes && len <= sync_bytes - off;
        if (len == 0) {
          FUZZ_CHECK(s.ok());
          break;
        }
        if (!inside) {
          FUZZ_CHECK(s.code() == absl::StatusCode::kOutOfRange);
          break;
        }
        FUZZ_CHECK(s.ok() || m.fail_persist);
        if (!s.ok()) break;
        const auto [first, last] = ChunkRange(m, off, len);
        for (uint64_t c = first; c <= last; ++c) {
          FUZZ_CHECK(DiskBit(m.disk, c));
          FUZZ_CHECK(bm.IsChunkDirty(c));
          ++m.active[c];
        }
        writes.push_back({off, len});
        break;
      }
      case 2:
      case 3: {  // EndWrite of an accepted write
        if (writes.empty()) break;
        const size_t i =
            in.ConsumeIntegralInRange<size_t>(0, writes.size() - 1);
        const Write w = writes[i];
        writes.erase(writes.begin() + i);
        const bool success = in.ConsumeIntegralInRange<int>(0, 7) != 0;
        bm.EndWrite(w.off, w.len, success);
        const auto [first, last] = ChunkRange(m, w.off, w.len);
        for (uint64_t c = first; c <= last; ++c) {
          --m.active[c];
          m.last_end[c] = m.op;
          if (!success) m.pinned[c] = true;
        }
        break;
      }
      case 4: {  // Tick
        const bool flush_ok = in.ConsumeIntegralInRange<int>(0, 7) != 0;
        const absl::Status s = bm.Tick([&] {
          if (!flush_ok) return absl::UnavailableError("injected flush error");
          m.flushed_op = m.op;
          return absl::OkStatus();
        });
        FUZZ_CHECK(s.ok() || !flush_ok || m.fail_persist);
        break;
      }
      case 5:
        now_ms += in.ConsumeIntegralInRange<int64_t>(0, 12000);
        break;
      case 6:
        m.degraded = in.ConsumeBool();
        bm.SetDegraded(m.degraded);
        break;
      case 7: {
        const uint64_t events =
            m.events + in.ConsumeIntegralInRange<int>(0, 3) - 1;
        const absl::Status s = bm.SetEvents(events);
        FUZZ_CHECK(s.ok() || m.fail_persist);
        m.events = events;
        FUZZ_CHECK(bm.events() == events);
        FUZZ_CHECK(bm.events_cleared() <= events);
        break;
      }
      case 8: {
        const uint64_t c = in.ConsumeIntegralInRange<uint64_t>(0, m.chunks);
        bm.ClearChunk(c);
        if (c < m.chunks) m.pinned[c] = false;
        break;
      }
      case 9:
        if (in.ConsumeIntegralInRange<int>(0, 3) == 0) {
          std::fill(m.pinned.begin(), m.pinned.end(), true);
          const absl::Status s = bm.MarkAllDirty();
          FUZZ_CHECK(s.ok() || m.fail_persist);
          FUZZ_CHECK(bm.DirtyChunks() == m.chunks);
          if (s.ok()) FUZZ_CHECK(!uraid::DecodeBitmapSuper(m.disk)->stale());
        }
        break;
      case 10:
        m.fail_persist = in.ConsumeIntegralInRange<int>(0, 3) == 0;
        m.torn_writes = in.ConsumeBool();
        break;
      case 11: {
        const absl::Status s = bm.Sync();
        FUZZ_CHECK(s.ok() || m.fail_persist);
        if (s.ok()) FUZZ_CHECK(bm.AreaImage() == m.disk);
        break;
      }
    }
  }
  m.fail_persist = false;
  FUZZ_CHECK(bm.Sync().ok());
  const std::vector<uint8_t> image = bm.AreaImage();
  FUZZ_CHECK(image == m.disk);
  // The in-memory count agrees with the image it describes.
  FUZZ_CHECK(bm.DirtyChunks() ==
             uraid::CountBitmapDirty(std::span<const uint8_t>(image).subspan(
                                         uraid::kBitmapSuperBytes),
                                     m.chunks));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> in(data, size);
  CheckDecode(in);
  if (size >= uraid::kBitmapSuperBytes) {
    // Past the magic and version checks, to the field checks behind them.
    std::vector<uint8_t> patched(data, data + uraid::kBitmapSuperBytes);
    const uint32_t version = (data[4] & 1) ? 3 : 4;
    const uint32_t words[2] = {uraid::kBitmapMagic, version};
    for (int w = 0; w < 2; ++w) {
      for (int i = 0; i < 4; ++i) {
        patched[4 * w + i] = static_cast<uint8_t>(words[w] >> (8 * i));
      }
    }
    CheckDecode(patched);
  }
  RunProtocol(data, size);
  return 0;
}
