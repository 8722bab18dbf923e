// Concat: inputs one after another along an axis, each into its slice of out.
#include <vector>

#include "mudnn_op.h"

namespace musa {
namespace dnn {

Status Concat::SetAxis(int axis) {
  if (axis < 0 || axis >= Tensor::kMaxDims) return Status::INVALID_PARAMETER;
  axis_ = axis;
  return Status::SUCCESS;
}

Status Concat::Run(Handle& h, Tensor& out, int num_inputs, const Tensor* inputs) const {
  Status st = emu::enter("Concat::Run");
  if (st != Status::SUCCESS) return st;
  const Tensor::Type type = out.GetType();
  if (!emu::valid_type(type) || type == Tensor::Type::DOUBLE) return Status::NOT_SUPPORTED;
  if (num_inputs < 1 || !inputs || axis_ >= out.GetNdims()) return Status::INVALID_PARAMETER;
  const int nd = out.GetNdims(), axis = axis_;
  int64_t along = 0;
  for (int i = 0; i < num_inputs; ++i) {
    const Tensor& t = inputs[i];
    if (t.GetType() != type) return Status::NOT_SUPPORTED;
    if (t.GetNdims() != nd) return Status::INVALID_PARAMETER;
    for (int d = 0; d < nd; ++d)
      if (d != axis && t.GetDims()[d] != out.GetDims()[d]) return Status::INVALID_PARAMETER;
    along += t.GetDims()[axis];
  }
  if (along != out.GetDims()[axis]) return Status::INVALID_PARAMETER;
  emu::Launch launch("Concat::Run", h);
  for (int i = 0; i < num_inputs; ++i) launch.input(inputs[i], "input");
  launch.output(out, "out");
  const bool floating = emu::is_floating(type);
  return launch.submit([=](const std::vector<emu::View>& v) {
    const emu::View& o = v.back();
    // Every input is read before out is written: an exact copy whatever the type.
    std::vector<std::vector<double>> fs;
    std::vector<std::vector<int64_t>> is;
    for (int i = 0; i < num_inputs; ++i) {
      if (floating)
        fs.push_back(v[i].gather_f());
      else
        is.push_back(v[i].gather_i());
    }
    int64_t start = 0;
    for (int i = 0; i < num_inputs; ++i) {
      emu::View slice = o;
      slice.t.SetNdInfo(nd, v[i].dims(), o.t.GetStrides());
      if (slice.base)
        slice.base += start * o.t.GetStrides()[axis] * static_cast<int64_t>(emu::elem_size(type));
      if (v[i].numel() > 0) {
        if (floating)
          slice.scatter_f(fs[i]);
        else
          slice.scatter_i(is[i]);
      }
      start += v[i].dims()[axis];
    }
  });
}

}  // namespace dnn
}  // namespace musa
