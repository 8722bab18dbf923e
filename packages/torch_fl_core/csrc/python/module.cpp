// torch_fl._C: the control plane (ints, strings, stats). Tensors pass through
// here only as torch's own Python objects (THPVariable), in the one allocation
// entry point of compiled code: nanobind does not share torch's pybind11 type
// registry, so other tensor-level entry points are torch.ops / dispatcher
// kernels.
#include <ATen/Context.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <torch/csrc/Dtype.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/device_lazy_init.h>
#include <torch_fl/kit/conv_layout.h>

#include <memory>
#include <unordered_map>

#include "router/fallback_counts.h"
#include "glue/caching_allocator.h"
#include "glue/generator.h"
#include "glue/accelerator_graph.h"
#include "glue/device_graph.h"
#include "glue/graph_capture.h"
#include "glue/host_allocator.h"
#include "glue/runtime_access.h"
#include "glue/stream_pool.h"
#include "aten/composite_backend.h"
#include "distributed/collective_library.h"
#include "distributed/python_backend_object.h"
#include "aten/cpu_fallback.h"
#include "aten/factories.h"
#include "aten/layout_fallback.h"
#include "aten/sparse_stubs.h"
#include "aten/vendor_copy.h"
#include "profiler/route_scope.h"
#include "router/backend.h"
#include "boxing/call_arguments.h"
#include "boxing/alias_pool.h"
#include "boxing/list_aliases.h"
#include "boxing/host_results.h"
#include "router/box_backend.h"
#include "router/capture_rules.h"
#include "router/library_backend.h"
#include "router/producer_order.h"
#include "router/python_backend.h"
#include "router/route_phases.h"
#include "router/router.h"
#include "router/unboxed_registry.h"

namespace nb = nanobind;

namespace torch_fl {
namespace {

using StatMap = std::map<std::string, int64_t>;

void add_stat(StatMap& out, const std::string& prefix, const c10::CachingAllocator::Stat& s) {
  out[prefix + ".current"] = s.current;
  out[prefix + ".peak"] = s.peak;
  out[prefix + ".allocated"] = s.allocated;
  out[prefix + ".freed"] = s.freed;
}

void add_stat_array(StatMap& out, const std::string& name,
                    const c10::CachingAllocator::StatArray& a) {
  static const char* pools[] = {"all", "small_pool", "large_pool"};
  for (size_t i = 0; i < 3; ++i) add_stat(out, name + "." + pools[i], a[i]);
}

StatMap memory_stats(int device) {
  check_device_index(static_cast<c10::DeviceIndex>(device));
  const auto s = caching_allocator()->getDeviceStats(static_cast<c10::DeviceIndex>(device));
  StatMap out;
  add_stat_array(out, "allocation", s.allocation);
  add_stat_array(out, "segment", s.segment);
  add_stat_array(out, "active", s.active);
  add_stat_array(out, "inactive_split", s.inactive_split);
  add_stat_array(out, "allocated_bytes", s.allocated_bytes);
  add_stat_array(out, "reserved_bytes", s.reserved_bytes);
  add_stat_array(out, "active_bytes", s.active_bytes);
  add_stat_array(out, "inactive_split_bytes", s.inactive_split_bytes);
  add_stat_array(out, "requested_bytes", s.requested_bytes);
  out["num_alloc_retries"] = s.num_alloc_retries;
  out["num_ooms"] = s.num_ooms;
  out["num_device_alloc"] = s.num_device_alloc;
  out["num_device_free"] = s.num_device_free;
  out["num_sync_all_streams"] = s.num_sync_all_streams;
  out["max_split_size"] = s.max_split_size;
  add_stat(out, "oversize_allocations", s.oversize_allocations);
  add_stat(out, "oversize_segments", s.oversize_segments);
  return out;
}

// A tuple (or list) of Python ints, as Inductor's generated code passes sizes.
c10::SmallVector<int64_t, 6> int_sequence(nb::handle seq, const char* what) {
  PyObject* obj = seq.ptr();
  const bool tuple = PyTuple_Check(obj);
  TORCH_CHECK_TYPE(tuple || PyList_Check(obj), "flagos empty_strided: ", what,
                   " must be a tuple or list of ints, got ", Py_TYPE(obj)->tp_name);
  const Py_ssize_t n = tuple ? PyTuple_GET_SIZE(obj) : PyList_GET_SIZE(obj);
  c10::SmallVector<int64_t, 6> out(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = tuple ? PyTuple_GET_ITEM(obj, i) : PyList_GET_ITEM(obj, i);
    const long long v = PyLong_AsLongLong(item);
    if (v == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      TORCH_CHECK_TYPE(false, "flagos empty_strided: ", what, "[", i, "] must be an int, got ",
                       Py_TYPE(item)->tp_name);
    }
    out[static_cast<size_t>(i)] = v;
  }
  return out;
}

// empty_strided(size, stride, dtype, device) on flagos device `device` (-1:
// the current one): Inductor's buffer allocations on flagos (torch.empty_strided
// through the Python arg parser and the dispatcher costs about 2 us more per
// buffer).
nb::object empty_strided_python(nb::handle size, nb::handle stride, nb::handle dtype, int device) {
  TORCH_CHECK_TYPE(THPDtype_Check(dtype.ptr()),
                   "flagos empty_strided: dtype must be a torch.dtype, got ",
                   Py_TYPE(dtype.ptr())->tp_name);
  const auto sizes = int_sequence(size, "size");
  const auto strides = int_sequence(stride, "stride");
  TORCH_CHECK(sizes.size() == strides.size(), "flagos empty_strided: ", sizes.size(), " sizes but ",
              strides.size(), " strides");
  for (const int64_t s : sizes) {
    TORCH_CHECK(s >= 0, "flagos empty_strided: negative dimension ", s);
  }
  if (device >= 0) check_device_index(static_cast<c10::DeviceIndex>(device));
  CurrentDeviceScope scope(static_cast<c10::DeviceIndex>(device));
  at::Tensor t = empty_strided_on_current_device(
      sizes, strides, reinterpret_cast<THPDtype*>(dtype.ptr())->scalar_type);
  return nb::steal(THPVariable_Wrap(std::move(t)));
}

StatMap host_memory_stats() {
  const at::HostStats s = host_stats();
  StatMap out;
  add_stat(out, "active_requests", s.active_requests);
  add_stat(out, "active_bytes", s.active_bytes);
  add_stat(out, "allocations", s.allocations);
  add_stat(out, "allocated_bytes", s.allocated_bytes);
  out["num_host_alloc"] = s.num_host_alloc;
  out["num_host_free"] = s.num_host_free;
  return out;
}

// Graphs created from Python, by handle (the GIL serialises access). Leaked
// at exit on purpose: a graph's reset calls the runtime, which may be gone.
std::unordered_map<int64_t, std::unique_ptr<DeviceGraph>>& graphs() {
  static auto* map = new std::unordered_map<int64_t, std::unique_ptr<DeviceGraph>>();
  return *map;
}
int64_t g_next_graph = 0;

DeviceGraph& graph_of(int64_t id) {
  auto it = graphs().find(id);
  TORCH_CHECK(it != graphs().end(), "flagos graph: unknown graph handle ", id);
  return *it->second;
}

}  // namespace
}  // namespace torch_fl

NB_MODULE(_C, m) {
  using namespace torch_fl;
  m.doc() = "torch-fl core control plane";
  // c10's errors as torch raises them (TypeError, ValueError, ...), with
  // their message and without the C++ backtrace.
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const c10::TypeError& e) {
      PyErr_SetString(PyExc_TypeError, e.what_without_backtrace());
    } catch (const c10::ValueError& e) {
      PyErr_SetString(PyExc_ValueError, e.what_without_backtrace());
    } catch (const c10::IndexError& e) {
      PyErr_SetString(PyExc_IndexError, e.what_without_backtrace());
    } catch (const c10::NotImplementedError& e) {
      PyErr_SetString(PyExc_NotImplementedError, e.what_without_backtrace());
    } catch (const c10::OutOfMemoryError& e) {
      // torch.OutOfMemoryError (libtorch_python does not export its C handle).
      nb::object oom = nb::module_::import_("torch").attr("OutOfMemoryError");
      PyErr_SetString(oom.ptr(), e.what_without_backtrace());
    } catch (const c10::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
    }
  });
  // A forked child cannot use the parent's runtime (its stream threads are
  // gone): mark flagos as needing re-initialisation there, as CUDA does.
  torch::utils::register_fork_handler_for_device_init(at::kPrivateUse1);
  // After this library's static registrations: which quantized operators need the CPU fallback
  // is read from the dispatcher.
  register_quantized_cpu_kernels();
  register_sparse_stubs();

  m.attr("CAP_HOST_ADDRESSABLE_MEMORY") = static_cast<uint64_t>(TFL_CAP_HOST_ADDRESSABLE_MEMORY);
  m.attr("CAP_PEER_COPY") = static_cast<uint64_t>(TFL_CAP_PEER_COPY);
  m.attr("CAP_EVENT_TIMING") = static_cast<uint64_t>(TFL_CAP_EVENT_TIMING);
  m.attr("CAP_UNORDERED_PRODUCERS") = static_cast<uint64_t>(TFL_CAP_UNORDERED_PRODUCERS);
  m.attr("CAP_PINNED_HOST_MEMORY") = static_cast<uint64_t>(TFL_CAP_PINNED_HOST_MEMORY);

  m.def(
      "activate_runtime",
      [](const std::string& path) {
        activate_runtime_library(path);
        // Host kernels can run on this runtime's memory: offer box:cpu.
        if (has_capability(TFL_CAP_HOST_ADDRESSABLE_MEMORY) && !find_backend("box:cpu")) {
          register_backend(make_box_backend(c10::DispatchKey::CPU, c10::DeviceType::CPU));
          boxing::install_host_result_allocator();
        }
        if (const auto type = mirror_device_type()) {
          // The delegate runtime: the mirrored backend's kernels run on flagos
          // memory as it is (box:cuda); activation installed its allocators.
          const c10::Device device(*type, 0);
          const std::string name = "box:" + c10::DeviceTypeName(*type, true);
          if (!find_backend(name)) {
            register_backend(make_box_backend(
                c10::computeDispatchKey(std::nullopt, std::nullopt, device), *type));
          }
        }
      },
      nb::arg("path"), nb::call_guard<nb::gil_scoped_release>());
  m.def("runtime_active", &runtime_active);
  // The device module's lazy init marks PrivateUse1 initialised in ATen's context, as
  // torch.cuda's does for CUDA: Context::isPinnedPtr (Tensor.is_pinned()) answers false for an
  // accelerator it has not seen initialised. Without it, where another allocator pins factory
  // tensors (CUDA's, beside the cuda vendor), nothing would mark it.
  m.def(
      "lazy_init_context", [] { at::globalContext().lazyInitDevice(c10::DeviceType::PrivateUse1); },
      nb::call_guard<nb::gil_scoped_release>());
  m.def("runtime_name", &runtime_name);
  m.def("_set_capturing_device",
        [](int device) { set_capturing_device(static_cast<c10::DeviceIndex>(device)); });
  m.def("_capturing_device", [] { return static_cast<int>(capturing_device()); });
  // Device graphs through the runtime's graph seat: a graph is a handle (an int) here.
  m.def("graphs_recorded", [] { return runtime_records_graphs(); });
  // Whether the vendor serves same-device casts and strided copies (aten/vendor_copy.h).
  m.def("vendor_copies", [] { return has_vendor_copy(); });
  m.def("_graph_new", [] {
    auto graph = std::make_unique<DeviceGraph>();
    const int64_t id = ++g_next_graph;
    graphs().emplace(id, std::move(graph));
    return id;
  });
  m.def("_graph_capture_begin",
        [](int64_t id, uint64_t pool, int mode) { graph_of(id).capture_begin(pool, mode); });
  m.def("_graph_capture_end", [](int64_t id) { graph_of(id).capture_end(); });
  m.def("_graph_instantiate", [](int64_t id) { graph_of(id).instantiate(); });
  m.def("_graph_replay", [](int64_t id) { graph_of(id).replay(); });
  m.def("_graph_reset", [](int64_t id) { graph_of(id).reset(); });
  m.def("_graph_pool", [](int64_t id) { return graph_of(id).pool(); });
  m.def("_graph_delete", [](int64_t id) {
    auto node = graphs().extract(id);  // reset by its destructor
  });
  m.def("_graph_new_pool", [] { return new_graph_pool_id(); });
  m.def("_capture_sink_active", [] { return capture_sink() != nullptr; });
  m.def("register_accelerator_graph", &register_accelerator_graph);
  m.def("_vendor_backend",
        [](nb::handle store, int rank, int size, double timeout_s, const std::string& library,
           const std::string& vendor) -> nb::object {
          PyObject* backend = torch_fl::distributed::make_vendor_backend_object(
              store.ptr(), rank, size, timeout_s, library, vendor);
          if (backend == nullptr) throw nb::python_error();
          return nb::steal(backend);
        });
  m.def("_vendor_backend_library_calls", [](nb::handle backend) {
    return torch_fl::distributed::vendor_backend_library_calls(backend.ptr());
  });
  m.def("collective_fields", [](const std::string& library) {
    std::vector<std::tuple<std::string, int, bool>> fields;
    for (const auto& f : torch_fl::distributed::collective_fields(library)) {
      fields.emplace_back(f.name, static_cast<int>(f.minor), f.present);
    }
    return fields;
  });
  m.def("runtime_abi_version", [] { return static_cast<int>(TFL_RUNTIME_ABI_VERSION); });
  m.def("runtime_abi_minor", [] { return static_cast<int>(TFL_RUNTIME_ABI_MINOR); });
  m.def("runtime_v1_0_size", [] { return static_cast<int>(TFL_RUNTIME_V1_0_SIZE); });
  m.def("runtime_struct_size", [] { return static_cast<int>(runtime_struct_size()); });
  // [(name, minor, offset, size, present)] of the table's functions, in order.
  m.def("runtime_fields", [] {
    std::vector<std::tuple<std::string, int, int, int, bool>> out;
    for (const RuntimeField& f : runtime_fields()) {
      out.emplace_back(f.name, static_cast<int>(f.minor), static_cast<int>(f.offset),
                       static_cast<int>(f.size), f.present);
    }
    return out;
  });
  m.def("runtime_shares_memory", [] { return runtime_shares_memory(); });
  m.def("runtime_capabilities", [] { return runtime_active() ? runtime().capabilities : 0; });
  m.def("layout_backend", &layout_backend);

  m.def("device_count", [] { return static_cast<int>(device_count_noexcept()); });
  m.def("current_device", [] { return static_cast<int>(current_device()); });
  m.def("set_device", [](int device) {
    check_device_index(static_cast<c10::DeviceIndex>(device));
    TFL_CALL(device, set_device, device);
  });
  m.def("exchange_device", [](int device) {
    const int prev = current_device();
    if (device >= 0 && device != prev) {
      check_device_index(static_cast<c10::DeviceIndex>(device));
      TFL_CALL(device, set_device, device);
    }
    return prev;
  });
  m.def(
      "synchronize",
      [](int device) {
        if (device < 0) device = current_device();
        check_device_index(static_cast<c10::DeviceIndex>(device));
        CurrentDeviceScope scope(static_cast<c10::DeviceIndex>(device));
        TFL_CALL(device, device_synchronize);
      },
      nb::arg("device") = -1, nb::call_guard<nb::gil_scoped_release>());
  // Compiled C++ kernels (torch_fl.compile.runtime.wait_stream) call this before
  // they read flagos memory: wait for the current stream's earlier work. The
  // query keeps the common case (an idle stream) free of a GIL release.
  m.def(
      "wait_current_stream",
      [](int device) {
        const c10::DeviceIndex d =
            device < 0 ? current_device() : static_cast<c10::DeviceIndex>(device);
        // Compiled host code runs now, not at a replay: it cannot be captured.
        check_not_capturing("compiled host code (Inductor's C++ kernels)");
        CurrentDeviceScope scope(d);
        tfl_stream s = native_stream(current_stream(d));
        const tfl_status st = runtime().stream_query(s);
        if (st == TFL_OK) return;
        if (st != TFL_ERROR_NOT_READY) throw_runtime_error(st, "stream_query", d);
        nb::gil_scoped_release release;
        TFL_CALL(d, stream_synchronize, s);
      },
      nb::arg("device") = -1);
  m.def("kineto_session_available", &profiler::kineto_session_available);
  m.def("kineto_session_enabled", &profiler::kineto_session_enabled);
  m.def("set_kineto_session_enabled", &profiler::set_kineto_session_enabled, nb::arg("enabled"));
  m.def("device_name", [](int device) {
    check_device_index(static_cast<c10::DeviceIndex>(device));
    char buf[256] = {0};
    TFL_CALL(device, device_name, device, buf, sizeof(buf));
    return std::string(buf);
  });
  m.def("mem_get_info", [](int device) {
    check_device_index(static_cast<c10::DeviceIndex>(device));
    return caching_allocator()->getMemoryInfo(static_cast<c10::DeviceIndex>(device));
  });

  m.def("memory_stats", &memory_stats, nb::arg("device"));
  m.def("reset_peak_memory_stats", [](int device) {
    check_device_index(static_cast<c10::DeviceIndex>(device));
    caching_allocator()->resetPeakStats(static_cast<c10::DeviceIndex>(device));
  });
  m.def("reset_accumulated_memory_stats", [](int device) {
    check_device_index(static_cast<c10::DeviceIndex>(device));
    caching_allocator()->resetAccumulatedStats(static_cast<c10::DeviceIndex>(device));
  });
  m.def(
      "empty_cache", [] { caching_allocator()->emptyCache(); },
      nb::call_guard<nb::gil_scoped_release>());
  m.def("host_memory_stats", &host_memory_stats);
  m.def("empty_strided", &empty_strided_python, nb::arg("size"), nb::arg("stride"),
        nb::arg("dtype"), nb::arg("device") = -1);
  m.def("host_empty_cache", [] { empty_host_cache(); }, nb::call_guard<nb::gil_scoped_release>());

  m.def("default_generator", [](int device) {
    const at::Generator& gen = default_generator(static_cast<c10::DeviceIndex>(device));
    return nb::steal(THPGenerator_initDefaultGenerator(gen));
  });

  // Every call served by ATen's CPU fallback, routed there or not.
  m.def("fallback_counts", [] {
    std::map<std::string, int64_t> out;
    for (const auto& [op, per_backend] : dispatch_counts()) {
      auto it = per_backend.find("cpu");
      if (it != per_backend.end()) out[op] = it->second;
    }
    return out;
  });
  m.def("reset_fallback_counts", &reset_dispatch_counts);

  // ---- router ----
  m.def("router_backends", &backend_names);
  m.def("backend_has_kernel", [](const std::string& backend, const std::string& op) {
    auto b = find_backend(backend);
    TORCH_CHECK(b, "flagos: unknown backend '", backend, "'");
    const auto dot = op.find('.', op.find("::") == std::string::npos ? 0 : op.find("::") + 2);
    c10::OperatorName name(op.substr(0, dot), dot == std::string::npos ? "" : op.substr(dot + 1));
    auto handle = c10::Dispatcher::singleton().findOp(name);
    TORCH_CHECK(handle.has_value(), "flagos: unknown operator ", op);
    return b->has_kernel(*handle);
  });
  m.def("core_native_ops", &core_native_ops);
  m.def("set_cpu_argument_rules", &boxing::set_cpu_argument_rules);
  m.def("set_device_count_setting", &set_device_count_setting);
  m.def("composite_kernels", &composite_kernels);
  // The format a flagos convolution answers in (torch_fl.compile.conv_layout
  // predicts it for fake tensors): the torch.memory_format's name.
  m.def("conv_memory_format", [](nb::handle input, nb::handle weight) -> const char* {
    TORCH_CHECK(THPVariable_Check(input.ptr()) && THPVariable_Check(weight.ptr()),
                "flagos: conv_memory_format takes two tensors");
    switch (kit::conv_memory_format(THPVariable_Unpack(input.ptr()),
                                    THPVariable_Unpack(weight.ptr()))) {
      case at::MemoryFormat::ChannelsLast:
        return "channels_last";
      case at::MemoryFormat::ChannelsLast3d:
        return "channels_last_3d";
      default:
        return "contiguous_format";
    }
  });
  m.def(
      "register_python_backend",
      [](const std::string& name, nb::handle trampoline, nb::handle has_kernel,
         const std::string& view_device, nb::handle direct) {
        std::optional<c10::DeviceType> view_type;
        if (!view_device.empty()) view_type = c10::Device(view_device).type();
        register_python_backend(name, trampoline.ptr(),
                                has_kernel.is_none() ? nullptr : has_kernel.ptr(),
                                direct.is_none() ? nullptr : direct.ptr(), view_type);
      },
      nb::arg("name"), nb::arg("trampoline"), nb::arg("has_kernel") = nb::none(),
      nb::arg("view_device") = "", nb::arg("direct") = nb::none());
  m.def(
      "register_library_backend",
      [](const std::string& name, const std::string& ns) {
        register_backend(make_library_backend(name, ns));
      },
      nb::arg("name"), nb::arg("namespace"));
  // Ordering between producers (runtimes declaring CAP_UNORDERED_PRODUCERS).
  m.def("set_producer_barrier", &set_producer_barrier, nb::arg("enabled"));
  m.def("producer_barrier_enabled", &producer_barrier_enabled);
  m.def("producer_barrier_count", [] { return static_cast<uint64_t>(producer_barrier_count()); });
  m.def("router_install", &router_install, nb::arg("routes"), nb::arg("unboxed") = true,
        nb::call_guard<nb::gil_scoped_release>());
  // Which backend a device-graph capture uses for ops routed to a Python backend it cannot record.
  m.def("router_capture_alternates", &set_capture_alternates, nb::arg("alternates"));
  m.def("unboxed_route_count", &unboxed_factory_count);
  m.def("router_routes", &router_routes);
  m.def("dispatch_counts", &dispatch_counts);
  m.def("alias_pool_stats", [] {
    const boxing::AliasPoolStats s = boxing::alias_pool_stats();
    nb::dict d;
    d["hits"] = s.hits;
    d["rebinds"] = s.rebinds;
    d["builds"] = s.builds;
    return d;
  });
  m.def("list_alias_stats", [] {
    const boxing::ListAliases::Stats s = boxing::ListAliases::stats();
    nb::dict d;
    d["served"] = s.served;
    d["built"] = s.built;
    d["missed"] = s.missed;
    return d;
  });
  m.def("reset_dispatch_counts", &reset_dispatch_counts);
  // A profiling build's per-phase counters of this thread's routed calls
  // (router/route_phases.h), taken and reset; enabled: whether the build has them.
  m.def("route_phases", [] {
    const route_phases::Counters c = route_phases::take();
    nb::dict d;
    d["enabled"] = route_phases::kEnabled;
    d["calls"] = c.calls;
    static constexpr const char* kNames[] = {"pick", "scope", "args", "kernel", "results", "other"};
    for (int i = 0; i < route_phases::kCount; ++i) d[kNames[i]] = c.ticks[i];
    return d;
  });
  m.def("route_phase_ticks", &route_phases::ticks_now);
  m.def(
      "set_log",
      [](bool dispatch, bool fallback) {
        set_dispatch_log(dispatch);
        set_fallback_log(fallback);
      },
      nb::arg("dispatch"), nb::arg("fallback"));
}
