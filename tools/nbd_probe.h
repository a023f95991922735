// SPDX-License-Identifier: MIT
// Ending an NBD connection politely: on a connected socket to an NBD
// server, the newstyle handshake up to NBD_OPT_ABORT (the server's 18-byte
// greeting, our flags: fixed newstyle and no zeroes, the abort option and
// its reply). A bare connect-and-close instead makes nbdkit log an
// "error:" line ("sending newstyle handshake: Broken pipe", "reading
// initial client flags: Connection reset by peer"). Used by the readiness
// probe of `uraid serve` (nbdkit_supervisor.h) and by the control client
// when a path turns out to be an export's socket.

#ifndef URAID_TOOLS_NBD_PROBE_H_
#define URAID_TOOLS_NBD_PROBE_H_

namespace uraid::tool {

// True when the peer greeted as an NBD newstyle server and took the
// abort; false on anything else (the caller closes `fd` either way).
bool NbdHandshakeAborts(int fd);

}  // namespace uraid::tool

#endif  // URAID_TOOLS_NBD_PROBE_H_
