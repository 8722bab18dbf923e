// Counts of operators served by ATen's CPU fallback (for census and the demo).
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace torch_fl {

void count_fallback(const std::string& op);
std::map<std::string, int64_t> fallback_counts();
void reset_fallback_counts();

}  // namespace torch_fl
