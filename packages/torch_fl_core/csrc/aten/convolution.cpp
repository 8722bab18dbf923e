// Convolutions on flagos, by two paths:
//
// - Routed: where the route table routes aten::convolution and its backward
//   (derived box routes: sim's box:cpu, the cuda vendor's box:cuda; a
//   vendor's own kernel: ascend), the router's unboxed kernel runs the
//   backend's convolution directly. The kernels below are that route kernel
//   plus the layout rule: ATen's composite would otherwise run _convolution on
//   flagos, reach convolution_overrideable, box the call and run _convolution
//   again on the aliases (33 heap allocations and a boxed stack per call).
// - Overrideable: ATen's _convolution sends devices it has no backend path for
//   (anything but CPU/CUDA/MKLDNN/...) to convolution_overrideable / its
//   backward, whose default kernels raise. Where convolution is not routed
//   (and for direct callers of _convolution) flagos answers them by running
//   the public convolution ops on the backend the route table already trusts
//   with convolutions: the one aten::convolution_backward is routed to, else
//   box:cpu where the runtime's memory is host addressable (zero copies), else
//   ATen's CPU fallback. Every call is counted (the census and
//   FLAGOS_FALLBACK_BUDGET see it), as a CPU fallback when it is one.
//
// Layout: the answer has the format native CUDA and CPU give the same
// operands (kit/conv_layout.h), whatever the backend computed in; flagos's
// fake kernels predict the same format (torch_fl.compile.conv_layout), since
// compiled graphs assert the predicted strides. PyTorch's own prediction for
// an out-of-tree device (ConvBackend::Overrideable) is always contiguous,
// which would cost every channels_last convolution a copy.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>
#include <torch_fl/kit/conv_layout.h>

#include "router/backend.h"
#include "router/fallback_counts.h"
#include "router/router.h"
#include "router/unboxed_route.h"

namespace torch_fl {

namespace {

// Asked on every convolution: the route lookup and the operator handles are
// cached (no lock, string or schema lookup per call).
RouteProbe g_conv_route("aten::convolution_backward");

Backend& conv_route(const c10::OperatorHandle& op, c10::ScalarType dtype) {
  Backend* routed = g_conv_route.peek(dtype);
  if (routed != nullptr && routed->has_kernel(op)) return *routed;
  // Core registers both at import, before any convolution runs.
  static const std::shared_ptr<Backend> host = [] {
    auto b = find_backend("box:cpu");
    return b ? b : find_backend("cpu");
  }();
  return *host;
}

const c10::OperatorHandle& conv_op(bool backward) {
  static const c10::OperatorHandle forward_op =
      c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution", "");
  static const c10::OperatorHandle backward_op =
      c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution_backward", "");
  return backward ? backward_op : forward_op;
}

torch::jit::Stack run_routed(bool backward, c10::ScalarType dtype, torch::jit::Stack stack) {
  const c10::OperatorHandle& op = conv_op(backward);
  Backend& backend = conv_route(op, dtype);
  static const Backend* const cpu = find_backend("cpu").get();
  if (&backend == cpu) {
    call_cpu_fallback(op, &stack, /*counted=*/true);
  } else {
    count_served(backward ? "aten::convolution_backward" : "aten::convolution", backend);
    backend.call(op, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), &stack);
  }
  return stack;
}

at::Tensor as_predicted(at::Tensor result, at::MemoryFormat format) {
  if (!result.defined()) return result;
  return result.is_contiguous(format) ? result : result.contiguous(format);
}

at::Tensor as_predicted(at::Tensor result, const at::Tensor& input, const at::Tensor& weight) {
  return as_predicted(std::move(result), kit::conv_memory_format(input, weight));
}

at::Tensor convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias,
                                    c10::SymIntArrayRef stride, c10::SymIntArrayRef padding,
                                    c10::SymIntArrayRef dilation, bool transposed,
                                    c10::SymIntArrayRef output_padding, c10::SymInt groups) {
  torch::jit::Stack stack;
  torch::jit::push(stack, input, weight, bias, stride, padding, dilation, transposed,
                   output_padding, groups);
  return as_predicted(
      run_routed(/*backward=*/false, input.scalar_type(), std::move(stack)).at(0).toTensor(), input,
      weight);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    c10::SymIntArrayRef stride, c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
    bool transposed, c10::SymIntArrayRef output_padding, c10::SymInt groups,
    std::array<bool, 3> output_mask) {
  // convolution_backward wants the bias size only to know a bias exists: it
  // is the number of output channels.
  std::optional<std::vector<c10::SymInt>> bias_sizes;
  if (output_mask[2]) {
    bias_sizes =
        std::vector<c10::SymInt>{transposed ? weight.sym_size(1) * groups : weight.sym_size(0)};
  }
  torch::jit::Stack stack;
  torch::jit::push(stack, grad_output, input, weight,
                   bias_sizes ? c10::IValue(c10::SymIntArrayRef(*bias_sizes)) : c10::IValue(),
                   stride, padding, dilation, transposed, output_padding, groups,
                   c10::List<bool>({output_mask[0], output_mask[1], output_mask[2]}));
  auto out = run_routed(/*backward=*/true, grad_output.scalar_type(), std::move(stack));
  auto tensor = [](const c10::IValue& v) { return v.isTensor() ? v.toTensor() : at::Tensor(); };
  const at::MemoryFormat format = kit::conv_memory_format(input, weight);
  return {as_predicted(tensor(out.at(0)), format), as_predicted(tensor(out.at(1)), format),
          tensor(out.at(2))};
}

// ---- the routed convolution ----

// The route kernels of aten::convolution and aten::convolution_backward: the
// router's unboxed kernel (SignatureRoute: aliases, the backend's kernel,
// results back on flagos), then the layout rule on the flagos answer. Their
// boxed entry is c10's (torch.ops calls, FX graphs), so boxed calls get the
// same rule.
struct RoutedConvolution final : c10::OperatorKernel {
  using Op = at::_ops::convolution;
  static inline std::atomic<RouteState*> state{nullptr};

  at::Tensor operator()(c10::DispatchKeySet ks, const at::Tensor& input, const at::Tensor& weight,
                        const std::optional<at::Tensor>& bias, c10::SymIntArrayRef stride,
                        c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, bool transposed,
                        c10::SymIntArrayRef output_padding, c10::SymInt groups) {
    return as_predicted(
        unboxed::SignatureRoute<Op::schema>::call(
            state.load(std::memory_order_acquire), &Op::redispatch, ks, input, weight, bias, stride,
            padding, dilation, transposed, output_padding, std::move(groups)),
        input, weight);
  }
};

struct RoutedConvolutionBackward final : c10::OperatorKernel {
  using Op = at::_ops::convolution_backward;
  static inline std::atomic<RouteState*> state{nullptr};

  std::tuple<at::Tensor, at::Tensor, at::Tensor> operator()(
      c10::DispatchKeySet ks, const at::Tensor& grad_output, const at::Tensor& input,
      const at::Tensor& weight, at::OptionalSymIntArrayRef bias_sizes, c10::SymIntArrayRef stride,
      c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, bool transposed,
      c10::SymIntArrayRef output_padding, c10::SymInt groups, std::array<bool, 3> output_mask) {
    auto [gi, gw, gb] = unboxed::SignatureRoute<Op::schema>::call(
        state.load(std::memory_order_acquire), &Op::redispatch, ks, grad_output, input, weight,
        bias_sizes, stride, padding, dilation, transposed, output_padding, std::move(groups),
        output_mask);
    const at::MemoryFormat format = kit::conv_memory_format(input, weight);
    return {as_predicted(std::move(gi), format), as_predicted(std::move(gw), format),
            std::move(gb)};
  }
};

template <class Kernel>
UnboxedKernel routed(RouteState* state) {
  Kernel::state.store(state, std::memory_order_release);
  return UnboxedKernel{
      c10::KernelFunction::makeFromUnboxedFunctor<false, Kernel>(std::make_unique<Kernel>()),
      c10::impl::CppSignature::make<typename Kernel::Op::schema>()};
}

// tools/gen_unboxed_routes.py leaves these two overloads to this file.
const bool g_routed_registered = [] {
  register_unboxed_factory("aten::convolution", &routed<RoutedConvolution>);
  register_unboxed_factory("aten::convolution_backward", &routed<RoutedConvolutionBackward>);
  return true;
}();

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", TORCH_FN(convolution_overrideable));
  m.impl("convolution_backward_overrideable", TORCH_FN(convolution_backward_overrideable));
}

}  // namespace
}  // namespace torch_fl
