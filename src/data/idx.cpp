// read_idx: the IDX reader (data/idx_reader.h) decoding straight into a CPU tensor.
#include "data/idx_reader.h"
#include "rtx/data.h"
#include "rtx/ops.h"

namespace rtx::data {

Tensor read_idx(const std::string& path) {
  detail::IdxReader reader(path);
  Tensor out = empty(reader.shape(), TensorOptions(reader.dtype()));
  reader.read_into(out.data_ptr());
  return out;
}

}  // namespace rtx::data
