extern "C" __global__ void scale(float *x, float a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }
extern "C" int launch_scale(float *x, float a, int n) { scale<<<(n + 255) / 256, 256>>>(x, a, n); return 0; }
