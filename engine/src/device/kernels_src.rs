//! CUDA C source of the batched elementwise and memory kernels, compiled with
//! NVRTC once per device (see `CudaDevice::open`). Kept in its own module so the
//! source is one place to read; the launch side lives in `cuda.rs`.

/// The kernels: elementwise unary/binary ops over `n` floats, and one
/// multi-slice gather/scatter per memory operation (Cavs and DyNet move the
/// rows of a batch with one kernel, not one copy per row).
pub const KERNELS_CU: &str = r#"
extern "C" __global__ void unary_f32(int op, const float* x, float* y, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    switch (op) {
        case 0: y[i] = 1.0f / (1.0f + __expf(-v)); break;   // sigmoid
        case 1: y[i] = tanhf(v); break;                      // tanh
        case 2: y[i] = v > 0.0f ? v : 0.0f; break;           // relu
        default: y[i] = 1.0f - v; break;                     // one_minus
    }
}

extern "C" __global__ void binary_f32(int op, const float* a, const float* b, float* y, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    switch (op) {
        case 0: y[i] = a[i] + b[i]; break;
        case 1: y[i] = a[i] - b[i]; break;
        default: y[i] = a[i] * b[i]; break;
    }
}

// dst[r * width + c] = src[offsets[r] + c]: one launch gathers every row of a batch.
extern "C" __global__ void gather_rows_f32(const float* src, const long* offsets, float* dst,
                                           int rows, int width) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)rows * width) return;
    int r = (int)(i / width), c = (int)(i % width);
    dst[i] = src[offsets[r] + c];
}

// dst[offsets[r] + c] = src[r * width + c]: the inverse, one launch per batch.
extern "C" __global__ void scatter_rows_f32(const float* src, const long* offsets, float* dst,
                                            int rows, int width) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)rows * width) return;
    int r = (int)(i / width), c = (int)(i % width);
    dst[offsets[r] + c] = src[i];
}
"#;
