// Reduce: folds `in` over a set of dims into `out`, which keeps in's rank with each reduced dim
// of size 1.
#include <cmath>
#include <cstdio>
#include <limits>
#include <type_traits>
#include <vector>

#include "mudnn_op.h"

namespace musa {
namespace dnn {
namespace {

using emu::View;
using Type = Tensor::Type;
using M = Reduce::Mode;

bool types_supported(M m, Type ti, Type to) {
  switch (m) {
    case M::ADD:
      return (emu::is_floating(ti) && emu::is_floating(to)) || (emu::is_int(ti) && emu::is_int(to));
    case M::MEAN:
      return emu::is_floating(ti) && emu::is_floating(to);
    case M::MAX:
    case M::MIN:
      return ti == to && (emu::is_floating(ti) || emu::is_int(ti));
    case M::AND:
    case M::OR:
      return to == Type::BOOL && emu::valid_type(ti) && ti != Type::DOUBLE;
  }
  return false;
}

// For each element of `in` (row-major), the row-major index of the element of `out` it folds
// into: in's index with the reduced coordinates dropped to 0.
std::vector<int64_t> fold_map(int nd, const int64_t* dims, const bool* reduced) {
  int64_t ostride[Tensor::kMaxDims], s = 1;
  for (int d = nd - 1; d >= 0; --d) {
    ostride[d] = reduced[d] ? 0 : s;
    if (!reduced[d]) s *= dims[d];
  }
  std::vector<int64_t> map;
  emu::for_each_offset(nd, dims, ostride, [&](int64_t off) { map.push_back(off); });
  return map;
}

template <typename T>
T fold(M m, T acc, T x) {
  switch (m) {
    case M::ADD:
    case M::MEAN:
      return acc + x;
    case M::MAX:
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(acc) || std::isnan(x)) return std::numeric_limits<T>::quiet_NaN();
      }
      return x > acc ? x : acc;
    case M::MIN:
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(acc) || std::isnan(x)) return std::numeric_limits<T>::quiet_NaN();
      }
      return x < acc ? x : acc;
    case M::AND:
      return acc != 0 && x != 0;
    case M::OR:
      return acc != 0 || x != 0;
  }
  return acc;
}

template <typename T>
T identity(M m) {
  switch (m) {
    case M::MAX:
      return std::is_floating_point_v<T> ? -std::numeric_limits<T>::infinity()
                                         : std::numeric_limits<T>::lowest();
    case M::MIN:
      return std::is_floating_point_v<T> ? std::numeric_limits<T>::infinity()
                                         : std::numeric_limits<T>::max();
    case M::AND:
      return 1;
    default:
      return 0;
  }
}

template <typename T>
std::vector<T> reduce(M m, const std::vector<T>& in, const std::vector<int64_t>& map, int64_t nout,
                      int64_t group) {
  std::vector<T> acc(static_cast<size_t>(nout), identity<T>(m));
  for (size_t i = 0; i < in.size(); ++i) {
    T& a = acc[static_cast<size_t>(map[i])];
    if constexpr (std::is_integral_v<T>) {
      // Integer sums wrap, as the hardware's do.
      if (m == M::ADD) {
        a = static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(in[i]));
        continue;
      }
    }
    a = fold(m, a, in[i]);
  }
  if constexpr (std::is_floating_point_v<T>) {
    if (m == M::MEAN)
      for (T& a : acc) a = group == 0 ? std::numeric_limits<T>::quiet_NaN() : a / group;
  }
  return acc;
}

}  // namespace

Status Reduce::SetMode(Mode mode) {
  if (static_cast<int>(mode) < 0 || mode > Mode::OR) return Status::INVALID_PARAMETER;
  mode_ = mode;
  return Status::SUCCESS;
}

Status Reduce::SetDim(int ndims, const int* dims) {
  if (ndims < 0 || ndims > Tensor::kMaxDims || (ndims > 0 && dims == nullptr))
    return Status::INVALID_PARAMETER;
  ndims_ = ndims;
  for (int i = 0; i < ndims; ++i) dims_[i] = dims[i];
  return Status::SUCCESS;
}

Status Reduce::Run(Handle& h, Tensor& out, const Tensor& in, MemoryMaintainer maintainer) const {
  (void)maintainer;  // the emulator needs no workspace
  Status st = emu::enter("Reduce::Run");
  if (st != Status::SUCCESS) return st;
  const M m = mode_;
  const Type ti = in.GetType(), to = out.GetType();
  if (!types_supported(m, ti, to)) return Status::NOT_SUPPORTED;

  // Negative dims count from the end; each dim once.
  const int nd = in.GetNdims();
  bool reduced[Tensor::kMaxDims] = {};
  for (int i = 0; i < ndims_; ++i) {
    int d = dims_[i] < 0 ? dims_[i] + nd : dims_[i];
    if (d < 0 || d >= nd || reduced[d]) return Status::INVALID_PARAMETER;
    reduced[d] = true;
  }
  if (out.GetNdims() != nd) return Status::INVALID_PARAMETER;
  int64_t group = 1;
  for (int d = 0; d < nd; ++d) {
    const int64_t n = in.GetDims()[d];
    if (out.GetDims()[d] != (reduced[d] ? 1 : n)) return Status::INVALID_PARAMETER;
    if (reduced[d]) group *= n;
  }
  if (group == 0 && (m == M::MAX || m == M::MIN)) return Status::INVALID_PARAMETER;

  int64_t in_dims[Tensor::kMaxDims];
  for (int d = 0; d < nd; ++d) in_dims[d] = in.GetDims()[d];
  std::vector<bool> red(reduced, reduced + nd);
  emu::Launch launch("Reduce::Run", h);
  launch.output(out, "out");
  launch.input(in, "in");
  return launch.submit([=](const std::vector<View>& v) {
    bool r[Tensor::kMaxDims] = {};
    for (int d = 0; d < nd; ++d) r[d] = red[d];
    const std::vector<int64_t> map = fold_map(nd, in_dims, r);
    const int64_t nout = v[0].numel();
    if (emu::is_floating(ti)) {
      v[0].scatter_f(reduce<double>(m, v[1].gather_f(), map, nout, group));
    } else {
      v[0].scatter_i(reduce<int64_t>(m, v[1].gather_i(), map, nout, group));
    }
  });
}

Status Reduce::RunWithIndices(Handle& h, Tensor& out, Tensor& indices, const Tensor& in,
                              MemoryMaintainer maintainer) const {
  (void)maintainer;  // the emulator needs no workspace
  Status st = emu::enter("Reduce::RunWithIndices");
  if (st != Status::SUCCESS) return st;
  const M m = mode_;
  if (m != M::MAX && m != M::MIN) return Status::NOT_SUPPORTED;
  const Type ti = in.GetType();
  if (!types_supported(m, ti, out.GetType()) || indices.GetType() != Type::INT64)
    return Status::NOT_SUPPORTED;
  const int nd = in.GetNdims();
  if (ndims_ != 1) return Status::INVALID_PARAMETER;
  const int dim = dims_[0] < 0 ? dims_[0] + nd : dims_[0];
  if (dim < 0 || dim >= nd || out.GetNdims() != nd || !emu::same_dims(out, indices))
    return Status::INVALID_PARAMETER;
  for (int d = 0; d < nd; ++d)
    if (out.GetDims()[d] != (d == dim ? 1 : in.GetDims()[d])) return Status::INVALID_PARAMETER;
  if (in.GetDims()[dim] == 0) return Status::INVALID_PARAMETER;  // no extreme of nothing
  if (emu::spans_overlap(out, indices) || emu::spans_overlap(out, in) ||
      emu::spans_overlap(indices, in)) {
    char msg[256];
    std::snprintf(msg, sizeof msg, "Reduce::RunWithIndices: out, indices and in overlap");
    musa_emu::violation(msg);
    return Status::INVALID_PARAMETER;
  }
  int64_t in_dims[Tensor::kMaxDims];
  for (int d = 0; d < nd; ++d) in_dims[d] = in.GetDims()[d];
  emu::Launch launch("Reduce::RunWithIndices", h);
  launch.output(out, "out");
  launch.output(indices, "indices");
  launch.input(in, "in");
  return launch.submit([=](const std::vector<View>& v) {
    int64_t inner = 1, outer = 1;
    for (int d = dim + 1; d < nd; ++d) inner *= in_dims[d];
    for (int d = 0; d < dim; ++d) outer *= in_dims[d];
    const int64_t n = in_dims[dim], nout = outer * inner;
    std::vector<int64_t> idx(static_cast<size_t>(nout), 0);
    // The first extreme of each line; a NaN is chosen over everything and the first one kept.
    auto pick = [&](auto x, auto& best) {
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          const size_t r = static_cast<size_t>(o * inner + i);
          auto b = x[static_cast<size_t>(o * n * inner + i)];
          for (int64_t k = 1; k < n; ++k) {
            const auto e = x[static_cast<size_t>((o * n + k) * inner + i)];
            if (b != b) break;  // NaN found
            if (e != e || (m == M::MAX ? e > b : e < b)) {
              b = e;
              idx[r] = k;
            }
          }
          best[r] = b;
        }
    };
    if (emu::is_floating(ti)) {
      std::vector<double> best(static_cast<size_t>(nout));
      pick(v[2].gather_f(), best);
      v[0].scatter_f(best);
    } else {
      std::vector<int64_t> best(static_cast<size_t>(nout));
      pick(v[2].gather_i(), best);
      v[0].scatter_i(best);
    }
    v[1].scatter_i(idx);
  });
}

}  // namespace dnn
}  // namespace musa
