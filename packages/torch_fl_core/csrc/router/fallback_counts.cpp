#include "router/fallback_counts.h"

#include <mutex>

namespace torch_fl {
namespace {

std::mutex g_count_mutex;
std::map<std::string, int64_t>* g_counts = new std::map<std::string, int64_t>();

}  // namespace

void count_fallback(const std::string& op) {
  std::lock_guard<std::mutex> lock(g_count_mutex);
  ++(*g_counts)[op];
}

std::map<std::string, int64_t> fallback_counts() {
  std::lock_guard<std::mutex> lock(g_count_mutex);
  return *g_counts;
}

void reset_fallback_counts() {
  std::lock_guard<std::mutex> lock(g_count_mutex);
  g_counts->clear();
}

}  // namespace torch_fl
