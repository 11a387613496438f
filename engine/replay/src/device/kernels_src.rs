//! CUDA C source of the batched elementwise and memory kernels, compiled with
//! NVRTC once per device (see `CudaDevice::open`). Kept in its own module so the
//! source is one place to read; the launch side lives in `cuda.rs` and
//! `backend::cuda`.
//!
//! Operands of the replay kernels are *table views*: element `c` of op `j` of
//! instance `r` lives at `ptr[shift + tab[j] + r·rs + c]`. One form covers a
//! packed `[k][m][len]` buffer, an instance-major record arena read in place
//! (rs = record length), a broadcast (`tab[j]` equal for all j, or rs = 0 for a
//! parameter) and a gather from scattered variables (arbitrary `tab`), so the
//! in-cell batches of any layout run with the same few kernels.

/// The kernels: elementwise unary/binary ops over `n` floats (self-test), one
/// multi-slice gather/scatter per memory operation (Cavs and DyNet move the
/// rows of a batch with one kernel, not one copy per row), and the table-view
/// kernels of the replay engine.
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

#define GRID_STRIDE(i, total) \
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < (total); \
         i += (long)gridDim.x * blockDim.x)

// y = f(a) or f(a, b) over k instances x m ops x len elements of table views.
// op: 0 sigmoid, 1 tanh, 2 relu, 3 one_minus, 4 alpha*a, 5 gelu, 6 exp, 10 a+b, 11 a-b, 12 a*b.
extern "C" __global__ void ew_f32(int op, float alpha,
                                  const float* a, const long* at, long ars, long ash,
                                  const float* b, const long* bt, long brs, long bsh,
                                  float* y, const long* yt, long yrs, long ysh,
                                  int k, int m, int len) {
    GRID_STRIDE(i, (long)k * m * len) {
        int c = (int)(i % len);
        long q = i / len;
        int j = (int)(q % m), r = (int)(q / m);
        float x = a[ash + at[j] + r * ars + c];
        float v;
        switch (op) {
            case 0: v = 1.0f / (1.0f + expf(-x)); break;
            case 1: v = tanhf(x); break;
            case 2: v = x > 0.0f ? x : 0.0f; break;
            case 3: v = 1.0f - x; break;
            case 4: v = alpha * x; break;
            case 5: v = 0.5f * x * (1.0f + erff(x * 0.70710678f)); break;
            case 6: v = expf(x); break;
            default: {
                float z = b[bsh + bt[j] + r * brs + c];
                v = op == 10 ? x + z : (op == 11 ? x - z : x * z);
            }
        }
        y[ysh + yt[j] + r * yrs + c] = v;
    }
}

// d = s (or d += s) over k instances x m ops x len elements of table views.
extern "C" __global__ void copy_f32(const float* s, const long* st, long srs, long ssh,
                                    float* d, const long* dt, long drs, long dsh,
                                    int k, int m, int len, int accumulate) {
    GRID_STRIDE(i, (long)k * m * len) {
        int c = (int)(i % len);
        long q = i / len;
        int j = (int)(q % m), r = (int)(q / m);
        float v = s[ssh + st[j] + r * srs + c];
        float* o = &d[dsh + dt[j] + r * drs + c];
        *o = accumulate ? *o + v : v;
    }
}

// Segment s of `segs` = (dst offset, length, first source, end source) into
// `srcs`: dst[off + c] = sum of src[srcs[i] + c]. One launch moves every row of
// a batch's cell entry (summing `many` ports) or exit; no source writes zeros.
extern "C" __global__ void seg_sum_f32(float* dst, const float* src, const long* segs, int nseg,
                                       const long* srcs) {
    for (int s = blockIdx.x; s < nseg; s += gridDim.x) {
        long off = segs[4 * s], len = segs[4 * s + 1], b = segs[4 * s + 2], e = segs[4 * s + 3];
        for (long c = threadIdx.x; c < len; c += blockDim.x) {
            float v = 0.0f;
            for (long i = b; i < e; i++) v += src[srcs[i] + c];
            dst[off + c] = v;
        }
    }
}

// y[r, j] = row (idx[r] mod rows) of the table of op j.
extern "C" __global__ void lookup_f32(const float* t, const long* tt, long tsh, long rows,
                                      const long* idx,
                                      float* y, const long* yt, long yrs, long ysh,
                                      int k, int m, int len) {
    GRID_STRIDE(i, (long)k * m * len) {
        int c = (int)(i % len);
        long q = i / len;
        int j = (int)(q % m), r = (int)(q / m);
        unsigned long long row = (unsigned long long)idx[r] % (unsigned long long)rows;
        y[ysh + yt[j] + r * yrs + c] = t[tsh + tt[j] + row * len + c];
    }
}

// Per (r, j) row of n: softmax (loss = 0) or -log softmax[label[r] mod n] (loss = 1).
extern "C" __global__ void softmax_f32(const float* x, const long* xt, long xrs, long xsh,
                                       float* y, const long* yt, long yrs, long ysh,
                                       int k, int m, int n, int loss, const long* labels) {
    GRID_STRIDE(q, (long)k * m) {
        int j = (int)(q % m), r = (int)(q / m);
        const float* row = &x[xsh + xt[j] + r * xrs];
        if (loss == 2) {  // layer_norm: (x - mean) / sqrt(var + 1e-5)
            float mean = 0.0f, var = 0.0f;
            for (int c = 0; c < n; c++) mean += row[c];
            mean /= n;
            for (int c = 0; c < n; c++) var += (row[c] - mean) * (row[c] - mean);
            float inv = rsqrtf(var / n + 1e-5f);
            float* out = &y[ysh + yt[j] + r * yrs];
            for (int c = 0; c < n; c++) out[c] = (row[c] - mean) * inv;
            continue;
        }
        float mx = -3.402823466e+38f;
        for (int c = 0; c < n; c++) mx = fmaxf(mx, row[c]);
        float sum = 0.0f;
        for (int c = 0; c < n; c++) sum += expf(row[c] - mx);
        float* out = &y[ysh + yt[j] + r * yrs];
        if (loss) {
            long label = (long)((unsigned long long)labels[r] % (unsigned long long)n);
            out[0] = logf(sum) + mx - row[label];
        } else {
            for (int c = 0; c < n; c++) out[c] = expf(row[c] - mx) / sum;
        }
    }
}

// A fused chain of elementwise batches (Cavs' kernel fusion, §3.5): each thread
// runs the chain's `n` instructions (op, a, b, dst register, store view) for
// its element, keeping intermediates in registers; an operand >= 0 is a
// register, < 0 the view -(x + 1) loaded from the work buffer. Every result is
// stored (other batches may read it). A view is (base, op stride, instance
// stride, shift per instance), all in floats.
#define FUSED_REGS 16
extern "C" __global__ void fused_ew_f32(float* w, const long* code, int n, const long* views,
                                        long k, int m, int len) {
    GRID_STRIDE(i, k * m * len) {
        int c = (int)(i % len);
        long q = i / len;
        int j = (int)(q % m);
        long r = q / m;
        float regs[FUSED_REGS];
        for (int t = 0; t < n; t++) {
            const long* in = code + 5 * t;
            float x[2];
            for (int s = 0; s < 2; s++) {
                long src = in[1 + s];
                if (src >= 0) {
                    x[s] = regs[src];
                } else {
                    const long* v = views + 4 * (-src - 1);
                    x[s] = w[v[3] * k + v[0] + j * v[1] + r * v[2] + c];
                }
            }
            float a = x[0], b = x[1], y;
            switch ((int)in[0]) {
                case 0: y = 1.0f / (1.0f + expf(-a)); break;
                case 1: y = tanhf(a); break;
                case 2: y = a > 0.0f ? a : 0.0f; break;
                case 3: y = 1.0f - a; break;
                case 5: y = 0.5f * a * (1.0f + erff(a * 0.70710678f)); break;
                case 6: y = expf(a); break;
                case 10: y = a + b; break;
                case 11: y = a - b; break;
                default: y = a * b; break;
            }
            regs[in[3]] = y;
            if (in[4] >= 0) {
                const long* v = views + 4 * in[4];
                w[v[3] * k + v[0] + j * v[1] + r * v[2] + c] = y;
            }
        }
    }
}
"#;
