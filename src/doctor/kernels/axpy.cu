// preflight doctor: y = a * x + y, the smoke kernel for NVRTC and nvcc.
extern "C" __global__ void preflight_axpy(float a, const float* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = a * x[i] + y[i];
    }
}
