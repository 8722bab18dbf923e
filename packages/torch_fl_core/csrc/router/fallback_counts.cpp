#include "router/fallback_counts.h"

#include <atomic>
#include <mutex>
#include <utility>

#include <c10/util/Exception.h>

#include "router/backend.h"

namespace torch_fl {
namespace {

std::mutex g_count_mutex;
std::map<std::string, int64_t>* g_counts = new std::map<std::string, int64_t>();

// Served calls, counted on every convolution: lock-free after a pair's first
// call. A fixed table of (op, backend) slots, published by g_served_used.
struct ServedSlot {
  std::atomic<const char*> op{nullptr};
  std::atomic<const Backend*> backend{nullptr};
  std::atomic<int64_t> calls{0};
};
constexpr int kServedSlots = 64;
ServedSlot g_served[kServedSlots];
std::atomic<int> g_served_used{0};
// op -> backend -> calls, for count_served by name (under g_count_mutex).
std::map<std::string, std::map<std::string, int64_t>>* g_served_by_name =
    new std::map<std::string, std::map<std::string, int64_t>>();

ServedSlot* find_served(const char* op, const Backend* backend, int used) {
  for (int i = 0; i < used; ++i) {
    ServedSlot& s = g_served[i];
    if (s.op.load(std::memory_order_relaxed) == op &&
        s.backend.load(std::memory_order_relaxed) == backend) {
      return &s;
    }
  }
  return nullptr;
}

}  // namespace

void count_fallback(const std::string& op) {
  std::lock_guard<std::mutex> lock(g_count_mutex);
  ++(*g_counts)[op];
}

std::map<std::string, int64_t> fallback_counts() {
  std::lock_guard<std::mutex> lock(g_count_mutex);
  return *g_counts;
}

void count_served(const char* op, const Backend& backend) {
  ServedSlot* slot = find_served(op, &backend, g_served_used.load(std::memory_order_acquire));
  if (slot == nullptr) {
    std::lock_guard<std::mutex> lock(g_count_mutex);
    const int used = g_served_used.load(std::memory_order_relaxed);
    slot = find_served(op, &backend, used);
    if (slot == nullptr) {
      // Two ops (convolution and its backward) times the backends of a
      // process: the table does not fill; a pair past it is an internal error.
      TORCH_CHECK(used < kServedSlots, "flagos: more than ", kServedSlots,
                  " (operator, backend) pairs served outside route kernels");
      slot = &g_served[used];
      slot->op.store(op, std::memory_order_relaxed);
      slot->backend.store(&backend, std::memory_order_relaxed);
      g_served_used.store(used + 1, std::memory_order_release);
    }
  }
  slot->calls.fetch_add(1, std::memory_order_relaxed);
}

void count_served(const std::string& op, const std::string& backend) {
  std::lock_guard<std::mutex> lock(g_count_mutex);
  ++(*g_served_by_name)[op][backend];
}

std::map<std::string, std::map<std::string, int64_t>> served_counts() {
  std::map<std::string, std::map<std::string, int64_t>> out;
  {
    std::lock_guard<std::mutex> lock(g_count_mutex);
    out = *g_served_by_name;
  }
  const int used = g_served_used.load(std::memory_order_acquire);
  for (int i = 0; i < used; ++i) {
    const ServedSlot& s = g_served[i];
    const int64_t n = s.calls.load(std::memory_order_relaxed);
    if (n > 0) out[s.op.load()][s.backend.load()->name()] += n;
  }
  return out;
}

void reset_fallback_counts() {
  std::lock_guard<std::mutex> lock(g_count_mutex);
  g_counts->clear();
  g_served_by_name->clear();
  const int used = g_served_used.load(std::memory_order_acquire);
  for (int i = 0; i < used; ++i) g_served[i].calls.store(0, std::memory_order_relaxed);
}

}  // namespace torch_fl
