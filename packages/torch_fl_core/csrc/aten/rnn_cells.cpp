// The fused LSTM/GRU cell kernels ATen's lstm_cell/gru_cell call for every
// device that is not the CPU (RNN.cpp takes the fused path for CUDA and
// PrivateUse1). PyTorch only has CUDA kernels for them, so neither box:cpu nor
// the CPU fallback can serve them; these are written with ATen ops, which the
// router then serves. Workspace layouts follow CUDA's, so the autograd
// formulas in derivatives.yaml pair them the same way.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace torch_fl {
namespace {

using at::Tensor;

std::tuple<Tensor, Tensor, Tensor> fused_lstm_cell(const Tensor& input_gates,
                                                   const Tensor& hidden_gates, const Tensor& cx,
                                                   const std::optional<Tensor>& input_bias,
                                                   const std::optional<Tensor>& hidden_bias) {
  Tensor gates = input_gates + hidden_gates;
  if (input_bias && input_bias->defined()) gates = gates + *input_bias;
  if (hidden_bias && hidden_bias->defined()) gates = gates + *hidden_bias;
  auto chunks = gates.chunk(4, 1);
  Tensor i = chunks[0].sigmoid();
  Tensor f = chunks[1].sigmoid();
  Tensor g = chunks[2].tanh();
  Tensor o = chunks[3].sigmoid();
  Tensor cy = f * cx + i * g;
  Tensor hy = o * cy.tanh();
  // Workspace: the activated gates [i, f, g, o], as CUDA keeps them.
  Tensor workspace = at::cat({i, f, g, o}, 1);
  return {hy, cy, workspace};
}

std::tuple<Tensor, Tensor, Tensor> fused_lstm_cell_backward_impl(
    const std::optional<Tensor>& grad_hy, const std::optional<Tensor>& grad_cy, const Tensor& cx,
    const Tensor& cy, const Tensor& workspace, bool has_bias) {
  const bool has_hy = grad_hy && grad_hy->defined();
  const bool has_cy = grad_cy && grad_cy->defined();
  if (!has_hy && !has_cy) return {Tensor(), Tensor(), Tensor()};
  auto w = workspace.chunk(4, 1);
  const Tensor &i = w[0], &f = w[1], &g = w[2], &o = w[3];
  Tensor tanh_cy = cy.tanh();
  Tensor gcy = has_cy ? *grad_cy : at::zeros_like(cy);
  Tensor go = at::zeros_like(o);
  if (has_hy) {
    gcy = gcy + *grad_hy * o * (1 - tanh_cy * tanh_cy);
    go = *grad_hy * tanh_cy;
  }
  Tensor grad_gates = at::cat(
      {gcy * g * i * (1 - i), gcy * cx * f * (1 - f), gcy * i * (1 - g * g), go * o * (1 - o)}, 1);
  Tensor grad_cx = gcy * f;
  Tensor grad_bias = has_bias ? grad_gates.sum(0) : Tensor();
  return {grad_gates, grad_cx, grad_bias};
}

std::tuple<Tensor, Tensor> fused_gru_cell(const Tensor& input_gates, const Tensor& hidden_gates,
                                          const Tensor& hx, const std::optional<Tensor>& input_bias,
                                          const std::optional<Tensor>& hidden_bias) {
  Tensor ig = input_gates;
  Tensor hg = hidden_gates;
  if (input_bias && input_bias->defined()) ig = ig + *input_bias;
  if (hidden_bias && hidden_bias->defined()) hg = hg + *hidden_bias;
  auto ic = ig.chunk(3, 1);
  auto hc = hg.chunk(3, 1);
  Tensor r = (ic[0] + hc[0]).sigmoid();
  Tensor z = (ic[1] + hc[1]).sigmoid();
  Tensor hn = hc[2];
  Tensor n = (ic[2] + r * hn).tanh();
  Tensor hy = n + z * (hx - n);
  // Workspace: [r, z, n, hx, hn], as CUDA keeps it.
  Tensor workspace = at::cat({r, z, n, hx, hn}, 1);
  return {hy, workspace};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> fused_gru_cell_backward(const Tensor& grad_hy,
                                                                           const Tensor& workspace,
                                                                           bool has_bias) {
  auto w = workspace.chunk(5, 1);
  const Tensor &r = w[0], &z = w[1], &n = w[2], &hx = w[3], &hn = w[4];
  Tensor grad_hx = grad_hy * z;
  Tensor gz = grad_hy * (hx - n) * z * (1 - z);
  Tensor gn = grad_hy * (1 - z) * (1 - n * n);
  Tensor gr = gn * hn * r * (1 - r);
  Tensor grad_input_gates = at::cat({gr, gz, gn}, 1);
  Tensor grad_hidden_gates = at::cat({gr, gz, gn * r}, 1);
  Tensor grad_input_bias = has_bias ? grad_input_gates.sum(0) : Tensor();
  Tensor grad_hidden_bias = has_bias ? grad_hidden_gates.sum(0) : Tensor();
  return {grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(fused_lstm_cell));
  m.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(fused_lstm_cell_backward_impl));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(fused_gru_cell));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(fused_gru_cell_backward));
}

}  // namespace
}  // namespace torch_fl
