// The seed and offset a vendor's RNG kernel draws (torch.ops.torch_fl.philox_inputs; vendors
// include torch_fl/philox.h). Outside a device-graph capture they are host values reserved from
// the generator, as for any kernel. Inside a capture a host value would be frozen into the graph
// and every replay would repeat the capture's random numbers; a kernel that can read them from
// device memory (CUDA's graph-safe Philox state; CANN's aclnnDropoutGenMaskV2Tensor) gets two
// int64 device words [seed, offset] instead, plus its offset within the graph. Before each
// replay's launch the graph reserves the whole graph's offsets from the generator and writes the
// words with stream work on the replaying stream, so every replay draws new numbers and the
// generator advances as if the captured calls had run eagerly. A kernel that cannot read device
// words is refused by name in a capture.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <optional>
#include <string_view>

namespace torch_fl {

struct PhiloxDraw {
  uint64_t seed = 0;
  uint64_t offset = 0;  // with words: the draw's offset past words[1]
  at::Tensor words;     // in a capture: int64 [seed, offset] on the device; else undefined
};

// Reserves `increment` Philox offsets (rounded up to 4) from `generator` (else the device's
// default one). `op` names the caller in a refusal; `device_words`: whether the kernel reads
// device words in a capture (else a capture refuses it).
PhiloxDraw philox_inputs(c10::Device device, uint64_t increment,
                         const std::optional<at::Generator>& generator, std::string_view op,
                         bool device_words);

}  // namespace torch_fl
