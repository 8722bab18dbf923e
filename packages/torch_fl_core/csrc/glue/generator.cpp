#include "glue/generator.h"

#include <ATen/Context.h>
#include <ATen/Utils.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/CallOnce.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <mutex>

#include "glue/runtime_access.h"

namespace torch_fl {

FlagosGeneratorImpl::FlagosGeneratorImpl(c10::DeviceIndex device, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      seed_(seed) {}

FlagosGeneratorImpl::FlagosGeneratorImpl(c10::DeviceIndex device, at::Generator mirror)
    : FlagosGeneratorImpl(device, kDefaultSeed) {
  mirror_ = std::move(mirror);
}

// In mirror mode every accessor reads the mirrored generator under its lock
// (its own kernels take that lock, not ours).
#define TFL_MIRRORED(expr)                             \
  if (mirror_.defined()) {                             \
    std::lock_guard<std::mutex> lock(mirror_.mutex()); \
    return mirror_.unsafeGetGeneratorImpl()->expr;     \
  }

void FlagosGeneratorImpl::set_current_seed(uint64_t seed) {
  TFL_MIRRORED(set_current_seed(seed));
  seed_ = seed;
  offset_ = 0;
}

void FlagosGeneratorImpl::set_offset(uint64_t offset) {
  TFL_MIRRORED(set_offset(offset));
  offset_ = offset;
}
uint64_t FlagosGeneratorImpl::get_offset() const {
  TFL_MIRRORED(get_offset());
  return offset_;
}
uint64_t FlagosGeneratorImpl::current_seed() const {
  TFL_MIRRORED(current_seed());
  return seed_;
}

uint64_t FlagosGeneratorImpl::seed() {
  TFL_MIRRORED(seed());
  const uint64_t s = c10::detail::getNonDeterministicRandom(true);
  set_current_seed(s);
  return s;
}

void FlagosGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  // Checked here for every runtime: the mirrored generator may accept legacy
  // sizes (CUDA takes an 8-byte seed-only state), flagos's contract is 16 bytes.
  TORCH_CHECK_TYPE(new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>(),
                   "flagos: RNG state must be a torch.ByteTensor");
  TORCH_CHECK(new_state.device().is_cpu(), "flagos: RNG state must be a CPU tensor");
  TORCH_CHECK(static_cast<size_t>(new_state.numel()) == kStateBytes,
              "flagos: RNG state is wrong size: expected ", kStateBytes,
              " bytes (seed, offset), got ", new_state.numel());
  TFL_MIRRORED(set_state(new_state));
  uint64_t words[2];
  std::memcpy(words, new_state.data(), kStateBytes);
  seed_ = words[0];
  offset_ = words[1];
}

c10::intrusive_ptr<c10::TensorImpl> FlagosGeneratorImpl::get_state() const {
  TFL_MIRRORED(get_state());
  auto state = at::detail::empty_cpu({static_cast<int64_t>(kStateBytes)}, at::kByte, std::nullopt,
                                     std::nullopt, std::nullopt, std::nullopt);
  const uint64_t words[2] = {seed_, offset_};
  std::memcpy(state.data_ptr(), words, kStateBytes);
  return state.getIntrusivePtr();
}

std::pair<uint64_t, uint64_t> FlagosGeneratorImpl::philox_engine_inputs(uint64_t increment) {
  increment = ((increment + 3) / 4) * 4;
  if (mirror_.defined()) {
    // A host-served RNG op (CPU fallback) reserves its offsets from the
    // mirrored generator, so it advances the same stream its kernels do.
    std::lock_guard<std::mutex> lock(mirror_.mutex());
    c10::GeneratorImpl* g = mirror_.unsafeGetGeneratorImpl();
    const uint64_t offset = g->get_offset();
    g->set_offset(offset + increment);
    return {g->current_seed(), offset};
  }
  const uint64_t offset = offset_;
  offset_ += increment;
  return {seed_, offset};
}

FlagosGeneratorImpl* FlagosGeneratorImpl::clone_impl() const {
  if (mirror_.defined()) {
    std::lock_guard<std::mutex> lock(mirror_.mutex());
    return new FlagosGeneratorImpl(device().index(), mirror_.clone());
  }
  auto* gen = new FlagosGeneratorImpl(device().index(), seed_);
  gen->offset_ = offset_;
  return gen;
}

namespace {

// Flagos's own Philox generators.
class PhiloxGenerators final : public GeneratorSource {
 public:
  at::Generator make_default(c10::DeviceIndex device) const override {
    return at::make_generator<FlagosGeneratorImpl>(device);
  }
  at::Generator make_new(c10::DeviceIndex device) const override {
    return at::make_generator<FlagosGeneratorImpl>(device);
  }
};

const PhiloxGenerators g_philox;
std::atomic<const GeneratorSource*> g_source{&g_philox};

const GeneratorSource& source() { return *g_source.load(std::memory_order_acquire); }

}  // namespace

void install_generator_source(const GeneratorSource* generators) {
  g_source.store(generators, std::memory_order_release);
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  // One generator per device for the life of the process (never destroyed:
  // Python's default_generators tuple holds references to them).
  static std::mutex mutex;
  static auto* generators = new std::deque<at::Generator>();
  if (device < 0) device = current_device();
  check_device_index(device);
  std::lock_guard<std::mutex> lock(mutex);
  while (generators->size() <= static_cast<size_t>(device)) {
    const auto index = static_cast<c10::DeviceIndex>(generators->size());
    generators->push_back(source().make_default(index));
  }
  return (*generators)[device];
}

at::Generator new_generator(c10::DeviceIndex device) {
  if (device < 0) device = current_device();
  return source().make_new(device);
}

}  // namespace torch_fl
