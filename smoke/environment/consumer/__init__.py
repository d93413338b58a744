"""The wheel's C++ SDK, used as its consumers use it (issue 49): a C++ program built out of tree with CMake against
the installed wheel's own package config and libraries, run with none of the caller's loader variables
(``loaderenv.clean``), loading the row's weighted program with its data file through ``executorch::extension::module::Module(program, data_file)``.

Upstream's own consumer test (pytorch/executorch main, ``.ci/scripts/wheel/test_cpp_sdk.py``, added by #21639 for
1.5) builds its consumers as here: ``cmake_minimum_required(VERSION 3.28)``, ``find_package(executorch REQUIRED
COMPONENTS ...)`` with ``CMAKE_PREFIX_PATH`` at the package's ``share/cmake``, one ``executorch::<component>`` target
a component, the loader's variables cleared. The wheel's config (``tools/cmake/executorch-wheel-config.cmake``, shipped
as ``share/cmake/executorch-config.cmake``) defines its imported targets only from CMake 3.28 (it says why: older
CMake writes ``$ORIGIN`` wrongly). It runs its models with their weights inside the program; here the program's
weights are in its data file, which is what the runners that ship ``aoti_cuda_blob.ptd`` do.

The consumer is built beside the child's exports (``start``), once per environment: the build folder is kept in the
environment's folder, keyed by the wheel's sha256 and the row, so a warm run only runs it.

The headers compiled alone (``headers_alone``, 117 compiles of 1.5.1's, about 23 CPU-seconds here) are a function of
the bytes under ``executorch/include``, the compiler and the compile's variables, and nothing of the environment: a
verdict with no failure is kept in ``.gate/cpp-headers/KEY.json``, KEY the sha256 of all of those (``headers_key``),
and a later run of the same headers and compiler, in any environment, takes it, saying so in its line. It is looked
up before the child starts (``Consumer.__init__``), so the wheel's code of that run cannot have written it. A failure
is never kept: it is compiled anew, its message naming the run's own paths.
"""

from __future__ import annotations

from smoke.environment.consumer.build import BUILD_SECONDS, Built, Consumer
from smoke.environment.consumer.deploy import Deployed, deploy, find_patchelf, shipped_libraries
from smoke.environment.consumer.headers import (
    COMPILE_VARIABLES,
    HEADERS_LEFT_OUT,
    KEPT,
    KEPT_BYTES,
    Compiles,
    Headers,
    headers_alone,
    headers_key,
    keep_headers,
    kept_headers,
)
from smoke.environment.consumer.run import RUN_SECONDS, run, write_inputs
from smoke.environment.consumer.sdk import (
    BUILD_VARIABLES,
    COMPILER_FIX,
    CONFIG,
    DELEGATE_COMPONENT,
    KERNELS,
    QUANTIZED_KERNELS,
    RUNTIME,
    NoConfig,
    build_environment,
    components,
    find_cmake,
    find_compiler,
    library_of,
    machine_lacks,
    missing_config,
    missing_delegate,
    nothing_to_judge,
)
from smoke.environment.consumer.sources import CMAKELISTS, CONSUMER

__all__ = ["BUILD_SECONDS", "BUILD_VARIABLES", "CMAKELISTS", "COMPILER_FIX", "COMPILE_VARIABLES", "CONFIG", "CONSUMER",
           "DELEGATE_COMPONENT", "HEADERS_LEFT_OUT", "KEPT", "KEPT_BYTES", "KERNELS", "QUANTIZED_KERNELS", "RUNTIME",
           "RUN_SECONDS", "Built", "Compiles", "Consumer", "Deployed", "Headers", "NoConfig", "build_environment",
           "components", "deploy", "find_cmake", "find_compiler", "find_patchelf", "headers_alone", "headers_key",
           "keep_headers", "kept_headers", "library_of", "machine_lacks", "missing_config", "missing_delegate",
           "nothing_to_judge", "run", "shipped_libraries", "write_inputs"]
