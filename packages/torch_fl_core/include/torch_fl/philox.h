// The seed and offset of a vendor's RNG kernel (header-only; the kernel library compiles it
// against the torch it is built for): every vendor kernel that draws random numbers takes them
// from here, so it advances the one flagos generator every route shares and replays right in a
// device graph. Outside a capture: host values. Inside one: `words`, two int64 on the device
// ([seed, offset]) that the graph rewrites before each replay, and `offset`, the draw's place past
// words[1]; a kernel that cannot read its seed from device memory passes device_words=false and
// a capture refuses the call by name instead of replaying the capture's numbers.
#ifndef TORCH_FL_PHILOX_H_
#define TORCH_FL_PHILOX_H_

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>

namespace torch_fl {

struct PhiloxInputs {
  uint64_t seed = 0;
  uint64_t offset = 0;
  at::Tensor words;  // defined only inside a device-graph capture
  bool on_device() const { return words.defined(); }
};

// Reserves `increment` Philox offsets from `generator` (None: the device's default generator).
// `op` names the caller ("aten::bernoulli_.float") in a refusal.
inline PhiloxInputs philox_inputs(c10::Device device, uint64_t increment,
                                  const std::optional<at::Generator>& generator,
                                  const std::string& op, bool device_words) {
  static const auto handle =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("torch_fl::philox_inputs", "")
          .typed<std::tuple<int64_t, int64_t, at::Tensor>(
              c10::Device, int64_t, const std::optional<at::Generator>&, c10::string_view, bool)>();
  auto [seed, offset, words] = handle.call(device, static_cast<int64_t>(increment), generator,
                                           c10::string_view(op.data(), op.size()), device_words);
  return {static_cast<uint64_t>(seed), static_cast<uint64_t>(offset), std::move(words)};
}

}  // namespace torch_fl

#endif  // TORCH_FL_PHILOX_H_
