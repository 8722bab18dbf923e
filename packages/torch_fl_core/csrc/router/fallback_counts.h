// Counts of calls the route kernels do not count: operators served by ATen's
// CPU fallback, and calls served at ATen's decision points (convolution's
// overrideable kernels) by the backend the route table trusts with them.
// For the census, the fallback budget and the demo.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace torch_fl {

class Backend;

void count_fallback(const std::string& op);
std::map<std::string, int64_t> fallback_counts();
// `op` is a string literal ("aten::convolution"); the backend lives for the process.
void count_served(const char* op, const Backend& backend);
// op -> backend name -> calls.
std::map<std::string, std::map<std::string, int64_t>> served_counts();
// Resets both.
void reset_fallback_counts();

}  // namespace torch_fl
