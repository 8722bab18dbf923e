#include "distributed/communicator.h"

#include <c10/util/Exception.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "glue/stream_pool.h"

namespace torch_fl::distributed {
namespace {

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr &&
         (std::strcmp(v, "1") == 0 || std::strcmp(v, "true") == 0 || std::strcmp(v, "yes") == 0);
}

// ProcessGroupNCCL's TORCH_NCCL_ASYNC_ERROR_HANDLING: 0 keeps the process up.
bool teardown_on_async_error() {
  const char* v = std::getenv("TORCH_NCCL_ASYNC_ERROR_HANDLING");
  if (v == nullptr) v = std::getenv("NCCL_ASYNC_ERROR_HANDLING");
  return v == nullptr || std::strcmp(v, "0") != 0;
}

}  // namespace

bool blocking_wait_requested() {
  return env_flag("TORCH_NCCL_BLOCKING_WAIT") || env_flag("NCCL_BLOCKING_WAIT");
}

Communicator::Communicator(const CollectiveLibrary& library, const tfl_comm_id& id, int rank,
                           int size, c10::DeviceIndex device, std::chrono::milliseconds timeout,
                           std::string vendor)
    : library_(library),
      rank_(rank),
      size_(size),
      device_(device),
      timeout_(timeout),
      stream_(stream_from_pool(device)) {
  where_ = "rank " + std::to_string(rank) + "/" + std::to_string(size) +
           " on flagos:" + std::to_string(device) + " (vendor '" + vendor + "', library " +
           library.name() + ")";
  vendor_ = vendor;
  const auto ms = timeout.count() <= 0             ? 0u
                  : timeout.count() > 0xffffffffLL ? 0xffffffffu
                                                   : static_cast<uint32_t>(timeout.count());
  check(table().comm_init(&comm_, size, &id, rank, device, ms), "comm_init");
  native_ = native_stream(stream_);
}

Communicator::~Communicator() {
  {
    std::lock_guard<std::mutex> lock(watch_mutex_);
    stopping_ = true;
  }
  watch_cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  if (comm_ != nullptr) table().comm_destroy(comm_);
}

std::string Communicator::where(const char* op) const {
  return std::string("flagos ") + op + " on flagos:" + std::to_string(device_) + " (vendor '" +
         vendor_ + "', tier vendor, library " + library_.name() + ", rank " +
         std::to_string(rank_) + "/" + std::to_string(size_) + ")";
}

void Communicator::check(tfl_status status, const char* call) const {
  if (status == TFL_OK) return;
  C10_THROW_ERROR(DistBackendError, where(call) + ": " + library_.describe(status, call));
}

std::string Communicator::async_error() const {
  std::string stall;
  {
    std::lock_guard<std::mutex> lock(stall_mutex_);
    stall = stall_;
  }
  tfl_status error = TFL_OK;
  const tfl_status st = table().comm_async_error(comm_, &error);
  std::string reported;
  if (st != TFL_OK) {
    reported = library_.describe(st, "comm_async_error");
  } else if (error != TFL_OK) {
    reported = library_.describe(error, "an enqueued operation");
  }
  if (stall.empty()) return reported;
  return reported.empty() ? stall : stall + " (" + reported + ")";
}

void Communicator::check_async() const {
  const std::string error = async_error();
  if (!error.empty()) C10_THROW_ERROR(DistBackendError, where_ + ": " + error);
}

void Communicator::abort() {
  if (!aborted_.exchange(true) && comm_ != nullptr) table().comm_abort(comm_);
}

void Communicator::start_watchdog() {
  teardown_ = !blocking_wait_requested() && teardown_on_async_error();
  watchdog_ = std::thread([this] { watch(); });
}

Communicator::InLibrary::InLibrary(Communicator& comm, const char* op) : comm_(comm) {
  if (comm_.in_library_.fetch_add(1) == 0) {
    comm_.in_library_op_.store(op);
    comm_.in_library_since_ns_.store(std::chrono::steady_clock::now().time_since_epoch().count());
  }
}

Communicator::InLibrary::~InLibrary() {
  if (comm_.in_library_.fetch_sub(1) == 1) comm_.in_library_since_ns_.store(0);
}

void Communicator::abort_stalled_call(std::unique_lock<std::mutex>& lock) {
  const int64_t since = in_library_since_ns_.load();
  if (since == 0 || timeout_.count() <= 0 || aborted_.load()) return;
  const auto now = std::chrono::steady_clock::now().time_since_epoch();
  const auto in_flight = std::chrono::duration_cast<std::chrono::milliseconds>(
      now - std::chrono::steady_clock::duration(since));
  if (in_flight <= timeout_) return;
  const char* op = in_library_op_.load();
  {
    std::lock_guard<std::mutex> stall_lock(stall_mutex_);
    stall_ = std::string(op ? op : "an operation") + " did not return from the library within " +
             std::to_string(timeout_.count()) +
             " ms (the group's timeout): a peer never arrived; the communicator is aborted";
  }
  lock.unlock();
  abort();  // ends the call's waits here and at the peers
  lock.lock();
}

void Communicator::watch() {
  std::unique_lock<std::mutex> lock(watch_mutex_);
  while (!stopping_) {
    watch_cv_.wait_for(lock, std::chrono::milliseconds(100));
    if (stopping_) continue;
    abort_stalled_call(lock);
    bool stalled = false;
    {
      std::lock_guard<std::mutex> stall_lock(stall_mutex_);
      stalled = !stall_.empty();
    }
    // An abort by the caller ends the watch; one for a stalled call is that call's failure, and
    // a collective timeout takes the process down as ProcessGroupNCCL's watchdog does.
    if (!teardown_ || (aborted_.load() && !stalled)) continue;
    const std::string error = async_error();
    if (error.empty()) continue;
    // As ProcessGroupNCCL's watchdog: results of the failed operation are
    // undefined, and continuing would train on them.
    std::fprintf(stderr,
                 "[flagos dist] %s: %s. To avoid data inconsistency the process is taken down, "
                 "as ProcessGroupNCCL does (TORCH_NCCL_BLOCKING_WAIT=1 makes Work.wait() raise "
                 "instead; TORCH_NCCL_ASYNC_ERROR_HANDLING=0 keeps the process up).\n",
                 where_.c_str(), error.c_str());
    std::fflush(stderr);
    std::_Exit(EXIT_FAILURE);
  }
}

}  // namespace torch_fl::distributed
