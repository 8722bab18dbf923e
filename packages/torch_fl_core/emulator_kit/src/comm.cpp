// An emulated communicator: joining the shared segment, waits for peers bounded by
// the timeout and broken by an abort, and the communicator's errors.
#include "emu_kit/comm.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

namespace emu_kit {

// The ids unique_id makes: magic, then a token the segment repeats (so a
// stale segment of the same name is never joined), then the shm name.
namespace {
constexpr char kIdMagic[8] = {'T', 'F', 'L', 'S', 'I', 'M', 'C', '1'};
constexpr size_t kNameBytes = 64;
constexpr uint64_t kSegmentMagic = 0x544c46434f4d4d31ull;  // "TLFCOMM1"
constexpr size_t kReasonBytes = 512;

struct IdLayout {
  char magic[8];
  uint64_t token;
  char name[kNameBytes];
};
static_assert(sizeof(IdLayout) <= TFL_COMM_ID_SIZE, "the id must fit tfl_comm_id");
}  // namespace

struct alignas(64) SegmentHeader {
  std::atomic<uint64_t> magic;  // set last by the creator: the rest is valid
  uint64_t token;
  uint32_t nranks;
  std::atomic<uint32_t> joined;
  std::atomic<uint32_t> aborted_by;    // 0, or 1 + the rank that broke it
  std::atomic<uint32_t> reason_ready;  // `reason` is written
  char reason[kReasonBytes];
};

struct alignas(64) RankCtl {
  std::atomic<uint64_t> phase;  // barriers passed
  std::atomic<uint32_t> joined;
  int32_t pid;
  CollectiveDesc desc;
};

static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared atomics must be lock-free");

namespace {

using Clock = std::chrono::steady_clock;

size_t align_up(size_t n) { return (n + 4095) & ~size_t{4095}; }

struct Layout {
  size_t ctl, mailboxes, collective, p2p, total;
};

Layout layout(int nranks) {
  const auto n = static_cast<size_t>(nranks);
  Layout l{};
  l.ctl = align_up(sizeof(SegmentHeader));
  l.mailboxes = l.ctl + align_up(n * sizeof(RankCtl));
  l.collective = l.mailboxes + align_up(n * n * sizeof(Mailbox));
  l.p2p = l.collective + n * kCollectiveSlotBytes;
  l.total = l.p2p + n * n * kPointToPointSlotBytes;
  return l;
}

// shm_open's file, opened directly: shm_open needs -lrt on older glibc (the
// manylinux wheels), a plain open of /dev/shm does not.
std::string shm_path(const char* name) { return std::string("/dev/shm") + name; }
int open_shared(const char* name, int flags) { return open(shm_path(name).c_str(), flags, 0600); }
void unlink_shared(const char* name) { unlink(shm_path(name).c_str()); }

std::string errno_text(const char* call) { return std::string(call) + ": " + std::strerror(errno); }

}  // namespace

namespace {

CommIdentity g_identity{"sim", "flagos sim device", "FLAGOS_SIM_COMM_TIMEOUT"};

tfl_comm_id id_from_token(uint64_t token, const char* tag) {
  IdLayout l{};
  std::memcpy(l.magic, kIdMagic, sizeof kIdMagic);
  l.token = token;
  std::snprintf(l.name, sizeof l.name, "/tfl_%s_comm.%s.%016" PRIx64, g_identity.tag, tag, token);
  tfl_comm_id id;
  std::memset(id.bytes, 0, sizeof id.bytes);
  std::memcpy(id.bytes, &l, sizeof l);
  return id;
}

// splitmix64's finaliser: a split's token from its parent's, serial and color.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

void set_comm_identity(const CommIdentity& identity) noexcept { g_identity = identity; }

const CommIdentity& comm_identity() noexcept { return g_identity; }

void make_unique_id(tfl_comm_id* id) {
  std::random_device rd;
  const uint64_t token = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
                         static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  *id = id_from_token(token, std::to_string(getpid()).c_str());
}

tfl_comm_id Comm::derived_id(uint64_t serial, int color) const {
  const uint64_t token = mix(token_ ^ mix(serial ^ mix(static_cast<uint64_t>(color) + 1)));
  return id_from_token(token, "split");
}

bool default_timeout_ms(uint32_t* out, std::string* error) {
  const char* text = std::getenv(g_identity.timeout_env);
  if (text == nullptr || *text == '\0') {
    *out = kDefaultTimeoutMs;
    return true;
  }
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  if (*end != '\0' || !(seconds > 0) || seconds > 4.0e6) {
    *error = std::string(g_identity.timeout_env) + "=" + text +
             " is not a positive number of seconds (at most 4e6)";
    return false;
  }
  *out = static_cast<uint32_t>(seconds * 1000.0 + 0.5);
  if (*out == 0) *out = 1;
  return true;
}

Comm::Comm(int nranks, const tfl_comm_id& id, int rank, int device, uint32_t timeout_ms)
    : nranks_(nranks), rank_(rank), device_(device), timeout_ms_(timeout_ms) {
  try {
    join(id);
  } catch (...) {
    if (base_ != nullptr) munmap(base_, size_);  // no destructor for a failed constructor
    throw;
  }
}

Comm::~Comm() {
  if (base_ != nullptr) munmap(base_, size_);
}

std::string Comm::who() const {
  char buf[96];
  std::snprintf(buf, sizeof buf, "rank %d of %d (%s %d)", rank_, nranks_, g_identity.device_label,
                device_);
  return buf;
}

void Comm::join(const tfl_comm_id& id) {
  IdLayout l;
  std::memcpy(&l, id.bytes, sizeof l);
  if (std::memcmp(l.magic, kIdMagic, sizeof kIdMagic) != 0 || l.name[0] != '/' ||
      std::memchr(l.name, '\0', sizeof l.name) == nullptr) {
    throw CommError(TFL_ERROR_INVALID_VALUE,
                    std::string("the id was not made by the ") + g_identity.tag + " unique_id");
  }
  const Layout lay = layout(nranks_);
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms_);
  const auto timed_out = [&] { return Clock::now() > deadline; };

  // The first rank to arrive creates and sizes the segment; the others wait
  // until it is sized and its header is written.
  bool creator = false;
  int fd = open_shared(l.name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC);
  if (fd >= 0) {
    creator = true;
    if (ftruncate(fd, static_cast<off_t>(lay.total)) != 0) {
      const std::string why = errno_text("ftruncate");
      close(fd);
      unlink_shared(l.name);
      throw CommError(TFL_ERROR_DEVICE,
                      "cannot size the shared segment " + std::string(l.name) + ": " + why);
    }
  } else if (errno == EEXIST) {
    fd = open_shared(l.name, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      throw CommError(TFL_ERROR_DEVICE, "cannot open the shared segment " + std::string(l.name) +
                                            ": " + errno_text("open"));
    }
  } else {
    throw CommError(TFL_ERROR_DEVICE, "cannot create the shared segment " + std::string(l.name) +
                                          ": " + errno_text("open"));
  }
  unsigned spins = 0;
  struct stat st{};
  for (;;) {
    if (fstat(fd, &st) != 0) {
      close(fd);
      throw CommError(TFL_ERROR_DEVICE, errno_text("fstat"));
    }
    if (st.st_size > 0) break;
    if (timed_out()) {
      close(fd);
      throw CommError(TFL_ERROR_TIMEOUT,
                      "the rank that creates the shared segment did not size it");
    }
    backoff(&spins);
  }
  if (static_cast<size_t>(st.st_size) != lay.total) {
    // Another nranks made it: read what it says, for the message.
    uint32_t theirs = 0;
    void* head = mmap(nullptr, sizeof(SegmentHeader), PROT_READ, MAP_SHARED, fd, 0);
    if (head != MAP_FAILED) {
      theirs = static_cast<SegmentHeader*>(head)->nranks;
      munmap(head, sizeof(SegmentHeader));
    }
    close(fd);
    char msg[160];
    std::snprintf(msg, sizeof msg,
                  "rank %d passed nranks %d, but the communicator was created with nranks %u",
                  rank_, nranks_, theirs);
    throw CommError(TFL_ERROR_INVALID_VALUE, msg);
  }
  void* p = mmap(nullptr, lay.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);  // the mapping keeps the segment
  if (p == MAP_FAILED) throw CommError(TFL_ERROR_OUT_OF_MEMORY, errno_text("mmap"));
  base_ = static_cast<unsigned char*>(p);
  size_ = lay.total;
  header_ = reinterpret_cast<SegmentHeader*>(base_);
  ctl_ = reinterpret_cast<RankCtl*>(base_ + lay.ctl);

  if (creator) {
    header_->token = l.token;
    header_->nranks = static_cast<uint32_t>(nranks_);
    header_->magic.store(kSegmentMagic, std::memory_order_release);
  }
  spins = 0;
  while (header_->magic.load(std::memory_order_acquire) != kSegmentMagic) {
    if (timed_out()) {
      throw CommError(TFL_ERROR_TIMEOUT,
                      "the rank that creates the shared segment did not initialise it");
    }
    backoff(&spins);
  }
  token_ = l.token;
  if (header_->token != l.token) {
    throw CommError(TFL_ERROR_INVALID_VALUE,
                    "the shared segment " + std::string(l.name) + " belongs to another id");
  }
  uint32_t expected = 0;
  if (!ctl_[rank_].joined.compare_exchange_strong(expected, 1)) {
    throw CommError(TFL_ERROR_INVALID_VALUE,
                    "rank " + std::to_string(rank_) + " already joined this communicator");
  }
  ctl_[rank_].pid = static_cast<int32_t>(getpid());
  if (header_->joined.fetch_add(1) + 1 == static_cast<uint32_t>(nranks_)) {
    unlink_shared(l.name);  // all mapped it: the name is no longer needed
  }
  spins = 0;
  while (header_->joined.load(std::memory_order_acquire) < static_cast<uint32_t>(nranks_)) {
    if (timed_out()) {
      std::string missing;
      for (int r = 0; r < nranks_; ++r) {
        if (ctl_[r].joined.load() == 0)
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
      unlink_shared(l.name);  // nobody else may join a communicator that failed
      char msg[128];
      std::snprintf(msg, sizeof msg, "comm_init timed out after %u ms; rank(s) ", timeout_ms_);
      throw CommError(TFL_ERROR_TIMEOUT, msg + missing + " never joined");
    }
    backoff(&spins);
  }
}

unsigned char* Comm::collective_slot(int rank) const noexcept {
  return base_ + layout(nranks_).collective + static_cast<size_t>(rank) * kCollectiveSlotBytes;
}

Mailbox& Comm::mailbox(int src, int dst) const noexcept {
  auto* boxes = reinterpret_cast<Mailbox*>(base_ + layout(nranks_).mailboxes);
  return boxes[static_cast<size_t>(src) * static_cast<size_t>(nranks_) + static_cast<size_t>(dst)];
}

unsigned char* Comm::mailbox_data(int src, int dst) const noexcept {
  const size_t pair =
      static_cast<size_t>(src) * static_cast<size_t>(nranks_) + static_cast<size_t>(dst);
  return base_ + layout(nranks_).p2p + pair * kPointToPointSlotBytes;
}

void Comm::publish_desc(const CollectiveDesc& desc) noexcept { ctl_[rank_].desc = desc; }

CollectiveDesc Comm::desc_of(int rank) const noexcept { return ctl_[rank].desc; }

void Comm::backoff(unsigned* spins) noexcept {
  const unsigned n = (*spins)++;
  if (n < 64) {
    sched_yield();
  } else {
    // The machine may have fewer cores than ranks: sleep rather than spin.
    const unsigned us = n < 200 ? 20 : (n < 1000 ? 100 : 1000);
    std::this_thread::sleep_for(std::chrono::microseconds(us));
  }
}

void Comm::check_aborted() const {
  if (aborted_.load(std::memory_order_acquire)) {
    throw CommError(TFL_ERROR_ABORTED, "the communicator was aborted (comm_abort) on " + who());
  }
  const uint32_t by = header_->aborted_by.load(std::memory_order_acquire);
  if (by == 0) return;
  std::string reason;
  if (header_->reason_ready.load(std::memory_order_acquire) != 0) {
    reason = std::string(header_->reason, strnlen(header_->reason, kReasonBytes));
  }
  throw CommError(TFL_ERROR_ABORTED, "rank " + std::to_string(by - 1) + " broke the communicator" +
                                         (reason.empty() ? std::string() : ": " + reason));
}

void Comm::barrier(const std::string& what) {
  ++phase_;
  ctl_[rank_].phase.store(phase_, std::memory_order_release);
  const auto start = Clock::now();
  const auto limit = std::chrono::milliseconds(timeout_ms_);
  unsigned spins = 0;
  for (int r = 0; r < nranks_; ++r) {
    while (ctl_[r].phase.load(std::memory_order_acquire) < phase_) {
      check_aborted();
      if (Clock::now() - start > limit) {
        std::string missing;
        for (int q = 0; q < nranks_; ++q) {
          if (ctl_[q].phase.load() < phase_)
            missing += (missing.empty() ? "" : ", ") + std::to_string(q);
        }
        throw CommError(TFL_ERROR_TIMEOUT, who() + " timed out after " +
                                               std::to_string(timeout_ms_) + " ms in " + what +
                                               " waiting for rank(s) " + missing);
      }
      backoff(&spins);
    }
  }
}

void Comm::publish_abort(const std::string& reason) noexcept {
  uint32_t expected = 0;
  if (header_->aborted_by.compare_exchange_strong(expected, static_cast<uint32_t>(rank_) + 1)) {
    const size_t n = std::min(reason.size(), kReasonBytes - 1);
    std::memcpy(header_->reason, reason.data(), n);
    header_->reason[n] = '\0';
    header_->reason_ready.store(1, std::memory_order_release);
  }
}

void Comm::fail(tfl_status status, const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (error_ != TFL_OK) return;
    error_ = status;
    error_message_ = message;
  }
  publish_abort(message);
}

tfl_status Comm::error(std::string* message) const {
  std::lock_guard<std::mutex> lock(error_mutex_);
  if (message != nullptr) *message = error_message_;
  return error_;
}

void Comm::abort() {
  aborted_.store(true, std::memory_order_release);
  fail(TFL_ERROR_ABORTED, "the communicator was aborted (comm_abort) on " + who());
}

void Comm::begin_work() noexcept {
  std::lock_guard<std::mutex> lock(work_mutex_);
  ++outstanding_;
}

void Comm::end_work() noexcept {
  std::lock_guard<std::mutex> lock(work_mutex_);
  if (--outstanding_ == 0) work_cv_.notify_all();
}

void Comm::drain() {
  std::unique_lock<std::mutex> lock(work_mutex_);
  work_cv_.wait(lock, [&] { return outstanding_ == 0; });
}

}  // namespace emu_kit
