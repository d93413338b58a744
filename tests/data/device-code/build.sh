#!/usr/bin/env bash
# How the CUDA libraries in this folder were made (nvcc 13.0, on the development machine; no GPU
# needed). They stand in for the delegate's shipped libraries in the device-code and RUNPATH tests:
# real machine code, real fatbins, a real DT_NEEDED on libcudart.so.13.
#   libcovers_cu130.so  sm_80 sm_86 sm_89 sm_90 sm_100 sm_120 + PTX for sm_120, RUNPATH into nvidia/cu13/lib
#   libsm90_only.so     sm_90 alone, no PTX (what a build that detects the builder's GPU ships)
#   libabsolute_rpath.so the first one, with an absolute toolkit RUNPATH instead
#   libshims_cu130.so   the first one's code and one aoti_torch_ function (shims.cu): the AOTI shim layer's stand-in,
#                       which must define its component (one runtime core FAILs an owner that defines none)
set -euo pipefail
cd "$(dirname "$0")"
all=(80 86 89 90 100)
gencode=()
for sm in "${all[@]}"; do gencode+=(-gencode "arch=compute_$sm,code=sm_$sm"); done
gencode+=(-gencode "arch=compute_120,code=[sm_120,compute_120]")
common=(-shared -Xcompiler -fPIC -cudart shared kernel.cu)
nvcc "${common[@]}" "${gencode[@]}" -Xlinker --enable-new-dtags -Xlinker -rpath -Xlinker '$ORIGIN/../../../nvidia/cu13/lib' -o libcovers_cu130.so
nvcc "${common[@]}" -gencode arch=compute_90,code=sm_90 -Xlinker --enable-new-dtags -Xlinker -rpath -Xlinker '$ORIGIN/../../../nvidia/cu13/lib' -o libsm90_only.so
nvcc "${common[@]}" "${gencode[@]}" -Xlinker --enable-new-dtags -Xlinker -rpath -Xlinker /usr/local/cuda-13.0/lib64 -o libabsolute_rpath.so
nvcc -shared -Xcompiler -fPIC -cudart shared shims.cu "${gencode[@]}" -Xlinker --enable-new-dtags -Xlinker -rpath -Xlinker '$ORIGIN/../../../nvidia/cu13/lib' -o libshims_cu130.so
strip libcovers_cu130.so libsm90_only.so libabsolute_rpath.so libshims_cu130.so
nvcc --version | tail -2
