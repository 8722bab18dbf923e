// Kept apart from the nanobind module: this file uses torch's own pybind11
// converters (torch/csrc/jit/python/pybind_utils.h), which is the machinery
// PyTorch uses for Python kernels, rather than hand-written converters.
#include "router/python_backend.h"

#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/tensor_memoryformats.h>

#include "boxing/alias_ops.h"
#include "boxing/alias_view.h"
#include "boxing/call_arguments.h"
#include "boxing/call_mapper.h"
#include "boxing/call_scope.h"
#include "glue/runtime_access.h"
#include "router/backend.h"
#include "router/capture_rules.h"
#include "router/producer_order.h"

#include <unordered_map>

namespace torch_fl {
namespace {

namespace py = pybind11;

// The dispatcher stores dtype/layout/memory_format arguments as ints; Python
// kernels expect torch.dtype & co. (as PyTorch's own Python dispatch passes
// them), so those are converted by their schema type.
py::object argument_to_py(c10::IValue v, const c10::Argument& arg) {
  if (v.isInt()) {
    c10::TypePtr t = arg.real_type();
    if (auto opt = t->cast<c10::OptionalType>()) t = opt->getElementType();
    const auto i = v.toInt();
    switch (t->kind()) {
      case c10::TypeKind::ScalarTypeType:
        return py::reinterpret_borrow<py::object>(
            reinterpret_cast<PyObject*>(torch::getTHPDtype(static_cast<c10::ScalarType>(i))));
      case c10::TypeKind::LayoutType:
        return py::reinterpret_borrow<py::object>(
            reinterpret_cast<PyObject*>(torch::getTHPLayout(static_cast<c10::Layout>(i))));
      case c10::TypeKind::MemoryFormatType:
        return py::reinterpret_borrow<py::object>(
            torch::utils::getTHPMemoryFormat(static_cast<c10::MemoryFormat>(i)));
      default:
        break;
    }
  }
  return torch::jit::toPyObject(std::move(v));
}

// How to call one operator's kernel without the trampoline: the callable
// itself, with the schema's arguments in `order` (positional ones first, then
// the kwarg-only ones named by `kwnames`).
struct DirectCall {
  bool usable = false;  // false: the operator goes through the trampoline
  py::object fn;
  std::vector<size_t> order;
  Py_ssize_t npos = 0;
  py::object kwnames;  // a tuple of str, or None
};

class PythonBackend final : public Backend {
 public:
  PythonBackend(std::string name, PyObject* trampoline, PyObject* has_kernel, PyObject* direct,
                std::optional<c10::DeviceType> view_type)
      : name_(std::move(name)),
        trampoline_(trampoline),
        has_kernel_(has_kernel),
        direct_(direct),
        view_type_(view_type) {
    Py_XINCREF(trampoline_);
    Py_XINCREF(has_kernel_);
    Py_XINCREF(direct_);
  }
  // The callables above are never released: the registry outlives the
  // interpreter. A backend replaced by one of the same name is destroyed when
  // the last route using it goes, which may be without the GIL (router_install
  // releases it): the Python objects it cached go with the GIL held.
  ~PythonBackend() override {
    if (!Py_IsInitialized()) {
      for (auto& entry : names_) entry.second.release();
      for (auto& entry : directs_) {
        entry.second.fn.release();
        entry.second.kwnames.release();
      }
      return;
    }
    py::gil_scoped_acquire gil;
    names_.clear();
    directs_.clear();
  }

  const std::string& name() const override { return name_; }

  bool has_kernel(const c10::OperatorHandle& op) const override {
    if (!has_kernel_) return true;
    py::gil_scoped_acquire gil;
    try {
      py::object r = py::reinterpret_borrow<py::object>(has_kernel_)(full_name(op.operator_name()));
      return r.cast<bool>();
    } catch (py::error_already_set& e) {
      TORCH_CHECK(false, "flagos python backend '", name_, "': has_kernel(",
                  full_name(op.operator_name()), ") raised ", e.what());
    }
  }

  void call(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
            torch::jit::Stack* stack) override {
    if (const c10::DeviceIndex device = capturing_device(); C10_UNLIKELY(device >= 0)) {
      if (const char* why = uncapturable_reason(op, view_type_)) {
        if (auto alternate = capture_alternate(op)) return alternate->call(op, keys, stack);
        refuse_uncapturable(op, name_, device, why);
      }
    }
    const auto& schema = op.schema();
    const size_t num_args = schema.arguments().size();
    // A Python kernel (a Triton launch) is an unordered producer on runtimes
    // that say so: mark its streams once it has enqueued its work.
    const auto devices = stack_flagos_devices(op, *stack);
    // With core views: the arguments mapped to views of view_type_ (the one
    // mapper box backends use), written ones adopted and results mapped back.
    std::optional<boxing::CallScope> scope;
    std::optional<boxing::CallMapper> mapper;
    std::optional<boxing::MappedCall> boxed;
    if (view_type_) {
      const auto begin = stack->end() - static_cast<std::ptrdiff_t>(num_args);
      const auto found = boxing::first_flagos_device(begin, stack->end());
      const c10::DeviceIndex device = found ? *found : current_device();
      boxing::check_addressable(c10::Device(c10::DeviceType::PrivateUse1, device), *view_type_,
                                name_.c_str());
      // A Python kernel's own allocations stay its own (it may keep them).
      scope.emplace(device, found.has_value(), *view_type_, /*host_results=*/false);
      const c10::Device target = boxing::target_device(*view_type_, device);
      mapper.emplace(device, target, c10::computeDispatchKey(std::nullopt, std::nullopt, target),
                     boxing::CallMapper::Aliases::kOwning);
      boxed.emplace(schema, stack, *mapper);
    }
    py::gil_scoped_acquire gil;
    const py::object& name = op_name(op);
    try {
      const DirectCall& direct = direct_call(op, name);
      py::tuple args(num_args);
      for (size_t i = 0; i < num_args; ++i) {
        c10::IValue v = std::move((*stack)[stack->size() - num_args + i]);
        args[i] = argument_to_py(std::move(v), schema.arguments()[i]);
      }
      torch::jit::drop(*stack, num_args);
      const auto& returns = schema.returns();
      py::object result;
      if (direct.usable) {
        // The kernel called directly: no Python frame of ours per call.
        c10::SmallVector<PyObject*, 8> argv;
        for (size_t i : direct.order) argv.push_back(PyTuple_GET_ITEM(args.ptr(), i));
        PyObject* kwnames = direct.kwnames.is_none() ? nullptr : direct.kwnames.ptr();
        result = py::reinterpret_steal<py::object>(
            PyObject_Vectorcall(direct.fn.ptr(), argv.data(), direct.npos, kwnames));
        if (!result) throw py::error_already_set();
      } else {
        result = py::reinterpret_borrow<py::object>(trampoline_)(name, args);
      }
      if (boxed) boxed->adopt_written();
      if (returns.size() == 1) {
        // With core views an out=/in-place kernel may return None, meaning the
        // argument it wrote (MappedCall::result hands back the caller's tensor).
        c10::IValue value;
        if (!boxed || !result.is_none() || boxed->written_argument(0) < 0) {
          value = torch::jit::toIValue(result, returns[0].type());
        }
        stack->push_back(boxed ? boxed->result(0, std::move(value)) : std::move(value));
      } else if (returns.size() > 1) {
        py::tuple tup = result.cast<py::tuple>();
        TORCH_CHECK(tup.size() == returns.size(), "flagos python backend '", name_, "' returned ",
                    tup.size(), " values for ", full_name(op.operator_name()), ", which returns ",
                    returns.size());
        for (size_t i = 0; i < returns.size(); ++i) {
          c10::IValue value = torch::jit::toIValue(tup[i], returns[i].type());
          stack->push_back(boxed ? boxed->result(i, std::move(value)) : std::move(value));
        }
      }
      for (auto d : devices) note_unordered_producer(d);
    } catch (py::error_already_set& e) {
      TORCH_CHECK(false, "flagos python backend '", name_, "' failed in ",
                  full_name(op.operator_name()), ": ", e.what());
    } catch (py::cast_error& e) {
      TORCH_CHECK(false, "flagos python backend '", name_,
                  "' returned a value of the wrong type for ", full_name(op.operator_name()), ": ",
                  e.what());
    }
  }

 private:
  // The operator's full name as a Python str, made once per operator (GIL
  // held) instead of a std::string and a str per call: the trampoline looks
  // its kernel up by it on every call, and a kept str keeps its hash.
  const py::object& op_name(const c10::OperatorHandle& op) {
    auto it = names_.find(&op.operator_name());
    if (it == names_.end()) {
      it = names_.emplace(&op.operator_name(), py::str(full_name(op.operator_name()))).first;
    }
    return it->second;
  }

  // The direct call of `op`, asked of Python once (GIL held). Only with core
  // views, where the trampoline does nothing but call the kernel; a failure
  // (a kernel library that does not import) is raised and asked again next call.
  const DirectCall& direct_call(const c10::OperatorHandle& op, const py::object& name) {
    static const DirectCall kNone;
    if (direct_ == nullptr || !view_type_) return kNone;
    auto it = directs_.find(&op.operator_name());
    if (it != directs_.end()) return it->second;
    DirectCall d;
    py::object plan = py::reinterpret_borrow<py::object>(direct_)(name);
    if (!plan.is_none()) {
      auto t = plan.cast<py::tuple>();
      TORCH_CHECK(t.size() == 4, "flagos python backend '", name_, "': direct_call(",
                  full_name(op.operator_name()), ") must return (fn, npos, kw_indices, kwnames)");
      d.fn = t[0];
      d.npos = t[1].cast<Py_ssize_t>();
      for (Py_ssize_t i = 0; i < d.npos; ++i) d.order.push_back(static_cast<size_t>(i));
      for (auto k : t[2].cast<py::tuple>()) d.order.push_back(k.cast<size_t>());
      d.kwnames = t[3].is_none() ? py::none() : py::object(t[3]);
      const auto& returns = op.schema().returns();
      TORCH_CHECK(returns.size() <= 1 && d.order.size() == op.schema().arguments().size(),
                  "flagos python backend '", name_, "': no direct call for ",
                  full_name(op.operator_name()));
      d.usable = true;
    }
    return directs_.emplace(&op.operator_name(), std::move(d)).first->second;
  }

 private:
  std::string name_;
  PyObject* trampoline_;
  PyObject* has_kernel_;
  PyObject* direct_;
  std::optional<c10::DeviceType> view_type_;
  // Operator names live for the process (dispatcher entries), so do these.
  std::unordered_map<const c10::OperatorName*, py::object> names_;    // guarded by the GIL
  std::unordered_map<const c10::OperatorName*, DirectCall> directs_;  // guarded by the GIL
};

}  // namespace

void register_python_backend(const std::string& name, PyObject* trampoline, PyObject* has_kernel,
                             PyObject* direct, std::optional<c10::DeviceType> view_type) {
  TORCH_CHECK(name.rfind("box:", 0) != 0 && name != "cpu" && name != "none",
              "flagos: backend name '", name, "' is reserved");
  register_backend(
      std::make_shared<PythonBackend>(name, trampoline, has_kernel, direct, view_type));
}

}  // namespace torch_fl
