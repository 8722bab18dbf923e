// Counts of calls the route kernels do not count: operators served by ATen's
// CPU fallback, calls served at ATen's decision points (convolution's
// overrideable kernels) by the backend the route table trusts with them, and
// sparse operators served by the mirrored backend's kernels (layout_fallback).
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
// The same for an operator and backend named at run time (rarer calls: a
// map under a lock).
void count_served(const std::string& op, const std::string& backend);
// op -> backend name -> calls.
std::map<std::string, std::map<std::string, int64_t>> served_counts();
// Resets both.
void reset_fallback_counts();

}  // namespace torch_fl
