// The AOTI shim layer's stand-in: the kernel of kernel.cu and one aoti_torch_ function, so that it defines the
// component its owner (executorch/backends/cuda/libaoti_cuda_shims.so) must define (smoke/checks/owners.py).
extern "C" __global__ void scale(float *x, float a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }
extern "C" int launch_scale(float *x, float a, int n) { scale<<<(n + 255) / 256, 256>>>(x, a, n); return 0; }
extern "C" int aoti_torch_gate_stand_in(void) { return 0; }
