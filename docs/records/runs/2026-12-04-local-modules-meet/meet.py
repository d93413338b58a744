"""Do executorch's extension modules meet in one process, and what crosses between them?

    MEET_DIR=/tmp/meet python meet.py STEP   (export first; "handover" needs handover.cpp built beside this file)

Each step prints what it measured; README.md here says how it was run and what it printed.
"""
import ctypes
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
SITE = os.path.dirname(os.path.dirname(torch.__file__))
TAG = f"cpython-{sys.version_info.major}{sys.version_info.minor}-x86_64-linux-gnu.so"
MODULES = {"_portable_lib": f"executorch/extension/pybindings/_portable_lib.{TAG}",
           "data_loader": f"executorch/extension/pybindings/data_loader.{TAG}",
           "selective_build": f"executorch/codegen/tools/selective_build.{TAG}",
           "_training_lib": f"executorch/extension/training/pybindings/_training_lib.{TAG}"}
WORK = os.environ["MEET_DIR"]  # where the step "export" writes the two programs
PROGRAM = os.path.join(WORK, "add.pte")  # x + y, no delegate
XNNPACK_PROGRAM = os.path.join(WORK, "linear_xnn.pte")  # nn.Linear(8, 4) through XNNPACK


def threads() -> int:
    return len(os.listdir("/proc/self/task"))


def library_of(address: int) -> str:
    for line in open("/proc/self/maps"):
        low, high = (int(x, 16) for x in line.split()[0].split("-"))
        if low <= address < high:
            return os.path.basename(line.split()[-1])
    return "?"


def in_scope_of(module: str, symbol: str, restype):
    """The function a module's own symbol scope resolves ``symbol`` to (dlsym on the loaded module), or None."""
    handle = ctypes.CDLL(os.path.join(SITE, MODULES[module]), mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    try:
        function = getattr(handle, symbol)
    except AttributeError:
        return None
    function.restype, function.argtypes = restype, []
    return function


class Span(ctypes.Structure):  # executorch::runtime::Span<const Kernel>, returned in registers
    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_size_t)]


step = sys.argv[1]
if step == "export":
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    class Add(torch.nn.Module):
        def forward(self, x, y):
            return x + y

    add = torch.export.export(Add(), (torch.ones(2, 3), torch.ones(2, 3)))
    open(PROGRAM, "wb").write(to_edge_transform_and_lower(add).to_executorch().buffer)
    linear = torch.export.export(torch.nn.Linear(8, 4).eval(), (torch.ones(1, 8),))
    open(XNNPACK_PROGRAM, "wb").write(to_edge_transform_and_lower(linear, partitioner=[XnnpackPartitioner()]).to_executorch().buffer)
    print("wrote", PROGRAM, XNNPACK_PROGRAM)
elif step == "handover":
    # A PyDataLoader (the type the data_loader module registers) made by a third module, loaded by _portable_lib.
    sys.path.insert(0, HERE)
    import handover
    from executorch.extension.pybindings import _portable_lib as P  # portable_lib.py does not re-export the loader's entry
    print("data_loader imported by portable_lib itself:", "executorch.extension.pybindings.data_loader" in sys.modules)
    loader = handover.make(open(PROGRAM, "rb").read())
    print("handover.make returned a", f"{type(loader).__module__}.{type(loader).__name__}")
    module = P._load_for_executorch_from_data_loader(loader)
    x, y = torch.rand(2, 3), torch.rand(2, 3)
    print("forward equals x + y:", torch.equal(module.forward((x, y))[0], x + y),
          "; calls that reached the creator's loader:", handover.loads())
elif step == "selective_build":
    import executorch.codegen.tools.selective_build as S
    from executorch.extension.pybindings import _portable_lib as P
    program = S._get_program_from_buffer(open(PROGRAM, "rb").read())
    print("selective_build reads the program's operators:", S._get_program_operators(program))
    for what, call in (("selective_build given _portable_lib's program", lambda: S._get_program_operators(P._load_program_from_buffer(open(PROGRAM, "rb").read()))),
                       ("_portable_lib given selective_build's program", lambda: P._load_for_executorch_from_data_loader(program))):
        try:
            call()
            print(what, "-> accepted")
        except TypeError as exc:
            print(what, "->", type(exc).__name__ + ":", str(exc).splitlines()[0])
elif step == "registries":
    import executorch.codegen.tools.selective_build  # noqa: F401
    import executorch.extension.training  # noqa: F401  (imports _training_lib and portable_lib)
    from executorch.extension.pybindings import portable_lib as P
    mapped = {line.split()[-1] for line in open("/proc/self/maps")}
    print("in this process:", sorted(m for m, path in MODULES.items() if os.path.join(SITE, path) in mapped))
    print("_portable_lib's backends:", P._get_registered_backend_names())
    for module in MODULES:
        backends = in_scope_of(module, "_ZN10executorch7runtime27get_num_registered_backendsEv", ctypes.c_size_t)
        kernels = in_scope_of(module, "_ZN10executorch7runtime22get_registered_kernelsEv", Span)
        said = [f"backend registry in {library_of(ctypes.cast(backends, ctypes.c_void_p).value)} holds {backends()}" if backends else "no backend registry in its scope",
                f"kernel registry in {library_of(ctypes.cast(kernels, ctypes.c_void_p).value)} holds {kernels().size}" if kernels else "no kernel registry in its scope"]
        print(f"{module}'s scope:", ", ".join(said))
elif step == "threads":
    import executorch.extension.training as T
    from executorch.extension.pybindings import portable_lib as P
    w = torch.nn.Parameter(torch.ones(4_000_000)); g = torch.ones(4_000_000); (w.data + g).sum()
    print("threads, torch's own pool started:", threads())
    P._load_for_executorch(XNNPACK_PROGRAM).forward((torch.ones(1, 8),))
    print("after an XNNPACK run through _portable_lib:", threads())
    sgd = T.get_sgd_optimizer({"w": w}, 0.1, 0.9, 0, 0.01, False)
    for _ in range(3):
        sgd.step({"w": g})
    print("after 3 SGD steps (4M parameters, momentum, weight decay) through _training_lib:", threads())
    for module in ("_portable_lib", "_training_lib"):
        pool = in_scope_of(module, "_ZN10executorch9extension10threadpool14get_threadpoolEv", ctypes.c_void_p)
        print(f"{module}'s get_threadpool() ({library_of(ctypes.cast(pool, ctypes.c_void_p).value)}): {pool():#x}; threads now {threads()}")
elif step == "rtld-global":
    sys.setdlopenflags(os.RTLD_GLOBAL | os.RTLD_NOW)  # every module's symbols in one scope
    for name in ("executorch.extension.pybindings.data_loader", "executorch.extension.pybindings.portable_lib",
                 "executorch.codegen.tools.selective_build", "executorch.extension.training"):
        print("importing", name, flush=True)
        __import__(name)
    print("all imported with RTLD_GLOBAL")
elif step == "export-copy":
    from executorch.extension.pybindings import portable_lib as P
    before = len(P._get_operator_names())
    import executorch.kernels.quantized  # noqa: F401  (torch loads libquantized_ops_aot_lib.so)
    mapped = {os.path.basename(line.split()[-1]) for line in open("/proc/self/maps")}
    print("libquantized_ops_aot_lib.so mapped:", "libquantized_ops_aot_lib.so" in mapped,
          "; libexecutorch_kernels_quantized.so mapped:", "libexecutorch_kernels_quantized.so" in mapped)
    print("ExecuTorch operators before / after:", before, "/", len(P._get_operator_names()))
