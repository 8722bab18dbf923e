#include "emu_kit/ledger.h"

#include <cstdio>
#include <utility>

namespace emu_kit {

Ledger::Ledger(std::string prefix, std::string label) : label_(std::move(label)) {
  size_t start = 0;
  while (start <= prefix.size()) {
    const size_t bar = prefix.find('|', start);
    const size_t end = bar == std::string::npos ? prefix.size() : bar;
    prefixes_.push_back(prefix.substr(start, end - start));
    start = end + 1;
  }
}

int Ledger::enter(const char* name) {
  std::lock_guard<std::mutex> lk(mu_);
  const uint64_t n = ++calls_[name];
  for (auto it = faults_.begin(); it != faults_.end(); ++it) {
    if (it->at == n && it->name == name) {
      const int status = it->status;
      faults_.erase(it);
      return status;
    }
  }
  return 0;
}

bool Ledger::inject(const char* name, int nth, int status) {
  if (!name || nth < 1 || status == 0) return false;
  const std::string call(name);
  bool known = false;
  for (const std::string& p : prefixes_) known = known || call.compare(0, p.size(), p) == 0;
  if (!known) return false;
  std::lock_guard<std::mutex> lk(mu_);
  faults_.push_back(Fault{call, calls_[call] + static_cast<uint64_t>(nth), status});
  return true;
}

void Ledger::clear_faults() {
  std::lock_guard<std::mutex> lk(mu_);
  faults_.clear();
}

void Ledger::reset() {
  std::lock_guard<std::mutex> lk(mu_);
  faults_.clear();
  calls_.clear();
  violations_ = 0;
  last_violation_.clear();
}

uint64_t Ledger::calls(const char* name) const {
  if (!name) return 0;
  std::lock_guard<std::mutex> lk(mu_);
  auto it = calls_.find(name);
  return it == calls_.end() ? 0 : it->second;
}

void Ledger::violation(const std::string& msg) {
  std::lock_guard<std::mutex> lk(mu_);
  ++violations_;
  last_violation_ = msg;
  std::fprintf(stderr, "[%s] contract violation: %s\n", label_.c_str(), msg.c_str());
}

uint64_t Ledger::violations() const {
  std::lock_guard<std::mutex> lk(mu_);
  return violations_;
}

const char* Ledger::last_violation() const {
  std::lock_guard<std::mutex> lk(mu_);
  return last_violation_.c_str();
}

}  // namespace emu_kit
