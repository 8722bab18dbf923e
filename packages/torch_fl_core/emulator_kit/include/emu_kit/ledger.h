// Call counters, injected faults and contract violations of one emulated SDK: what its control
// header (<sdk>EmuInjectFault, <sdk>EmuCallCount, ...) arms and reads. Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace emu_kit {

class Ledger {
 public:
  // `prefix`: what every entry point of the SDK is named with ("tops", "acl"; several separated
  // by '|', "acl|Hccl", where the SDK's libraries name theirs apart); `label` names the emulator
  // in the violation reports written to stderr.
  Ledger(std::string prefix, std::string label);

  // Counts a call of `name`; the status injected for this very call, 0 when none.
  int enter(const char* name);
  // The nth call of `name` from now (1: the next one) returns `status` and does nothing else.
  // Faults add up. False for a name outside the SDK, nth < 1 or status 0.
  bool inject(const char* name, int nth, int status);
  void clear_faults();
  // Faults, call counters and the violation record (not the emulated devices).
  void reset();
  uint64_t calls(const char* name) const;

  // A contract violation the emulator detected: counted, kept as the latest, reported on stderr.
  void violation(const std::string& msg);
  uint64_t violations() const;
  // The latest violation's message ("" when none); valid until the next violation or reset.
  const char* last_violation() const;

 private:
  struct Fault {
    std::string name;
    uint64_t at;  // fails the call that brings the count of `name` to this
    int status;
  };
  std::vector<std::string> prefixes_;
  const std::string label_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, uint64_t> calls_;
  std::vector<Fault> faults_;
  uint64_t violations_ = 0;
  std::string last_violation_;
};

}  // namespace emu_kit
