// Softmax and log-softmax over one dim, forward and backward.
#include <cmath>
#include <limits>
#include <vector>

#include "mudnn_op.h"

namespace musa {
namespace dnn {
namespace {

using emu::View;
using Type = Tensor::Type;

// The dims around `dim` of a row-major tensor: outer * len * inner elements.
struct Rows {
  int64_t outer = 1, len = 1, inner = 1;
  int64_t at(int64_t o, int64_t j, int64_t i) const { return (o * len + j) * inner + i; }
};

Status rows(const Tensor& t, int dim, Rows* r) {
  const int nd = t.GetNdims();
  const int span = nd == 0 ? 1 : nd;  // a 0-d tensor has one dim of one element here
  const int d = dim < 0 ? dim + span : dim;
  if (d < 0 || d >= span) return Status::INVALID_PARAMETER;
  for (int i = 0; i < nd; ++i) {
    const int64_t n = t.GetDims()[i];
    if (i < d) r->outer *= n;
    if (i == d) r->len = n;
    if (i > d) r->inner *= n;
  }
  return Status::SUCCESS;
}

}  // namespace

Status Softmax::SetMode(Mode mode) {
  if (mode != Mode::SOFTMAX && mode != Mode::LOGSOFTMAX) return Status::INVALID_PARAMETER;
  mode_ = mode;
  return Status::SUCCESS;
}

Status Softmax::SetDim(int dim) {
  dim_ = dim;
  return Status::SUCCESS;
}

Status Softmax::Run(Handle& h, Tensor& out, const Tensor& in) const {
  Status st = emu::enter("Softmax::Run");
  if (st != Status::SUCCESS) return st;
  const Type t = out.GetType();
  if (!emu::is_floating(t) || in.GetType() != t) return Status::NOT_SUPPORTED;
  if (!emu::same_dims(out, in)) return Status::INVALID_PARAMETER;
  Rows r;
  st = rows(in, dim_, &r);
  if (st != Status::SUCCESS) return st;
  const bool log = mode_ == Mode::LOGSOFTMAX;
  emu::Launch launch("Softmax::Run", h);
  launch.output(out, "out");
  launch.input(in, "in");
  return launch.submit([r, log](const std::vector<View>& v) {
    std::vector<double> x = v[1].gather_f();
    for (int64_t o = 0; o < r.outer; ++o) {
      for (int64_t i = 0; i < r.inner; ++i) {
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < r.len; ++j) {
          const double e = x[r.at(o, j, i)];
          if (std::isnan(e) || e > mx) mx = e;
          if (std::isnan(mx)) break;
        }
        double sum = 0;
        for (int64_t j = 0; j < r.len; ++j) sum += std::exp(x[r.at(o, j, i)] - mx);
        const double lse = std::log(sum);
        for (int64_t j = 0; j < r.len; ++j) {
          double& e = x[r.at(o, j, i)];
          e = log ? e - mx - lse : std::exp(e - mx) / sum;
        }
      }
    }
    v[0].scatter_f(x);
  });
}

Status Softmax::RunBwd(Handle& h, Tensor& grad_in, const Tensor& out,
                       const Tensor& grad_out) const {
  Status st = emu::enter("Softmax::RunBwd");
  if (st != Status::SUCCESS) return st;
  const Type t = grad_in.GetType();
  if (!emu::is_floating(t) || out.GetType() != t || grad_out.GetType() != t)
    return Status::NOT_SUPPORTED;
  if (!emu::same_dims(grad_in, out) || !emu::same_dims(grad_in, grad_out))
    return Status::INVALID_PARAMETER;
  Rows r;
  st = rows(out, dim_, &r);
  if (st != Status::SUCCESS) return st;
  const bool log = mode_ == Mode::LOGSOFTMAX;
  emu::Launch launch("Softmax::RunBwd", h);
  launch.output(grad_in, "grad_in");
  launch.input(out, "out");
  launch.input(grad_out, "grad_out");
  return launch.submit([r, log](const std::vector<View>& v) {
    const std::vector<double> y = v[1].gather_f();
    std::vector<double> g = v[2].gather_f();
    for (int64_t o = 0; o < r.outer; ++o) {
      for (int64_t i = 0; i < r.inner; ++i) {
        // softmax: dx = y * (dy - sum(dy * y)); log-softmax: dx = dy - exp(y) * sum(dy).
        double sum = 0;
        for (int64_t j = 0; j < r.len; ++j) {
          const int64_t k = r.at(o, j, i);
          sum += log ? g[k] : g[k] * y[k];
        }
        for (int64_t j = 0; j < r.len; ++j) {
          const int64_t k = r.at(o, j, i);
          g[k] = log ? g[k] - std::exp(y[k]) * sum : y[k] * (g[k] - sum);
        }
      }
    }
    v[0].scatter_f(g);
  });
}

}  // namespace dnn
}  // namespace musa
