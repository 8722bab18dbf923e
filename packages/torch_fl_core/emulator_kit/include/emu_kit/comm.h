// An emulated communicator: one rank's view of a shared-memory segment that
// every rank of the group maps (POSIX shm named by the unique id), its waits
// for peers (bounded by the timeout, broken by an abort), and its errors.
// Ranks are processes or threads of one machine. Sim's collective library
// and each SDK emulator's collective surface (HCCL's; ECCL's and MCCL's
// through nccl_style.h) run on it.
//
// Segment layout (sizes fixed by nranks, pages touched only when used):
//   Header | RankCtl[nranks] | Mailbox[nranks * nranks]
//   | collective slot per rank | point-to-point slot per ordered pair
#pragma once

#include <torch_fl/collective.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

namespace emu_kit {

// Bytes each rank stages per step of a collective, and per step of a send.
constexpr size_t kCollectiveSlotBytes = size_t{1} << 20;
constexpr size_t kPointToPointSlotBytes = size_t{256} << 10;
// The most ranks one communicator has (the segment grows as nranks^2).
constexpr int kMaxRanks = 64;
// Wait for peers this long unless comm_init or FLAGOS_SIM_COMM_TIMEOUT says.
constexpr uint32_t kDefaultTimeoutMs = 60000;

// A failure while an operation runs: the status and message it becomes.
class CommError : public std::runtime_error {
 public:
  CommError(tfl_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  tfl_status status() const noexcept { return status_; }

 private:
  tfl_status status_;
};

struct SegmentHeader;
struct RankCtl;

// One ordered pair's channel (src -> dst): a single slot the sender fills
// when `written == read` and the receiver empties when `written > read`.
struct alignas(64) Mailbox {
  std::atomic<uint64_t> written;
  std::atomic<uint64_t> read;
  uint64_t message_bytes;  // of the send this chunk belongs to (checked by recv)
  uint64_t chunk_bytes;
};

// What a rank says about the collective it runs, checked against rank 0's.
struct CollectiveDesc {
  uint32_t kind = 0;
  int32_t dtype = 0;
  int32_t op = 0;
  int32_t root = 0;
  uint64_t count = 0;
};

// Whose communicators these are, for names and messages: sim's {"sim",
// "flagos sim device", "FLAGOS_SIM_COMM_TIMEOUT"} (the default) or an SDK
// emulator's. Set once when the library loads, before any communicator.
struct CommIdentity {
  const char* tag;           // in shared-memory names and "made by the <tag> unique_id"
  const char* device_label;  // "rank 0 of 2 (<device_label> 0)"
  const char* timeout_env;   // seconds; the default timeout when comm_init gives none
};
void set_comm_identity(const CommIdentity& identity) noexcept;
const CommIdentity& comm_identity() noexcept;

class Comm {
 public:
  // Joins `rank` of the communicator named by `id` (throws CommError).
  Comm(int nranks, const tfl_comm_id& id, int rank, int device, uint32_t timeout_ms);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  int rank() const noexcept { return rank_; }
  int nranks() const noexcept { return nranks_; }
  int device() const noexcept { return device_; }
  tfl_comm handle() noexcept { return reinterpret_cast<tfl_comm>(this); }

  // ---- shared memory ----
  unsigned char* collective_slot(int rank) const noexcept;
  Mailbox& mailbox(int src, int dst) const noexcept;
  unsigned char* mailbox_data(int src, int dst) const noexcept;
  void publish_desc(const CollectiveDesc& desc) noexcept;
  CollectiveDesc desc_of(int rank) const noexcept;

  // ---- waits ----
  // Every rank reached this rank's next barrier; `what` names the operation.
  void barrier(const std::string& what);
  // Throws CommError(ABORTED) when this communicator or a peer aborted.
  void check_aborted() const;
  // A short pause in a polling loop that has made no progress (spins, then
  // sleeps a little longer each time up to a millisecond).
  static void backoff(unsigned* spins) noexcept;
  uint32_t timeout_ms() const noexcept { return timeout_ms_; }

  // ---- errors ----
  // Records the first failure as the asynchronous error and tells the peers
  // (the shared abort flag), so their waits end too.
  void fail(tfl_status status, const std::string& message);
  // TFL_OK, or the first failure (its message in *message).
  tfl_status error(std::string* message) const;
  // comm_abort: breaks the communicator here and for the peers.
  void abort();

  // ---- lifetime ----
  // One operation of the communicator runs at a time (streams of one comm
  // would otherwise interleave their barriers).
  std::mutex& run_mutex() noexcept { return run_mutex_; }
  // The collective's number on this communicator, for messages (run_mutex held).
  uint64_t next_serial() noexcept { return ++serial_; }
  // The id of the communicator that comm_split number `serial` of this one
  // makes for `color`: the same on every rank, and not any other's.
  tfl_comm_id derived_id(uint64_t serial, int color) const;
  void begin_work() noexcept;
  void end_work() noexcept;
  // Waits until every operation begun has ended (comm_destroy).
  void drain();
  std::atomic<bool> destroyed{false};

  // "rank 0 of 2 (flagos sim device 0)" for messages (the identity's label).
  std::string who() const;

 private:
  void join(const tfl_comm_id& id);
  void publish_abort(const std::string& reason) noexcept;

  const int nranks_;
  const int rank_;
  const int device_;
  const uint32_t timeout_ms_;
  uint64_t token_ = 0;  // of the id this communicator was made from
  unsigned char* base_ = nullptr;
  size_t size_ = 0;
  SegmentHeader* header_ = nullptr;
  RankCtl* ctl_ = nullptr;
  uint64_t phase_ = 0;   // this rank's barrier count (run under run_mutex_)
  uint64_t serial_ = 0;  // collectives run (under run_mutex_)

  std::atomic<bool> aborted_{false};
  mutable std::mutex error_mutex_;
  tfl_status error_ = TFL_OK;
  std::string error_message_;

  std::mutex run_mutex_;
  std::mutex work_mutex_;
  std::condition_variable work_cv_;
  int64_t outstanding_ = 0;
};

using CommPtr = std::shared_ptr<Comm>;

// Fills `id` with a fresh rendezvous name and token.
void make_unique_id(tfl_comm_id* id);
// The timeout comm_init uses for timeout_ms == 0 (the identity's variable,
// seconds, else the default); false with *error for a bad value.
bool default_timeout_ms(uint32_t* out, std::string* error);

}  // namespace emu_kit
