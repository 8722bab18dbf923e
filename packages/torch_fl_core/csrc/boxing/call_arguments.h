// What every boxed flagos path checks and rewrites among a call's arguments
// before running a host or boxed kernel: same-device checks, arguments whose
// memory overlaps a written one, and flagos generators replaced by generators
// the target kernel accepts.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <torch_fl/kit/written_argument.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>
#include <utility>

namespace torch_fl::boxing {

// `v` with each tensor in it (a Tensor, or an element of a Tensor[] or
// Tensor?[] list) replaced by f(tensor), and a flagos Device by `device`
// when one is given: how a boxed argument is handed to another device's kernel.
template <class F>
c10::IValue map_tensors(const c10::IValue& v, F&& f, std::optional<c10::Device> device = {}) {
  if (v.isTensor()) return f(v.toTensor());
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    const auto list = v.toTensorList();
    out.reserve(list.size());
    for (const at::Tensor& t : list.vec()) out.push_back(f(t));
    return out;
  }
  if (v.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> out;
    for (const auto& t : v.toOptionalTensorList().vec()) {
      out.push_back(t ? std::optional<at::Tensor>(f(*t)) : t);
    }
    return out;
  }
  if (device && v.isDevice() && v.toDevice().is_privateuseone()) return c10::IValue(*device);
  return v;
}

// The `n` arguments on top of `stack` replaced in place by map_tensors(v, f, device), the
// caller's values appended to `originals` and the mapped ones to `aliases`: how a boxed call
// hands its arguments to another device's kernel and keeps what it needs to map back.
template <class F>
void map_stack_arguments(torch::jit::Stack* stack, size_t n, F&& f,
                         std::optional<c10::Device> device, std::vector<c10::IValue>& originals,
                         std::vector<c10::IValue>& aliases) {
  const auto begin = stack->end() - static_cast<std::ptrdiff_t>(n);
  originals.assign(begin, stack->end());
  aliases.reserve(n);
  for (auto it = begin; it != stack->end(); ++it) {
    *it = map_tensors(*it, f, device);
    aliases.push_back(*it);
  }
}

// Throws CUDA's "Expected all tensors to be on the same device" error when
// flagos tensors of two devices, or a flagos and a non-scalar CPU tensor, meet.
void check_same_device(const c10::OperatorHandle& op, torch::jit::Stack::const_iterator begin,
                       torch::jit::Stack::const_iterator end);

// The same error for flagos:a and flagos:b (the unboxed route's device check).
[[noreturn]] void throw_two_devices(const c10::OperatorHandle& op, c10::DeviceIndex a,
                                    c10::DeviceIndex b);

// Whether a written flagos tensor argument (out=, in-place) has elements in
// common with another tensor argument over the same storage, or more than one
// element at one address. Kernels that see each argument alone (native SDK
// kernels, FlagGems, a copy to the CPU per argument) cannot tell; such a call
// is served where the aliasing is visible, as ATen's CPU kernels see it.
bool has_aliased_write(const c10::FunctionSchema& schema, torch::jit::Stack::const_iterator begin,
                       torch::jit::Stack::const_iterator end);

// The index of the argument return `ret` of `schema` writes (out=, in-place:
// the argument with the same `(a!)` alias set), or -1: the one rule, shared
// with the vendors' kernels.
using torch_fl::kit::written_argument;

// The device of the first flagos tensor among the arguments.
std::optional<c10::DeviceIndex> first_flagos_device(torch::jit::Stack::const_iterator begin,
                                                    torch::jit::Stack::const_iterator end);

// Replaces each flagos (or absent) `Generator?` argument of an RNG op with a
// CPU generator seeded from the flagos generator's (seed, offset), advancing
// that offset: every route draws from the device's one Philox stream, so a
// seeded run is reproducible whichever backend serves it. No-op for ops
// without generator arguments.
void bridge_generators(const c10::FunctionSchema& schema, torch::jit::Stack::iterator begin,
                       torch::jit::Stack::iterator end);

bool has_generator_argument(const c10::FunctionSchema& schema);
// Whether an argument of this type is a Generator or Generator?.
bool is_generator_type(const c10::TypePtr& type);

// Mirror mode (box:<mirrored key>): each flagos generator argument becomes the
// mirrored generator it wraps (its state is that generator's), and an absent
// one stays absent, so the mirrored kernel draws from the mirrored default
// generator, which is the flagos default generator's state.
void mirror_generators(const c10::FunctionSchema& schema, torch::jit::Stack::iterator begin,
                       torch::jit::Stack::iterator end);
void mirror_generator_value(c10::IValue& value);

// One `Generator?` value: the bridge above for a single argument, given the
// op's flagos device and largest flagos input numel.
void bridge_generator_value(const c10::FunctionSchema& schema, c10::IValue& value,
                            std::optional<c10::DeviceIndex> device, int64_t numel);

// The error for non-scalar CPU tensors beside flagos tensors, unless CUDA's
// kernel of the op accepts CPU tensors in each of those arguments (bit i of
// `positions`: argument i holds one; bit 63 also stands for any later one).
void check_cpu_tensors_allowed(const c10::OperatorHandle& op, c10::DeviceIndex device,
                               uint64_t positions);
// The bit of argument `i` in such a `positions` mask.
inline uint64_t argument_bit(size_t i) { return uint64_t{1} << (i < 63 ? i : 63); }
// Which arguments of which overloads CUDA's kernels accept as CPU tensors
// ("aten::index_fill_.int_Scalar" -> {"index"}), measured on CUDA
// (tools/cpu_arguments_probe.py) and set at import by torch_fl.routing.
void set_cpu_argument_rules(std::map<std::string, std::vector<std::string>> rules);
// Whether an operator writes a tensor argument (out=, in-place).
bool writes_tensor(const c10::FunctionSchema& schema);
// The same-device error where a written tensor argument is a CPU tensor beside
// flagos tensors (a 0-dim CPU tensor is a scalar operand, never an output).
void check_written_not_cpu(const c10::OperatorHandle& op, const torch::jit::Stack& stack);
// The same-device error for a CPU tensor beside flagos ones (a written CPU
// tensor, or a CPU operand the operator does not accept).
[[noreturn]] void throw_flagos_and_cpu(const c10::OperatorHandle& op, c10::DeviceIndex device);

}  // namespace torch_fl::boxing
