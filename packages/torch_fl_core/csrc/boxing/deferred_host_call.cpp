#include "boxing/deferred_host_call.h"

#include <ATen/ATen.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "boxing/call_arguments.h"
#include "glue/graph_capture.h"
#include "glue/op_names.h"
#include "glue/runtime_access.h"

namespace torch_fl::boxing {
namespace {

using torch::jit::Stack;

bool is_flagos(const at::Tensor& t) { return t.defined() && t.device().is_privateuseone(); }

// Meta twins of the call's flagos tensors, one meta storage per flagos
// storage, so that a result's storage says which argument it aliases.
struct MetaTwins {
  std::unordered_map<const c10::StorageImpl*, c10::Storage> meta_of;  // flagos -> meta
  std::unordered_map<const c10::StorageImpl*, at::Tensor> flagos_of;  // meta -> a flagos tensor

  at::Tensor twin(const at::Tensor& t) {
    if (!is_flagos(t)) return t;
    const c10::StorageImpl* key = t.storage().unsafeGetStorageImpl();
    auto it = meta_of.find(key);
    if (it == meta_of.end()) {
      const auto bytes = static_cast<int64_t>(t.storage().nbytes());
      c10::Storage s =
          at::empty({bytes}, at::TensorOptions().dtype(at::kByte).device(at::kMeta)).storage();
      flagos_of.emplace(s.unsafeGetStorageImpl(), t);
      it = meta_of.emplace(key, std::move(s)).first;
    }
    at::Tensor m = at::empty({0}, t.options().device(at::kMeta));
    m.set_(it->second, t.storage_offset(), t.sizes(), t.strides());
    return m;
  }
};

// A CPU tensor over `t`'s memory with its geometry (t is kept alive by the
// recorded call).
at::Tensor host_view(const at::Tensor& t) {
  if (!is_flagos(t)) return t;
  return at::from_blob(t.data_ptr(), t.sizes(), t.strides(), t.options().device(at::kCPU));
}

struct RecordedCall {
  c10::OperatorHandle op;
  c10::DispatchKey key;
  std::vector<c10::IValue> args;               // the flagos arguments, as called
  std::vector<c10::IValue> fresh;              // per return: the result to copy into, or None
  std::vector<size_t> generator_args;          // positions of Generator? arguments
  std::mutex draws_mutex;                      // before_launch (caller) vs run (stream worker)
  std::deque<std::vector<c10::IValue>> draws;  // per queued launch: the bridged generators

  RecordedCall(const c10::OperatorHandle& o, c10::DispatchKey k) : op(o), key(k) {}

  void draw() {
    std::vector<c10::IValue> gens;
    Stack probe(args.begin(), args.end());
    bridge_generators(op.schema(), probe.begin(), probe.end());
    for (size_t i : generator_args) gens.push_back(probe[i]);
    std::lock_guard<std::mutex> lock(draws_mutex);
    draws.push_back(std::move(gens));
  }

  void run() {
    Stack stack;
    stack.reserve(args.size());
    for (const c10::IValue& a : args) {
      stack.push_back(map_tensors(a, host_view, c10::Device(at::kCPU)));
    }
    if (!generator_args.empty()) {
      std::vector<c10::IValue> gens;
      {
        std::lock_guard<std::mutex> lock(draws_mutex);
        TORCH_INTERNAL_ASSERT(!draws.empty(), "flagos graph: a launch without its draws");
        gens = std::move(draws.front());
        draws.pop_front();
      }
      for (size_t j = 0; j < generator_args.size(); ++j) stack[generator_args[j]] = gens[j];
    }
    at::AutoDispatchBelowADInplaceOrView below;
    op.redispatchBoxed(c10::DispatchKeySet(key), &stack);
    TORCH_INTERNAL_ASSERT(stack.size() == fresh.size());
    for (size_t i = 0; i < fresh.size(); ++i) {
      const c10::IValue& into = fresh[i];
      if (into.isTensor()) {
        host_view(into.toTensor()).copy_(stack[i].toTensor());
      } else if (into.isTensorList()) {
        const auto outs = into.toTensorList().vec();
        const auto got = stack[i].toTensorList().vec();
        for (size_t k = 0; k < outs.size(); ++k) {
          if (outs[k].defined()) host_view(outs[k]).copy_(got[k]);
        }
      }
    }
  }
};

[[noreturn]] void throw_uncapturable(const c10::OperatorHandle& op, const std::string& why) {
  TORCH_CHECK(false, "flagos: ", full_name(op.schema().operator_name()),
              " cannot be captured into a device graph on flagos:",
              static_cast<int>(capturing_device()), " (runtime ", runtime_name(),
              "): its host kernel runs at replay, so its results must be known before it runs, "
              "and ",
              why, ". Move it out of the captured region.");
}

// A flagos result for meta result `m`: the argument it is written into, a
// view of the argument whose storage it shares, or fresh memory of the pool.
at::Tensor flagos_result(const at::Tensor& m, MetaTwins& twins, c10::Device device,
                         const at::Tensor* written, bool* is_fresh) {
  *is_fresh = false;
  if (!m.defined()) return m;
  auto it = twins.flagos_of.find(m.storage().unsafeGetStorageImpl());
  if (it != twins.flagos_of.end()) {
    if (written != nullptr && written->sizes() == m.sizes() && written->strides() == m.strides() &&
        written->storage_offset() == m.storage_offset()) {
      return *written;
    }
    at::Tensor v = at::empty({0}, it->second.options());
    v.set_(it->second.storage(), m.storage_offset(), m.sizes(), m.strides());
    return v;
  }
  *is_fresh = true;
  return at::empty_strided(m.sizes(), m.strides(), m.options().device(device));
}

}  // namespace

void defer_host_call(const c10::OperatorHandle& op, c10::DispatchKey key, Stack* stack) {
  CaptureSink* sink = capture_sink();
  TORCH_INTERNAL_ASSERT(sink != nullptr);
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  const size_t num_returns = schema.returns().size();
  const auto begin = stack->end() - static_cast<std::ptrdiff_t>(num_args);
  auto call = std::make_shared<RecordedCall>(op, key);
  call->args.assign(begin, stack->end());
  const c10::Device device(c10::kPrivateUse1, sink->stream().device_index());

  // Generator arguments (None ones too: they draw from the device's default
  // generator) are drawn anew before each launch.
  for (size_t i = 0; i < num_args; ++i) {
    if (is_generator_type(schema.arguments()[i].type())) call->generator_args.push_back(i);
  }

  // Results from the Meta kernel, on twins sharing storages as the arguments do.
  MetaTwins twins;
  Stack meta;
  meta.reserve(num_args);
  for (size_t i = 0; i < num_args; ++i) {
    meta.push_back(map_tensors(
        call->args[i], [&](const at::Tensor& t) { return twins.twin(t); }, c10::Device(at::kMeta)));
  }
  for (size_t i : call->generator_args) meta[i] = c10::IValue();  // Meta kernels draw nothing
  try {
    at::AutoDispatchBelowADInplaceOrView below;
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &meta);
  } catch (const c10::Error& e) {
    throw_uncapturable(op, std::string("its Meta kernel could not tell them (") +
                               e.what_without_backtrace() + ")");
  } catch (const std::exception& e) {  // a Python meta kernel's error
    throw_uncapturable(op, std::string("its Meta kernel could not tell them (") + e.what() + ")");
  }
  TORCH_INTERNAL_ASSERT(meta.size() == num_returns);

  // Which argument each written return is (its alias set).
  std::vector<const at::Tensor*> written(num_returns, nullptr);
  for (size_t r = 0; r < num_returns; ++r) {
    const auto* ret_alias = schema.returns()[r].alias_info();
    if (ret_alias == nullptr || !ret_alias->isWrite()) continue;
    for (size_t i = 0; i < num_args; ++i) {
      const auto* arg_alias = schema.arguments()[i].alias_info();
      if (arg_alias != nullptr && arg_alias->beforeSets() == ret_alias->beforeSets() &&
          call->args[i].isTensor()) {
        written[r] = &call->args[i].toTensor();
        break;
      }
    }
  }

  std::vector<c10::IValue> results(num_returns);
  call->fresh.assign(num_returns, c10::IValue());
  for (size_t r = 0; r < num_returns; ++r) {
    const c10::IValue& m = meta[r];
    if (m.isTensor()) {
      const at::Tensor& mt = m.toTensor();
      if (written[r] != nullptr && written[r]->sizes() != mt.sizes()) {
        // An out= argument resized by the kernel: resized now (its new
        // memory is the capture's), written at each replay.
        at::Tensor w = *written[r];
        w.resize_(mt.sizes());
        if (w.strides() != mt.strides()) throw_uncapturable(op, "it restrides an out= argument");
        twins.twin(w);  // the new storage is an argument's too
        results[r] = w;
        continue;
      }
      bool is_fresh = false;
      at::Tensor res = flagos_result(mt, twins, device, written[r], &is_fresh);
      if (is_fresh) call->fresh[r] = res;
      results[r] = res;
    } else if (m.isTensorList()) {
      c10::List<at::Tensor> outs, fresh;
      bool any_fresh = false;
      for (const at::Tensor& mt : m.toTensorList().vec()) {
        bool is_fresh = false;
        at::Tensor res = flagos_result(mt, twins, device, nullptr, &is_fresh);
        outs.push_back(res);
        fresh.push_back(is_fresh ? res : at::Tensor());
        any_fresh = any_fresh || is_fresh;
      }
      if (any_fresh) call->fresh[r] = fresh;
      results[r] = outs;
    } else if (m.isTensor() || m.isNone() || m.isInt() || m.isDouble() || m.isBool() ||
               m.isSymInt() || m.isIntList()) {
      results[r] = m;
    } else {
      throw_uncapturable(op, "it returns a " + m.tagKind());
    }
  }

  // What the graph keeps: the same memory and geometry without the callers'
  // autograd history (holding it would keep forward graphs alive until reset).
  auto bare = [](const at::Tensor& t) { return is_flagos(t) ? t.variable_data() : t; };
  for (c10::IValue& a : call->args) a = map_tensors(a, bare);
  for (c10::IValue& f : call->fresh) f = map_tensors(f, bare);

  std::function<void()> before;
  if (!call->generator_args.empty()) before = [call] { call->draw(); };
  sink->record([call] { call->run(); }, std::move(before));

  stack->erase(begin, stack->end());
  for (auto& r : results) stack->push_back(std::move(r));
}

void deferred_host_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet keys, Stack* stack) {
  defer_host_call(op, keys.highestPriorityTypeId(), stack);
}

}  // namespace torch_fl::boxing
