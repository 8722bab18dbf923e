// Fill: one value into every element of out.
#include <cstdint>
#include <vector>

#include "mudnn_op.h"

namespace musa {
namespace dnn {

Status Fill::SetValue(double value) {
  value_ = value;
  integral_ = false;
  return Status::SUCCESS;
}

Status Fill::SetValue(int64_t value) {
  ivalue_ = value;
  integral_ = true;
  return Status::SUCCESS;
}

Status Fill::Run(Handle& h, Tensor& out) const {
  Status st = emu::enter("Fill::Run");
  if (st != Status::SUCCESS) return st;
  if (!emu::valid_type(out.GetType()) || out.GetType() == Tensor::Type::DOUBLE)
    return Status::NOT_SUPPORTED;
  const double value = value_;
  const int64_t ivalue = ivalue_;
  const bool integral = integral_;
  emu::Launch launch("Fill::Run", h);
  launch.output(out, "out");
  return launch.submit([=](const std::vector<emu::View>& v) {
    const emu::View& o = v[0];
    emu::for_each_offset(o.nd(), o.dims(), o.t.GetStrides(), [&](int64_t off) {
      // An integer value reaches integer types exactly (a double holds 53 bits).
      if (integral) {
        emu::store_i(o.base, o.type(), off, ivalue);
      } else {
        emu::store_f(o.base, o.type(), off, value);
      }
    });
  });
}

}  // namespace dnn
}  // namespace musa
