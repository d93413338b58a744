// A third-party extension, as the 1.2-1.4 PyDataLoader API expects one: it makes a DataLoader
// and hands it to _portable_lib through the PyDataLoader type that the wheel's data_loader
// module registers with pybind11. Written for the gate's evidence, not taken from executorch.
#include <cstring>
#include <memory>
#include <string>

#include <pybind11/pybind11.h>

#include <executorch/runtime/core/data_loader.h>

namespace py = pybind11;

namespace executorch::extension::pybindings {
// The wheel does not ship pybindings_data_loader.h; this has the same name and the same one
// member (a shared_ptr<DataLoader>), which is all that crosses the module boundary.
struct PyDataLoader {
  explicit PyDataLoader(std::shared_ptr<runtime::DataLoader> loader) : loader_(std::move(loader)) {}
  std::shared_ptr<runtime::DataLoader> loader_;
};
}  // namespace executorch::extension::pybindings

using executorch::extension::pybindings::PyDataLoader;
using executorch::runtime::DataLoader;
using executorch::runtime::Error;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::Result;

static size_t g_loads = 0;  // calls that reached this module's loader

class BytesLoader final : public DataLoader {
 public:
  explicit BytesLoader(std::string bytes) : bytes_(std::move(bytes)) {}
  Result<FreeableBuffer> load(size_t offset, size_t size, const SegmentInfo&) const override {
    ++g_loads;
    if (offset + size > bytes_.size()) return Error::InvalidArgument;
    return FreeableBuffer(bytes_.data() + offset, size, nullptr);
  }
  Error load_into(size_t offset, size_t size, const SegmentInfo&, void* buffer) const override {
    ++g_loads;
    if (offset + size > bytes_.size()) return Error::InvalidArgument;
    std::memcpy(buffer, bytes_.data() + offset, size);
    return Error::Ok;
  }
  Result<size_t> size() const override { return bytes_.size(); }

 private:
  std::string bytes_;
};

PYBIND11_MODULE(handover, m) {
  m.def("make", [](py::bytes program) {
    return std::make_shared<PyDataLoader>(std::make_shared<BytesLoader>(std::string(program)));
  });
  m.def("loads", [] { return g_loads; });
}
