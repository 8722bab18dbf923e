// The tensor kinds flagos serves without a kernel of its own:
// - sparse (COO and the compressed layouts): the operators whose CPU and CUDA kernels differ
//   (_coalesce, add.out and mul.out of sparse tensors, addmm with a sparse matrix, ...); the
//   kernels ATen writes once for both are registered from tools/gen_sparse_kernels.py;
// - quantized: every operator that computes (dequantize, quantized arithmetic, comparisons, ...);
//   making, viewing and copying one is quantized_tensors.cpp.
// Where flagos memory is another backend's (the mirrored CUDA, or the host on sim), that
// backend's kernel runs on aliases of the tensors' parts (boxing/layout_call.h), counted as served
// by box:<type>. Elsewhere, or where that backend has no kernel for the operator, the CPU path:
// every flagos tensor (sparse ones as indices and values, quantized ones as integers and
// quantizer) is copied there, the CPU's kernel runs, written arguments get the answer back
// through copy_ and other results are copied to the caller's flagos device. Counted and logged as
// any CPU fallback.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "aten/cpu_fallback.h"
#include "aten/layout_fallback.h"
#include "boxing/alias_view.h"
#include "boxing/call_arguments.h"
#include "boxing/call_mapper.h"
#include "boxing/call_scope.h"
#include "boxing/layout_call.h"
#include "glue/graph_capture.h"
#include "glue/op_names.h"
#include "glue/runtime_access.h"
#include "profiler/route_scope.h"
#include "router/fallback_counts.h"

namespace torch_fl {
namespace {

void run_on_cpu_copies(const c10::OperatorHandle& op, torch::jit::Stack* stack, const char* kind,
                       const char* note) {
  static const std::string kBackend = "cpu";
  profiler::RouteScope scope(kBackend, op);
  const auto& schema = op.schema();
  const auto args_begin = check_fallback_call(op, stack, kind);
  note_fallback(schema, /*count=*/true, note);

  std::optional<c10::Device> device;
  std::vector<c10::IValue> originals(args_begin, stack->end());
  for (auto it = args_begin; it != stack->end(); ++it) {
    // A factory names its device (empty_like(x, layout=torch.sparse_coo) on flagos): the CPU
    // makes it, and it comes back to that device; without this the call would come back here.
    if (it->isDevice() && it->toDevice().is_privateuseone()) {
      if (!device) device = it->toDevice();
      *it = c10::IValue(c10::Device(c10::kCPU));
      continue;
    }
    *it = boxing::map_tensors(*it, [&](const at::Tensor& t) {
      if (!t.defined() || !t.device().is_privateuseone()) return t;
      if (!device) device = t.device();
      at::Tensor copy = t.cpu();
      // Some kernels decide what to compute from it (_sparse_mm_reduce_impl
      // keeps amax/amin's argmax only for a backward): the copy must say so too.
      if (t.requires_grad()) copy.requires_grad_(true);
      return copy;
    });
  }
  // Nothing on flagos to move: calling again would dispatch here again, without end.
  TORCH_CHECK_NOT_IMPLEMENTED(device.has_value(), "Could not run '",
                              c10::toString(schema.operator_name()),
                              "' on flagos: it reached flagos's ", kind,
                              " with no flagos tensor or device among its arguments");
  op.callBoxed(stack);

  const size_t num_returns = schema.returns().size();
  TORCH_INTERNAL_ASSERT(stack->size() >= num_returns);
  auto ret = stack->end() - static_cast<std::ptrdiff_t>(num_returns);
  for (size_t r = 0; r < num_returns; ++r, ++ret) {
    const int w = boxing::written_argument(schema, r);
    if (w >= 0) {
      // out= and in-place: the caller's tensor takes the answer and is the result.
      const c10::IValue& original = originals[static_cast<size_t>(w)];
      if (original.isTensor() && ret->isTensor()) {
        at::Tensor target = original.toTensor();
        const at::Tensor& answer = ret->toTensor();
        if (!target.is_same(answer)) {
          // The CPU kernel resized its copy of an out= tensor (sparse copy_ resizes itself).
          if (!target.is_sparse() && target.sizes() != answer.sizes()) {
            target.resize_(answer.sizes());
          }
          target.copy_(answer);
        }
        *ret = target;
        continue;
      }
    }
    const auto* alias = schema.returns()[r].alias_info();
    TORCH_CHECK(alias == nullptr || ret->isNone(),
                "flagos: ", c10::toString(schema.operator_name()),
                " returns a view of an argument, which its CPU fallback (", kind,
                ") cannot serve: a copy would not share memory with it");
    if (device) {
      *ret = boxing::map_tensors(*ret, [&](const at::Tensor& t) {
        return t.defined() && t.device().is_cpu() ? t.to(*device) : t;
      });
    }
  }
}

// The device type whose kernels run on flagos memory as it is: the mirrored backend's (CUDA), or
// the CPU's where flagos memory is host memory (sim).
std::optional<c10::DeviceType> layout_box_type() {
  if (const auto mirrored = mirror_device_type()) return mirrored;
  if (has_capability(TFL_CAP_HOST_ADDRESSABLE_MEMORY)) return c10::DeviceType::CPU;
  return std::nullopt;
}

enum class Kind { kSparse, kCompressed, kQuantized };

// Whether an argument or result is a TorchScript class object (a quantized operator's packed
// weights): such an object carries the kernels of the backend that made it, so one made by a
// device backend must never reach the CPU path's kernels, nor a CPU-made one a device kernel.
bool takes_class_objects(const c10::FunctionSchema& schema) {
  const auto is_class = [](const c10::Argument& a) {
    return a.type()->kind() == c10::TypeKind::ClassType;
  };
  return std::any_of(schema.arguments().begin(), schema.arguments().end(), is_class) ||
         std::any_of(schema.returns().begin(), schema.returns().end(), is_class);
}

// The kernel `type` has for the operator's `kind` of tensors on aliases of the flagos tensors'
// parts, without copies; false where there is none to run (no such backend, no kernel of it for
// the operator, a host kernel while a device graph is being captured, which the CPU path refuses
// by name). Where that kernel refuses arguments the CPU's takes (CUDA's quantized kernels are
// cuDNN's, for qint8 only) and the operator writes no argument, `refused` gets its reason and the
// stack is as it came: the CPU path answers as CPU does, as before there was a box path. An
// operator that writes an argument keeps the kernel's error (it may have written part of it), and
// so does one returning a view, which the CPU path cannot serve.
bool layout_on_box(const c10::OperatorHandle& op, torch::jit::Stack* stack, Kind kind,
                   std::string& refused) {
  const auto type = layout_box_type();
  if (!type) return false;
  const c10::Device device_type(*type);
  const auto key =
      kind == Kind::kQuantized
          ? c10::computeDispatchKey(c10::kQInt8, c10::kStrided, device_type)
          : c10::computeDispatchKey(
                std::nullopt, kind == Kind::kSparse ? c10::kSparse : c10::kSparseCsr, device_type);
  if (!op.hasKernelForDispatchKey(key)) return false;
  if (*type == c10::DeviceType::CPU && capturing_device() >= 0) return false;
  const auto& schema = op.schema();
  // Packed weights stay the CPU's on a device box: the CPU path makes and uses them, as one
  // path (a refused call of the device's kernels would hand its packing to the CPU's).
  if (*type != c10::DeviceType::CPU && takes_class_objects(schema)) return false;
  const auto args_begin = stack->end() - static_cast<std::ptrdiff_t>(schema.arguments().size());
  boxing::check_same_device(op, args_begin, stack->end());
  const std::optional<c10::DeviceIndex> found =
      boxing::first_flagos_device(args_begin, stack->end());
  const c10::DeviceIndex device = found ? *found : current_device();
  const bool rerun_on_cpu =
      !boxing::writes_tensor(schema) &&
      std::none_of(schema.returns().begin(), schema.returns().end(),
                   [](const c10::Argument& r) { return r.alias_info() != nullptr; });
  const size_t base = static_cast<size_t>(args_begin - stack->begin());
  std::vector<c10::IValue> arguments;
  if (rerun_on_cpu) arguments.assign(args_begin, stack->end());
  // Leaked, one per process: the counters and the profiler keep the name.
  static const std::string* backend = new std::string(layout_backend());
  profiler::RouteScope route(*backend, op, device);
  boxing::CallScope scope(device, found.has_value(), *type);
  boxing::CallMapper mapper(device, boxing::target_device(*type, device),
                            c10::computeDispatchKey(std::nullopt, c10::kStrided, device_type),
                            boxing::CallMapper::Aliases::kOwning);
  boxing::LayoutMappedCall call(schema, stack, mapper);
  // A kernel that failed after resizing or growing a written argument leaves the caller's
  // tensor as it left the alias; the kernel's own error is the one to report.
  const auto adopt_after_failure = [&call] {
    try {
      call.adopt_written();
    } catch (...) {
    }
  };
  try {
    op.callBoxed(stack);
  } catch (const c10::Error& e) {
    if (!rerun_on_cpu) {
      adopt_after_failure();
      throw;
    }
    refused = *backend + "'s kernel refused it: " + e.what_without_backtrace();
    if (const auto eol = refused.find('\n'); eol != std::string::npos) refused.resize(eol);
    stack->resize(base);
    stack->insert(stack->end(), std::make_move_iterator(arguments.begin()),
                  std::make_move_iterator(arguments.end()));
    return false;
  } catch (...) {
    adopt_after_failure();
    throw;
  }
  count_served(full_name(schema.operator_name()), *backend);
  call.adopt_written();
  const size_t num_returns = schema.returns().size();
  TORCH_INTERNAL_ASSERT(stack->size() >= num_returns);
  const auto ret_begin = stack->end() - static_cast<std::ptrdiff_t>(num_returns);
  for (size_t i = 0; i < num_returns; ++i) {
    c10::IValue& ret = *(ret_begin + static_cast<std::ptrdiff_t>(i));
    ret = call.result(i, std::move(ret));
  }
  return true;
}

void layout_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack, Kind kind) {
  std::string refused;
  if (layout_on_box(op, stack, kind, refused)) return;
  const bool quantized = kind == Kind::kQuantized;
  const std::string note = (quantized ? std::string(" (quantized") : std::string(" (sparse")) +
                           (refused.empty() ? ")" : "; " + refused + ")");
  run_on_cpu_copies(op, stack,
                    quantized ? "quantized, on the CPU fallback" : "sparse, on the CPU fallback",
                    note.c_str());
}

void sparse_coo_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  layout_fallback(op, stack, Kind::kSparse);
}

void sparse_compressed_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  layout_fallback(op, stack, Kind::kCompressed);
}

void quantized_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  layout_fallback(op, stack, Kind::kQuantized);
}

}  // namespace

std::string layout_backend() {
  const auto type = layout_box_type();
  return type ? "box:" + std::string(c10::DeviceTypeName(*type, /*lower_case=*/true)) : "cpu";
}

void register_quantized_cpu_kernels() {
  // Leaked: the dispatcher keeps what they registered for the life of the process.
  static auto* libraries = new std::map<std::string, std::unique_ptr<torch::Library>>();
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const auto& name : dispatcher.getAllOpNames()) {
    const auto op = dispatcher.findOp(name);
    if (!op || !op->hasKernelForDispatchKey(c10::DispatchKey::QuantizedCPU) ||
        op->hasKernelForDispatchKey(c10::DispatchKey::QuantizedPrivateUse1)) {
      continue;
    }
    const auto ns = name.getNamespace();
    if (!ns) continue;
    const std::string space(*ns);
    auto& library = (*libraries)[space];
    if (!library) {
      library = std::make_unique<torch::Library>(
          torch::Library::IMPL, space, c10::DispatchKey::QuantizedPrivateUse1, __FILE__, __LINE__);
    }
    std::string full = name.name.substr(space.size() + 2);
    if (!name.overload_name.empty()) full += "." + name.overload_name;
    library->impl(full.c_str(), torch::CppFunction::makeFromBoxedFunction<&quantized_fallback>());
  }
}

namespace {

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_coo_fallback>());
}

TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_compressed_fallback>());
}

TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&quantized_fallback>());
}

}  // namespace
}  // namespace torch_fl
