// Reduce: folds `in` over a set of dims into `out`, which keeps in's rank with each reduced dim
// of size 1.
#include <cmath>
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

}  // namespace dnn
}  // namespace musa
