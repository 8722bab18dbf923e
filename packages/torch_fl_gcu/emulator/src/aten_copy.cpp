// topsatenCopy: the one topsaten op that honours both tensors' strides (measured), converting to
// self's dtype. As every topsaten op: no 64-bit dtypes, no rank-0 shapes; no broadcasting here
// (the shapes must match), and non_blocking=true is not supported.
#include <cstring>

#include "aten_op.h"

namespace topsaten {
namespace {

// The element span a strided descriptor covers (0 for an empty one).
int64_t span(const T& t) {
  int64_t last = 0;
  for (size_t d = 0; d < t.dims().size(); ++d) {
    if (t.dims()[d] == 0) return 0;
    last += (t.dims()[d] - 1) * t.strides()[d];
  }
  return last + 1;
}

}  // namespace

ATEN_API topsatenStatus_t topsatenCopy(T& self, const T& src, bool non_blocking, St s) {
  Call c("topsatenCopy", s);
  c.require(!non_blocking, TOPSATEN_STATUS_NOT_SUPPORT);
  c.require(self.defined() && src.defined());
  if (!c.ok()) return c.status();
  for (const T* t : {static_cast<const T*>(&self), &src}) {
    if (t->dtype() == TOPSATEN_DATA_I64 || t->dtype() == TOPSATEN_DATA_F64)
      return TOPSATEN_STATUS_NOT_SUPPORT;
    if (t->dims().empty() || t->strides().size() != t->dims().size())
      return TOPSATEN_STATUS_BAD_PARAM;
    for (size_t d = 0; d < t->dims().size(); ++d)
      if (t->dims()[d] < 0 || t->strides()[d] < 0) return TOPSATEN_STATUS_BAD_PARAM;
  }
  if (self.dims() != src.dims()) return TOPSATEN_STATUS_BAD_PARAM;
  const int64_t n = numel(self.dims());
  if (n == 0) return TOPSATEN_STATUS_SUCCESS;
  Buf o, a;
  o.dt = self.dtype();
  a.dt = src.dtype();
  o.p = static_cast<char*>(topsEmuInternalResolve(self.data(), span(self) * elem_size(o.dt)));
  a.p = static_cast<char*>(topsEmuInternalResolve(src.data(), span(src) * elem_size(a.dt)));
  if (!o.p || !a.p) return TOPSATEN_STATUS_RUNTIME_ERROR;
  // Walk the logical elements in order, each tensor at its own strided offset.
  const std::vector<int64_t>& dims = self.dims();
  std::vector<int64_t> index(dims.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t so = 0, ao = 0;
    for (size_t d = 0; d < dims.size(); ++d) {
      so += index[d] * self.strides()[d];
      ao += index[d] * src.strides()[d];
    }
    if (o.dt == a.dt) {  // a move: every bit as it is (NaN payloads too)
      std::memcpy(o.p + so * elem_size(o.dt), a.p + ao * elem_size(a.dt), elem_size(o.dt));
    } else {
      o.set(so, a.get(ao));
    }
    for (size_t d = dims.size(); d-- > 0;) {
      if (++index[d] < dims[d]) break;
      index[d] = 0;
    }
  }
  return TOPSATEN_STATUS_SUCCESS;
}

}  // namespace topsaten
