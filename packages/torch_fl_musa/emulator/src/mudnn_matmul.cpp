// MatMul and BatchMatMul: out = alpha * op(a) @ op(b) + beta * (out or bias), per batch.
#include <vector>

#include "mudnn_op.h"

namespace musa {
namespace dnn {
namespace {

using emu::View;
using Type = Tensor::Type;

// The problem, per batch: op(a) [m, k], op(b) [k, n], out [m, n].
struct Gemm {
  int64_t batch, m, n, k;
  bool ta, tb;
  double alpha, beta;
};

// Checks ranks, dims and types; rank 2 (MatMul) or 3 (BatchMatMul, batch leading).
Status shape(int rank, bool ta, bool tb, const Tensor& out, const Tensor& a, const Tensor& b,
             const Tensor* bias, Gemm* g) {
  const Type t = out.GetType();
  if (!emu::is_floating(t) || a.GetType() != t || b.GetType() != t ||
      (bias && bias->GetType() != t))
    return Status::NOT_SUPPORTED;
  if (out.GetNdims() != rank || a.GetNdims() != rank || b.GetNdims() != rank)
    return Status::INVALID_PARAMETER;
  if (bias && !emu::same_dims(*bias, out)) return Status::INVALID_PARAMETER;
  const int o = rank - 2;  // first matrix dim
  const int64_t* ad = a.GetDims() + o;
  const int64_t* bd = b.GetDims() + o;
  g->batch = rank == 3 ? out.GetDims()[0] : 1;
  if (rank == 3 && (a.GetDims()[0] != g->batch || b.GetDims()[0] != g->batch))
    return Status::INVALID_PARAMETER;
  g->m = ta ? ad[1] : ad[0];
  g->k = ta ? ad[0] : ad[1];
  g->n = tb ? bd[0] : bd[1];
  const int64_t kb = tb ? bd[1] : bd[0];
  if (kb != g->k || out.GetDims()[o] != g->m || out.GetDims()[o + 1] != g->n)
    return Status::INVALID_PARAMETER;
  g->ta = ta;
  g->tb = tb;
  return Status::SUCCESS;
}

// v[0] out, v[1] a, v[2] b, v[3] bias (when given). Every input is read before out is written.
void compute(const Gemm& g, const std::vector<View>& v, bool with_bias) {
  const std::vector<double> a = v[1].gather_f(), b = v[2].gather_f();
  std::vector<double> c;
  if (g.beta != 0) c = (with_bias ? v[3] : v[0]).gather_f();  // beta 0: never read (NaN too)
  std::vector<double> out(static_cast<size_t>(g.batch * g.m * g.n), 0.0);
  std::vector<double> arow(static_cast<size_t>(g.k));
  for (int64_t p = 0; p < g.batch; ++p) {
    const double* ap = a.data() + p * g.m * g.k;
    const double* bp = b.data() + p * g.k * g.n;
    double* op = out.data() + p * g.m * g.n;
    for (int64_t i = 0; i < g.m; ++i) {
      for (int64_t l = 0; l < g.k; ++l) arow[l] = g.ta ? ap[l * g.m + i] : ap[i * g.k + l];
      for (int64_t j = 0; j < g.n; ++j) {
        double acc = 0;
        if (g.tb) {
          const double* bj = bp + j * g.k;
          for (int64_t l = 0; l < g.k; ++l) acc += arow[l] * bj[l];
        } else {
          for (int64_t l = 0; l < g.k; ++l) acc += arow[l] * bp[l * g.n + j];
        }
        op[i * g.n + j] = acc;
      }
    }
  }
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = g.alpha * out[i] + (c.empty() ? 0.0 : g.beta * c[i]);
  v[0].scatter_f(out);
}

// One call of either operator: counts it, validates it (rank 2 MatMul, rank 3 BatchMatMul) and
// queues it. Both classes hold the same configuration, passed here by value.
Status run(const char* name, int rank, bool ta, bool tb, double alpha, double beta, Handle& h,
           Tensor& out, const Tensor& a, const Tensor& b, const Tensor* bias) {
  Status st = emu::enter(name);
  if (st != Status::SUCCESS) return st;
  Gemm g;
  st = shape(rank, ta, tb, out, a, b, bias, &g);
  if (st != Status::SUCCESS) return st;
  g.alpha = alpha;
  g.beta = beta;
  emu::Launch l(name, h);
  l.output(out, "out");
  l.input(a, "a");
  l.input(b, "b");
  if (bias) l.input(*bias, "bias");
  const bool with_bias = bias != nullptr;
  return l.submit([g, with_bias](const std::vector<View>& v) { compute(g, v, with_bias); });
}

}  // namespace

Status MatMul::SetTranspose(bool transpose_a, bool transpose_b) {
  ta_ = transpose_a;
  tb_ = transpose_b;
  return Status::SUCCESS;
}

Status MatMul::SetAlpha(double alpha) {
  alpha_ = alpha;
  return Status::SUCCESS;
}

Status MatMul::SetBeta(double beta) {
  beta_ = beta;
  return Status::SUCCESS;
}

Status MatMul::Run(Handle& h, Tensor& out, const Tensor& a, const Tensor& b) const {
  return run("MatMul::Run", 2, ta_, tb_, alpha_, beta_, h, out, a, b, nullptr);
}

Status MatMul::RunWithBiasAdd(Handle& h, Tensor& out, const Tensor& a, const Tensor& b,
                              const Tensor& bias) const {
  return run("MatMul::RunWithBiasAdd", 2, ta_, tb_, alpha_, beta_, h, out, a, b, &bias);
}

Status BatchMatMul::SetTranspose(bool transpose_a, bool transpose_b) {
  ta_ = transpose_a;
  tb_ = transpose_b;
  return Status::SUCCESS;
}

Status BatchMatMul::SetAlpha(double alpha) {
  alpha_ = alpha;
  return Status::SUCCESS;
}

Status BatchMatMul::SetBeta(double beta) {
  beta_ = beta;
  return Status::SUCCESS;
}

Status BatchMatMul::Run(Handle& h, Tensor& out, const Tensor& a, const Tensor& b) const {
  return run("BatchMatMul::Run", 3, ta_, tb_, alpha_, beta_, h, out, a, b, nullptr);
}

}  // namespace dnn
}  // namespace musa
