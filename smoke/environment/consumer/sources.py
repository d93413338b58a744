"""The consumer's sources: its CMakeLists.txt (``find_package(executorch ...)``, upstream's way) and its C++ program."""

from __future__ import annotations

CMAKELISTS = """cmake_minimum_required(VERSION 3.28)
project(gate_consumer CXX)
find_package(executorch REQUIRED COMPONENTS {components})
add_executable(consumer consumer.cpp)
target_link_libraries(consumer PRIVATE {targets})
"""

# Reads the inputs (a text file: their count, then each one's rank, sizes and float values), loads PROGRAM with
# DATA_FILE ("-": none), runs forward and prints the outputs as smoke.tensors writes them, or the error, as one JSON line.
CONSUMER = r"""
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <link.h>

#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor.h>
#include <executorch/runtime/platform/runtime.h>

using executorch::extension::TensorPtr;
using executorch::extension::make_tensor_ptr;
using executorch::extension::module::Module;

// Every object loaded in this process (the loader's list, dl_iterate_phdr), as a JSON list of paths.
static int one_object(struct dl_phdr_info* info, size_t, void* seen) {
  if (info->dlpi_name == nullptr || info->dlpi_name[0] == '\0') return 0;  // the program itself, the vDSO
  std::printf("%s\"", (*static_cast<int*>(seen))++ ? ", " : "");
  for (const char* c = info->dlpi_name; *c; ++c) {
    if (*c == '"' || *c == '\\') std::printf("\\%c", *c);
    else if ((unsigned char)*c < 0x20) std::printf("\\u%04x", (unsigned)(unsigned char)*c);
    else std::putchar(*c);
  }
  std::putchar('"');
  return 0;
}

static void loaded() {
  int seen = 0;
  std::printf(", \"loaded\": [");
  dl_iterate_phdr(one_object, &seen);
  std::printf("]}\n");
}

// The stage it reaches, on stderr before each begins: a crash leaves the last one there (smoke.checks.controls).
static void stage(const char* name) { std::fprintf(stderr, "gate-stage: %s\n", name); std::fflush(stderr); }

static void value(double v) {
  if (std::isnan(v)) std::printf("\"NaN\"");
  else if (std::isinf(v)) std::printf(v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
  else std::printf("%.9g", v);
}

int main(int argc, char** argv) {
  if (argc != 4) { std::printf("{\"error\": \"usage: consumer PROGRAM DATA_FILE|- INPUTS\"}\n"); return 2; }
  executorch::runtime::runtime_init();
  std::ifstream in(argv[3]);
  size_t count = 0;
  in >> count;
  std::vector<TensorPtr> inputs;
  for (size_t i = 0; i < count && in; ++i) {
    size_t rank = 0;
    in >> rank;
    std::vector<executorch::aten::SizesType> sizes(rank);
    size_t numel = 1;
    for (auto& size : sizes) { in >> size; numel *= size; }
    std::vector<float> data(numel);
    for (auto& v : data) in >> v;
    inputs.push_back(make_tensor_ptr(sizes, std::move(data)));
  }
  if (!in || inputs.size() != count) { std::printf("{\"error\": \"the inputs file could not be read\"}\n"); return 2; }
  const std::string data_file = argv[2];
  std::unique_ptr<Module> module = data_file == "-" ? std::make_unique<Module>(argv[1])
                                                     : std::make_unique<Module>(argv[1], data_file);
  stage("program load");
  const auto load_error = module->load();
  if (load_error != executorch::runtime::Error::Ok) {
    std::printf("{\"stage\": \"program load\", \"error\": \"Module::load() returned error 0x%x\"", (unsigned)load_error);
    loaded();
    return 0;
  }
  stage("method load");
  const auto method_error = module->load_method("forward");
  if (method_error != executorch::runtime::Error::Ok) {
    std::printf("{\"stage\": \"method load\", \"error\": \"Module::load_method(forward) returned error 0x%x\"",
                (unsigned)method_error);
    loaded();
    return 0;
  }
  stage("execute");
  std::vector<executorch::runtime::EValue> args(inputs.begin(), inputs.end());
  const auto result = module->forward(args);
  if (!result.ok()) {
    std::printf("{\"stage\": \"execute\", \"error\": \"Module::forward() returned error 0x%x\"", (unsigned)result.error());
    loaded();
    return 0;
  }
  std::printf("{\"stage\": \"execute\", \"outputs\": [");
  for (size_t o = 0; o < result->size(); ++o) {
    const auto& out = result->at(o);
    if (!out.isTensor()) { std::printf("%s{\"shape\": [], \"dtype\": \"not a tensor\", \"values\": []}", o ? ", " : ""); continue; }
    const auto tensor = out.toTensor();
    std::printf("%s{\"shape\": [", o ? ", " : "");
    for (ssize_t d = 0; d < tensor.dim(); ++d) std::printf("%s%d", d ? ", " : "", (int)tensor.size(d));
    const bool is_float = tensor.scalar_type() == executorch::aten::ScalarType::Float;
    std::printf("], \"dtype\": \"%s\", \"values\": [", is_float ? "torch.float32" : "other");
    if (is_float) {
      const float* v = tensor.template const_data_ptr<float>();
      for (ssize_t i = 0; i < tensor.numel(); ++i) { if (i) std::printf(", "); value(v[i]); }
    }
    std::printf("]}");
  }
  std::printf("]");
  loaded();
  return 0;
}
"""
