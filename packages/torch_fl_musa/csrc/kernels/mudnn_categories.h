// One routine per category of the ops table (tools/mudnn_ops.py). The generated kernels
// (build/generated/mudnn_kernels.cpp) call these with the muDNN operator's mode (where it has
// one), its name for messages and the compute dtypes its kernel serves.
#pragma once

#include "mudnn_common.h"

namespace tfl_musa {

void unary(Call& c, dnn::Unary::Mode mode, const char* fn, const DtypeSet& dtypes, UnaryKind kind);
void gelu(Call& c, dnn::Unary::Mode mode, const char* fn, const DtypeSet& dtypes);
// `self` OP `other` (pow: `exponent`), either of them a Scalar in some overloads.
void binary(Call& c, dnn::Binary::Mode mode, const char* fn, const DtypeSet& dtypes,
            BinaryKind kind);
// self ** exponent, the exponent a Scalar (Unary's POW with alpha = exponent).
void pow_scalar(Call& c, dnn::Unary::Mode mode, const char* fn, const DtypeSet& dtypes);
// self + alpha * other, self - alpha * other.
void binary_alpha(Call& c, dnn::Binary::Mode mode, const char* fn, const DtypeSet& dtypes);
// self + value * tensor1 (* or /) tensor2.
void ternary_value(Call& c, dnn::Ternary::Mode mode, const char* fn, const DtypeSet& dtypes);
// self + weight * (end - self), weight a Scalar or a Tensor.
void lerp(Call& c, dnn::Ternary::Mode mode, const char* fn, const DtypeSet& dtypes);
// grad_output where self > threshold, else 0 (ReLU's backward): a Binary GT mask, then SELECT.
void threshold_backward(Call& c, dnn::Ternary::Mode mode, const char* fn, const DtypeSet& dtypes);
// condition ? self : other.
void where(Call& c, dnn::Ternary::Mode mode, const char* fn, const DtypeSet& dtypes);
// sum, mean, amax, amin, all, any over `dim` (every dim when absent or None).
void reduce(Call& c, dnn::Reduce::Mode mode, const char* fn, const DtypeSet& dtypes);
// max.dim / min.dim: the extreme along one dim and its int64 index (Reduce::RunWithIndices with
// `mode`); an empty or 0-dim input, and out= targets of other dtypes, are PyTorch's to judge.
void reduce_with_indices(Call& c, const char* fn, const DtypeSet& dtypes, dnn::Reduce::Mode mode);
// cumsum (Cum::ADD) along `dim`, in the result's dtype (integers to int64 unless dtype= says).
void cumsum(Call& c, dnn::Cum::Mode mode, const char* fn, const DtypeSet& dtypes);
void mm(Call& c, const char* fn, const DtypeSet& dtypes);
void bmm(Call& c, const char* fn, const DtypeSet& dtypes);
void addmm(Call& c, const char* fn, const DtypeSet& dtypes);
void softmax(Call& c, dnn::Softmax::Mode mode, const char* fn, const DtypeSet& dtypes);
void softmax_backward(Call& c, const char* fn, const DtypeSet& dtypes, dnn::Softmax::Mode mode);
// tensors one after another along `dim` (Concat); calls with PyTorch's special cases (type
// promotion, legacy empty tensors, other memory formats, an out= that overlaps an input) are
// declined to the CPU.
void cat(Call& c, const char* fn, const DtypeSet& dtypes);
// tensors of one shape joined along a new `dim`: a Concat of the inputs unsqueezed there (views).
// Inputs of several shapes or dtypes, an empty list, an out= that overlaps an input: declined.
void stack(Call& c, const char* fn, const DtypeSet& dtypes);
void fill(Call& c, const char* fn, const DtypeSet& dtypes);
void zero(Call& c, const char* fn, const DtypeSet& dtypes);

}  // namespace tfl_musa
