#include "boxing/sparse_tensors.h"

#include <ATen/ATen.h>
#include <ATen/SparseCsrTensorImpl.h>
#include <ATen/SparseTensorImpl.h>

#include "boxing/call_mapper.h"

namespace torch_fl::boxing {
namespace {

// A sparse tensor's dense parts: COO has indices and values; the compressed layouts have
// compressed indices, plain indices and values.
struct Parts {
  at::Tensor indices;
  at::Tensor plain;  // compressed layouts only
  at::Tensor values;
};

bool is_coo(const at::Tensor& t) { return t.layout() == c10::kSparse; }

const at::SparseTensorImpl* coo_impl(const at::Tensor& t) {
  return static_cast<const at::SparseTensorImpl*>(t.unsafeGetTensorImpl());
}

const at::SparseCsrTensorImpl* compressed_impl(const at::Tensor& t) {
  return static_cast<const at::SparseCsrTensorImpl*>(t.unsafeGetTensorImpl());
}

Parts parts_of(const at::Tensor& t) {
  if (is_coo(t)) return {coo_impl(t)->indices(), {}, coo_impl(t)->values()};
  const auto* impl = compressed_impl(t);
  return {impl->compressed_indices(), impl->plain_indices(), impl->values()};
}

// `like`'s sizes and flags over `parts`, on `device`. The constructors alias the parts.
at::Tensor sparse_over(const at::Tensor& like, const Parts& parts, c10::Device device) {
  const auto options = parts.values.options().device(device).layout(like.layout());
  if (is_coo(like)) {
    const auto* impl = coo_impl(like);
    return at::_sparse_coo_tensor_with_dims_and_tensors(impl->sparse_dim(), impl->dense_dim(),
                                                        like.sizes(), parts.indices, parts.values,
                                                        options, impl->coalesced());
  }
  return at::_sparse_compressed_tensor_unsafe(parts.indices, parts.plain, parts.values,
                                              like.sizes(), options);
}

at::Tensor result_part(const CallMapper& mapper, const at::Tensor& part) {
  return part.defined() ? mapper.result(part) : part;
}

// The caller's part where the kernel left it as it was (written in place at most), so that its
// identity and version counter stay; else the kernel's part joining flagos.
at::Tensor kept_part(const CallMapper& mapper, const at::Tensor& mine, const at::Tensor& theirs) {
  at::Tensor got = result_part(mapper, theirs);
  if (mine.defined() && got.defined() && got.unsafeGetTensorImpl() != mine.unsafeGetTensorImpl() &&
      got.storage().is_alias_of(mine.storage()) && got.storage_offset() == mine.storage_offset() &&
      got.sizes() == mine.sizes() && got.strides() == mine.strides() &&
      got.scalar_type() == mine.scalar_type()) {
    return mine;
  }
  return got;
}

}  // namespace

bool is_sparse_layout(const at::Tensor& t) {
  return t.defined() && t.layout() != c10::kStrided && !t.is_mkldnn();
}

at::Tensor sparse_arg(CallMapper& mapper, const at::Tensor& t) {
  if (!t.defined() || !t.device().is_privateuseone()) return t;
  const Parts parts = parts_of(t);
  const Parts aliases{mapper.arg(parts.indices),
                      parts.plain.defined() ? mapper.arg(parts.plain) : at::Tensor(),
                      mapper.arg(parts.values)};
  return sparse_over(t, aliases, mapper.target());
}

at::Tensor sparse_result(const CallMapper& mapper, const at::Tensor& r) {
  if (!r.defined() || r.device().is_privateuseone()) return r;
  const Parts parts = parts_of(r);
  const Parts flagos{result_part(mapper, parts.indices), result_part(mapper, parts.plain),
                     result_part(mapper, parts.values)};
  return sparse_over(r, flagos, c10::Device(c10::kPrivateUse1, mapper.device()));
}

void sparse_written(const CallMapper& mapper, const at::Tensor& original, const at::Tensor& alias) {
  if (!original.defined() || !original.device().is_privateuseone() || !alias.defined() ||
      alias.device().is_privateuseone()) {
    return;
  }
  TORCH_CHECK(original.layout() == alias.layout(), "flagos: a kernel left its ", original.layout(),
              " output as ", alias.layout());
  const Parts mine = parts_of(original);
  const Parts theirs = parts_of(alias);
  if (is_coo(original)) {
    auto* impl = static_cast<at::SparseTensorImpl*>(original.unsafeGetTensorImpl());
    const auto* from = coo_impl(alias);
    impl->raw_resize_(from->sparse_dim(), from->dense_dim(), alias.sizes());
    impl->set_indices_and_values_unsafe(kept_part(mapper, mine.indices, theirs.indices),
                                        kept_part(mapper, mine.values, theirs.values));
    impl->set_coalesced(from->coalesced());
    return;
  }
  auto* impl = static_cast<at::SparseCsrTensorImpl*>(original.unsafeGetTensorImpl());
  impl->set_member_tensors(kept_part(mapper, mine.indices, theirs.indices),
                           kept_part(mapper, mine.plain, theirs.plain),
                           kept_part(mapper, mine.values, theirs.values), alias.sizes());
}

}  // namespace torch_fl::boxing
