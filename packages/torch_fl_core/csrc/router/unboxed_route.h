// The unboxed route kernel, instantiated per overload by the build-time
// generator (tools/gen_unboxed_routes.py) from ATen's own at::_ops structs.
//
// Why: a boxed kernel converts every argument to IValues and back on each
// call. For the hot path (a routed op served by box:cpu) this kernel aliases
// the tensor arguments and redispatches to the CPU (or CUDA) kernel with the same C++
// signature, without boxing. Other backends are reached by boxing once.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/IListRef.h>
#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/boxing/impl/boxing.h>
#include <torch/library.h>

#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "boxing/alias_view.h"
#include "boxing/call_arguments.h"
#include "boxing/call_mapper.h"
#include "boxing/call_scope.h"
#include "boxing/deferred_host_call.h"
#include "boxing/list_versions.h"
#include "glue/graph_capture.h"
#include "glue/runtime_access.h"
#include "profiler/route_scope.h"
#include "router/route_phases.h"
#include "router/route_state.h"
#include "router/unboxed_registry.h"

namespace torch_fl::unboxed {

// ---- pass 1: what the arguments say (device, dtype, sizes) ----------------
struct Observer {
  std::optional<c10::ScalarType> first_dtype;
  std::optional<c10::DeviceIndex> device;
  int64_t numel = 0;
  size_t position = 0;         // the argument being observed
  uint64_t cpu_nonscalar = 0;  // boxing::argument_bit of arguments holding CPU tensors
  bool cpu_written = false;    // a CPU out=/in-place tensor
  std::optional<c10::DeviceIndex> other_device;  // a second flagos device

  void see(const at::Tensor& t) {
    if (!t.defined()) return;
    if (!first_dtype) first_dtype = t.scalar_type();
    if (t.device().is_privateuseone()) {
      const auto d = t.device().index();
      if (!device) {
        device = d;
      } else if (*device != d) {
        other_device = d;
      }
      numel = std::max<int64_t>(numel, t.numel());
    } else if (t.device().is_cpu() && t.dim() > 0) {
      cpu_nonscalar |= boxing::argument_bit(position);
    }
  }
};

inline void observe(Observer& o, const at::Tensor& t) { o.see(t); }
// A written tensor: a 0-dim CPU one is no scalar operand but a CPU output.
inline void observe(Observer& o, at::Tensor& t) {
  o.see(t);
  if (t.defined() && t.device().is_cpu()) o.cpu_written = true;
}
inline void observe(Observer& o, const std::optional<at::Tensor>& t) {
  if (t) o.see(*t);
}
inline void observe(Observer& o, at::TensorList l) {
  for (const auto& t : l) o.see(t);
}
inline void observe(Observer& o, const at::ITensorListRef& l) {
  for (const auto& t : l) o.see(t);
}
inline void observe(Observer& o, const c10::List<std::optional<at::Tensor>>& l) {
  for (const std::optional<at::Tensor> t : l) {
    if (t) o.see(*t);
  }
}
// Factories name their device instead of passing a flagos tensor.
inline void observe(Observer& o, c10::Device d) {
  if (d.is_privateuseone() && !o.device && d.has_index()) o.device = d.index();
}
inline void observe(Observer& o, const std::optional<c10::Device>& d) {
  if (d) observe(o, *d);
}
template <class T>
inline void observe(Observer&, const T&) {}

// ---- pass 2: arguments as the target backend sees them --------------------
// Each tensor goes through the call's boxing::CallMapper (the mapper boxed
// calls use), which keeps arguments over one flagos storage on one alias
// storage; the overloads below only unpack the C++ argument types.
struct Converter {
  boxing::CallMapper& mapper;
  const Observer& obs;
  const c10::OperatorHandle& op;  // its schema is read only to bridge a generator

  at::Tensor alias(const at::Tensor& t) const { return mapper.arg(t); }
};

inline at::Tensor convert(const Converter& c, const at::Tensor& t) { return c.alias(t); }

// Signatures whose tensors are all single tensors, at most the call mapper's
// inline entries of them: each argument's alias is an entry that stays where
// it is for the call, so the kernel is handed the entries themselves (no
// reference count taken and dropped per argument).
template <class A>
constexpr size_t kTensorSlots = std::is_same_v<std::decay_t<A>, at::Tensor> ||
                                std::is_same_v<std::decay_t<A>, std::optional<at::Tensor>>;
template <class A>
constexpr bool kListLike = std::is_same_v<std::decay_t<A>, at::TensorList> ||
                           std::is_same_v<std::decay_t<A>, at::ITensorListRef> ||
                           std::is_same_v<std::decay_t<A>, c10::List<std::optional<at::Tensor>>>;
template <class... A>
constexpr bool kEntryArgs =
    !(kListLike<A> || ...) && (kTensorSlots<A> + ... + 0) <= boxing::CallMapper::kInlineEntries;

// The converted form of one argument of such a signature: a tensor is its
// entry (the mapper's alias, or the caller's own tensor when it is no flagos
// tensor); anything else as convert() makes it.
template <class A>
using EntryArg =
    std::conditional_t<std::is_same_v<std::decay_t<A>, at::Tensor>, at::Tensor&,
                       decltype(convert(std::declval<const Converter&>(), std::declval<A>()))>;
template <class A>
inline EntryArg<A> entry_arg(const Converter& c, A&& a) {
  if constexpr (std::is_same_v<std::decay_t<A>, at::Tensor>) {
    // Entries are non-const tensors; a non-flagos tensor is the caller's own
    // (const only for its const parameters, which the kernel takes as const).
    return const_cast<at::Tensor&>(c.mapper.arg(a));
  } else {
    return convert(c, std::forward<A>(a));
  }
}
inline std::optional<at::Tensor> convert(const Converter& c, const std::optional<at::Tensor>& t) {
  return t ? std::optional<at::Tensor>(c.alias(*t)) : t;
}
// A converted list: a kept set's aliases (borrowed for the call) or the
// call's own vector of them.
struct ListArg {
  std::vector<at::Tensor> owned;
  const at::Tensor* data = nullptr;
  size_t size = 0;
  bool kept = false;

  operator at::TensorList() const {  // NOLINT: passed where the kernel takes a TensorList
    return kept ? at::TensorList(data, size) : at::TensorList(owned);
  }
};
inline ListArg convert(const Converter& c, at::TensorList l) {
  ListArg out;
  const at::TensorList got = c.mapper.arg_list(l, out.owned);
  if (got.data() != out.owned.data() || got.empty()) {
    out.kept = true;
    out.data = got.data();
    out.size = got.size();
  }
  return out;
}
inline std::vector<at::Tensor> convert(const Converter& c, const at::ITensorListRef& l) {
  std::vector<at::Tensor> out;
  out.reserve(l.size());
  c.mapper.reserve(l.size());
  for (const auto& t : l) out.push_back(c.alias(t));
  return out;
}
inline c10::List<std::optional<at::Tensor>> convert(const Converter& c,
                                                    const c10::List<std::optional<at::Tensor>>& l) {
  c10::List<std::optional<at::Tensor>> out;
  out.reserve(l.size());
  for (const std::optional<at::Tensor> t : l) out.push_back(t ? std::optional(c.alias(*t)) : t);
  return out;
}
inline c10::Device convert(const Converter& c, c10::Device d) { return c.mapper.arg_device(d); }
inline std::optional<c10::Device> convert(const Converter& c, const std::optional<c10::Device>& d) {
  return d ? std::optional<c10::Device>(c.mapper.arg_device(*d)) : d;
}
std::optional<at::Generator> bridge_generator(const std::optional<at::Generator>& gen,
                                              const Observer& obs,
                                              const c10::FunctionSchema& schema,
                                              c10::DeviceType type);
inline std::optional<at::Generator> convert(const Converter& c,
                                            const std::optional<at::Generator>& g) {
  return bridge_generator(g, c.obs, c.op.schema(), c.mapper.target().type());
}
template <class T>
inline std::decay_t<T> convert(const Converter&, const T& v) {
  return v;
}

// The call's flagos device after the same-device checks boxed calls make.
c10::DeviceIndex call_device(const Observer& obs, const c10::OperatorHandle& op);

// ---- results ---------------------------------------------------------------
template <class Conv, class Orig, size_t... I>
at::Tensor* original_of(const at::Tensor* r, Conv& conv, Orig& orig, std::index_sequence<I...>) {
  at::Tensor* found = nullptr;
  auto check = [&](auto& converted, auto&& original) {
    using O = decltype(original);
    if constexpr (std::is_same_v<O, at::Tensor&> || std::is_same_v<O, const at::Tensor&>) {
      if (!found && static_cast<const void*>(&converted) == static_cast<const void*>(r)) {
        found = const_cast<at::Tensor*>(&original);
      }
    }
  };
  (check(std::get<I>(conv), std::get<I>(orig)), ...);
  return found;
}

template <class Conv, class Orig, size_t... I>
void adopt_outputs(Conv& conv, Orig& orig, std::index_sequence<I...>) {
  auto adopt = [](auto& converted, auto&& original) {
    using O = decltype(original);
    if constexpr (std::is_same_v<O, at::Tensor&>) boxing::CallMapper::written(original, converted);
  };
  (adopt(std::get<I>(conv), std::get<I>(orig)), ...);
}

// The target kernel on the converted arguments. Where the signature writes a
// tensor (out=, in-place):
// - one C++ object passed for two tensor parameters is one object for the
//   kernel too: addr_ calls addr_out(self, self, ...), and kernels tell
//   in-place from out= by the references' addresses;
// - a kernel that fails after resizing (or growing) its output leaves the
//   caller's tensor as it left the alias, as CPU and CUDA leave theirs.
template <size_t I, class Conv, class Orig, size_t... J>
decltype(auto) kernel_arg(Conv& conv, Orig& orig, std::index_sequence<J...>) {
  using O = std::tuple_element_t<I, Orig>;
  if constexpr (std::is_same_v<O, at::Tensor&> || std::is_same_v<O, const at::Tensor&>) {
    at::Tensor* same = nullptr;
    auto check = [&](auto j) {
      constexpr size_t K = decltype(j)::value;
      using P = std::tuple_element_t<K, Orig>;
      if constexpr (K < I &&
                    (std::is_same_v<P, at::Tensor&> || std::is_same_v<P, const at::Tensor&>)) {
        if (same == nullptr && &std::get<K>(orig) == &std::get<I>(orig)) same = &std::get<K>(conv);
      }
    };
    (check(std::integral_constant<size_t, J>{}), ...);
    return static_cast<at::Tensor&>(same != nullptr ? *same : std::get<I>(conv));
  } else {
    return (std::get<I>(conv));
  }
}

template <class... A>
constexpr bool kWritesTensor = (std::is_same_v<A, at::Tensor&> || ...);

template <class... A>
constexpr bool kHasList = (std::is_same_v<std::decay_t<A>, at::TensorList> || ...);

// Signatures without a list argument carry no list versions.
struct NoListVersions {
  void apply() {}
};

// The written list arguments' aliases, watched for the version bumps their
// kernel makes (boxing/list_versions.h).
template <class Conv, class Orig, size_t... I>
void watch_written_lists(boxing::WrittenListVersions& versions, const c10::FunctionSchema& schema,
                         Conv& conv, Orig& orig, std::index_sequence<I...>) {
  const auto& args = schema.arguments();
  auto one = [&](auto i) {
    constexpr size_t K = decltype(i)::value;
    if constexpr (std::is_same_v<std::decay_t<std::tuple_element_t<K, Orig>>, at::TensorList>) {
      const auto* info = K < args.size() ? args[K].alias_info() : nullptr;
      if (info != nullptr && info->isWrite()) {
        const ListArg& l = std::get<K>(conv);
        versions.watch(std::get<K>(orig), static_cast<at::TensorList>(l), l.kept);
      }
    }
  };
  (one(std::integral_constant<size_t, I>{}), ...);
}

template <class R, class F, class Conv, class Orig, size_t... I>
R run_kernel(F redispatch, c10::DispatchKeySet keys, Conv& conv, Orig& orig,
             std::index_sequence<I...> seq) {
  if constexpr (!kWritesTensor<std::tuple_element_t<I, Orig>...>) {
    return redispatch(keys, std::get<I>(conv)...);
  } else {
    try {
      return redispatch(keys, kernel_arg<I>(conv, orig, seq)...);
    } catch (...) {
      try {
        adopt_outputs(conv, orig, seq);
      } catch (...) {
        // The kernel's own error is the one to report.
      }
      throw;
    }
  }
}

template <class R>
struct Result {
  // Scalars, shapes, ...: nothing to convert.
  template <class Conv, class Orig, size_t N>
  static R convert(R&& r, Conv&, Orig&, const boxing::CallMapper&) {
    return std::forward<R>(r);
  }
};

template <>
struct Result<at::Tensor> {
  template <class Conv, class Orig, size_t N>
  static at::Tensor convert(at::Tensor&& r, Conv&, Orig&, const boxing::CallMapper& mapper) {
    return mapper.result(r);
  }
};

template <class Ref>
struct RefResult {
  template <class Conv, class Orig, size_t N>
  static Ref convert(Ref r, Conv& conv, Orig& orig, const boxing::CallMapper&) {
    at::Tensor* o = original_of(&r, conv, orig, std::make_index_sequence<N>{});
    TORCH_CHECK(o != nullptr,
                "flagos router: an in-place/out= kernel returned a tensor that is "
                "not one of its arguments");
    return *o;
  }
};
template <>
struct Result<at::Tensor&> : RefResult<at::Tensor&> {};
template <>
struct Result<const at::Tensor&> : RefResult<const at::Tensor&> {};

template <>
struct Result<std::vector<at::Tensor>> {
  template <class Conv, class Orig, size_t N>
  static std::vector<at::Tensor> convert(std::vector<at::Tensor>&& r, Conv&, Orig&,
                                         const boxing::CallMapper& mapper) {
    for (auto& t : r) t = mapper.result(t);
    return std::move(r);
  }
};

template <class... Ts>
struct Result<std::tuple<Ts...>> {
  template <class Conv, class Orig, size_t N>
  static std::tuple<Ts...> convert(std::tuple<Ts...>&& r, Conv& conv, Orig& orig,
                                   const boxing::CallMapper& mapper) {
    return std::apply(
        [&](auto&&... e) {
          return std::tuple<Ts...>(Result<Ts>::template convert<Conv, Orig, N>(
              std::forward<Ts>(e), conv, orig, mapper)...);
        },
        std::move(r));
  }
};

// ---- the kernel ------------------------------------------------------------
// The body is instantiated once per C++ signature, not per overload: many
// overloads share one (unary ops, their out= forms, ...), and the overload's
// own part is only its redispatch function, an out-of-line libtorch function
// either way. This keeps the generated files' compile time down.
template <class Sig>
struct SignatureRoute;

template <class R, class... Args>
struct SignatureRoute<R(Args...)> {
  using Redispatch = R (*)(c10::DispatchKeySet, Args...);

  static R call(RouteState* st, Redispatch redispatch, c10::DispatchKeySet ks, Args... args) {
    route_phases::Timer timer;
    if (C10_UNLIKELY(st->overlap_checks() != foreach_overlap::Checks::kNone)) {
      foreach_overlap::Checker checker(st->overlap_checks());
      (checker.see(args), ...);
    }
    Observer obs;
    ((observe(obs, args), ++obs.position), ...);
    // Before any backend: a written CPU tensor is an error whoever serves the call.
    if (C10_UNLIKELY(obs.cpu_written && obs.device)) {
      boxing::throw_flagos_and_cpu(st->handle(), *obs.device);
    }
    RouteTarget& target = st->pick(obs.first_dtype);
    timer.mark(route_phases::kPick);
    if (target.box_key == c10::DispatchKey::Undefined) {
      return c10::impl::BoxedKernelWrapper<R(Args...)>::call(target.boxed, st->handle(), ks,
                                                             std::forward<Args>(args)...);
    }
    const c10::DeviceType type = target.box_type;
    if (C10_UNLIKELY(type == c10::DeviceType::CPU && records_host_work())) {
      // A host kernel inside a graph capture: recorded, boxed (rare and slow anyway).
      static const c10::BoxedKernel deferred =
          c10::BoxedKernel::makeFromFunction<&boxing::deferred_host_kernel>();
      return c10::impl::BoxedKernelWrapper<R(Args...)>::call(
          deferred, st->handle(), target.box_keys, std::forward<Args>(args)...);
    }
    const c10::DeviceIndex device = call_device(obs, st->handle());
    boxing::CallScope scope(device, obs.device.has_value(), type);
    profiler::RouteScope route(*target.name, st->handle(), device);  // after the scope
    boxing::CallMapper mapper(device, boxing::target_device(type, device), target.box_key,
                              boxing::CallMapper::Aliases::kPooled);
    timer.mark(route_phases::kScope);
    const Converter conv{mapper, obs, st->handle()};
    auto converted = [&] {
      if constexpr (kEntryArgs<Args...>) {
        return std::tuple<EntryArg<Args>...>(entry_arg(conv, args)...);
      } else {
        return std::make_tuple(convert(conv, args)...);
      }
    }();
    auto originals = std::forward_as_tuple(args...);
    const c10::DispatchKeySet keys = target.box_keys;
    constexpr size_t N = sizeof...(Args);
    std::conditional_t<kHasList<Args...>, boxing::WrittenListVersions, NoListVersions> versions;
    if constexpr (kHasList<Args...>) {
      watch_written_lists(versions, st->handle().schema(), converted, originals,
                          std::make_index_sequence<N>{});
    }
    timer.mark(route_phases::kArgs);
    if constexpr (std::is_void_v<R>) {
      run_kernel<R>(redispatch, keys, converted, originals, std::make_index_sequence<N>{});
      timer.mark(route_phases::kKernel);
      adopt_outputs(converted, originals, std::make_index_sequence<N>{});
      versions.apply();
      timer.mark(route_phases::kResults);
    } else {
      R r = run_kernel<R>(redispatch, keys, converted, originals, std::make_index_sequence<N>{});
      timer.mark(route_phases::kKernel);
      adopt_outputs(converted, originals, std::make_index_sequence<N>{});
      versions.apply();
      if constexpr (route_phases::kEnabled) {
        R out = Result<R>::template convert<decltype(converted), decltype(originals), N>(
            std::forward<R>(r), converted, originals, mapper);
        timer.mark(route_phases::kResults);
        return out;
      } else {
        return Result<R>::template convert<decltype(converted), decltype(originals), N>(
            std::forward<R>(r), converted, originals, mapper);
      }
    }
  }
};

template <class Op, class Sig = typename Op::schema>
struct UnboxedRoute;

template <class Op, class R, class... Args>
struct UnboxedRoute<Op, R(Args...)> {
  static inline std::atomic<RouteState*> state{nullptr};

  static R call(c10::DispatchKeySet ks, Args... args) {
    return SignatureRoute<R(Args...)>::call(state.load(std::memory_order_acquire), &Op::redispatch,
                                            ks, std::forward<Args>(args)...);
  }

  static UnboxedKernel make(RouteState* s);
};

// The kernel functor the dispatcher holds: unboxed calls run
// UnboxedRoute::call; boxed ones (torch.ops from Python, FX graphs) take the
// router's boxed path through the specialization below.
template <class Op, class Sig = typename Op::schema>
struct Functor;

template <class Op, class R, class... Args>
struct Functor<Op, R(Args...)> final : c10::OperatorKernel {
  R operator()(c10::DispatchKeySet ks, Args... args) {
    return UnboxedRoute<Op>::call(ks, std::forward<Args>(args)...);
  }
};

template <class Op, class R, class... Args>
UnboxedKernel UnboxedRoute<Op, R(Args...)>::make(RouteState* s) {
  state.store(s, std::memory_order_release);
  return UnboxedKernel{c10::KernelFunction::makeFromUnboxedFunctor<false, Functor<Op>>(
                           std::make_unique<Functor<Op>>()),
                       c10::impl::CppSignature::make<R(c10::DispatchKeySet, Args...)>()};
}

// Generated files call this once per overload at load time.
template <class Op>
struct Register {
  explicit Register(const char* full_name) {
    register_unboxed_factory(full_name, &UnboxedRoute<Op>::make);
  }
};

}  // namespace torch_fl::unboxed

// c10 would build a boxed wrapper per overload (IValue conversions for every
// argument and return type: most of the compile time of the generated files).
// The router's boxed path already serves any routed overload from the stack,
// so the routed kernels' boxed entry is that one function.
namespace c10::impl {
template <class Op, bool AllowDeprecatedTypes>
struct make_boxed_from_unboxed_functor<torch_fl::unboxed::Functor<Op>, AllowDeprecatedTypes> final {
  static void call(OperatorKernel*, const OperatorHandle& op, DispatchKeySet ks,
                   torch::jit::Stack* stack) {
    torch_fl::route_boxed(
        *torch_fl::unboxed::UnboxedRoute<Op>::state.load(std::memory_order_acquire), op, ks, stack);
  }
};
}  // namespace c10::impl
