#include "router/fallback_counts.h"

#include <mutex>
#include <utility>

#include "router/backend.h"

namespace torch_fl {
namespace {

std::mutex g_count_mutex;
std::map<std::string, int64_t>* g_counts = new std::map<std::string, int64_t>();
// Keyed by pointers: no string is built per call.
std::map<std::pair<const char*, const Backend*>, int64_t>* g_served =
    new std::map<std::pair<const char*, const Backend*>, int64_t>();

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
  std::lock_guard<std::mutex> lock(g_count_mutex);
  ++(*g_served)[{op, &backend}];
}

std::map<std::string, std::map<std::string, int64_t>> served_counts() {
  std::lock_guard<std::mutex> lock(g_count_mutex);
  std::map<std::string, std::map<std::string, int64_t>> out;
  for (const auto& [key, n] : *g_served) out[key.first][key.second->name()] += n;
  return out;
}

void reset_fallback_counts() {
  std::lock_guard<std::mutex> lock(g_count_mutex);
  g_counts->clear();
  g_served->clear();
}

}  // namespace torch_fl
