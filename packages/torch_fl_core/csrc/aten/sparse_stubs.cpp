// The DispatchStubs inside ATen's sparse kernels, for flagos. The sparse kernels ATen writes once
// for CPU and CUDA (registered for flagos by tools/gen_sparse_kernels.py) call per-device stubs
// for their inner loops: flattening COO indices (CSR <-> CSC conversions, coalesced-tensor
// checks), and the intersections of sparse_mask and sparse-sparse mul. A stub without a flagos
// entry stops with "DispatchStub: missing kernel for flagos". Here each one's flagos entry runs
// CPU's on CPU copies and brings the answer back, as the CPU fallback does for whole operators
// (counted as one, under the stub's name).
// DispatchStub's call depends on the CPU kernels torch was built with (its own
// HAVE_*_CPU_DEFINITION flags, which an extension does not get): x86-64 builds of torch have AVX2
// and AVX-512 ones.
#if defined(__x86_64__)
#define TFL_SPARSE_STUBS 1
#ifndef HAVE_AVX512_CPU_DEFINITION
#define HAVE_AVX512_CPU_DEFINITION
#endif
#ifndef HAVE_AVX2_CPU_DEFINITION
#define HAVE_AVX2_CPU_DEFINITION
#endif
#include <ATen/native/DispatchStub.h>
#endif

#include <ATen/ATen.h>

#include <optional>
#include <string>

#include "aten/cpu_fallback.h"
#include "aten/sparse_stubs.h"
#include "glue/graph_capture.h"

#if TFL_SPARSE_STUBS
namespace at::native {
// The stubs as ATen declares them (ATen/native/sparse/SparseStubs.h, not installed).
using flatten_indices_fn = Tensor (*)(const Tensor& indices, IntArrayRef size);
using sparse_mask_intersection_out_fn = void (*)(Tensor& res, const Tensor& x, const Tensor& y,
                                                 const std::optional<Tensor>& x_hash_opt);
using sparse_mask_projection_out_fn = void (*)(Tensor& res, const Tensor& x, const Tensor& y,
                                               const std::optional<Tensor>& x_hash_opt,
                                               bool accumulate_matches);
using mul_sparse_sparse_out_fn = void (*)(Tensor& res, const Tensor& x, const Tensor& y);
DECLARE_DISPATCH(flatten_indices_fn, flatten_indices_stub)
DECLARE_DISPATCH(sparse_mask_intersection_out_fn, sparse_mask_intersection_out_stub)
DECLARE_DISPATCH(sparse_mask_projection_out_fn, sparse_mask_projection_out_stub)
DECLARE_DISPATCH(mul_sparse_sparse_out_fn, mul_sparse_sparse_out_stub)
}  // namespace at::native
#endif

namespace torch_fl {
#if TFL_SPARSE_STUBS
namespace {

using namespace at::native;

// What every stub call does first: no host work inside a device graph capture; counted and,
// under FLAGOS_LOG=fallback, logged.
void enter(const char* stub) {
  if (C10_UNLIKELY(capturing_device() >= 0)) {
    check_not_capturing(std::string(stub) + " (a sparse kernel's inner loop, on the CPU)");
  }
  note_fallback(stub, " (a sparse kernel's inner loop)");
}

at::Tensor cpu(const at::Tensor& t) { return t.defined() ? t.cpu() : t; }
std::optional<at::Tensor> cpu(const std::optional<at::Tensor>& t) {
  return t ? std::optional<at::Tensor>(cpu(*t)) : t;
}

// The stub's written result on the CPU, for the CPU kernel to fill (it resizes it).
at::Tensor cpu_result(const at::Tensor& res) {
  return res.is_sparse() ? at::empty({0}, res.options().device(at::kCPU)) : cpu(res);
}

// The CPU answer into the caller's flagos result.
void write_back(at::Tensor& res, const at::Tensor& answer) {
  if (!res.is_sparse() && res.sizes() != answer.sizes()) res.resize_(answer.sizes());
  res.copy_(answer);
}

at::Tensor flatten_indices(const at::Tensor& indices, c10::IntArrayRef size) {
  enter("at::native::flatten_indices_stub");
  return flatten_indices_stub(c10::DeviceType::CPU, cpu(indices), size).to(indices.device());
}

void mask_intersection(at::Tensor& res, const at::Tensor& x, const at::Tensor& y,
                       const std::optional<at::Tensor>& x_hash) {
  enter("at::native::sparse_mask_intersection_out_stub");
  at::Tensor out = cpu_result(res);
  sparse_mask_intersection_out_stub(c10::DeviceType::CPU, out, cpu(x), cpu(y), cpu(x_hash));
  write_back(res, out);
}

void mask_projection(at::Tensor& res, const at::Tensor& x, const at::Tensor& y,
                     const std::optional<at::Tensor>& x_hash, bool accumulate_matches) {
  enter("at::native::sparse_mask_projection_out_stub");
  at::Tensor out = cpu_result(res);
  sparse_mask_projection_out_stub(c10::DeviceType::CPU, out, cpu(x), cpu(y), cpu(x_hash),
                                  accumulate_matches);
  write_back(res, out);
}

void mul_sparse_sparse(at::Tensor& res, const at::Tensor& x, const at::Tensor& y) {
  enter("at::native::mul_sparse_sparse_out_stub");
  at::Tensor out = cpu_result(res);
  mul_sparse_sparse_out_stub(c10::DeviceType::CPU, out, cpu(x), cpu(y));
  write_back(res, out);
}

}  // namespace

#endif

void register_sparse_stubs() {
#if TFL_SPARSE_STUBS
  flatten_indices_stub.set_privateuse1_dispatch_ptr(&flatten_indices);
  sparse_mask_intersection_out_stub.set_privateuse1_dispatch_ptr(&mask_intersection);
  sparse_mask_projection_out_stub.set_privateuse1_dispatch_ptr(&mask_projection);
  mul_sparse_sparse_out_stub.set_privateuse1_dispatch_ptr(&mul_sparse_sparse);
#endif
}

}  // namespace torch_fl
