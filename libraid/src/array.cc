// The read and write paths, member failure, superblock updates, the
// clean/active state machine and resync.

#include <algorithm>
#include <cstring>
#include <ctime>

#include "absl/strings/str_format.h"
#include "array_impl.h"
#include "parity.h"
#include "status_macros.h"

namespace uraid {
namespace {

constexpr uint64_t kBlock = 4096;
// md's safemode delay: the array is marked clean this long after the last
// write completes.
constexpr auto kSafemodeDelay = std::chrono::milliseconds(200);
// Resync and parity check work on row windows of at most this many bytes
// per member, so memory stays bounded for any chunk size.
constexpr uint64_t kScanWindow = 1 << 20;
// Member I/Os faster than this on average are run one after another by the
// calling thread; slower ones in parallel (see Submit).
constexpr int64_t kParallelIoThresholdNs = 30'000;

// 4 KiB blocks overlapping [x, y).
uint64_t Blocks(uint64_t x, uint64_t y) {
  if (y <= x) return 0;
  return (y + kBlock - 1) / kBlock - x / kBlock;
}

uint64_t NowSeconds() { return static_cast<uint64_t>(std::time(nullptr)); }

}  // namespace

Counters AtomicCounters::Snapshot() const {
  Counters c;
  c.member_reads = member_reads.load();
  c.member_read_bytes = member_read_bytes.load();
  c.member_writes = member_writes.load();
  c.member_write_bytes = member_write_bytes.load();
  c.member_flushes = member_flushes.load();
  c.full_stripe_writes = full_stripe_writes.load();
  c.rmw_writes = rmw_writes.load();
  c.rcw_writes = rcw_writes.load();
  c.degraded_writes = degraded_writes.load();
  c.reconstructions = reconstructions.load();
  c.resynced_stripes = resynced_stripes.load();
  c.resync_repairs = resync_repairs.load();
  c.cached_writes = cached_writes.load();
  c.cache_writebacks = cache_writebacks.load();
  c.cache_evictions = cache_evictions.load();
  return c;
}

ArrayImpl::ArrayImpl(Geometry geometry, uint64_t data_offset_bytes,
                     Superblock sb, std::vector<std::unique_ptr<Slot>> slots,
                     bool read_only, const CacheOptions& cache, Logger logger)
    : geo_(geometry),
      data_offset_(data_offset_bytes),
      read_only_(read_only),
      logger_(std::move(logger)),
      slots_(std::move(slots)),
      pool_(geometry.raid_disks() - 1),
      cache_(geometry.stripe_data_bytes(), read_only ? 0 : cache.bytes),
      cache_max_age_(cache.max_age_ms),
      sb_(std::move(sb)),
      resync_stripe_(geometry.stripe_count()) {
  absl::MutexLock lock(&state_mu_);
  clean_ = sb_.clean();
  last_write_ = std::chrono::steady_clock::now();
  if (GoneSlots() > 1) failed_.store(true);
}

ArrayImpl::~ArrayImpl() { Shutdown(); }

void ArrayImpl::Log(const std::string& line) const {
  if (logger_) logger_(line);
}

int ArrayImpl::MissingSlot() const {
  for (int i = 0; i < geo_.raid_disks(); ++i) {
    if (!SlotUsable(i)) return i;
  }
  return -1;
}

absl::Status ArrayImpl::CheckRange(const char* op, size_t len,
                                   uint64_t offset) const {
  if (offset > geo_.array_bytes() || len > geo_.array_bytes() - offset) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s of %d bytes at %d is past the end of the array (%d bytes)", op, len,
        offset, geo_.array_bytes()));
  }
  return absl::OkStatus();
}

int ArrayImpl::GoneSlots() const {
  int gone = 0;
  for (const auto& s : slots_) gone += s->state.load() != SlotState::kActive;
  return gone;
}

absl::Status ArrayImpl::CheckUsable(bool write) const {
  if (failed_.load()) {
    return absl::UnavailableError(
        "array has failed: more than one member is missing or faulty");
  }
  if (write && read_only_) {
    return absl::FailedPreconditionError("array is read-only");
  }
  return absl::OkStatus();
}

void ArrayImpl::RunIo(MemberIo& io) {
  Member& m = *slots_[io.slot]->member;
  const uint64_t raw = data_offset_ + io.offset;
  const auto start = std::chrono::steady_clock::now();
  switch (io.kind) {
    case MemberIo::kRead:
      io.status = m.Read(io.buf, io.len, raw);
      counters_.member_reads.fetch_add(1, std::memory_order_relaxed);
      counters_.member_read_bytes.fetch_add(io.len, std::memory_order_relaxed);
      break;
    case MemberIo::kWrite:
      io.status = m.Write(io.buf, io.len, raw);
      counters_.member_writes.fetch_add(1, std::memory_order_relaxed);
      counters_.member_write_bytes.fetch_add(io.len, std::memory_order_relaxed);
      break;
    case MemberIo::kFlush:
      io.status = m.Flush();
      counters_.member_flushes.fetch_add(1, std::memory_order_relaxed);
      return;  // flushes say nothing about per-I/O latency
    case MemberIo::kDiscard:
      io.status = m.Discard(io.len, raw);
      return;
  }
  // Moving average of data I/O latency (1/8 weight per sample). Racy
  // updates lose a sample now and then, which is harmless.
  const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::steady_clock::now() - start)
                         .count();
  const int64_t old = io_latency_ns_.load(std::memory_order_relaxed);
  io_latency_ns_.store(old + (ns - old) / 8, std::memory_order_relaxed);
}

void ArrayImpl::Submit(std::vector<MemberIo>& ios) {
  // Members that answer within a few microseconds (page cache, memory) are
  // cheaper to call one after another than to hand to other threads: a
  // handoff costs more than the I/O. Slower members (disks, O_DIRECT,
  // remote exports) get every I/O of the plan in flight at once, so a
  // stripe costs one member latency, not N. The choice follows the
  // measured latency, so it adapts to whatever the members are.
  if (ios.size() == 1 ||
      io_latency_ns_.load(std::memory_order_relaxed) < kParallelIoThresholdNs) {
    for (MemberIo& io : ios) RunIo(io);
    return;
  }
  std::vector<std::function<void()>> tasks;
  tasks.reserve(ios.size());
  for (MemberIo& io : ios) tasks.emplace_back([this, &io] { RunIo(io); });
  pool_.RunAll(tasks);
}

absl::Status ArrayImpl::AbsorbFailures(std::vector<MemberIo>& ios,
                                       bool* slot_failed) {
  *slot_failed = false;
  absl::Status first;
  for (MemberIo& io : ios) {
    if (io.status.ok()) continue;
    if (first.ok()) {
      first = absl::Status(
          io.status.code(),
          absl::StrFormat("member %s (slot %d) at member offset %d: %s",
                          slots_[io.slot]->member->Name(), io.slot,
                          data_offset_ + io.offset, io.status.message()));
    }
    if (SlotUsable(io.slot)) {
      (void)FailSlot(io.slot, std::string(io.status.message()));
    }
    // Failed by us or, racing us, by another request that hit the same
    // dying member: either way the caller should redo its plan around it.
    *slot_failed = true;
  }
  return first;
}

absl::Status ArrayImpl::FailSlot(int slot, const std::string& why) {
  if (slot < 0 || slot >= geo_.raid_disks()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "slot %d out of range 0..%d", slot, geo_.raid_disks() - 1));
  }
  SlotState expected = SlotState::kActive;
  if (!slots_[slot]->state.compare_exchange_strong(expected,
                                                   SlotState::kFaulty)) {
    return absl::OkStatus();  // already gone
  }
  const int gone = GoneSlots();
  std::string name = slots_[slot]->member ? slots_[slot]->member->Name() : "";
  if (gone > 1) {
    failed_.store(true);
    Log(absl::StrFormat(
        "member %s (slot %d) failed: %s; array has FAILED (%d members gone), "
        "requests that need it return EIO",
        name, slot, why, gone));
    return absl::OkStatus();  // nothing safe to record any more
  }
  Log(
      absl::StrFormat("member %s (slot %d) failed: %s; array continues "
                      "degraded",
                      name, slot, why));
  if (resync_stripe_.load() < geo_.stripe_count()) {
    Log("warning: a member failed before resync finished; stripes not yet "
        "resynced may reconstruct stale data");
  }
  if (read_only_) return absl::OkStatus();
  return WriteSuperblocks(std::nullopt);
}

absl::Status ArrayImpl::WriteSuperblocks(std::optional<bool> clean) {
  absl::MutexLock lock(&sb_mu_);
  for (int attempt = 0; attempt <= geo_.raid_disks(); ++attempt) {
    sb_.events += 1;
    sb_.utime = NowSeconds();
    if (clean.has_value()) {
      if (*clean) {
        sb_.resync_offset = kMaxSector;
      } else if (wrote_since_open_.load()) {
        // Writes since assembly may have torn stripes anywhere: dirty from
        // the start.
        sb_.resync_offset = 0;
      } else {
        // Only resync has written: stripes below its front are in sync.
        sb_.resync_offset = resync_stripe_.load() * geo_.chunk_bytes() / 512;
      }
    }
    std::fill(sb_.dev_roles.begin(), sb_.dev_roles.end(), kRoleSpare);
    for (int i = 0; i < geo_.raid_disks(); ++i) {
      const Slot& s = *slots_[i];
      if (s.member == nullptr) continue;
      if (s.dev_number >= sb_.dev_roles.size()) {
        sb_.dev_roles.resize(s.dev_number + 1, kRoleSpare);
      }
      sb_.dev_roles[s.dev_number] = s.state.load() == SlotState::kActive
                                        ? static_cast<uint16_t>(i)
                                        : kRoleFaulty;
    }
    bool retry = false;
    for (int i = 0; i < geo_.raid_disks(); ++i) {
      Slot& s = *slots_[i];
      if (s.state.load() != SlotState::kActive) continue;
      Superblock mine = sb_;
      mine.dev_number = s.dev_number;
      mine.device_uuid = s.device_uuid;
      mine.data_size = s.data_size_sectors;
      std::vector<uint8_t> bytes = EncodeSuperblock(mine);
      absl::Status st =
          s.member->Write(bytes.data(), bytes.size(), kSb12OffsetBytes);
      if (st.ok()) st = s.member->Flush();
      if (!st.ok()) {
        s.state.store(SlotState::kFaulty);
        const int gone = GoneSlots();
        Log(
            absl::StrFormat("member %s (slot %d) failed writing its "
                            "superblock: %s",
                            s.member->Name(), i, st.message()));
        if (gone > 1) {
          failed_.store(true);
          return absl::UnavailableError(absl::StrFormat(
              "array has failed: superblock write to %s failed: %s",
              s.member->Name(), st.message()));
        }
        retry = true;
        break;
      }
    }
    if (!retry) return absl::OkStatus();
  }
  return absl::InternalError("superblock update did not settle");
}

// ---------------------------------------------------------------- reads

absl::Status ArrayImpl::Read(void* buf, size_t len, uint64_t offset) {
  RETURN_IF_ERROR(CheckRange("read", len, offset));
  RETURN_IF_ERROR(CheckUsable(false));
  auto* out = static_cast<uint8_t*>(buf);
  const uint64_t chunk = geo_.chunk_bytes();

  struct Piece {
    Location loc;
    size_t len;
    uint8_t* dst;
  };
  std::vector<Piece> pieces;
  for (uint64_t done = 0; done < len;) {
    Location loc = geo_.Map(offset + done);
    size_t n = static_cast<size_t>(
        std::min<uint64_t>(len - done, chunk - loc.chunk_offset));
    pieces.push_back(Piece{loc, n, out + done});
    done += n;
  }
  // Healthy pieces straight into the caller's buffer, all in flight at once.
  // Pieces of stripes the cache holds newer data for, and pieces on a
  // missing member, take the locked slow path.
  std::vector<MemberIo> ios;
  std::vector<size_t> io_piece;
  std::vector<bool> slow(pieces.size(), false);
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Piece& p = pieces[i];
    if (SlotUsable(p.loc.disk) && !cache_.MayContain(p.loc.stripe)) {
      ios.push_back(MemberIo{
          MemberIo::kRead, p.loc.disk, p.dst, p.len, p.loc.member_offset, {}});
      io_piece.push_back(i);
    } else {
      slow[i] = true;
    }
  }
  Submit(ios);
  for (size_t j = 0; j < ios.size(); ++j) {
    if (ios[j].status.ok()) continue;
    if (SlotUsable(ios[j].slot)) {
      (void)FailSlot(ios[j].slot, std::string(ios[j].status.message()));
    }
    slow[io_piece[j]] = true;
  }
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (!slow[i]) continue;
    const Piece& p = pieces[i];
    StripeLock lock(&locks_, p.loc.stripe);
    RETURN_IF_ERROR(ReadPieceLocked(p.loc, p.len, p.dst));
  }
  return absl::OkStatus();
}

absl::Status ArrayImpl::ReadPieceLocked(const Location& loc, size_t len,
                                        uint8_t* dst) {
  RETURN_IF_ERROR(
      ReadPieceDegraded(loc.stripe, loc.disk, loc.chunk_offset, len, dst));
  // Lay newer cached bytes over what the members hold.
  if (StripeCache::Entry* e = cache_.Find(loc.stripe)) {
    const uint64_t start =
        static_cast<uint64_t>(loc.data_index) * geo_.chunk_bytes() +
        loc.chunk_offset;
    const uint64_t end = start + len;
    for (const auto& [a, b] : e->dirty.ranges()) {
      uint64_t x = std::max(a, start), y = std::min(b, end);
      if (x < y) std::memcpy(dst + (x - start), e->data.data() + x, y - x);
    }
  }
  return absl::OkStatus();
}

absl::Status ArrayImpl::ReadPieceDegraded(uint64_t stripe, int slot,
                                          uint64_t chunk_offset, size_t len,
                                          uint8_t* dst) {
  RETURN_IF_ERROR(CheckUsable(false));
  const uint64_t member_offset = stripe * geo_.chunk_bytes() + chunk_offset;
  if (SlotUsable(slot)) {
    // Recovered meanwhile? Never: slots only go from active to gone. But a
    // stripe lock taken after a concurrent failure may find the slot fine
    // when the failure was elsewhere; read it directly.
    std::vector<MemberIo> ios{
        MemberIo{MemberIo::kRead, slot, dst, len, member_offset, {}}};
    Submit(ios);
    if (ios[0].status.ok()) return absl::OkStatus();
    (void)FailSlot(slot, std::string(ios[0].status.message()));
    RETURN_IF_ERROR(CheckUsable(false));
  }
  const int n = geo_.raid_disks();
  AlignedBuffer bufs(len * static_cast<size_t>(n - 1));
  std::vector<MemberIo> ios;
  for (int i = 0, j = 0; i < n; ++i) {
    if (i == slot) continue;
    if (!SlotUsable(i)) {
      return absl::UnavailableError(absl::StrFormat(
          "cannot reconstruct slot %d at member offset %d: member in slot %d "
          "is also gone",
          slot, data_offset_ + member_offset, i));
    }
    ios.push_back(MemberIo{
        MemberIo::kRead, i, bufs.data() + len * j++, len, member_offset, {}});
  }
  Submit(ios);
  bool slot_failed;
  absl::Status st = AbsorbFailures(ios, &slot_failed);
  if (!st.ok()) {
    return absl::UnavailableError(
        absl::StrFormat("cannot reconstruct slot %d at member offset %d: %s",
                        slot, data_offset_ + member_offset, st.message()));
  }
  std::vector<const void*> srcs;
  for (int j = 0; j < n - 1; ++j) srcs.push_back(bufs.data() + len * j);
  Xor(dst, srcs, len);
  counters_.reconstructions.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

// ---------------------------------------------------------------- writes

absl::Status ArrayImpl::BeginWrite() {
  absl::MutexLock lock(&state_mu_);
  RETURN_IF_ERROR(CheckUsable(true));
  ++writes_in_flight_;
  wrote_since_open_.store(true);
  if (clean_) {
    // md's rule: the superblocks say "active" (dirty) before any member
    // write, so a crash from here on is detected at the next assembly.
    absl::Status st = WriteSuperblocks(/*clean=*/false);
    if (!st.ok()) {
      --writes_in_flight_;
      return st;
    }
    clean_ = false;
  }
  return absl::OkStatus();
}

void ArrayImpl::EndWrite() {
  absl::MutexLock lock(&state_mu_);
  --writes_in_flight_;
  last_write_ = std::chrono::steady_clock::now();
}

absl::Status ArrayImpl::Write(const void* buf, size_t len, uint64_t offset,
                              bool fua) {
  RETURN_IF_ERROR(CheckRange("write", len, offset));
  if (len == 0) return CheckUsable(true);
  RETURN_IF_ERROR(BeginWrite());
  const auto* src = static_cast<const uint8_t*>(buf);
  const uint64_t sd = geo_.stripe_data_bytes();
  std::vector<bool> touched(geo_.raid_disks(), false);
  absl::Status st;
  for (uint64_t done = 0; done < len && st.ok();) {
    uint64_t pos = offset + done;
    uint64_t stripe = pos / sd;
    uint64_t a = pos % sd;
    uint64_t b = std::min<uint64_t>(sd, a + (len - done));
    st = WritePiece(stripe, a, b, src + done, fua, &touched);
    done += b - a;
  }
  if (st.ok() && fua) st = FlushSlots(touched);
  EndWrite();
  return st;
}

absl::Status ArrayImpl::WritePiece(uint64_t stripe, uint64_t a, uint64_t b,
                                   const uint8_t* src, bool fua,
                                   std::vector<bool>* touched) {
  const uint64_t sd = geo_.stripe_data_bytes();
  const bool full = a == 0 && b == sd;
  // Gather only what looks like a stream: a piece that starts or ends a
  // stripe (a sequential writer crossing a stripe boundary; with a deep
  // queue the pieces arrive out of order), or lands in or beside a stripe
  // already being gathered. A random small write gains nothing from
  // waiting, so it goes straight to RMW/RCW.
  const bool cache = cache_.enabled() && !full && !fua &&
                     (a == 0 || b == sd || cache_.MayContain(stripe) ||
                      (stripe > 0 && cache_.MayContain(stripe - 1)) ||
                      cache_.MayContain(stripe + 1));
  if (cache) {
    // Keep the cache within its bound before taking our stripe lock: never
    // hold one stripe lock while waiting for another.
    for (int i = 0; i < 4 && cache_.over_capacity(); ++i) {
      std::vector<uint64_t> victims = cache_.Oldest(1, std::nullopt);
      if (victims.empty() || victims[0] == stripe) break;
      RETURN_IF_ERROR(WritebackStripe(victims[0]));
      counters_.cache_evictions.fetch_add(1, std::memory_order_relaxed);
    }
  }
  StripeLock lock(&locks_, stripe);
  StripeCache::Entry* e = cache_.Find(stripe);
  if (cache || (e != nullptr && !full)) {
    // Gather: the bytes join the stripe's entry; a stripe that becomes
    // fully dirty goes out at once as a full-stripe write (no reads).
    if (e == nullptr) e = cache_.GetOrCreate(stripe);
    std::memcpy(e->data.data() + a, src, b - a);
    e->dirty.Add(a, b);
    counters_.cached_writes.fetch_add(1, std::memory_order_relaxed);
    if (!fua && !e->dirty.Covers(sd)) return absl::OkStatus();
    return WritebackLocked(e, touched);
  }
  // A full-stripe write supersedes anything cached for the stripe.
  if (e != nullptr) cache_.Erase(stripe);
  return WriteStripeLocked(stripe, a, b, src, touched);
}

absl::Status ArrayImpl::WritebackLocked(StripeCache::Entry* e,
                                        std::vector<bool>* touched) {
  const uint64_t stripe = e->stripe;
  for (const auto& [a, b] : e->dirty.ranges()) {
    RETURN_IF_ERROR(
        WriteStripeLocked(stripe, a, b, e->data.data() + a, touched));
  }
  counters_.cache_writebacks.fetch_add(1, std::memory_order_relaxed);
  cache_.Erase(stripe);
  return absl::OkStatus();
}

absl::Status ArrayImpl::WritebackStripe(uint64_t stripe) {
  StripeLock lock(&locks_, stripe);
  StripeCache::Entry* e = cache_.Find(stripe);
  if (e == nullptr) return absl::OkStatus();
  std::vector<bool> touched(geo_.raid_disks(), false);
  return WritebackLocked(e, &touched);
}

absl::Status ArrayImpl::WritebackAll() {
  absl::Status first;
  for (uint64_t stripe : cache_.Oldest(SIZE_MAX, std::nullopt)) {
    absl::Status st = WritebackStripe(stripe);
    if (first.ok()) first = st;
  }
  return first;
}

absl::Status ArrayImpl::WriteStripeLocked(uint64_t stripe, uint64_t a,
                                          uint64_t b, const uint8_t* src,
                                          std::vector<bool>* touched) {
  // A write over the end of one chunk and the start of the next touches
  // disjoint rows when it is shorter than a chunk: two small updates (as
  // md's per-row choice would make) instead of one over the whole chunk.
  const uint64_t C = geo_.chunk_bytes();
  if (a / C + 1 == (b - 1) / C && b % C != 0 && b % C <= a % C) {
    uint64_t mid = (a / C + 1) * C;
    RETURN_IF_ERROR(WriteStripeLocked(stripe, a, mid, src, touched));
    return WriteStripeLocked(stripe, mid, b, src + (mid - a), touched);
  }
  for (int attempt = 0; attempt <= geo_.raid_disks(); ++attempt) {
    RETURN_IF_ERROR(CheckUsable(true));
    bool slot_failed = false;
    absl::Status st = PlanAndWriteStripe(stripe, a, b, src, MissingSlot(),
                                         &slot_failed, touched);
    if (st.ok() || !slot_failed) return st;
    // A member failed mid-plan: it is now marked faulty. Redo the stripe
    // around it; every plan is idempotent (it rewrites the same data and
    // parity from scratch), so partial writes of the failed attempt are
    // harmless.
  }
  return absl::InternalError("write retries exhausted");
}

absl::Status ArrayImpl::PlanAndWriteStripe(uint64_t stripe, uint64_t a,
                                           uint64_t b, const uint8_t* src,
                                           int missing, bool* slot_failed,
                                           std::vector<bool>* touched) {
  const uint64_t C = geo_.chunk_bytes();
  const int D = geo_.data_disks();
  const int pd = geo_.ParityDisk(stripe);
  const uint64_t base = stripe * C;  // member offset of the stripe

  // Per data index: the written range [x, y) inside the chunk, if any.
  struct Chunk {
    bool written = false;
    uint64_t x = 0, y = 0;
    const uint8_t* data = nullptr;  // new bytes for [x, y)
    int slot = 0;
  };
  std::vector<Chunk> ch(D);
  uint64_t lo = C, hi = 0;
  for (int k = 0; k < D; ++k) {
    ch[k].slot = geo_.DataDisk(stripe, k);
    uint64_t cs = static_cast<uint64_t>(k) * C, ce = cs + C;
    if (b <= cs || a >= ce) continue;
    ch[k].written = true;
    ch[k].x = std::max(a, cs) - cs;
    ch[k].y = std::min(b, ce) - cs;
    ch[k].data = src + (std::max(a, cs) - a);
    lo = std::min(lo, ch[k].x);
    hi = std::max(hi, ch[k].y);
  }
  const uint64_t W = hi - lo;  // row window all parity work happens in
  const bool parity_missing = missing == pd;
  const int missing_k =
      (missing >= 0 && !parity_missing) ? geo_.DataIndex(stripe, missing) : -1;

  std::vector<MemberIo> writes;
  auto add_data_writes = [&] {
    for (int k = 0; k < D; ++k) {
      if (!ch[k].written || k == missing_k) continue;
      writes.push_back(MemberIo{MemberIo::kWrite,
                                ch[k].slot,
                                const_cast<uint8_t*>(ch[k].data),
                                ch[k].y - ch[k].x,
                                base + ch[k].x,
                                {}});
    }
  };
  auto run_writes = [&]() -> absl::Status {
    for (const MemberIo& io : writes) (*touched)[io.slot] = true;
    Submit(writes);
    return AbsorbFailures(writes, slot_failed);
  };

  // Parity member gone: data alone is the truth.
  if (parity_missing) {
    add_data_writes();
    counters_.degraded_writes.fetch_add(1, std::memory_order_relaxed);
    return run_writes();
  }

  AlignedBuffer parity(W);
  const bool full = (a == 0 && b == geo_.stripe_data_bytes());
  if (full) {
    std::vector<const void*> srcs;
    for (int k = 0; k < D; ++k) srcs.push_back(ch[k].data);
    Xor(parity.data(), srcs, C);
    add_data_writes();
    writes.push_back(
        MemberIo{MemberIo::kWrite, pd, parity.data(), C, base, {}});
    (missing_k >= 0 ? counters_.degraded_writes : counters_.full_stripe_writes)
        .fetch_add(1, std::memory_order_relaxed);
    return run_writes();
  }

  // Choose how to get the parity: read-modify-write reads the old data
  // being replaced plus old parity; reconstruct-write reads every data byte
  // of the window that is not being replaced. Counted in 4 KiB blocks as md
  // does; ties go to reconstruct-write (md's default rmw_level).
  enum { kRmw, kRcw, kReconstruct } mode;
  if (missing_k >= 0) {
    mode = ch[missing_k].written ? kReconstruct : kRmw;
  } else if (stripe >= resync_stripe_.load(std::memory_order_acquire)) {
    mode = kRcw;  // parity here is not trusted yet: never carry it forward
  } else {
    uint64_t rmw = Blocks(lo, hi), rcw = 0;
    for (int k = 0; k < D; ++k) {
      if (ch[k].written) {
        rmw += Blocks(ch[k].x, ch[k].y);
        rcw += Blocks(lo, ch[k].x) + Blocks(ch[k].y, hi);
      } else {
        rcw += Blocks(lo, hi);
      }
    }
    mode = rmw < rcw ? kRmw : kRcw;
  }

  std::vector<MemberIo> reads;
  if (mode == kRmw) {
    // P' = P ^ Dold ^ Dnew over each written range.
    AlignedBuffer old(static_cast<size_t>(hi - lo) * D);
    reads.push_back(
        MemberIo{MemberIo::kRead, pd, parity.data(), W, base + lo, {}});
    for (int k = 0; k < D; ++k) {
      if (!ch[k].written) continue;
      reads.push_back(MemberIo{MemberIo::kRead,
                               ch[k].slot,
                               old.data() + W * k,
                               ch[k].y - ch[k].x,
                               base + ch[k].x,
                               {}});
    }
    Submit(reads);
    RETURN_IF_ERROR(AbsorbFailures(reads, slot_failed));
    for (int k = 0; k < D; ++k) {
      if (!ch[k].written) continue;
      uint8_t* p = parity.data() + (ch[k].x - lo);
      const void* srcs[3] = {p, old.data() + W * k, ch[k].data};
      Xor(p, srcs, ch[k].y - ch[k].x);
    }
    add_data_writes();
    writes.push_back(
        MemberIo{MemberIo::kWrite, pd, parity.data(), W, base + lo, {}});
    (missing_k >= 0 ? counters_.degraded_writes : counters_.rmw_writes)
        .fetch_add(1, std::memory_order_relaxed);
    return run_writes();
  }

  // Reconstruct-write (and its degraded form): build every data chunk's new
  // contents over the window, then P = XOR of them all.
  AlignedBuffer rows(static_cast<size_t>(W) * D);
  std::vector<const void*> srcs(D);
  for (int k = 0; k < D; ++k) {
    uint8_t* row = rows.data() + W * k;
    srcs[k] = row;
    if (k == missing_k) continue;  // rebuilt below
    if (mode == kReconstruct) {
      // Rebuilding the missing chunk needs every other chunk's old bytes.
      reads.push_back(
          MemberIo{MemberIo::kRead, ch[k].slot, row, W, base + lo, {}});
      continue;
    }
    if (ch[k].written && ch[k].x == lo && ch[k].y == hi) continue;
    uint64_t x = ch[k].written ? ch[k].x : hi;
    uint64_t y = ch[k].written ? ch[k].y : hi;
    if (x > lo) {
      reads.push_back(
          MemberIo{MemberIo::kRead, ch[k].slot, row, x - lo, base + lo, {}});
    }
    if (ch[k].written && y < hi) {
      reads.push_back(MemberIo{
          MemberIo::kRead, ch[k].slot, row + (y - lo), hi - y, base + y, {}});
    }
  }
  if (mode == kReconstruct) {
    reads.push_back(
        MemberIo{MemberIo::kRead, pd, parity.data(), W, base + lo, {}});
  }
  Submit(reads);
  RETURN_IF_ERROR(AbsorbFailures(reads, slot_failed));
  if (mode == kReconstruct) {
    // Old contents of the missing chunk: P ^ every other data chunk.
    std::vector<const void*> others{parity.data()};
    for (int k = 0; k < D; ++k) {
      if (k != missing_k) others.push_back(rows.data() + W * k);
    }
    Xor(rows.data() + W * missing_k, others, W);
  }
  // Lay the new bytes over the window; a chunk replaced across the whole
  // window is used in place from the caller's buffer (no copy).
  for (int k = 0; k < D; ++k) {
    if (!ch[k].written) continue;
    if (ch[k].x == lo && ch[k].y == hi) {
      srcs[k] = ch[k].data;
      continue;
    }
    std::memcpy(rows.data() + W * k + (ch[k].x - lo), ch[k].data,
                ch[k].y - ch[k].x);
  }
  Xor(parity.data(), srcs, W);
  add_data_writes();
  writes.push_back(
      MemberIo{MemberIo::kWrite, pd, parity.data(), W, base + lo, {}});
  (mode == kReconstruct ? counters_.degraded_writes : counters_.rcw_writes)
      .fetch_add(1, std::memory_order_relaxed);
  return run_writes();
}

absl::Status ArrayImpl::FlushSlots(const std::vector<bool>& which) {
  for (int attempt = 0; attempt <= geo_.raid_disks(); ++attempt) {
    std::vector<MemberIo> ios;
    for (int i = 0; i < geo_.raid_disks(); ++i) {
      if (which[i] && SlotUsable(i)) {
        ios.push_back(MemberIo{MemberIo::kFlush, i, nullptr, 0, 0, {}});
      }
    }
    Submit(ios);
    bool slot_failed;
    absl::Status st = AbsorbFailures(ios, &slot_failed);
    if (st.ok()) return st;
    // A member that cannot flush is failed; the data it held is still
    // recoverable from the others, which did flush. Fine unless the array
    // failed as a whole.
    RETURN_IF_ERROR(CheckUsable(false));
    if (!slot_failed) return st;
  }
  return absl::OkStatus();
}

absl::Status ArrayImpl::Flush() {
  RETURN_IF_ERROR(CheckUsable(false));
  // Everything acknowledged before this call is in the cache or on the
  // members: write the cache back, then make the members durable.
  RETURN_IF_ERROR(WritebackAll());
  return FlushSlots(std::vector<bool>(geo_.raid_disks(), true));
}

absl::Status ArrayImpl::Trim(size_t len, uint64_t offset, bool fua) {
  RETURN_IF_ERROR(CheckRange("trim", len, offset));
  RETURN_IF_ERROR(CheckUsable(true));
  for (const auto& s : slots_) {
    if (s->member != nullptr && !s->member->DiscardZeroes()) {
      return absl::OkStatus();  // advisory: cannot keep parity, so skip
    }
  }
  const uint64_t sd = geo_.stripe_data_bytes();
  uint64_t first = (offset + sd - 1) / sd;
  uint64_t end = (offset + len) / sd;
  if (first >= end) return absl::OkStatus();
  RETURN_IF_ERROR(BeginWrite());
  std::vector<bool> touched(geo_.raid_disks(), false);
  absl::Status st;
  for (uint64_t s = first; s < end && st.ok(); ++s) {
    StripeLock lock(&locks_, s);
    cache_.Erase(s);  // the whole stripe is being replaced by zeros
    // Every present chunk, parity included, becomes zeros: the stripe stays
    // consistent and a missing member's chunk reconstructs as zeros too.
    std::vector<MemberIo> ios;
    for (int i = 0; i < geo_.raid_disks(); ++i) {
      if (!SlotUsable(i)) continue;
      touched[i] = true;
      ios.push_back(MemberIo{MemberIo::kDiscard,
                             i,
                             nullptr,
                             geo_.chunk_bytes(),
                             s * geo_.chunk_bytes(),
                             {}});
    }
    Submit(ios);
    bool slot_failed;
    st = AbsorbFailures(ios, &slot_failed);
    if (!st.ok() && slot_failed && CheckUsable(true).ok()) {
      st = absl::OkStatus();  // the failed member's chunk is implied by P=0
    }
  }
  if (st.ok() && fua) st = FlushSlots(touched);
  EndWrite();
  return st;
}

absl::Status ArrayImpl::Zero(size_t len, uint64_t offset, bool fua) {
  RETURN_IF_ERROR(CheckRange("zero", len, offset));
  if (len == 0) return CheckUsable(true);
  const uint64_t sd = geo_.stripe_data_bytes();
  // Zeros go through the ordinary write path, one stripe's worth at a time,
  // so parity and degraded handling are exactly those of writes.
  AlignedBuffer zeros(std::min<uint64_t>(len, sd), /*zero=*/true);
  for (uint64_t done = 0; done < len;) {
    uint64_t pos = offset + done;
    uint64_t n = std::min<uint64_t>(len - done, sd - pos % sd);
    n = std::min<uint64_t>(n, zeros.size());
    RETURN_IF_ERROR(Write(zeros.data(), n, pos, false));
    done += n;
  }
  return fua ? Flush() : absl::OkStatus();
}

// ------------------------------------------------------ resync and check

absl::Status ArrayImpl::ScanStripe(uint64_t stripe, bool repair,
                                   bool* mismatch) {
  *mismatch = false;
  const int n = geo_.raid_disks();
  const uint64_t C = geo_.chunk_bytes();
  const uint64_t win = std::min(C, kScanWindow);
  const int pd = geo_.ParityDisk(stripe);
  AlignedBuffer bufs(win * n);
  StripeLock lock(&locks_, stripe);
  RETURN_IF_ERROR(CheckUsable(false));
  if (MissingSlot() >= 0) {
    return absl::FailedPreconditionError(
        "array is degraded: parity cannot be checked");
  }
  for (uint64_t w = 0; w < C; w += win) {
    std::vector<MemberIo> ios;
    for (int i = 0; i < n; ++i) {
      ios.push_back(MemberIo{
          MemberIo::kRead, i, bufs.data() + win * i, win, stripe * C + w, {}});
    }
    Submit(ios);
    bool slot_failed;
    RETURN_IF_ERROR(AbsorbFailures(ios, &slot_failed));
    std::vector<const void*> all;
    for (int i = 0; i < n; ++i) all.push_back(bufs.data() + win * i);
    if (XorIsZero(all, win)) continue;
    *mismatch = true;
    if (!repair) return absl::OkStatus();
    std::vector<const void*> data;
    for (int i = 0; i < n; ++i) {
      if (i != pd) data.push_back(bufs.data() + win * i);
    }
    uint8_t* p = bufs.data() + win * pd;
    Xor(p, data, win);
    std::vector<MemberIo> w_io{
        MemberIo{MemberIo::kWrite, pd, p, win, stripe * C + w, {}}};
    Submit(w_io);
    RETURN_IF_ERROR(AbsorbFailures(w_io, &slot_failed));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> ArrayImpl::CheckParity(
    std::vector<uint64_t>* first_bad) {
  uint64_t bad = 0;
  for (uint64_t s = 0; s < geo_.stripe_count(); ++s) {
    bool mismatch;
    RETURN_IF_ERROR(ScanStripe(s, /*repair=*/false, &mismatch));
    if (!mismatch) continue;
    if (first_bad != nullptr && first_bad->size() < 16) {
      first_bad->push_back(s);
    }
    ++bad;
  }
  return bad;
}

uint64_t ArrayImpl::SkipHoles(uint64_t stripe) {
  const uint64_t C = geo_.chunk_bytes();
  uint64_t next = geo_.member_bytes();
  for (int i = 0; i < geo_.raid_disks(); ++i) {
    if (!SlotUsable(i)) return stripe;
    absl::StatusOr<uint64_t> d =
        slots_[i]->member->NextDataOffset(data_offset_ + stripe * C);
    if (!d.ok() || *d < data_offset_) return stripe;
    next = std::min(next, *d - data_offset_);
  }
  return std::max(stripe, std::min(next / C, geo_.stripe_count()));
}

absl::Status ArrayImpl::Resync() {
  if (read_only_ || resync_stripe_.load() >= geo_.stripe_count()) {
    return absl::OkStatus();
  }
  bool expected = false;
  if (!resync_running_.compare_exchange_strong(expected, true)) {
    return absl::OkStatus();  // another thread is already on it
  }
  uint64_t start = resync_stripe_.load();
  Log(absl::StrFormat("resync: recomputing parity of stripes %d..%d", start,
                      geo_.stripe_count() - 1));
  absl::Status st;
  uint64_t repaired = 0, read = 0;
  for (uint64_t s = start; s < geo_.stripe_count(); ++s) {
    {
      absl::MutexLock lock(&state_mu_);
      if (stop_) break;
    }
    // Stripes that are holes on every member are zeros with zero parity:
    // consistent without reading them (a new array on sparse files).
    uint64_t skip_to = SkipHoles(s);
    if (skip_to > s) {
      resync_stripe_.store(skip_to, std::memory_order_release);
      s = skip_to - 1;
      continue;
    }
    bool mismatch;
    st = ScanStripe(s, /*repair=*/true, &mismatch);
    if (!st.ok()) break;
    counters_.resynced_stripes.fetch_add(1, std::memory_order_relaxed);
    ++read;
    if (mismatch) {
      ++repaired;
      counters_.resync_repairs.fetch_add(1, std::memory_order_relaxed);
    }
    resync_stripe_.store(s + 1, std::memory_order_release);
  }
  resync_running_.store(false);
  if (!st.ok()) {
    Log(absl::StrFormat("resync stopped at stripe %d: %s",
                        resync_stripe_.load(), st.message()));
    return st;
  }
  if (resync_stripe_.load() < geo_.stripe_count()) return absl::OkStatus();
  Log(absl::StrFormat(
      "resync: done: %d stripes read, %d skipped as never written, %d "
      "repaired",
      read, geo_.stripe_count() - start - read, repaired));
  absl::MutexLock lock(&state_mu_);
  if (writes_in_flight_ == 0 && !clean_) return MarkCleanLocked();
  return absl::OkStatus();
}

// ------------------------------------------------- clean/active and threads

absl::Status ArrayImpl::MarkCleanLocked() {
  if (clean_ || read_only_ || failed_.load()) return absl::OkStatus();
  if (resync_stripe_.load() < geo_.stripe_count()) return absl::OkStatus();
  // Data first, then the claim that it is consistent.
  RETURN_IF_ERROR(WritebackAll());
  RETURN_IF_ERROR(FlushSlots(std::vector<bool>(geo_.raid_disks(), true)));
  RETURN_IF_ERROR(WriteSuperblocks(/*clean=*/true));
  clean_ = true;
  return absl::OkStatus();
}

void ArrayImpl::SafemodeLoop() {
  absl::MutexLock lock(&state_mu_);
  while (!stop_) {
    state_mu_.AwaitWithTimeout(
        absl::Condition(&stop_),
        absl::FromChrono(std::chrono::milliseconds(100)));
    if (stop_) break;
    if (!clean_ && writes_in_flight_ == 0 &&
        std::chrono::steady_clock::now() - last_write_ >= kSafemodeDelay) {
      absl::Status st = MarkCleanLocked();
      if (!st.ok())
        Log(absl::StrFormat("marking clean failed: %s", st.message()));
    }
  }
}

void ArrayImpl::WritebackLoop() {
  for (;;) {
    {
      absl::MutexLock lock(&state_mu_);
      state_mu_.AwaitWithTimeout(
          absl::Condition(&stop_),
          absl::FromChrono(std::chrono::milliseconds(10)));
      if (stop_) return;
    }
    // Aged entries first, then the oldest while the cache is over 3/4 full
    // (so writers rarely have to evict inline).
    auto deadline = StripeCache::Clock::now() - cache_max_age_;
    for (uint64_t stripe : cache_.Oldest(SIZE_MAX, deadline)) {
      absl::Status st = WritebackStripe(stripe);
      if (!st.ok()) {
        Log(absl::StrFormat("cache writeback of stripe %d failed: %s", stripe,
                            st.message()));
        break;
      }
    }
    while (cache_.bytes() * 4 > cache_.capacity() * 3 && cache_.size() > 0) {
      std::vector<uint64_t> v = cache_.Oldest(1, std::nullopt);
      if (v.empty() || !WritebackStripe(v[0]).ok()) break;
    }
  }
}

void ArrayImpl::StartBackground() {
  if (read_only_ || safemode_thread_.joinable()) return;
  safemode_thread_ = std::thread([this] { SafemodeLoop(); });
  writeback_thread_ = std::thread([this] { WritebackLoop(); });
  if (resync_stripe_.load() < geo_.stripe_count() && !failed_.load()) {
    resync_thread_ = std::thread([this] { (void)Resync(); });
  }
}

void ArrayImpl::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  {
    absl::MutexLock lock(&state_mu_);
    stop_ = true;
  }
  if (safemode_thread_.joinable()) safemode_thread_.join();
  if (writeback_thread_.joinable()) writeback_thread_.join();
  if (resync_thread_.joinable()) resync_thread_.join();
  absl::Status wb = WritebackAll();
  if (!wb.ok()) {
    Log(absl::StrFormat("writing back cached data at shutdown failed: %s",
                        wb.message()));
  }
  absl::MutexLock lock(&state_mu_);
  if (!read_only_ && !failed_.load() && !clean_) {
    absl::Status st = MarkCleanLocked();
    if (!st.ok())
      Log(absl::StrFormat("marking clean failed: %s", st.message()));
  }
}

ArrayInfo ArrayImpl::Info() const {
  ArrayInfo info{.geometry = geo_};
  {
    absl::MutexLock lock(&sb_mu_);
    info.uuid = sb_.set_uuid;
    info.name = sb_.set_name;
    info.events = sb_.events;
    info.ctime = sb_.ctime;
    info.utime = sb_.utime;
  }
  {
    absl::MutexLock lock(&state_mu_);
    info.clean = clean_;
  }
  info.data_offset_bytes = data_offset_;
  info.read_only = read_only_;
  info.failed = failed_.load();
  info.resyncing = resync_stripe_.load() < geo_.stripe_count();
  info.resync_bytes = resync_stripe_.load() * geo_.chunk_bytes();
  int gone = 0;
  for (int i = 0; i < geo_.raid_disks(); ++i) {
    const Slot& s = *slots_[i];
    SlotInfo si;
    si.slot = i;
    si.state = s.state.load();
    si.name = s.member ? s.member->Name() : "";
    si.dev_number = s.dev_number;
    si.device_uuid = s.device_uuid;
    gone += si.state != SlotState::kActive;
    info.slots.push_back(si);
  }
  info.degraded = gone == 1;
  info.counters = counters_.Snapshot();
  return info;
}

// ------------------------------------------------------------ Array shell

Array::Array(std::unique_ptr<ArrayImpl> impl) : impl_(std::move(impl)) {}
Array::~Array() {
  if (impl_) impl_->Shutdown();
}
void Array::StartBackground() { impl_->StartBackground(); }
absl::Status Array::Read(void* buf, size_t len, uint64_t offset) {
  return impl_->Read(buf, len, offset);
}
absl::Status Array::Write(const void* buf, size_t len, uint64_t offset,
                          bool fua) {
  return impl_->Write(buf, len, offset, fua);
}
absl::Status Array::Flush() { return impl_->Flush(); }
absl::Status Array::Trim(size_t len, uint64_t offset, bool fua) {
  return impl_->Trim(len, offset, fua);
}
absl::Status Array::Zero(size_t len, uint64_t offset, bool fua) {
  return impl_->Zero(len, offset, fua);
}
absl::Status Array::Resync() { return impl_->Resync(); }
absl::Status Array::FailSlot(int slot) {
  return impl_->FailSlot(slot, "failed by request");
}
absl::StatusOr<uint64_t> Array::CheckParity(std::vector<uint64_t>* first_bad) {
  return impl_->CheckParity(first_bad);
}
uint64_t Array::size() const { return impl_->geometry().array_bytes(); }
const Geometry& Array::geometry() const { return impl_->geometry(); }
bool Array::read_only() const { return impl_->read_only(); }
ArrayInfo Array::Info() const { return impl_->Info(); }
void Array::SetCacheBytes(uint64_t bytes) { impl_->SetCacheBytes(bytes); }

// TODO(jobs): being implemented in jobs.cc; stubs keep the API compiling.
const char* JobKindName(JobKind kind) {
  switch (kind) {
    case JobKind::kNone:
      return "idle";
    case JobKind::kResync:
      return "resync";
    case JobKind::kRecover:
      return "recover";
    case JobKind::kReplace:
      return "replace";
    case JobKind::kCheck:
      return "check";
    case JobKind::kRepair:
      return "repair";
  }
  return "unknown";
}
absl::Status Array::FailMember(const std::string&) {
  return absl::UnimplementedError("fail: not implemented yet");
}
absl::Status Array::RemoveMember(const std::string&) {
  return absl::UnimplementedError("remove: not implemented yet");
}
absl::Status Array::AddMember(std::unique_ptr<Member>) {
  return absl::UnimplementedError("add: not implemented yet");
}
absl::Status Array::ReplaceMember(const std::string&, std::unique_ptr<Member>) {
  return absl::UnimplementedError("replace: not implemented yet");
}
absl::Status Array::StartScrub(bool) {
  return absl::UnimplementedError("check/repair: not implemented yet");
}
absl::Status Array::StopJob() { return absl::OkStatus(); }
absl::Status Array::WaitForJob() { return absl::OkStatus(); }
void Array::SetSpeedLimits(const SpeedLimits&) {}

}  // namespace uraid
