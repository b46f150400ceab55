// rustytorch._C.cuda: devices, streams, events, synchronization, the caching allocator's statistics
// and CUDA graphs. Every function works without a GPU: is_available() is then False and the others raise
// DeviceError saying why.
#include "bindings.h"

namespace rtx::python {

void bind_cuda_graphs(py::module_& m);

void bind_cuda(py::module_& parent) {
  py::module_ m = parent.def_submodule("_cuda", "The CUDA runtime");
  m.def("is_available", &rtx::cuda::is_available);
  m.def("device_count", &rtx::cuda::device_count);
  m.def("unavailable_reason", &rtx::cuda::unavailable_reason);
  m.def("current_device", &rtx::cuda::current_device);
  m.def("set_device", &rtx::cuda::set_device, py::arg("device"));
  m.def("synchronize", &rtx::cuda::synchronize, py::arg("device") = -1);
  m.def("empty_cache", &rtx::cuda::empty_cache);
  m.def("memory_summary", &rtx::cuda::memory_summary, py::arg("device") = -1);
  m.def("reset_peak_memory_stats", &rtx::cuda::reset_peak_memory_stats, py::arg("device") = -1);
  m.def(
      "memory_stats",
      [](int device) {
        const rtx::cuda::MemoryStats s = rtx::cuda::memory_stats(device);
        py::dict d;
        d["allocated_bytes.all.current"] = s.allocated_bytes;
        d["allocated_bytes.all.peak"] = s.peak_allocated_bytes;
        d["reserved_bytes.all.current"] = s.reserved_bytes;
        d["reserved_bytes.all.peak"] = s.peak_reserved_bytes;
        d["active.all.current"] = s.active_blocks;
        d["active.all.peak"] = s.peak_active_blocks;
        d["num_alloc_retries"] = s.num_oom_retries;
        d["num_ooms"] = s.num_ooms;
        d["num_allocs"] = s.num_allocs;
        d["num_device_alloc"] = s.num_raw_allocs;
        d["num_device_free"] = s.num_raw_frees;
        d["fragmentation"] = s.fragmentation();
        // Of the totals above, what CUDA graphs' private pools hold (rustytorch's keys).
        d["private_pool_allocated_bytes.current"] = s.private_pool_allocated_bytes;
        d["private_pool_reserved_bytes.current"] = s.private_pool_reserved_bytes;
        return d;
      },
      py::arg("device") = -1);
  m.def(
      "get_device_properties",
      [](int device) {
        const rtx::cuda::DeviceProperties p = rtx::cuda::get_device_properties(device);
        py::dict d;
        d["name"] = p.name;
        d["major"] = p.major;
        d["minor"] = p.minor;
        d["multi_processor_count"] = p.multiprocessor_count;
        d["total_memory"] = p.total_memory;
        d["L2_cache_size"] = p.l2_cache_size;
        return d;
      },
      py::arg("device") = -1);

  py::class_<rtx::cuda::Stream>(m, "Stream")
      .def(py::init([](int device, int priority) { return rtx::cuda::Stream::create(device, priority < 0); }),
           py::arg("device") = -1, py::arg("priority") = 0)
      .def_static("default_stream", &rtx::cuda::Stream::default_stream, py::arg("device") = -1)
      .def_property_readonly("device_index", &rtx::cuda::Stream::device)
      .def_property_readonly("cuda_stream", [](const rtx::cuda::Stream& s) { return reinterpret_cast<uintptr_t>(s.handle()); })
      .def("query", &rtx::cuda::Stream::query)
      .def("synchronize", &rtx::cuda::Stream::synchronize)
      .def("wait_event", &rtx::cuda::Stream::wait, py::arg("event"))
      .def(
          "wait_stream",
          [](const rtx::cuda::Stream& self, const rtx::cuda::Stream& other) {
            rtx::cuda::Event event;  // the stream keeps waiting after the event is destroyed
            event.record(other);
            self.wait(event);
          },
          py::arg("stream"))
      .def("__eq__", [](const rtx::cuda::Stream& a, const rtx::cuda::Stream& b) { return a == b; })
      .def("__hash__", [](const rtx::cuda::Stream& s) { return reinterpret_cast<uintptr_t>(s.handle()); });
  m.def("current_stream", &rtx::cuda::current_stream, py::arg("device") = -1);
  m.def("set_stream", &rtx::cuda::set_current_stream, py::arg("stream"));
  m.def("record_stream", &rtx::cuda::record_stream, py::arg("tensor"), py::arg("stream"));

  py::class_<rtx::cuda::Event>(m, "Event")
      .def(py::init<bool>(), py::arg("enable_timing") = false)
      .def(
          "record",
          [](rtx::cuda::Event& e, const std::optional<rtx::cuda::Stream>& s) {
            if (s) e.record(*s);
            else e.record();
          },
          py::arg("stream") = py::none())
      .def("query", &rtx::cuda::Event::query)
      .def("synchronize", &rtx::cuda::Event::synchronize)
      .def("elapsed_time", &rtx::cuda::Event::elapsed_time, py::arg("end_event"));

  bind_cuda_graphs(m);
}

namespace {

rtx::cuda::CaptureErrorMode capture_error_mode(const std::string& name) {
  if (name == "global") return rtx::cuda::CaptureErrorMode::kGlobal;
  if (name == "thread_local") return rtx::cuda::CaptureErrorMode::kThreadLocal;
  if (name == "relaxed") return rtx::cuda::CaptureErrorMode::kRelaxed;
  throw rtx::ValueError("[graph] capture_error_mode must be 'global', 'thread_local' or 'relaxed', got '" + name + "'");
}

rtx::cuda::MempoolId pool_id(const std::optional<rtx::cuda::MempoolId>& pool) {
  return pool.value_or(rtx::cuda::MempoolId{0, 0});
}

}  // namespace

void bind_cuda_graphs(py::module_& m) {
  m.def("graph_pool_handle", &rtx::cuda::graph_pool_handle);
  m.def("kernel_launches", &rtx::cuda::kernel_launches);
  m.def("is_current_stream_capturing", &rtx::cuda::is_current_stream_capturing, py::arg("device") = -1);
  py::class_<rtx::cuda::CUDAGraph>(m, "CUDAGraph")
      .def(py::init<>())
      .def(
          "capture_begin",
          [](rtx::cuda::CUDAGraph& g, const std::optional<rtx::cuda::MempoolId>& pool, const std::string& mode) {
            g.capture_begin(pool_id(pool), capture_error_mode(mode));
          },
          py::arg("pool") = py::none(), py::arg("capture_error_mode") = "global")
      .def("capture_end", &rtx::cuda::CUDAGraph::capture_end)
      .def("abort_capture", &rtx::cuda::CUDAGraph::abort_capture)
      .def("replay", &rtx::cuda::CUDAGraph::replay, py::call_guard<py::gil_scoped_release>())
      .def("reset", &rtx::cuda::CUDAGraph::reset)
      .def("pool", &rtx::cuda::CUDAGraph::pool)
      .def_property_readonly("captured", &rtx::cuda::CUDAGraph::captured)
      .def_property_readonly("kernel_count", &rtx::cuda::CUDAGraph::kernel_count);
  py::class_<rtx::cuda::GraphCapture>(m, "_GraphCapture")
      .def(py::init([](rtx::cuda::CUDAGraph& g, const std::optional<rtx::cuda::MempoolId>& pool,
                       const std::optional<rtx::cuda::Stream>& stream, const std::string& mode) {
             return std::make_unique<rtx::cuda::GraphCapture>(g, pool_id(pool), stream ? &*stream : nullptr,
                                                              capture_error_mode(mode));
           }),
           py::arg("graph"), py::arg("pool"), py::arg("stream"), py::arg("capture_error_mode"), py::keep_alive<1, 2>())
      .def("finish", &rtx::cuda::GraphCapture::finish)
      .def("abort", &rtx::cuda::GraphCapture::abort);
}

}  // namespace rtx::python
