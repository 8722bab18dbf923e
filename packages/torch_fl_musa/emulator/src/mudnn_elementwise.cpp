// Unary, Binary and Ternary: elementwise operators over operands of one dims (zero strides
// broadcast inputs). Inputs are read in full before the output is written, so an output that is
// also an input (an in-place call) computes as if it were not.
#include <cmath>
#include <vector>

#include "mudnn_op.h"

namespace musa {
namespace dnn {
namespace {

using emu::View;
using Type = Tensor::Type;

// Integer arithmetic wraps, as the hardware's does.
int64_t wrap_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t wrap_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
int64_t wrap_neg(int64_t a) { return static_cast<int64_t>(0 - static_cast<uint64_t>(a)); }

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

double unary_f(Unary::Mode m, double x, double alpha) {
  using M = Unary::Mode;
  switch (m) {
    case M::ABS:
      return std::fabs(x);
    case M::NEG:
      return -x;
    case M::SQRT:
      return std::sqrt(x);
    case M::RSQRT:
      return 1.0 / std::sqrt(x);
    case M::EXP:
      return std::exp(x);
    case M::LOG:
      return std::log(x);
    case M::SIN:
      return std::sin(x);
    case M::COS:
      return std::cos(x);
    case M::TANH:
      return std::tanh(x);
    case M::SIGMOID:
      return sigmoid(x);
    case M::RELU:
      return std::isnan(x) ? x : (x > 0 ? x : 0.0);
    case M::RECIPROCAL:
      return 1.0 / x;
    case M::ERF:
      return std::erf(x);
    case M::FLOOR:
      return std::floor(x);
    case M::CEIL:
      return std::ceil(x);
    case M::SILU:
      return x * sigmoid(x);
    case M::GELU:
      return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case M::LOGICAL_NOT:
      return x == 0 ? 1.0 : 0.0;
    case M::ADD:
      return x + alpha;
    case M::MUL:
      return x * alpha;
    case M::POW:
      return std::pow(x, alpha);
  }
  return x;
}

int64_t unary_i(Unary::Mode m, int64_t x, int64_t alpha) {
  using M = Unary::Mode;
  switch (m) {
    case M::ABS:
      return x < 0 ? wrap_neg(x) : x;
    case M::NEG:
      return wrap_neg(x);
    case M::RELU:
      return x > 0 ? x : 0;
    case M::LOGICAL_NOT:
      return x == 0 ? 1 : 0;
    case M::ADD:
      return wrap_add(x, alpha);
    case M::MUL:
      return wrap_mul(x, alpha);
    default:
      return x;  // not offered for integers (Run rejects it)
  }
}

bool is_comparison(Binary::Mode m) { return m >= Binary::Mode::EQ; }

// The comparison and logical modes read the same in both domains; T is double or int64_t.
template <typename T>
bool compare(Binary::Mode m, T a, T b) {
  using M = Binary::Mode;
  switch (m) {
    case M::EQ:
      return a == b;
    case M::NE:
      return a != b;
    case M::LT:
      return a < b;
    case M::LE:
      return a <= b;
    case M::GT:
      return a > b;
    case M::GE:
      return a >= b;
    case M::LOGICAL_AND:
      return a != 0 && b != 0;
    case M::LOGICAL_OR:
      return a != 0 || b != 0;
    default:
      return false;  // arithmetic modes: the callers handle them
  }
}

double binary_f(Binary::Mode m, double a, double b, double alpha) {
  using M = Binary::Mode;
  if (is_comparison(m)) return compare(m, a, b);
  switch (m) {
    case M::ADD:
      return a + alpha * b;
    case M::SUB:
      return a - alpha * b;
    case M::MUL:
      return a * b;
    case M::TRUEDIV:
      return a / b;
    case M::MAXIMUM:
      return std::isnan(a) || std::isnan(b) ? std::nan("") : (a > b ? a : b);
    case M::MINIMUM:
      return std::isnan(a) || std::isnan(b) ? std::nan("") : (a < b ? a : b);
    case M::POW:
      return std::pow(a, b);
    default:
      return 0;  // comparisons: returned above
  }
}

int64_t binary_i(Binary::Mode m, int64_t a, int64_t b, int64_t alpha) {
  using M = Binary::Mode;
  if (is_comparison(m)) return compare(m, a, b);
  switch (m) {
    case M::ADD:
      return wrap_add(a, wrap_mul(alpha, b));
    case M::SUB:
      return wrap_add(a, wrap_neg(wrap_mul(alpha, b)));
    case M::MUL:
      return wrap_mul(a, b);
    case M::MAXIMUM:
      return a > b ? a : b;
    case M::MINIMUM:
      return a < b ? a : b;
    default:
      return 0;  // TRUEDIV and POW are floating only (Run rejects them)
  }
}

}  // namespace

Status Unary::SetMode(Mode mode) {
  if (static_cast<int>(mode) < 0 || mode > Mode::POW) return Status::INVALID_PARAMETER;
  mode_ = mode;
  return Status::SUCCESS;
}

Status Unary::SetAlpha(double alpha) {
  alpha_ = alpha;
  return Status::SUCCESS;
}

Status Unary::Run(Handle& h, Tensor& out, const Tensor& in) const {
  Status st = emu::enter("Unary::Run");
  if (st != Status::SUCCESS) return st;
  const Type ti = in.GetType(), to = out.GetType();
  const Mode m = mode_;
  bool ok;
  if (m == Mode::LOGICAL_NOT) {
    ok = to == Type::BOOL && emu::valid_type(ti) && ti != Type::DOUBLE;
  } else if (m == Mode::ABS || m == Mode::NEG || m == Mode::RELU || m == Mode::ADD ||
             m == Mode::MUL) {
    ok = ti == to && (emu::is_floating(ti) || emu::is_int(ti));
  } else {
    ok = ti == to && emu::is_floating(ti);
  }
  if (!ok) return Status::NOT_SUPPORTED;
  if (!emu::same_dims(out, in)) return Status::INVALID_PARAMETER;
  const bool int_domain = !emu::is_floating(ti);
  int64_t ialpha = 0;
  if (int_domain && (m == Mode::ADD || m == Mode::MUL) && !emu::integral_alpha(alpha_, &ialpha))
    return Status::INVALID_PARAMETER;
  const double alpha = alpha_;
  emu::Launch launch("Unary::Run", h);
  launch.output(out, "out");
  launch.input(in, "in");
  return launch.submit([=](const std::vector<View>& v) {
    if (int_domain) {
      std::vector<int64_t> x = v[1].gather_i();
      for (int64_t& e : x) e = unary_i(m, e, ialpha);
      v[0].scatter_i(x);
    } else {
      std::vector<double> x = v[1].gather_f();
      for (double& e : x) e = unary_f(m, e, alpha);
      v[0].scatter_f(x);
    }
  });
}

Status Binary::SetMode(Mode mode) {
  if (static_cast<int>(mode) < 0 || mode > Mode::LOGICAL_OR) return Status::INVALID_PARAMETER;
  mode_ = mode;
  return Status::SUCCESS;
}

Status Binary::SetAlpha(double alpha) {
  alpha_ = alpha;
  return Status::SUCCESS;
}

Status Binary::Run(Handle& h, Tensor& out, const Tensor& a, const Tensor& b) const {
  Status st = emu::enter("Binary::Run");
  if (st != Status::SUCCESS) return st;
  const Type ta = a.GetType(), to = out.GetType();
  const Mode m = mode_;
  bool ok = ta == b.GetType() && (emu::is_floating(ta) || emu::is_int(ta));
  if (m == Mode::TRUEDIV || m == Mode::POW) ok = ok && emu::is_floating(ta);
  ok = ok && to == (is_comparison(m) ? Type::BOOL : ta);
  if (!ok) return Status::NOT_SUPPORTED;
  if (!emu::same_dims(out, a) || !emu::same_dims(out, b)) return Status::INVALID_PARAMETER;
  const bool int_domain = emu::is_int(ta);
  int64_t ialpha = 0;
  if (int_domain && (m == Mode::ADD || m == Mode::SUB) && !emu::integral_alpha(alpha_, &ialpha))
    return Status::INVALID_PARAMETER;
  const double alpha = alpha_;
  emu::Launch launch("Binary::Run", h);
  launch.output(out, "out");
  launch.input(a, "a");
  launch.input(b, "b");
  return launch.submit([=](const std::vector<View>& v) {
    if (int_domain) {
      std::vector<int64_t> x = v[1].gather_i(), y = v[2].gather_i();
      for (size_t i = 0; i < x.size(); ++i) x[i] = binary_i(m, x[i], y[i], ialpha);
      v[0].scatter_i(x);
    } else {
      std::vector<double> x = v[1].gather_f(), y = v[2].gather_f();
      for (size_t i = 0; i < x.size(); ++i) x[i] = binary_f(m, x[i], y[i], alpha);
      v[0].scatter_f(x);
    }
  });
}

Status Ternary::SetMode(Mode mode) {
  if (static_cast<int>(mode) < 0 || mode > Mode::SELECT) return Status::INVALID_PARAMETER;
  mode_ = mode;
  return Status::SUCCESS;
}

Status Ternary::SetAlpha(double alpha) {
  alpha_ = alpha;
  return Status::SUCCESS;
}

Status Ternary::Run(Handle& h, Tensor& out, const Tensor& a, const Tensor& b,
                    const Tensor& c) const {
  Status st = emu::enter("Ternary::Run");
  if (st != Status::SUCCESS) return st;
  const Type to = out.GetType();
  const Mode m = mode_;
  bool ok = b.GetType() == to && c.GetType() == to;
  if (m == Mode::SELECT) {
    ok = ok && a.GetType() == Type::BOOL &&
         (emu::is_floating(to) || emu::is_int(to) || to == Type::BOOL);
  } else {
    ok = ok && a.GetType() == to && emu::is_floating(to);
  }
  if (!ok) return Status::NOT_SUPPORTED;
  if (!emu::same_dims(out, a) || !emu::same_dims(out, b) || !emu::same_dims(out, c))
    return Status::INVALID_PARAMETER;
  const double alpha = alpha_;
  emu::Launch launch("Ternary::Run", h);
  launch.output(out, "out");
  launch.input(a, "a");
  launch.input(b, "b");
  launch.input(c, "c");
  return launch.submit([=](const std::vector<View>& v) {
    if (m == Mode::SELECT && !emu::is_floating(to)) {
      std::vector<int64_t> cond = v[1].gather_i(), x = v[2].gather_i(), y = v[3].gather_i();
      for (size_t i = 0; i < x.size(); ++i) x[i] = cond[i] ? x[i] : y[i];
      v[0].scatter_i(x);
      return;
    }
    std::vector<double> p = v[1].gather_f(), x = v[2].gather_f(), y = v[3].gather_f();
    for (size_t i = 0; i < p.size(); ++i) {
      switch (m) {
        case Mode::ADDCMUL:
          p[i] = p[i] + alpha * x[i] * y[i];
          break;
        case Mode::ADDCDIV:
          p[i] = p[i] + alpha * x[i] / y[i];
          break;
        case Mode::LERP:
          p[i] = p[i] + (x[i] - p[i]) * y[i];
          break;
        case Mode::SELECT:
          p[i] = p[i] != 0 ? x[i] : y[i];
          break;
      }
    }
    v[0].scatter_f(p);
  });
}

}  // namespace dnn
}  // namespace musa
