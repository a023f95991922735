// SPDX-License-Identifier: MIT
// Internal: the array as the host of its two metadata owners, the roster
// (roster/roster.h: superblocks, who holds each slot) and the write-intent
// bitmap (meta/array_bitmap.h). It answers what each needs of the rest of
// the array and nothing else: which members carry the bitmap and how to
// write it on them at once, what a failed bitmap write does to a member,
// the bitmap header the roster writes before the superblocks, the resync
// offset a dirty superblock may claim.
//
// Thread-safety: the RosterHost methods run with the roster's mutex held
// and call nothing that takes it; the BitmapHost ones never run inside a
// roster call (the bitmap hands failures over afterwards).

#ifndef URAID_SRC_ARRAY_META_HOST_H_
#define URAID_SRC_ARRAY_META_HOST_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "array/array_state.h"
#include "array/member_faults.h"
#include "engine/shape_set.h"
#include "engine/stripe_engine.h"
#include "meta/array_bitmap.h"
#include "report/array_reporter.h"
#include "roster/roster.h"

namespace uraid {

class MetaHost final : public BitmapHost, public RosterHost {
 public:
  // References to parts that outlive it. Built before all of them but the
  // shapes and the reporter (the roster and the bitmap take it in their
  // constructors), so it touches none of them before they are built.
  MetaHost(Roster& roster, const ShapeSet& shapes, ArrayBitmap& bitmap,
           StripeEngine& engine, MemberFaults& faults, const ArrayState& state,
           const std::atomic<uint64_t>& resync_front,
           const ArrayReporter& reporter)
      : roster_(roster),
        shapes_(shapes),
        bitmap_(bitmap),
        engine_(engine),
        faults_(faults),
        state_(state),
        resync_front_(resync_front),
        reporter_(reporter) {}
  MetaHost(const MetaHost&) = delete;
  MetaHost& operator=(const MetaHost&) = delete;

  // --- BitmapHost ---
  std::vector<Carrier> BitmapCarriers() const override;
  std::vector<absl::Status> WriteDurablyOn(std::span<const Carrier> carriers,
                                           const void* buf, size_t len,
                                           uint64_t raw) override;
  absl::Status FlushAllSlots() override;
  void BitmapCarrierFailed(const Carrier& c, const std::string& why) override;
  // Names of the slot members, replacements and spares.
  std::vector<std::string> MemberNames() const override;

  // --- RosterHost ---
  uint64_t CurrentChunkBytes() const override {
    return shapes_.current().geo.chunk_bytes();
  }
  uint64_t DirtyResyncSectors() const override;
  void WriteBitmapEvents(uint64_t events) override;
  std::optional<BitmapSuper> BitmapHeader() const override;
  void SlotHealthChanged() override { faults_.UpdateBitmapDegraded(); }

  // --- both ---
  void Report(LogLevel level, Event e, const std::string& line) const override {
    reporter_.Report(level, std::move(e), line);
  }
  void Log(LogLevel level, const std::string& line) const override {
    reporter_.Log(level, line);
  }

 private:
  Roster& roster_;
  const ShapeSet& shapes_;
  ArrayBitmap& bitmap_;
  StripeEngine& engine_;
  MemberFaults& faults_;
  const ArrayState& state_;
  const std::atomic<uint64_t>& resync_front_;
  const ArrayReporter& reporter_;
};

}  // namespace uraid

#endif  // URAID_SRC_ARRAY_META_HOST_H_
