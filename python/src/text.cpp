// rustytorch._C._text: the byte-level BPE tokenizer (rtx::text::BpeTokenizer) as BPETokenizer. Text
// is a str (encoded as UTF-8) or bytes; token ids are a sequence of ints or a 1-D integer Tensor.
// Training, and encoding long texts, run without holding the GIL.
#include <string>
#include <vector>

#include "bindings.h"
#include "paths.h"
#include "rtx/text.h"

namespace rtx::python {
namespace {

using text::BpeTokenizer;

// Texts at least this long are encoded with the GIL released.
constexpr size_t kReleaseGilBytes = size_t{1} << 14;

// The UTF-8 bytes of a str or the bytes of a bytes object, valid as long as obj (immutable) lives.
std::string_view text_bytes(const py::handle& obj, const char* op) {
  if (PyBytes_Check(obj.ptr())) {
    char* data = nullptr;
    Py_ssize_t size = 0;
    if (PyBytes_AsStringAndSize(obj.ptr(), &data, &size) != 0) throw py::error_already_set();
    return {data, static_cast<size_t>(size)};
  }
  if (PyUnicode_Check(obj.ptr())) {
    Py_ssize_t size = 0;
    const char* data = PyUnicode_AsUTF8AndSize(obj.ptr(), &size);
    if (data == nullptr) throw py::error_already_set();
    return {data, static_cast<size_t>(size)};
  }
  throw py::type_error(std::string("[") + op + "] text must be str or bytes, not " +
                       py::str(py::type::handle_of(obj).attr("__name__")).cast<std::string>());
}

// Token ids from a 1-D integer Tensor or from any iterable of ints, each checked against the vocabulary.
std::vector<int32_t> token_ids(const BpeTokenizer& tokenizer, const py::handle& ids) {
  constexpr const char* kOp = "BpeTokenizer.decode";
  std::vector<int32_t> out;
  const auto add = [&](int64_t id) {
    tokenizer.check_id(id, kOp);
    out.push_back(static_cast<int32_t>(id));
  };
  if (py::isinstance<Tensor>(ids)) {
    const Tensor t = ids.cast<Tensor>();
    if (t.dim() != 1)
      throw ShapeError(std::string("[") + kOp + "] ids must be a 1-D tensor, not " + std::to_string(t.dim()) + "-D");
    if (!is_integral(t.dtype()))
      throw DTypeError(std::string("[") + kOp + "] ids must have an integer dtype, not " + dtype_name(t.dtype()));
    const Tensor values = t.detach().to(Device(kCPU), kInt64).contiguous();
    const int64_t* data = values.data_ptr<int64_t>();
    out.reserve(static_cast<size_t>(values.numel()));
    for (int64_t i = 0; i < values.numel(); ++i) add(data[i]);
    return out;
  }
  for (const py::handle item : ids) {
    const auto index = py::reinterpret_steal<py::object>(PyNumber_Index(item.ptr()));
    if (!index) throw py::error_already_set();
    int overflow = 0;
    const long long id = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
    if (overflow != 0)
      throw IndexError(std::string("[") + kOp + "] id " + py::str(index).cast<std::string>() +
                       " out of range for a vocabulary of " + std::to_string(tokenizer.vocab_size()) + " tokens");
    add(id);
  }
  return out;
}

}  // namespace

void bind_text(py::module_& parent) {
  py::module_ m = parent.def_submodule("_text", "Text tokenization");
  py::class_<BpeTokenizer>(m, "BPETokenizer",
                           "Byte-level BPE tokenizer: ids 0..255 are the bytes, every text encodes and "
                           "decode_bytes(encode(s)) == s. BPETokenizer() has no merges.")
      .def(py::init<>())
      .def_static(
          "train",
          [](const py::object& text, int64_t vocab_size) {
            const std::string_view corpus = text_bytes(text, "BpeTokenizer.train");
            py::gil_scoped_release release;
            return BpeTokenizer::train(corpus, vocab_size);
          },
          py::arg("text"), py::arg("vocab_size"),
          "Learns merges on text (str or bytes) until there are vocab_size tokens or no pair occurs twice.")
      .def(
          "encode",
          [](const BpeTokenizer& tokenizer, const py::object& text) {
            const std::string_view bytes = text_bytes(text, "BpeTokenizer.encode");
            if (bytes.size() < kReleaseGilBytes) return tokenizer.encode(bytes);
            py::gil_scoped_release release;
            return tokenizer.encode(bytes);
          },
          py::arg("text"), "Token ids (a list of ints) of text: str (as UTF-8) or bytes.")
      .def(
          "decode",
          [](const BpeTokenizer& tokenizer, const py::handle& ids) {
            const std::string bytes = tokenizer.decode(token_ids(tokenizer, ids));
            PyObject* str = PyUnicode_DecodeUTF8(bytes.data(), static_cast<Py_ssize_t>(bytes.size()), "replace");
            if (str == nullptr) throw py::error_already_set();
            return py::reinterpret_steal<py::str>(str);
          },
          py::arg("ids"), "The text of ids (ints or a 1-D integer Tensor); invalid UTF-8 becomes U+FFFD.")
      .def(
          "decode_bytes",
          [](const BpeTokenizer& tokenizer, const py::handle& ids) {
            return py::bytes(tokenizer.decode(token_ids(tokenizer, ids)));
          },
          py::arg("ids"), "The bytes of ids (ints or a 1-D integer Tensor), exactly.")
      .def(
          "token_bytes",
          [](const BpeTokenizer& tokenizer, int64_t id) {
            tokenizer.check_id(id, "BpeTokenizer.token_bytes");
            return py::bytes(tokenizer.token_bytes(static_cast<int32_t>(id)));
          },
          py::arg("id"), "The bytes token id stands for.")
      .def_property_readonly("vocab_size", &BpeTokenizer::vocab_size)
      .def_property_readonly(
          "merges",
          [](const BpeTokenizer& tokenizer) {
            py::list merges;
            for (const text::Merge& merge : tokenizer.merges()) merges.append(py::make_tuple(merge.left, merge.right));
            return merges;
          },
          "(left, right) for each merge in rank order; merge k creates token 256 + k.")
      .def(
          "save",
          [](const BpeTokenizer& tokenizer, const py::handle& path) {
            const std::string file = filesystem_path(path);
            py::gil_scoped_release release;
            tokenizer.save(file);
          },
          py::arg("path"), "Writes the tokenizer to path atomically.")
      .def_static(
          "load", [](const py::handle& path) { return BpeTokenizer::load(filesystem_path(path)); }, py::arg("path"),
          "Reads a tokenizer save() wrote; raises CheckpointError when the file is not one.")
      .def("to_str", &BpeTokenizer::serialize, "The tokenizer as text, e.g. for checkpoint metadata.")
      .def_static(
          "from_str", [](const std::string& text) { return BpeTokenizer::deserialize(text); }, py::arg("text"),
          "The tokenizer to_str() described; raises CheckpointError when the text is not one.")
      .def("__repr__",
           [](const BpeTokenizer& tokenizer) {
             return "BPETokenizer(vocab_size=" + std::to_string(tokenizer.vocab_size()) + ")";
           })
      .def(py::pickle([](const BpeTokenizer& tokenizer) { return py::make_tuple(tokenizer.serialize()); },
                      [](const py::tuple& state) { return BpeTokenizer::deserialize(state[0].cast<std::string>()); }));
}

}  // namespace rtx::python
