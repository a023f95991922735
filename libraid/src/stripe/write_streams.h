// SPDX-License-Identifier: MIT
// Internal: tells a write that continues a recent one (a sequential
// writer, its requests reordered by a deep queue or interleaved with other
// writers') from a random one, by the end offsets of the last kSlots
// writes. The stripe cache gathers a piece that starts nowhere near a
// stripe boundary only when its write continues a stream
// (engine/stripe_writer.cc): gathering random small writes saves nothing
// (each is written back by RMW later anyway) and costs a cache entry each.
//
// Thread-safe and lock-free (stripe/recent_values.h): writers racing may
// overwrite each other's end or read one a moment old; that changes only
// whether a piece is gathered, never what is written.

#ifndef URAID_SRC_STRIPE_WRITE_STREAMS_H_
#define URAID_SRC_STRIPE_WRITE_STREAMS_H_

#include <cstdint>

#include "stripe/recent_values.h"

namespace uraid {

class WriteStreams {
 public:
  // Ends remembered: enough for a few interleaved streams, each with a
  // deep queue of requests in flight.
  static constexpr int kSlots = 64;
  // A write that starts up to this many of its own lengths past a recent
  // end continues it: the requests between were reordered or are still in
  // flight (a queue depth of 32).
  static constexpr uint64_t kReorderLengths = 32;

  // Whether the write [offset, offset + len) continues a recent write: it
  // starts at that write's end or at most kReorderLengths of its own
  // lengths after it. A write over bytes just written (the same block
  // again) does not: gathering it would only delay it. Units: bytes of the
  // array. len > 0.
  bool Continues(uint64_t offset, uint64_t len) const;
  // Remembers the write's end, forgetting the oldest of kSlots.
  void Record(uint64_t offset, uint64_t len);

 private:
  RecentValues<kSlots> ends_;  // offset + len, never 0 (len > 0)
};

}  // namespace uraid

#endif  // URAID_SRC_STRIPE_WRITE_STREAMS_H_
