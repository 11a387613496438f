//! CPU kernels over row-batched tensors: a value of per-instance shape `s` for
//! `k` instances is `k` contiguous rows of `numel(s)` floats. GEMM goes through
//! `matrixmultiply` (packed, vectorised); everything else is a plain loop the
//! compiler vectorises.

/// `y[k×m] = beta·y + x[k×n] · wᵀ` where `w` is `m×n` row-major (a weight
/// matrix applied to every row of `x`).
pub fn gemm_xwt(k: usize, m: usize, n: usize, x: &[f32], w: &[f32], beta: f32, y: &mut [f32]) {
    debug_assert!(x.len() >= k * n && w.len() >= m * n && y.len() >= k * m);
    if k == 0 || m == 0 {
        return;
    }
    // SAFETY: the slices hold at least the k×n, m×n and k×m elements the strides
    // address (checked above in debug builds and guaranteed by every caller's
    // shape bookkeeping); `y` does not alias `x` or `w` (distinct borrows).
    unsafe {
        matrixmultiply::sgemm(
            k,
            n,
            m,
            1.0,
            x.as_ptr(),
            n as isize,
            1,
            w.as_ptr(),
            1,
            n as isize,
            beta,
            y.as_mut_ptr(),
            m as isize,
            1,
        );
    }
}

/// [`gemm_xwt`] on strided rows: row `r` of `x` starts at `r·rsx`, row `r` of `y`
/// at `r·rsy` (rows of a larger record, as in an instance-major arena).
#[allow(clippy::too_many_arguments)]
pub fn gemm_xwt_strided(
    k: usize,
    m: usize,
    n: usize,
    x: &[f32],
    rsx: usize,
    w: &[f32],
    beta: f32,
    y: &mut [f32],
    rsy: usize,
) {
    if k == 0 || m == 0 {
        return;
    }
    assert!(x.len() >= (k - 1) * rsx + n && w.len() >= m * n && y.len() >= (k - 1) * rsy + m);
    // SAFETY: the assert bounds every address the strides reach; `y` is a
    // distinct mutable borrow.
    unsafe {
        matrixmultiply::sgemm(
            k,
            n,
            m,
            1.0,
            x.as_ptr(),
            rsx as isize,
            1,
            w.as_ptr(),
            1,
            n as isize,
            beta,
            y.as_mut_ptr(),
            rsy as isize,
            1,
        );
    }
}

/// `c[m×p] = beta·c + a[m×n] · b[n×p]`, all row-major (one instance's product).
pub fn gemm(m: usize, n: usize, p: usize, a: &[f32], b: &[f32], beta: f32, c: &mut [f32]) {
    debug_assert!(a.len() >= m * n && b.len() >= n * p && c.len() >= m * p);
    if m == 0 || p == 0 {
        return;
    }
    // SAFETY: as in `gemm_xwt`: sizes checked, `c` distinct from `a` and `b`.
    unsafe {
        matrixmultiply::sgemm(
            m,
            n,
            p,
            1.0,
            a.as_ptr(),
            n as isize,
            1,
            b.as_ptr(),
            p as isize,
            1,
            beta,
            c.as_mut_ptr(),
            p as isize,
            1,
        );
    }
}

/// Adds `bias` (one row) to every row of `y`.
pub fn add_row(y: &mut [f32], bias: &[f32]) {
    for row in y.chunks_exact_mut(bias.len().max(1)) {
        for (v, b) in row.iter_mut().zip(bias) {
            *v += b;
        }
    }
}

/// Unary elementwise functions.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Unary {
    /// 1 / (1 + e^-x)
    Sigmoid,
    /// tanh x
    Tanh,
    /// max(x, 0)
    Relu,
    /// 1 - x
    OneMinus,
}

/// `y = f(x)` elementwise.
pub fn unary(f: Unary, x: &[f32], y: &mut [f32]) {
    let it = x.iter().zip(y.iter_mut());
    match f {
        Unary::Sigmoid => it.for_each(|(a, b)| *b = 1.0 / (1.0 + (-a).exp())),
        Unary::Tanh => it.for_each(|(a, b)| *b = a.tanh()),
        Unary::Relu => it.for_each(|(a, b)| *b = a.max(0.0)),
        Unary::OneMinus => it.for_each(|(a, b)| *b = 1.0 - a),
    }
}

/// Binary elementwise functions.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Binary {
    /// a + b
    Add,
    /// a - b
    Sub,
    /// a * b
    Mul,
}

/// `y = a ∘ b` elementwise.
pub fn binary(f: Binary, a: &[f32], b: &[f32], y: &mut [f32]) {
    let it = a.iter().zip(b).zip(y.iter_mut());
    match f {
        Binary::Add => it.for_each(|((a, b), y)| *y = a + b),
        Binary::Sub => it.for_each(|((a, b), y)| *y = a - b),
        Binary::Mul => it.for_each(|((a, b), y)| *y = a * b),
    }
}

/// `y += x` elementwise.
pub fn accumulate(y: &mut [f32], x: &[f32]) {
    y.iter_mut().zip(x).for_each(|(y, x)| *y += x);
}

/// Per row of width `n`: `-log softmax(row)[label]`, written to `out[row]`.
pub fn pick_loss(x: &[f32], n: usize, labels: &[u32], out: &mut [f32]) {
    for ((row, &label), o) in x.chunks_exact(n.max(1)).zip(labels).zip(out.iter_mut()) {
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let sum: f32 = row.iter().map(|v| (v - max).exp()).sum();
        let picked = row.get(label as usize % n.max(1)).copied().unwrap_or(0.0);
        *o = sum.ln() + max - picked;
    }
}

/// Per row of width `n`: softmax.
pub fn softmax(x: &[f32], n: usize, y: &mut [f32]) {
    for (row, out) in x.chunks_exact(n.max(1)).zip(y.chunks_exact_mut(n.max(1))) {
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0;
        for (o, v) in out.iter_mut().zip(row) {
            *o = (v - max).exp();
            sum += *o;
        }
        out.iter_mut().for_each(|o| *o /= sum);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemm_xwt_matches_a_hand_product() {
        // x = [[1, 2], [3, 4]], w = [[1, 0], [0, 1], [1, 1]] -> y = x wᵀ = [[1, 2, 3], [3, 4, 7]]
        let x = [1.0, 2.0, 3.0, 4.0];
        let w = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0];
        let mut y = [10.0; 6];
        gemm_xwt(2, 3, 2, &x, &w, 0.0, &mut y);
        assert_eq!(y, [1.0, 2.0, 3.0, 3.0, 4.0, 7.0]);
        gemm_xwt(2, 3, 2, &x, &w, 1.0, &mut y);
        assert_eq!(y, [2.0, 4.0, 6.0, 6.0, 8.0, 14.0]);
    }

    #[test]
    fn gemm_matches_a_hand_product() {
        // a = [[1, 2]], b = [[1, 2], [3, 4]] -> [[7, 10]]
        let mut c = [0.0; 2];
        gemm(1, 2, 2, &[1.0, 2.0], &[1.0, 2.0, 3.0, 4.0], 0.0, &mut c);
        assert_eq!(c, [7.0, 10.0]);
    }

    #[test]
    fn pick_loss_is_negative_log_softmax() {
        let mut out = [0.0; 2];
        pick_loss(&[0.0, 0.0, 1.0, 1.0], 2, &[1, 0], &mut out);
        assert!((out[0] - 2f32.ln()).abs() < 1e-6);
        assert!((out[1] - 2f32.ln()).abs() < 1e-6);
        let mut s = [0.0; 2];
        softmax(&[0.0, 0.0], 2, &mut s);
        assert_eq!(s, [0.5, 0.5]);
    }
}
