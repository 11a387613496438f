//! Vectorised elementwise math of the CPU replay: one portable body per
//! function (plain, branch-free loops), compiled three times — for AVX-512,
//! for AVX2 + FMA and for the baseline — and chosen at run time by the CPU's
//! features ([`isa`]). The compiler vectorises the bodies; nothing here needs
//! intrinsics.
//!
//! # Transcendentals and their accuracy
//!
//! `exp` uses Cody–Waite range reduction `x = n·ln2 + r`, `|r| ≤ ln2/2`, and
//! the degree-7 minimax polynomial of Cephes' `expf` for `e^r`; `2^n` is
//! applied as two normal powers of two, so results are right down to the
//! subnormal range. `tanh` uses Cephes' odd polynomial for `|x| < 0.625`, and
//! `1 − 2/(e^{2|x|} + 1)` (sign restored) beyond; `sigmoid` is `1/(1 + e)` for
//! `x ≥ 0` and `e/(1 + e)` for `x < 0`, with `e = e^{−|x|}`, so neither tail
//! cancels. Measured against `f64` over every 509th f32 in `[−104, 89]` (the
//! test `transcendentals_are_within_their_stated_ulps`): `exp` ≤ 2 ulp,
//! `sigmoid` ≤ 3 ulp, `tanh` ≤ 3 ulp for normal results (absolute error ≤
//! 1e-38 where the result is subnormal). Saturation is exact: `exp` gives
//! `+∞` above 88.73 and 0 below −104, `sigmoid` and `tanh` reach ±1 and 0;
//! NaN in gives NaN out. `docs/benchmarks.md` has their throughput against
//! libm.

use std::cell::Cell;
use std::sync::OnceLock;

/// An instruction set the CPU kernels are compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// AVX-512F (with AVX2 and FMA).
    #[cfg(target_arch = "x86_64")]
    Avx512,
    /// AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// Whatever the build targets (SSE2 on x86-64).
    Portable,
}

impl Isa {
    /// Name for reports.
    pub fn name(self) -> &'static str {
        match self {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => "avx512",
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => "avx2",
            Isa::Portable => "portable",
        }
    }
}

fn detected() -> Isa {
    static ISA: OnceLock<Isa> = OnceLock::new();
    *ISA.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            let forced = std::env::var("BATCHLAB_ISA").ok();
            let avx2 = is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma");
            let avx512 = avx2 && is_x86_feature_detected!("avx512f");
            match forced.as_deref() {
                Some("portable") => return Isa::Portable,
                Some("avx2") if avx2 => return Isa::Avx2,
                _ => {}
            }
            if avx512 {
                return Isa::Avx512;
            }
            if avx2 {
                return Isa::Avx2;
            }
        }
        Isa::Portable
    })
}

thread_local! {
    static FORCED: Cell<Option<Isa>> = const { Cell::new(None) };
}

/// The instruction set the kernels use on this thread: the best the CPU has
/// (`BATCHLAB_ISA=avx2|portable` asks for less), or what [`with_isa`] set.
pub fn isa() -> Isa {
    FORCED.with(|f| f.get()).unwrap_or_else(detected)
}

/// Every instruction set this CPU can run (for tests and benchmarks).
pub fn available() -> Vec<Isa> {
    let mut v = vec![Isa::Portable];
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            v.push(Isa::Avx2);
            if is_x86_feature_detected!("avx512f") {
                v.push(Isa::Avx512);
            }
        }
    }
    v
}

/// Runs `f` with the kernels of `isa` on this thread (which must be one of
/// [`available`]).
pub fn with_isa<R>(isa: Isa, f: impl FnOnce() -> R) -> R {
    assert!(
        available().contains(&isa),
        "{isa:?} is not available on this CPU"
    );
    let old = FORCED.with(|c| c.replace(Some(isa)));
    let r = f();
    FORCED.with(|c| c.set(old));
    r
}

/// Defines `pub fn $name(args)` whose portable body is compiled per ISA and
/// dispatched on [`isa`]. The body sees a `const FMA: bool`: true where fused
/// multiply–add is an instruction (then [`madd`] fuses), false on the
/// baseline (where `mul_add` would be a slow libm call).
macro_rules! multiversion {
    // With a hand-written AVX-512 version (intrinsics the portable body
    // cannot express: scalef, rcp14).
    (avx512 = $over:path; $(#[$m:meta])* pub fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $body:block) => {
        $(#[$m])*
        pub fn $name($($arg: $ty),*) {
            #[inline(always)]
            #[allow(non_snake_case)]
            fn body<const FMA: bool>($($arg: $ty),*) $body
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,fma")]
            fn v256($($arg: $ty),*) { body::<true>($($arg),*) }
            match isa() {
                // SAFETY: `isa` only reports what the CPU supports.
                #[cfg(target_arch = "x86_64")]
                Isa::Avx512 => unsafe { $over($($arg),*) },
                // SAFETY: as above.
                #[cfg(target_arch = "x86_64")]
                Isa::Avx2 => unsafe { v256($($arg),*) },
                Isa::Portable => body::<false>($($arg),*),
            }
        }
    };
    ($(#[$m:meta])* pub fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $body:block) => {
        $(#[$m])*
        pub fn $name($($arg: $ty),*) {
            #[inline(always)]
            #[allow(non_snake_case)]
            fn body<const FMA: bool>($($arg: $ty),*) $body
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx512f,avx2,fma")]
            fn v512($($arg: $ty),*) { body::<true>($($arg),*) }
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,fma")]
            fn v256($($arg: $ty),*) { body::<true>($($arg),*) }
            match isa() {
                // SAFETY: `isa` only reports what the CPU supports.
                #[cfg(target_arch = "x86_64")]
                Isa::Avx512 => unsafe { v512($($arg),*) },
                // SAFETY: as above.
                #[cfg(target_arch = "x86_64")]
                Isa::Avx2 => unsafe { v256($($arg),*) },
                Isa::Portable => body::<false>($($arg),*),
            }
        }
    };
}

/// `a·b + c`, fused when `FMA`.
#[inline(always)]
pub fn madd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA { a.mul_add(b, c) } else { a * b + c }
}

const LOG2E: f32 = std::f32::consts::LOG2_E;
/// ln 2 split so that `n · LN2_HI` is exact for |n| < 2^15.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// 1.5 · 2^23: adding it rounds to an integer held in the low mantissa bits.
const ROUND: f32 = 12_582_912.0;

/// `e^x`, branch-free (see the module docs for its range and error).
#[inline(always)]
pub fn exp1<const FMA: bool>(x: f32) -> f32 {
    let xc = x.clamp(-104.0, 89.0);
    let t = madd::<FMA>(xc, LOG2E, ROUND);
    let n = t - ROUND;
    let ni = (t.to_bits() as i32).wrapping_sub(ROUND.to_bits() as i32);
    let r = madd::<FMA>(-n, LN2_LO, madd::<FMA>(-n, LN2_HI, xc));
    let mut p = 1.987_569_1e-4f32;
    p = madd::<FMA>(p, r, 1.398_199_9e-3);
    p = madd::<FMA>(p, r, 8.333_452e-3);
    p = madd::<FMA>(p, r, 4.166_579_6e-2);
    p = madd::<FMA>(p, r, 1.666_666_5e-1);
    p = madd::<FMA>(p, r, 0.5);
    let p = madd::<FMA>(p * r, r, r) + 1.0;
    let n1 = ni >> 1;
    let s1 = f32::from_bits(((n1 + 127) as u32) << 23);
    let s2 = f32::from_bits(((ni - n1 + 127) as u32) << 23);
    let y = p * s1 * s2;
    if x.is_nan() { x } else { y }
}

/// `tanh x`, branch-free.
#[inline(always)]
pub fn tanh1<const FMA: bool>(x: f32) -> f32 {
    let a = x.abs();
    let z = x * x;
    let mut p = -5.704_988_7e-3f32;
    p = madd::<FMA>(p, z, 2.063_909e-2);
    p = madd::<FMA>(p, z, -5.373_971_6e-2);
    p = madd::<FMA>(p, z, 1.333_144_2e-1);
    p = madd::<FMA>(p, z, -3.333_328e-1);
    // On |x|, sign restored last (so tanh(−0) = −0).
    let small = madd::<FMA>(a * z, p, a);
    let e = exp1::<FMA>(2.0 * a);
    let big = 1.0 - 2.0 / (e + 1.0);
    (if a < 0.625 { small } else { big }).copysign(x)
}

/// The logistic sigmoid `1 / (1 + e^{−x})`, branch-free.
#[inline(always)]
pub fn sigmoid1<const FMA: bool>(x: f32) -> f32 {
    let e = exp1::<FMA>(-x.abs());
    let s = 1.0 / (1.0 + e);
    if x >= 0.0 { s } else { e * s }
}

multiversion! {
    avx512 = avx512::exp;
    /// `y = e^x` elementwise.
    pub fn exp(x: &[f32], y: &mut [f32]) {
        for (y, &x) in y.iter_mut().zip(x) {
            *y = exp1::<FMA>(x);
        }
    }
}

multiversion! {
    avx512 = avx512::tanh;
    /// `y = tanh x` elementwise.
    pub fn tanh(x: &[f32], y: &mut [f32]) {
        for (y, &x) in y.iter_mut().zip(x) {
            *y = tanh1::<FMA>(x);
        }
    }
}

multiversion! {
    avx512 = avx512::sigmoid;
    /// `y = sigmoid x` elementwise.
    pub fn sigmoid(x: &[f32], y: &mut [f32]) {
        for (y, &x) in y.iter_mut().zip(x) {
            *y = sigmoid1::<FMA>(x);
        }
    }
}

multiversion! {
    /// `y = max(x, 0)` elementwise.
    pub fn relu(x: &[f32], y: &mut [f32]) {
        for (y, &x) in y.iter_mut().zip(x) {
            *y = x.max(0.0);
        }
    }
}

/// `erf(x)` in f32 (Abramowitz & Stegun 7.1.26: |error| < 1.5e-7).
#[inline]
pub fn erf1(x: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.327_591_1 * x.abs());
    let poly = t
        * (0.254_829_6
            + t * (-0.284_496_74 + t * (1.421_413_7 + t * (-1.453_152_1 + t * 1.061_405_4))));
    let e = 1.0 - poly * (-x * x).exp();
    if x < 0.0 { -e } else { e }
}

/// GELU, `x Φ(x) = x (1 + erf(x / √2)) / 2`.
#[inline]
pub fn gelu1(x: f32) -> f32 {
    0.5 * x * (1.0 + erf1(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// GELU's derivative, `Φ(x) + x φ(x)`.
#[inline]
pub fn gelu_grad1(x: f32) -> f32 {
    const INV_SQRT_2PI: f32 = 0.398_942_3;
    0.5 * (1.0 + erf1(x * std::f32::consts::FRAC_1_SQRT_2))
        + x * INV_SQRT_2PI * (-0.5 * x * x).exp()
}

/// Lanes of the row reductions below: independent accumulators, so the
/// compiler keeps them in vector registers (a single running sum or max is
/// a chain it may not reorder).
const LANES: usize = 16;

multiversion! {
    /// The largest of `x` (−∞ for an empty row; a NaN is passed over, as
    /// `f32::max` does), into `max`.
    pub fn row_max(x: &[f32], max: &mut f32) {
        let mut acc = [f32::NEG_INFINITY; LANES];
        let mut chunks = x.chunks_exact(LANES);
        for c in &mut chunks {
            for (a, &v) in acc.iter_mut().zip(c) {
                *a = a.max(v);
            }
        }
        let tail = chunks.remainder().iter().copied().fold(f32::NEG_INFINITY, f32::max);
        *max = acc.iter().copied().fold(tail, f32::max);
    }
}

multiversion! {
    /// `y = e^(x − shift)` elementwise, and `Σ y` into `sum`: a softmax's
    /// numerators and denominator (the log-softmax of a loss over a
    /// vocabulary is thousands of these per row).
    pub fn exp_shifted(x: &[f32], shift: f32, y: &mut [f32], sum: &mut f32) {
        let mut acc = [0.0f32; LANES];
        let mut xs = x.chunks_exact(LANES);
        let mut ys = y.chunks_exact_mut(LANES);
        for (xc, yc) in (&mut xs).zip(&mut ys) {
            for ((a, o), &v) in acc.iter_mut().zip(yc.iter_mut()).zip(xc) {
                *o = exp1::<FMA>(v - shift);
                *a += *o;
            }
        }
        let mut tail = 0.0;
        for (o, &v) in ys.into_remainder().iter_mut().zip(xs.remainder()) {
            *o = exp1::<FMA>(v - shift);
            tail += *o;
        }
        *sum = acc.iter().sum::<f32>() + tail;
    }
}

multiversion! {
    /// `Σ e^(x − shift)` into `sum` ([`exp_shifted`] without keeping the
    /// terms).
    pub fn exp_shifted_sum(x: &[f32], shift: f32, sum: &mut f32) {
        let mut acc = [0.0f32; LANES];
        let mut xs = x.chunks_exact(LANES);
        for xc in &mut xs {
            for (a, &v) in acc.iter_mut().zip(xc) {
                *a += exp1::<FMA>(v - shift);
            }
        }
        let tail: f32 = xs.remainder().iter().map(|&v| exp1::<FMA>(v - shift)).sum();
        *sum = acc.iter().sum::<f32>() + tail;
    }
}

multiversion! {
    /// `y = gelu(x)` elementwise ([`gelu1`]).
    pub fn gelu(x: &[f32], y: &mut [f32]) {
        for (y, &x) in y.iter_mut().zip(x) {
            *y = gelu1(x);
        }
    }
}

multiversion! {
    /// `y = c · x` elementwise (`scale`).
    pub fn scaled(x: &[f32], c: f32, y: &mut [f32]) {
        for (y, &x) in y.iter_mut().zip(x) {
            *y = c * x;
        }
    }
}

multiversion! {
    /// `y = 1 − x` elementwise.
    pub fn one_minus(x: &[f32], y: &mut [f32]) {
        for (y, &x) in y.iter_mut().zip(x) {
            *y = 1.0 - x;
        }
    }
}

multiversion! {
    /// `y = a + b` elementwise.
    pub fn add(a: &[f32], b: &[f32], y: &mut [f32]) {
        for ((y, &a), &b) in y.iter_mut().zip(a).zip(b) {
            *y = a + b;
        }
    }
}

multiversion! {
    /// `y = a − b` elementwise.
    pub fn sub(a: &[f32], b: &[f32], y: &mut [f32]) {
        for ((y, &a), &b) in y.iter_mut().zip(a).zip(b) {
            *y = a - b;
        }
    }
}

multiversion! {
    /// `y = a · b` elementwise.
    pub fn mul(a: &[f32], b: &[f32], y: &mut [f32]) {
        for ((y, &a), &b) in y.iter_mut().zip(a).zip(b) {
            *y = a * b;
        }
    }
}

multiversion! {
    /// `y += x` elementwise.
    pub fn accumulate(y: &mut [f32], x: &[f32]) {
        for (y, &x) in y.iter_mut().zip(x) {
            *y += x;
        }
    }
}

/// The vector–Jacobian products of the backward row ops: each writes
/// `dx = …` when `store` (the op is the gradient's first writer) and
/// `dx += …` otherwise.
macro_rules! vjp {
    ($(#[$m:meta])* pub fn $name:ident($dy:ident, $v:ident: $vt:ty, $dx:ident) => |$g:ident, $x:ident| $e:expr) => {
        multiversion! {
            $(#[$m])*
            pub fn $name($dy: &[f32], $v: $vt, $dx: &mut [f32], store: bool) {
                if store {
                    vjp!(@loop $dy, $v, $dx, $g, $x, =, $e);
                } else {
                    vjp!(@loop $dy, $v, $dx, $g, $x, +=, $e);
                }
            }
        }
    };
    (@loop $dy:ident, $v:ident, $dx:ident, $g:ident, $x:ident, $op:tt, $e:expr) => {
        for ((d, &$g), &$x) in $dx.iter_mut().zip($dy).zip($v) {
            *d $op $e;
        }
    };
}

vjp! {
    /// Sigmoid's: `dx (+)= dy · y(1 − y)` (`v` = `y`).
    pub fn sigmoid_vjp(dy, v: &[f32], dx) => |g, y| g * y * (1.0 - y)
}

vjp! {
    /// Tanh's: `dx (+)= dy · (1 − y²)` (`v` = `y`).
    pub fn tanh_vjp(dy, v: &[f32], dx) => |g, y| g * (1.0 - y * y)
}

vjp! {
    /// ReLU's: `dx (+)= dy · [x > 0]` (`v` = `x`).
    pub fn relu_vjp(dy, v: &[f32], dx) => |g, x| if x > 0.0 { g } else { 0.0 }
}

vjp! {
    /// GELU's: `dx (+)= dy · (Φ(x) + x φ(x))` (`v` = `x`).
    pub fn gelu_vjp(dy, v: &[f32], dx) => |g, x| g * gelu_grad1(x)
}

vjp! {
    /// A product's, per factor: `dx (+)= dy · o` (`v` = the other factor);
    /// also exp's, whose derivative is its output (`v` = `y`).
    pub fn mul_vjp(dy, v: &[f32], dx) => |g, o| g * o
}

multiversion! {
    /// A scaled identity's (add, sub, sum, mean, concat, slice, bias):
    /// `dx (+)= s · dy`.
    pub fn scaled_vjp(dy: &[f32], s: f32, dx: &mut [f32], store: bool) {
        if store {
            for (d, &g) in dx.iter_mut().zip(dy) {
                *d = g * s;
            }
        } else {
            for (d, &g) in dx.iter_mut().zip(dy) {
                *d += g * s;
            }
        }
    }
}

multiversion! {
    /// `y *= s` elementwise.
    pub fn scale(y: &mut [f32], s: f32) {
        for y in y.iter_mut() {
            *y *= s;
        }
    }
}

/// AVX-512 versions of the transcendentals: the same formulas as the
/// portable bodies, with `vscalefps` for `p·2ⁿ` (exact over the whole range,
/// subnormals included) and `vrcp14ps` plus one Newton step for the
/// reciprocals (error below 2⁻²⁷, so the stated ulp bounds hold; the test
/// checks every ISA).
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use crate::backend::cpu::simd::{LN2_HI, LN2_LO, LOG2E};

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn exp16(x: __m512) -> __m512 {
        let s = _mm512_set1_ps;
        let xc = _mm512_min_ps(_mm512_max_ps(x, s(-104.0)), s(89.0));
        let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
            _mm512_mul_ps(xc, s(LOG2E)),
        );
        let r = _mm512_fnmadd_ps(n, s(LN2_LO), _mm512_fnmadd_ps(n, s(LN2_HI), xc));
        let mut p = s(1.987_569_1e-4);
        p = _mm512_fmadd_ps(p, r, s(1.398_199_9e-3));
        p = _mm512_fmadd_ps(p, r, s(8.333_452e-3));
        p = _mm512_fmadd_ps(p, r, s(4.166_579_6e-2));
        p = _mm512_fmadd_ps(p, r, s(1.666_666_5e-1));
        p = _mm512_fmadd_ps(p, r, s(0.5));
        let p = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), s(1.0));
        let y = _mm512_scalef_ps(p, n);
        // NaN in, NaN out (the clamp would have replaced it).
        let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x);
        _mm512_mask_mov_ps(y, nan, x)
    }

    /// `1 / d` for `d` in [1, 2^27]: reciprocal estimate, one Newton step.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn recip(d: __m512) -> __m512 {
        let r = _mm512_rcp14_ps(d);
        _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(2.0)))
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn sigmoid16(x: __m512) -> __m512 {
        let abs = _mm512_abs_ps(x);
        let e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), abs));
        let inv = recip(_mm512_add_ps(e, _mm512_set1_ps(1.0)));
        let neg = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(x, _mm512_setzero_ps());
        let y = _mm512_mask_mul_ps(inv, neg, e, inv);
        let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x);
        _mm512_mask_mov_ps(y, nan, x)
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn tanh16(x: __m512) -> __m512 {
        let s = _mm512_set1_ps;
        // tanh rounds to 1 in f32 beyond 9.01; clamping at 10 keeps
        // e^{2|x|} finite (the reciprocal step needs it).
        let a = _mm512_min_ps(_mm512_abs_ps(x), s(10.0));
        let z = _mm512_mul_ps(a, a);
        let mut p = s(-5.704_988_7e-3);
        p = _mm512_fmadd_ps(p, z, s(2.063_909e-2));
        p = _mm512_fmadd_ps(p, z, s(-5.373_971_6e-2));
        p = _mm512_fmadd_ps(p, z, s(1.333_144_2e-1));
        p = _mm512_fmadd_ps(p, z, s(-3.333_328e-1));
        let small = _mm512_fmadd_ps(_mm512_mul_ps(a, z), p, a);
        let e = exp16(_mm512_add_ps(a, a));
        let big = _mm512_fnmadd_ps(s(2.0), recip(_mm512_add_ps(e, s(1.0))), s(1.0));
        let is_small = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(a, s(0.625));
        let t = _mm512_mask_mov_ps(big, is_small, small);
        // Sign of x back on (tanh(−0) = −0).
        let sign = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(i32::MIN));
        let y = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(t), sign));
        let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x);
        _mm512_mask_mov_ps(y, nan, x)
    }

    /// Applies `f` to 16 floats at a time (a masked tail).
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn map(x: &[f32], y: &mut [f32], f: impl Fn(__m512) -> __m512) {
        let n = x.len().min(y.len());
        let mut i = 0;
        // SAFETY: every load and store is within the first `n` elements of
        // both slices (masked in the tail).
        unsafe {
            while i + 16 <= n {
                let v = _mm512_loadu_ps(x.as_ptr().add(i));
                _mm512_storeu_ps(y.as_mut_ptr().add(i), f(v));
                i += 16;
            }
            if i < n {
                let m: __mmask16 = ((1u32 << (n - i)) - 1) as u16;
                let v = _mm512_maskz_loadu_ps(m, x.as_ptr().add(i));
                _mm512_mask_storeu_ps(y.as_mut_ptr().add(i), m, f(v));
            }
        }
    }

    /// `y = e^x`.
    #[target_feature(enable = "avx512f")]
    pub(super) fn exp(x: &[f32], y: &mut [f32]) {
        map(x, y, |v| exp16(v))
    }

    /// `y = sigmoid x`.
    #[target_feature(enable = "avx512f")]
    pub(super) fn sigmoid(x: &[f32], y: &mut [f32]) {
        map(x, y, |v| sigmoid16(v))
    }

    /// `y = tanh x`.
    #[target_feature(enable = "avx512f")]
    pub(super) fn tanh(x: &[f32], y: &mut [f32]) {
        map(x, y, |v| tanh16(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance in units in the last place between `got` and the f64 `want`
    /// rounded to f32 (both finite, same sign or zero).
    fn ulps(got: f32, want: f64) -> u64 {
        let w = want as f32;
        if got == w {
            return 0;
        }
        let key = |v: f32| {
            let b = v.to_bits() as i64;
            if b < 0 { i64::MIN - b } else { b }
        };
        let (a, b) = (key(got), key(w));
        a.abs_diff(b)
    }

    fn worst(f: fn(&[f32], &mut [f32]), exact: fn(f64) -> f64) -> (u64, f32) {
        // Every 509th float of [-104, 0) then [0, 89] (4.4 M points, every
        // exponent and every mantissa residue class mod 509 covered).
        const STRIDE: u32 = 509;
        let mut xs = Vec::new();
        let mut b = (-104.0f32).to_bits();
        while f32::from_bits(b) < 0.0 || f32::from_bits(b).is_sign_negative() {
            xs.push(f32::from_bits(b));
            if b <= 0x8000_0000 + STRIDE {
                break;
            }
            b -= STRIDE;
        }
        let mut b = 0u32;
        while f32::from_bits(b) <= 89.0 {
            xs.push(f32::from_bits(b));
            b += STRIDE;
        }
        let mut ys = vec![0.0; xs.len()];
        f(&xs, &mut ys);
        let mut worst = (0, 0.0);
        for (&x, &y) in xs.iter().zip(&ys) {
            let want = exact(f64::from(x));
            if (want as f32).is_subnormal() || want == 0.0 {
                assert!(
                    (f64::from(y) - want).abs() <= 1e-38,
                    "x = {x}: {y} vs {want}"
                );
                continue;
            }
            let u = ulps(y, want);
            if u > worst.0 {
                worst = (u, x);
            }
        }
        worst
    }

    #[test]
    fn transcendentals_are_within_their_stated_ulps() {
        let sig = |x: f64| 1.0 / (1.0 + (-x).exp());
        for isa in available() {
            with_isa(isa, || {
                let (e, ex) = worst(exp, f64::exp);
                let (s, sx) = worst(sigmoid, sig);
                let (t, tx) = worst(tanh, f64::tanh);
                assert!(e <= 2, "{isa:?}: exp off by {e} ulp at {ex}");
                assert!(s <= 3, "{isa:?}: sigmoid off by {s} ulp at {sx}");
                assert!(t <= 3, "{isa:?}: tanh off by {t} ulp at {tx}");
            });
        }
    }

    #[test]
    fn saturation_infinities_and_nan() {
        for isa in available() {
            with_isa(isa, || {
                let x = [
                    f32::NAN,
                    f32::INFINITY,
                    f32::NEG_INFINITY,
                    89.0,
                    88.0,
                    -200.0,
                    0.0,
                    -0.0,
                ];
                let mut y = [0.0; 8];
                exp(&x, &mut y);
                assert!(y[0].is_nan());
                assert_eq!(&y[1..3], &[f32::INFINITY, 0.0]);
                assert_eq!(y[3], f32::INFINITY);
                assert!(y[4].is_finite() && (y[4] / 88f32.exp() - 1.0).abs() < 1e-6);
                assert_eq!(&y[5..], &[0.0, 1.0, 1.0]);
                sigmoid(&x, &mut y);
                assert!(y[0].is_nan());
                assert_eq!(&y[1..4], &[1.0, 0.0, 1.0]);
                assert_eq!(y[5], 0.0);
                assert_eq!(&y[6..], &[0.5, 0.5]);
                tanh(&x, &mut y);
                assert!(y[0].is_nan());
                assert_eq!(&y[1..4], &[1.0, -1.0, 1.0]);
                assert_eq!(y[5], -1.0);
                assert_eq!(y[6].to_bits(), 0.0f32.to_bits());
                assert_eq!(y[7].to_bits(), (-0.0f32).to_bits());
            });
        }
    }
}
