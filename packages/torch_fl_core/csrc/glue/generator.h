// Per-device Philox generator with CUDA-style state: 16 bytes, [seed, offset]
// as two little-endian uint64. Every producer on a device (fallback kernels
// today, FlagGems/boxed kernels later) draws from it and advances the offset,
// so a seeded run is reproducible whichever route serves an RNG op.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

namespace torch_fl {

struct FlagosGeneratorImpl : public c10::GeneratorImpl {
  explicit FlagosGeneratorImpl(c10::DeviceIndex device, uint64_t seed = kDefaultSeed);
  // Mirror mode: a flagos generator over the mirrored backend's generator
  // (CUDA's Philox generator), whose state it reads and advances. FlagGems and
  // boxed CUDA kernels draw from that generator, so every producer on the
  // device advances one seed/offset stream.
  FlagosGeneratorImpl(c10::DeviceIndex device, at::Generator mirror);
  // The mirrored generator (undefined outside mirror mode).
  const at::Generator& mirror() const { return mirror_; }

  static constexpr uint64_t kDefaultSeed = 67280421310721ULL;  // PyTorch's default_rng_seed_val
  static constexpr size_t kStateBytes = 16;

  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  // Reserves `increment` offsets (rounded up to a multiple of 4, as Philox
  // consumes 4 values per counter) and returns the (seed, offset) pair the
  // caller should use. Callers hold mutex_.
  std::pair<uint64_t, uint64_t> philox_engine_inputs(uint64_t increment);

 private:
  FlagosGeneratorImpl* clone_impl() const override;
  uint64_t seed_;
  uint64_t offset_ = 0;
  mutable at::Generator mirror_;  // mutable: locking it is not a change of state
};

const at::Generator& default_generator(c10::DeviceIndex device);
at::Generator new_generator(c10::DeviceIndex device);

// How a device's generators are made, chosen once at activation: flagos's own
// Philox generators, or on the delegate runtime generators over the mirrored
// backend's (glue/mirror/mirror_generators.cpp), whose state they are.
class GeneratorSource {
 public:
  virtual ~GeneratorSource() = default;
  virtual at::Generator make_default(c10::DeviceIndex device) const = 0;
  virtual at::Generator make_new(c10::DeviceIndex device) const = 0;
};
// Installs `generators` (process lifetime); before the runtime is published.
void install_generator_source(const GeneratorSource* generators);

}  // namespace torch_fl
