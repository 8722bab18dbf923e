// Cum: the running sum (ADD) or product (MUL) of `in` along one dim, into `out` of in's dims.
#include <cstdio>
#include <vector>

#include "mudnn_op.h"

namespace musa {
namespace dnn {
namespace {

using emu::View;
using Type = Tensor::Type;
using M = Cum::Mode;

bool type_supported(Type t) { return emu::is_floating(t) || emu::is_int(t); }

// Scans each line along `dim` of the row-major values `v` of `dims` in place.
template <typename T, typename Step>
void scan(std::vector<T>& v, int nd, const int64_t* dims, int dim, Step step) {
  int64_t inner = 1, outer = 1;
  for (int d = dim + 1; d < nd; ++d) inner *= dims[d];
  for (int d = 0; d < dim; ++d) outer *= dims[d];
  const int64_t n = dims[dim];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * n * inner + i;
      for (int64_t k = 1; k < n; ++k)
        v[static_cast<size_t>(base + k * inner)] =
            step(v[static_cast<size_t>(base + (k - 1) * inner)],
                 v[static_cast<size_t>(base + k * inner)]);
    }
}

}  // namespace

Status Cum::SetMode(Mode mode) {
  if (mode != Mode::ADD && mode != Mode::MUL) return Status::INVALID_PARAMETER;
  mode_ = mode;
  return Status::SUCCESS;
}

Status Cum::SetDim(int dim) {
  if (dim < -Tensor::kMaxDims || dim >= Tensor::kMaxDims) return Status::INVALID_PARAMETER;
  dim_ = dim;
  return Status::SUCCESS;
}

Status Cum::Run(Handle& h, Tensor& out, const Tensor& in, MemoryMaintainer maintainer) const {
  (void)maintainer;  // the emulator needs no workspace
  Status st = emu::enter("Cum::Run");
  if (st != Status::SUCCESS) return st;
  const Type t = in.GetType();
  if (!type_supported(t) || out.GetType() != t) return Status::NOT_SUPPORTED;
  const int nd = in.GetNdims();
  const int dim = dim_ < 0 ? dim_ + nd : dim_;
  if (nd < 1 || dim < 0 || dim >= nd || !emu::same_dims(out, in)) return Status::INVALID_PARAMETER;
  bool same = false;
  if (emu::spans_overlap(out, in, &same) && !same) {
    char msg[256];
    std::snprintf(msg, sizeof msg, "Cum::Run: out overlaps in (only out == in is allowed)");
    musa_emu::violation(msg);
    return Status::INVALID_PARAMETER;
  }
  int64_t dims[Tensor::kMaxDims];
  for (int d = 0; d < nd; ++d) dims[d] = in.GetDims()[d];
  const M m = mode_;
  emu::Launch launch("Cum::Run", h);
  launch.output(out, "out");
  launch.input(in, "in");
  return launch.submit([=](const std::vector<View>& v) {
    if (v[1].numel() == 0) return;
    if (emu::is_floating(t)) {
      // Partials are kept wide (HALF and BFLOAT16 ones are not rounded to their type); each
      // result is rounded once, when stored.
      std::vector<double> x = v[1].gather_f();
      scan(x, nd, dims, dim, [&](double a, double b) { return m == M::ADD ? a + b : a * b; });
      v[0].scatter_f(x);
    } else {
      // Integer scans wrap, as the hardware's do.
      std::vector<int64_t> x = v[1].gather_i();
      scan(x, nd, dims, dim, [&](int64_t a, int64_t b) {
        const uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
        return static_cast<int64_t>(m == M::ADD ? ua + ub : ua * ub);
      });
      v[0].scatter_i(x);
    }
  });
}

}  // namespace dnn
}  // namespace musa
