//! Row-level kernels of the primitive ops that are not shared-weight products
//! (those go to [`super::gemm`]): elementwise maps over slices, concatenation,
//! lookup, softmax and the pick loss, and the per-instance matrix products of
//! MV-RNN. Both the cell plans ([`super::plan`]) and the op-level DyNet
//! executor call these on slices they resolved themselves.

use super::simd;
use crate::cells::PrimOp;

/// `y = f(x)` for the unary elementwise ops.
pub fn unary(kind: PrimOp, x: &[f32], y: &mut [f32]) {
    match kind {
        PrimOp::Sigmoid => simd::sigmoid(x, y),
        PrimOp::Tanh => simd::tanh(x, y),
        PrimOp::Relu => simd::relu(x, y),
        PrimOp::Gelu => simd::gelu(x, y),
        PrimOp::Exp => simd::exp(x, y),
        PrimOp::OneMinus => simd::one_minus(x, y),
        // Sum or Mean of one argument: a copy.
        _ => y.copy_from_slice(x),
    }
}

/// `y = a ∘ b` for add, sub and mul.
pub fn binary(kind: PrimOp, a: &[f32], b: &[f32], y: &mut [f32]) {
    match kind {
        PrimOp::Add => simd::add(a, b, y),
        PrimOp::Sub => simd::sub(a, b, y),
        _ => simd::mul(a, b, y),
    }
}

/// Is `kind` a one-argument elementwise map?
pub fn is_unary(kind: PrimOp) -> bool {
    matches!(
        kind,
        PrimOp::Sigmoid
            | PrimOp::Tanh
            | PrimOp::Relu
            | PrimOp::Gelu
            | PrimOp::Exp
            | PrimOp::OneMinus
    )
}

/// Is `kind` a two-argument elementwise map?
pub fn is_binary(kind: PrimOp) -> bool {
    matches!(kind, PrimOp::Add | PrimOp::Sub | PrimOp::Mul)
}

/// `x` normalised to mean 0 and variance 1 (`(x − μ) / √(σ² + ε)`) into
/// `y`; its `1 / √(σ² + ε)` (what the backward divides by).
pub fn layer_norm(x: &[f32], y: &mut [f32]) -> f32 {
    let (mean, inv) = layer_norm_stats(x);
    for (o, &v) in y.iter_mut().zip(x) {
        *o = (v - mean) * inv;
    }
    inv
}

/// `x`'s mean and `1 / √(σ² + ε)`.
pub fn layer_norm_stats(x: &[f32]) -> (f32, f32) {
    let n = x.len().max(1) as f32;
    let mean = x.iter().sum::<f32>() / n;
    let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
    (mean, 1.0 / (var + crate::cells::LAYER_NORM_EPS).sqrt())
}

/// Softmax of one row `x` into `y`. Vectorised: a row may be a whole
/// vocabulary (lstm-nmt's 1000 classes), not a handful of scores.
pub fn softmax(x: &[f32], y: &mut [f32]) {
    let mut max = f32::NEG_INFINITY;
    simd::row_max(x, &mut max);
    let mut sum = 0.0;
    simd::exp_shifted(x, max, y, &mut sum);
    simd::scale(y, 1.0 / sum);
}

/// `−log softmax(x)[label mod n]` of one row (vectorised as [`softmax`]).
pub fn pick_loss(x: &[f32], label: u32) -> f32 {
    let n = x.len().max(1);
    let mut max = f32::NEG_INFINITY;
    simd::row_max(x, &mut max);
    let mut sum = 0.0;
    simd::exp_shifted_sum(x, max, &mut sum);
    let picked = x.get(label as usize % n).copied().unwrap_or(0.0);
    sum.ln() + max - picked
}

/// Row `id mod rows` of `table` (`rows × y.len()`) into `y`.
pub fn lookup(table: &[f32], rows: usize, id: u32, y: &mut [f32]) {
    let i = id as usize % rows.max(1);
    let n = y.len();
    y.copy_from_slice(&table[i * n..(i + 1) * n]);
}

/// One instance's product `y = beta·y + a · b` (`a` is `[m, n]`, `b` is
/// `[n, p]`, row major), through matrixmultiply: the per-instance matrices of
/// MV-RNN, which no packing can amortise.
pub fn product(m: usize, n: usize, p: usize, a: &[f32], b: &[f32], beta: f32, y: &mut [f32]) {
    product_strided(m, n, p, a, (n, 1), b, (p, 1), beta, y, p);
}

/// `c = beta·c + a · b` with general strides: `a` is `m × n` with (row,
/// column) strides `sa`, `b` is `n × p` with strides `sb`, `c` is `m × p`
/// with row stride `rsc` — transposes are strides (the backward of the
/// per-instance products).
#[allow(clippy::too_many_arguments)]
pub fn product_strided(
    m: usize,
    n: usize,
    p: usize,
    a: &[f32],
    sa: (usize, usize),
    b: &[f32],
    sb: (usize, usize),
    beta: f32,
    c: &mut [f32],
    rsc: usize,
) {
    let last = |rows: usize, cols: usize, s: (usize, usize)| {
        if rows == 0 || cols == 0 {
            0
        } else {
            (rows - 1) * s.0 + (cols - 1) * s.1 + 1
        }
    };
    assert!(
        a.len() >= last(m, n, sa) && b.len() >= last(n, p, sb) && c.len() >= last(m, p, (rsc, 1)),
        "product shapes"
    );
    if m == 0 || p == 0 {
        return;
    }
    // SAFETY: the assert bounds every element the strides address; `c` is a
    // distinct mutable borrow.
    unsafe {
        matrixmultiply::sgemm(
            m,
            n,
            p,
            1.0,
            a.as_ptr(),
            sa.0 as isize,
            sa.1 as isize,
            b.as_ptr(),
            sb.0 as isize,
            sb.1 as isize,
            beta,
            c.as_mut_ptr(),
            rsc as isize,
            1,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pick_loss_is_negative_log_softmax() {
        assert!((pick_loss(&[0.0, 0.0], 1) - 2f32.ln()).abs() < 1e-6);
        assert!((pick_loss(&[1.0, 1.0], 2) - 2f32.ln()).abs() < 1e-6);
        let mut s = [0.0; 3];
        softmax(&[1.0, 2.0, 3.0], &mut s);
        let e: Vec<f32> = [1f32, 2.0, 3.0].iter().map(|v| v.exp()).collect();
        let z: f32 = e.iter().sum();
        for (a, b) in s.iter().zip(&e) {
            assert!((a - b / z).abs() < 1e-6);
        }
    }

    /// The vectorised rows against f64, at every ISA this CPU has, on rows
    /// of every length around the 16 lanes and a vocabulary's 1000 (the
    /// lanes' tail included), with a large spread of scores.
    #[test]
    fn wide_softmax_and_pick_loss_equal_f64_on_every_isa() {
        for isa in simd::available() {
            for n in [1usize, 5, 15, 16, 17, 33, 1000] {
                let x: Vec<f32> = (0..n)
                    .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.3)
                    .collect();
                let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
                let z: f64 = x.iter().map(|&v| (v as f64 - max).exp()).sum();
                let mut y = vec![0.0; n];
                let label = (n / 2) as u32;
                let loss = simd::with_isa(isa, || {
                    softmax(&x, &mut y);
                    pick_loss(&x, label)
                });
                for (i, &v) in y.iter().enumerate() {
                    let want = (x[i] as f64 - max).exp() / z;
                    assert!(
                        (v as f64 - want).abs() <= 1e-6 * want.max(1e-30) + 1e-9,
                        "{isa:?} n={n} i={i}"
                    );
                }
                let want = z.ln() + max - x[label as usize] as f64;
                assert!(
                    (loss as f64 - want).abs() <= 1e-5 * want.abs().max(1.0),
                    "{isa:?} n={n}: {loss} {want}"
                );
            }
        }
    }

    #[test]
    fn product_matches_a_hand_product() {
        // a = [[1, 2]], b = [[1, 2], [3, 4]] -> [[7, 10]]
        let mut c = [0.0; 2];
        product(1, 2, 2, &[1.0, 2.0], &[1.0, 2.0, 3.0, 4.0], 0.0, &mut c);
        assert_eq!(c, [7.0, 10.0]);
    }
}
