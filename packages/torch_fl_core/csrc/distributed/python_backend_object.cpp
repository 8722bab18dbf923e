#include "distributed/python_backend_object.h"

#include <torch/csrc/Exceptions.h>
#include <torch/csrc/utils/pybind.h>

#include "distributed/vendor_backend.h"

namespace py = pybind11;

namespace torch_fl::distributed {

PyObject* make_vendor_backend_object(PyObject* store, int rank, int size, double timeout_s,
                                     const std::string& library_path, const std::string& vendor) {
  HANDLE_TH_ERRORS
  auto store_ptr = py::handle(store).cast<c10::intrusive_ptr<c10d::Store>>();
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000.0));
  c10::intrusive_ptr<c10d::Backend> backend = c10::make_intrusive<VendorBackend>(
      std::move(store_ptr), rank, size, timeout, library_path, vendor);
  return py::cast(backend).release().ptr();
  END_HANDLE_TH_ERRORS
}

int64_t vendor_backend_library_calls(PyObject* backend) {
  try {
    auto ptr = py::handle(backend).cast<c10::intrusive_ptr<c10d::Backend>>();
    const auto* vendor = dynamic_cast<const VendorBackend*>(ptr.get());
    return vendor ? static_cast<int64_t>(vendor->library_calls()) : -1;
  } catch (const py::cast_error&) {
    return -1;
  }
}

}  // namespace torch_fl::distributed
