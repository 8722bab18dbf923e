// Kept apart from the nanobind module: this file uses torch's own pybind11
// converters (torch/csrc/jit/python/pybind_utils.h), which is the machinery
// PyTorch uses for Python kernels, rather than hand-written converters.
#include "router/python_backend.h"

#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/tensor_memoryformats.h>

#include "router/backend.h"
#include "router/producer_order.h"

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

class PythonBackend final : public Backend {
 public:
  PythonBackend(std::string name, PyObject* trampoline, PyObject* has_kernel)
      : name_(std::move(name)), trampoline_(trampoline), has_kernel_(has_kernel) {
    Py_XINCREF(trampoline_);
    Py_XINCREF(has_kernel_);
  }
  // Never destroyed (the registry lives for the process): no decref at exit
  // when the interpreter may already be gone.

  const std::string& name() const override { return name_; }

  bool has_kernel(const c10::OperatorHandle& op) const override {
    if (!has_kernel_) return true;
    py::gil_scoped_acquire gil;
    try {
      py::object r = py::reinterpret_borrow<py::object>(has_kernel_)(
          full_name(op.operator_name()));
      return r.cast<bool>();
    } catch (py::error_already_set& e) {
      TORCH_CHECK(false, "flagos python backend '", name_, "': has_kernel(",
                  full_name(op.operator_name()), ") raised ", e.what());
    }
  }

  void call(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) override {
    const auto& schema = op.schema();
    const size_t num_args = schema.arguments().size();
    const std::string op_name = full_name(op.operator_name());
    // A Python kernel (a Triton launch) is an unordered producer on runtimes
    // that say so: mark its streams once it has enqueued its work.
    const auto devices = stack_flagos_devices(op, *stack);
    py::gil_scoped_acquire gil;
    try {
      py::tuple args(num_args);
      for (size_t i = 0; i < num_args; ++i) {
        args[i] = argument_to_py(std::move((*stack)[stack->size() - num_args + i]),
                                 schema.arguments()[i]);
      }
      torch::jit::drop(*stack, num_args);
      py::object result = py::reinterpret_borrow<py::object>(trampoline_)(op_name, args);
      const auto& returns = schema.returns();
      if (returns.size() == 1) {
        stack->push_back(torch::jit::toIValue(result, returns[0].type()));
      } else if (returns.size() > 1) {
        py::tuple tup = result.cast<py::tuple>();
        TORCH_CHECK(tup.size() == returns.size(), "flagos python backend '", name_, "' returned ",
                    tup.size(), " values for ", op_name, ", which returns ", returns.size());
        for (size_t i = 0; i < returns.size(); ++i) {
          stack->push_back(torch::jit::toIValue(tup[i], returns[i].type()));
        }
      }
      for (auto d : devices) note_unordered_producer(d);
    } catch (py::error_already_set& e) {
      TORCH_CHECK(false, "flagos python backend '", name_, "' failed in ", op_name, ": ", e.what());
    } catch (py::cast_error& e) {
      TORCH_CHECK(false, "flagos python backend '", name_, "' returned a value of the wrong type for ",
                  op_name, ": ", e.what());
    }
  }

 private:
  std::string name_;
  PyObject* trampoline_;
  PyObject* has_kernel_;
};

}  // namespace

void register_python_backend(const std::string& name, PyObject* trampoline, PyObject* has_kernel) {
  TORCH_CHECK(name.rfind("box:", 0) != 0 && name != "cpu" && name != "none",
              "flagos: backend name '", name, "' is reserved");
  register_backend(std::make_shared<PythonBackend>(name, trampoline, has_kernel));
}

}  // namespace torch_fl
