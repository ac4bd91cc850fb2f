// UnixAcceptor: the accept loop of the daemon's Unix sockets, in jitd's
// own hands.
//
// gRPC's listener (1.51) bounds nothing, names every client of a Unix
// socket after the socket, and after one accept4() that fails with EMFILE
// never accepts again: the process lives on, deaf, and a supervisor's
// Restart=on-failure never fires. So jitd binds its Unix sockets itself,
// accepts on one thread, and hands each connection to gRPC
// (grpc::AddInsecureChannelFromFd):
//
//   bounds    at most max_connections open at once, and max_per_peer for
//             one peer (the client's uid, from SO_PEERCRED). A connection
//             beyond either is told why (an HTTP/2 GOAWAY, error
//             ENHANCE_YOUR_CALM, whose text names the flag) and closed at
//             once; the first of an episode is logged, and when the bound
//             is met no longer, that too.
//   no fds    accept4() failing with EMFILE or ENFILE: a reserve
//             descriptor is let go, the waiting connection accepted, told
//             and closed (so the listener never stays readable and stuck),
//             and the reserve taken back. Logged once per episode; accepting
//             goes on by itself as soon as descriptors are free.
//   peers     gRPC names such a connection "fd:N"; PeerOf() turns that into
//             "uid:U" while the connection is open, so that per-peer limits
//             are per user and not per socket.
//   local     with a local hand-off (Start's second argument), a connection
//             whose first bytes are local_wire::kPreface goes there instead
//             of to gRPC (local_server.h): the acceptor peeks at the first
//             bytes a client sends (an HTTP/2 client's preface starts
//             "PRI "), waiting up to kSniffTimeout for them on its own
//             poll, never blocking; a connection still silent then goes to
//             gRPC, as every connection did before. When the whole preface
//             is there, the acceptor reads it and answers it itself before
//             the hand-off: a client's Connect() waits for that answer, and
//             would otherwise wait for the local server's thread to wake as
//             well. Both kinds count in the bounds.
//   closing   gRPC closes a connection's descriptor itself. The acceptor
//             notices at its next sweep (the descriptor no longer names the
//             socket it accepted, by inode): at least once a second, and
//             always before it refuses anyone.
//
// Thread safety: Listen() and Start() from one thread before any other
// call; PeerOf() from any thread; Stop() once, from the thread
// that started it.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"

namespace jitd::daemon {

class UnixAcceptor {
 public:
  struct Options {
    // Connections open at once over every socket of this acceptor; 0 = no
    // bound (still stopped by the descriptor limit, which is survived).
    size_t max_connections = 0;
    // Connections one uid may hold at once; 0 = no bound.
    size_t max_per_peer = 0;
    // The flags that set the two bounds, named in a refusal.
    std::string max_connections_flag = "--max-connections";
    std::string max_per_peer_flag = "--max-connections-per-peer";
  };

  explicit UnixAcceptor(Options options);
  // Stop().
  ~UnixAcceptor();
  UnixAcceptor(const UnixAcceptor&) = delete;
  UnixAcceptor& operator=(const UnixAcceptor&) = delete;

  // Binds PATH and listens on it (the caller has claimed the path: see
  // unix_socket_claim.h). UNAVAILABLE naming the path and the reason.
  absl::Status Listen(const std::filesystem::path& path);

  // Starts the accept thread. `hand_off` receives each admitted connection
  // (non-blocking, close-on-exec) and owns it from then on; `local_hand_off`,
  // when set, those that open with the local path's preface: `greeted` when
  // the acceptor has read the preface and sent the daemon's, else with the
  // start of it unread.
  absl::Status Start(std::function<void(int fd)> hand_off,
                     std::function<void(int fd, bool greeted)> local_hand_off = {});

  // How long an admitted connection may stay silent before it is handed to
  // gRPC without knowing its protocol.
  static constexpr std::chrono::milliseconds kSniffTimeout{1000};

  // Closes the listening sockets and joins the thread; the connections
  // already handed off are gRPC's to close. Idempotent.
  void Stop();

  // "uid:U" for "fd:N", gRPC's name of a connection this acceptor handed
  // off and that is still open; any other peer name unchanged.
  std::string PeerOf(const std::string& grpc_peer) const;

 private:
  struct Open {
    ino_t inode = 0;
    uid_t uid = 0;
  };
  enum class Refusal { kNone, kTotal, kPeer };
  // An admitted connection that has not sent enough to tell its protocol.
  struct Undecided {
    int fd = -1;
    std::chrono::steady_clock::time_point deadline;
  };
  // kLocalWhole: the whole local preface has arrived; kLocal: a start of it.
  enum class Protocol { kGrpc, kLocal, kLocalWhole, kUndecided, kGone };

  void Run();
  void AcceptReady(int listen_fd);
  // Hands `fd` over by its first bytes; false while they have not arrived.
  bool Route(int fd, bool silent_goes_to_grpc);
  static Protocol Sniff(int fd);
  // Reads the local preface Sniff() saw whole and sends the daemon's; false
  // when the connection broke meanwhile.
  static bool Greet(int fd);
  void OnNoDescriptors(int listen_fd, int err);
  // Forgets the connections gRPC has closed. Needs mu_.
  void SweepLocked();
  // Whether a connection of `uid` may be added now. Needs mu_.
  Refusal CheckLocked(uid_t uid);
  void NoteRefusal(Refusal refusal, uid_t uid);
  std::string RefusalText(Refusal refusal) const;

  const Options options_;
  std::vector<int> listen_fds_;
  int wake_fd_ = -1;     // an eventfd; Stop() writes it
  int reserve_fd_ = -1;  // /dev/null, let go when descriptors run out
  std::function<void(int)> hand_off_;
  std::function<void(int, bool)> local_hand_off_;
  std::vector<Undecided> undecided_;  // the accept thread's
  std::thread thread_;

  mutable std::mutex mu_;
  std::map<int, Open> open_;          // by descriptor; guarded by mu_
  std::map<uid_t, size_t> per_peer_;  // guarded by mu_
  // Episodes, for logging their start and end once (the accept thread's).
  bool over_total_ = false;
  bool out_of_fds_ = false;
  std::map<uid_t, bool> over_peer_;
};

}  // namespace jitd::daemon
