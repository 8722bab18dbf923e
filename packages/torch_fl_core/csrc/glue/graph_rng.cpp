#include "glue/graph_rng.h"

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "glue/generator.h"
#include "glue/graph_capture.h"
#include "glue/runtime_access.h"

namespace torch_fl {
namespace {

uint64_t rounded(uint64_t increment) { return ((increment + 3) / 4) * 4; }

// One generator's draws in one capture: the words its kernels read, and how
// many offsets the captured calls took.
struct GeneratorWords {
  at::Generator generator;
  at::Tensor words;
  uint64_t total = 0;
};

struct Draws {
  std::vector<std::shared_ptr<GeneratorWords>> generators;
};

std::mutex& draws_mutex() {
  static std::mutex m;
  return m;
}

FlagosGeneratorImpl* flagos_generator(const at::Generator& g) {
  auto* impl = dynamic_cast<FlagosGeneratorImpl*>(g.unsafeGetGeneratorImpl());
  TORCH_CHECK(impl != nullptr, "flagos: expected a flagos generator, got one of ", g.device());
  return impl;
}

std::pair<uint64_t, uint64_t> reserve(at::Generator g, uint64_t increment) {
  std::lock_guard<std::mutex> lock(g.mutex());
  return flagos_generator(g)->philox_engine_inputs(increment);
}

}  // namespace

PhiloxDraw philox_inputs(c10::Device device, uint64_t increment,
                         const std::optional<at::Generator>& generator, std::string_view op,
                         bool device_words) {
  TORCH_CHECK(device.is_privateuseone() && device.has_index(),
              "flagos: philox_inputs needs a flagos device with an index, got ", device);
  const at::Generator gen = generator.has_value() && generator->defined()
                                ? *generator
                                : default_generator(device.index());
  CaptureSink* sink = capture_sink();
  if (sink == nullptr) {
    const auto [seed, offset] = reserve(gen, increment);
    return {seed, offset, at::Tensor()};
  }
  TORCH_CHECK(device_words, "flagos: ", op, " cannot be captured into a device graph on ", device,
              " (runtime ", runtime_name(),
              "): its kernel takes the seed and offset as host values at the call, so every "
              "replay would repeat the random numbers of the capture. Route it to another "
              "backend while capturing (docs/routing.md) or move it out of the captured region.");
  std::lock_guard<std::mutex> lock(draws_mutex());
  std::shared_ptr<void>& slot = sink->rng_draws();
  if (!slot) slot = std::make_shared<Draws>();
  auto& generators = std::static_pointer_cast<Draws>(slot)->generators;
  std::shared_ptr<GeneratorWords> entry;
  for (const auto& g : generators) {
    if (g->generator.unsafeGetGeneratorImpl() == gen.unsafeGetGeneratorImpl()) entry = g;
  }
  if (!entry) {
    entry = std::make_shared<GeneratorWords>();
    entry->generator = gen;
    // From the capture's private pool: the graph holds it until reset.
    entry->words = at::empty({2}, at::TensorOptions().dtype(at::kLong).device(device));
    generators.push_back(entry);
    sink->before_each_launch([w = entry] {
      const auto [seed, offset] = reserve(w->generator, w->total);
      // Stream work on the replaying stream, ahead of the launch: no wait on the host.
      w->words.select(0, 0).fill_(static_cast<int64_t>(seed));
      w->words.select(0, 1).fill_(static_cast<int64_t>(offset));
    });
  }
  const uint64_t offset = entry->total;
  entry->total += rounded(increment);
  return {0, offset, entry->words};
}

namespace {

std::tuple<int64_t, int64_t, at::Tensor> philox_inputs_op(
    c10::Device device, int64_t increment, const std::optional<at::Generator>& generator,
    c10::string_view op, bool device_words) {
  TORCH_CHECK(increment >= 0, "flagos: philox_inputs: negative increment ", increment);
  PhiloxDraw d = philox_inputs(device, static_cast<uint64_t>(increment), generator,
                               std::string_view(op.data(), op.size()), device_words);
  return {static_cast<int64_t>(d.seed), static_cast<int64_t>(d.offset), std::move(d.words)};
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(torch_fl, m) {
  m.def(
      "philox_inputs(Device device, int increment, Generator? generator, str op, "
      "bool device_words) -> (int, int, Tensor)",
      TORCH_FN(philox_inputs_op));
}

}  // namespace torch_fl
