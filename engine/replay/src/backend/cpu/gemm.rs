//! The replay engine's GEMM: `C[M×N] = init + A[M×K] · Wᵀ` where `W` (`N×K`,
//! the weights) is packed **once per session** and `A` (the activations: one
//! row per instance) is read through strided, K-concatenated segments.
//!
//! Why not a library call per batch: every library GEMM (matrixmultiply,
//! OpenBLAS) packs *both* operands on every call. A cell's weights do not
//! change during a run, and a batch has few rows (trees shrink to a handful of
//! nodes per level, lattices run 20–30-row batches), so re-packing a
//! `5H × 2H` stacked weight matrix per batch costs as much as the product
//! itself at small `M`. Here the weights are packed into `KC × NR` panels
//! (each stored as two contiguous 16-column halves, [`PackedB`]) when
//! a session opens, `A` (small) is packed per call — or, when the weights
//! have few panels ([`DIRECT_A_MAX_PANELS`]), read in place by the kernel
//! row by row, since then the copy costs more than it saves — and the micro-kernel
//! writes `C` straight into its destination rows (an instance record, with
//! any row stride), starting from the bias or zero (`β = 0`, no zero-fill).
//! A multi-term affine (`b + W₁x₁ + W₂x₂`) is one product over the
//! concatenated `K` axis, so its terms never go through a temporary.
//!
//! Blocking (BLIS order): for each `KC` block of K, the rows of `A` are
//! packed into `MR`-row panels (they stay in L2); for each `NR`-column weight
//! panel (`KC × NR` floats, 32 KiB, read from L1 or L2), the kernel runs
//! over every row panel. Threads split the weight panels (or the row panels
//! when there are few weight panels); see [`super::threads`].
//!
//! The micro-kernel is AVX-512 (`MR × NR = 12 × 32`: 24 accumulators) where
//! the CPU has it; on AVX2 + FMA it runs each `12 × 32` tile as `6 × 16`
//! sub-tiles (12 of the 16 `ymm` registers: the whole tile would need 48),
//! and elsewhere a portable kernel the compiler vectorises. All read the same
//! packed formats, and a test runs each the CPU has against a naive product.

use super::simd::{self, Isa};

/// Columns of a weight panel (two 16-float AVX-512 vectors).
pub const NR: usize = 32;
/// Columns of a panel's half: a panel is stored as its first `HALF` columns
/// (`kc × HALF`, contiguous) and then its second (see [`PackedB`]).
pub const HALF: usize = NR / 2;
/// Rows of an activation panel (the AVX-512 kernel keeps `MR × NR` in 24
/// registers).
pub const MR: usize = 12;
/// K block: a `KC × NR` weight panel (32 KiB) plus an `MR × KC` activation
/// panel (12 KiB) fit a 48 KiB L1 (128, 192, 256 and 384 were measured on the
/// engine's shapes; 256 was best by 3–6 %, docs/benchmarks.md).
pub const KC: usize = 256;

/// A 64-byte-aligned block of floats (one cache line).
#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
pub struct Line(pub [f32; 16]);

/// A growable buffer of 64-byte-aligned floats (kept by a session and reused,
/// so steady-state runs never allocate).
#[derive(Default)]
pub struct AlignedBuf {
    lines: Vec<Line>,
}

impl AlignedBuf {
    /// At least `n` floats (contents unspecified).
    pub fn reserve_floats(&mut self, n: usize) -> &mut [f32] {
        let lines = n.div_ceil(16);
        if self.lines.len() < lines {
            self.lines.resize(lines, Line::default());
        }
        let all = self.floats_mut();
        &mut all[..n]
    }

    /// Every float of the buffer.
    pub fn floats_mut(&mut self) -> &mut [f32] {
        let len = self.lines.len() * 16;
        // SAFETY: `Line` is `repr(C)` over `[f32; 16]`, so the lines are
        // `16 × len` consecutive, initialised floats.
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().cast::<f32>(), len) }
    }

    /// Every float of the buffer.
    pub fn floats(&self) -> &[f32] {
        // SAFETY: as in `floats_mut`.
        unsafe {
            std::slice::from_raw_parts(self.lines.as_ptr().cast::<f32>(), self.lines.len() * 16)
        }
    }
}

/// Weights `W` (`N×K`) packed as `Wᵀ` panels: for K block `kb` (rows
/// `kb·KC ..`, `kc` of them) and column panel `jp`, `kc × NR` floats at
/// `kb·KC·n_pad + jp·kc·NR`, element `(p, jj)` = `W[jp·NR + jj][kb·KC + p]`
/// at `half_major(kc, p, jj)` in the panel, zero beyond `N`.
///
/// Why halves: the AVX2 kernel runs a panel 16 columns at a time. With the
/// two halves interleaved row by row (128-byte rows), one half's `kc` rows
/// sat 128 bytes apart, in every other L1 set: 16 KiB that filled all eight
/// ways of half the sets, so every activation line evicted weights. Stored
/// half after half, each is a contiguous 16 KiB stream over all sets.
/// Measured on the AVX2 VM (docs/journal.md, "Weight panels in
/// halves"): 24- and 64-row products 1.1–1.25× faster, 256 rows level.
pub struct PackedB {
    n: usize,
    k: usize,
    buf: AlignedBuf,
    /// Bias per output column, padded to `n_pad` (zeros when none).
    bias: Option<AlignedBuf>,
}

impl PackedB {
    /// Packs `W` given element-wise: `w(i, p)` = row `i < n` (output feature),
    /// column `p < k` (input feature). `bias`, when given, has `n` floats.
    pub fn new(
        n: usize,
        k: usize,
        w: impl Fn(usize, usize) -> f32,
        bias: Option<&[f32]>,
    ) -> PackedB {
        let n_pad = n.div_ceil(NR) * NR;
        let mut buf = AlignedBuf::default();
        let data = buf.reserve_floats(n_pad * k);
        for kb in 0..k.div_ceil(KC) {
            let k0 = kb * KC;
            let kc = KC.min(k - k0);
            for jp in 0..n_pad / NR {
                let panel = &mut data[k0 * n_pad + jp * kc * NR..][..kc * NR];
                for jj in 0..NR {
                    let i = jp * NR + jj;
                    for p in 0..kc {
                        panel[half_major(kc, p, jj)] = if i < n { w(i, k0 + p) } else { 0.0 };
                    }
                }
            }
        }
        let bias = bias.map(|b| {
            assert_eq!(b.len(), n, "bias length");
            let mut bb = AlignedBuf::default();
            let d = bb.reserve_floats(n_pad);
            d.fill(0.0);
            d[..n].copy_from_slice(b);
            bb
        });
        PackedB { n, k, buf, bias }
    }

    /// Repacks in place (the buffer is reused) from `K` rows of `N` floats:
    /// `W[i][p] = row(p)[i]`, i.e. the rows are the K axis. No bias.
    pub fn refill<'r>(&mut self, n: usize, k: usize, row: impl Fn(usize) -> &'r [f32]) {
        let n_pad = n.div_ceil(NR) * NR;
        self.n = n;
        self.k = k;
        self.bias = None;
        let data = self.buf.reserve_floats(n_pad * k);
        for kb in 0..k.div_ceil(KC) {
            let k0 = kb * KC;
            let kc = KC.min(k - k0);
            for p in 0..kc {
                let src = row(k0 + p);
                for jp in 0..n_pad / NR {
                    let panel = &mut data[k0 * n_pad + jp * kc * NR..][..kc * NR];
                    for h in 0..NR / HALF {
                        let dst = &mut panel[half_major(kc, p, h * HALF)..][..HALF];
                        let j0 = jp * NR + h * HALF;
                        let live = HALF.min(n.saturating_sub(j0));
                        if live > 0 {
                            dst[..live].copy_from_slice(&src[j0..j0 + live]);
                        }
                        dst[live..].fill(0.0);
                    }
                }
            }
        }
    }

    /// Output columns `N`.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Inner dimension `K`.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        (self.buf.lines.len() + self.bias.as_ref().map_or(0, |b| b.lines.len())) * 64
    }

    fn n_pad(&self) -> usize {
        self.n.div_ceil(NR) * NR
    }

    fn panel(&self, kb: usize, jp: usize) -> Panel {
        let k0 = kb * KC;
        let kc = KC.min(self.k - k0);
        Panel {
            lo: self.buf.floats()[k0 * self.n_pad() + jp * kc * NR..].as_ptr(),
            hi: kc * HALF,
        }
    }
}

/// A packed weight panel as the kernels read it: K step `p`'s first
/// [`HALF`] columns at `lo + p·HALF`, its second at `lo + hi + p·HALF`.
#[derive(Clone, Copy)]
struct Panel {
    lo: *const f32,
    hi: usize,
}

impl Panel {
    /// The panel from K step `p` on (the same halves).
    ///
    /// # Safety
    /// `p` is at most the panel's `kc`.
    unsafe fn skip(self, p: usize) -> Panel {
        Panel {
            // SAFETY: inside the panel's first half (the caller's bound).
            lo: unsafe { self.lo.add(p * HALF) },
            hi: self.hi,
        }
    }
}

/// Where element `(p, jj)` (K step `p < kc`, column `jj < NR`) of a packed
/// `kc × NR` weight panel lies: the first [`HALF`] columns' `kc` rows, then
/// the second's.
#[inline]
fn half_major(kc: usize, p: usize, jj: usize) -> usize {
    (jj / HALF) * kc * HALF + p * HALF + jj % HALF
}

/// One K segment of the activations: row `r`'s `len` floats start at
/// `ptr + r·rs`. A GEMM's K axis is its segments concatenated.
#[derive(Clone, Copy, Debug)]
pub struct ASeg<'a> {
    ptr: *const f32,
    rs: usize,
    len: usize,
    /// Row pointers instead of a stride: row `r` starts `off` floats after
    /// the address `table[r·rs]` (exposed with `expose_provenance`).
    table: *const usize,
    off: usize,
    _data: std::marker::PhantomData<&'a [f32]>,
}

// SAFETY: an `ASeg` is a shared view of floats (like `&[f32]`).
unsafe impl Send for ASeg<'_> {}
unsafe impl Sync for ASeg<'_> {}

/// Most K segments one [`gemm`] call takes (an affine with more terms is
/// split into accumulating calls by its plan).
pub const MAX_SEGS: usize = 8;

impl ASeg<'static> {
    /// An empty segment (a placeholder in fixed arrays).
    pub const EMPTY: ASeg<'static> = ASeg {
        ptr: std::ptr::null(),
        rs: 0,
        len: 0,
        table: std::ptr::null(),
        off: 0,
        _data: std::marker::PhantomData,
    };
}

impl<'a> ASeg<'a> {
    /// A segment whose rows are anywhere: row `r`'s `len` floats start `off`
    /// floats after the address `table[r·stride]` (the producers' output
    /// slots of a batch's nodes, read in place).
    ///
    /// # Safety
    /// As [`ASeg::raw`], for every row the table gives.
    pub unsafe fn rows(table: *const usize, stride: usize, off: usize, len: usize) -> ASeg<'a> {
        ASeg {
            ptr: std::ptr::null(),
            rs: stride,
            len,
            table,
            off,
            _data: std::marker::PhantomData,
        }
    }

    /// Row `r`'s first float.
    ///
    /// # Safety
    /// `r` is a row of the GEMM the segment was made for.
    unsafe fn row(&self, r: usize) -> *const f32 {
        // SAFETY: the constructors' contracts.
        unsafe {
            if self.table.is_null() {
                self.ptr.add(r * self.rs)
            } else {
                std::ptr::with_exposed_provenance::<f32>(*self.table.add(r * self.rs)).add(self.off)
            }
        }
    }

    /// `m` rows of `len` floats in `data`, row `r` at `base + r·rs`.
    /// Panics if they do not fit (a bookkeeping bug, not bad input).
    pub fn new(data: &'a [f32], base: usize, rs: usize, len: usize, m: usize) -> ASeg<'a> {
        assert!(
            m == 0 || len == 0 || base + (m - 1) * rs + len <= data.len(),
            "A segment out of bounds"
        );
        ASeg {
            ptr: data[base.min(data.len())..].as_ptr(),
            rs,
            len,
            table: std::ptr::null(),
            off: 0,
            _data: std::marker::PhantomData,
        }
    }

    /// A segment over raw memory.
    ///
    /// # Safety
    /// The rows the GEMM reads (`m` of them, `len` floats at `ptr + r·rs`)
    /// must stay valid and must not overlap the `C` rectangle it writes.
    pub unsafe fn raw(ptr: *const f32, rs: usize, len: usize) -> ASeg<'a> {
        ASeg {
            ptr,
            rs,
            len,
            table: std::ptr::null(),
            off: 0,
            _data: std::marker::PhantomData,
        }
    }
}

/// What `C` starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Init {
    /// `C = A·Wᵀ (+ bias if the packed weights carry one)`: `C` is not read.
    Overwrite,
    /// `C += A·Wᵀ` (the bias is not added).
    Accumulate,
}

/// Where `C` goes: row `r`, column `j` at `ptr[r·ldc + j]`.
#[derive(Clone, Copy)]
pub struct COut<'a> {
    ptr: *mut f32,
    ldc: usize,
    _data: std::marker::PhantomData<&'a mut [f32]>,
}

// SAFETY: a `COut` is only written inside `gemm`, whose threads write
// disjoint column panels or row panels of it (see `gemm`).
unsafe impl Send for COut<'_> {}
unsafe impl Sync for COut<'_> {}

impl<'a> COut<'a> {
    /// `C` inside `y`: row `r` at `base + r·ldc`, `m` rows of `n` columns.
    /// Panics if that does not fit `y` (a bookkeeping bug, not bad input).
    pub fn new(y: &'a mut [f32], base: usize, ldc: usize, m: usize, n: usize) -> COut<'a> {
        assert!(
            m == 0 || base + (m - 1) * ldc + n <= y.len(),
            "C out of bounds"
        );
        assert!(m <= 1 || ldc >= n, "C rows overlap");
        let len = y.len();
        COut {
            ptr: y[base.min(len)..].as_mut_ptr(),
            ldc,
            _data: std::marker::PhantomData,
        }
    }

    /// `C` over raw memory.
    ///
    /// # Safety
    /// The `m × n` rectangle at `ptr` with row stride `ldc ≥ n` must be valid
    /// for writes, not read through any other reference while the GEMM runs,
    /// and must not overlap its A segments.
    pub unsafe fn raw(ptr: *mut f32, ldc: usize) -> COut<'a> {
        COut {
            ptr,
            ldc,
            _data: std::marker::PhantomData,
        }
    }
}

/// Scratch of [`gemm_outer_acc`] (both operands are packed per call).
#[derive(Default)]
pub struct OuterScratch {
    a: AlignedBuf,
    b: Option<PackedB>,
}

/// Weight gradients: `dW[m × n] += Σ_p dy_p ⊗ x_p` over `rows`, each the
/// exposed addresses of `dy_p` (`m` floats) and `x_p` (`n` floats) — the
/// rows of one batch (eager) or of every batch of a run at once (Cavs' lazy
/// batching: one large product per parameter instead of one per batch).
/// Same micro-kernel as [`gemm`], with `M = m`, `N = n` and the rows as `K`.
///
/// # Safety
/// Every address in `rows` points to that many valid floats, none inside
/// `dw`, and nothing writes them meanwhile.
pub unsafe fn gemm_outer_acc(
    threads: &super::threads::Threads,
    m: usize,
    n: usize,
    rows: &[(usize, usize)],
    dw: &mut [f32],
    scratch: &mut OuterScratch,
) {
    assert!(dw.len() >= m * n, "dW too small");
    // One KC block of rows at a time: packing every row of a lazy product
    // first (thousands of rows) left both packed operands far out of cache
    // (16 MB at h256 for a 4096-row fixed-lstm product) and made lazy
    // batching slower than per-batch products; block by block, the packed
    // operands stay cache-resident and dW accumulates, as GotoBLAS's K loop.
    for chunk in rows.chunks(KC) {
        // SAFETY: the caller's contract covers every row of `rows`.
        unsafe { outer_block(threads, m, n, chunk, dw, scratch) };
    }
}

/// [`gemm_outer_acc`] over at most [`KC`] rows.
///
/// # Safety
///
/// As [`gemm_outer_acc`].
unsafe fn outer_block(
    threads: &super::threads::Threads,
    m: usize,
    n: usize,
    rows: &[(usize, usize)],
    dw: &mut [f32],
    scratch: &mut OuterScratch,
) {
    let k = rows.len();
    if k == 0 || m == 0 || n == 0 {
        return;
    }
    let dy = |p: usize| std::ptr::with_exposed_provenance::<f32>(rows[p].0);
    let x = |p: usize| std::ptr::with_exposed_provenance::<f32>(rows[p].1);
    // A (m × K): panels of MR dW rows; element (ii, p) = dy_p[ip·MR + ii].
    let m_pad = m.div_ceil(MR) * MR;
    let a = scratch.a.reserve_floats(m_pad * k);
    for kb in 0..k.div_ceil(KC) {
        let k0 = kb * KC;
        let kc = KC.min(k - k0);
        for ip in 0..m_pad / MR {
            let panel = &mut a[k0 * m_pad + ip * kc * MR..][..kc * MR];
            let live = MR.min(m - ip * MR);
            for (q, d) in panel.chunks_exact_mut(MR).enumerate() {
                // SAFETY: dy rows hold m floats (the caller's contract).
                let src = unsafe { std::slice::from_raw_parts(dy(k0 + q).add(ip * MR), live) };
                d[..live].copy_from_slice(src);
                d[live..].fill(0.0);
            }
        }
    }
    // B (n × K): the x rows as K, packed like weights.
    let b = scratch
        .b
        .get_or_insert_with(|| PackedB::new(0, 0, |_, _| 0.0, None));
    b.refill(n, k, |p| {
        // SAFETY: x rows hold n floats (the caller's contract).
        unsafe { std::slice::from_raw_parts(x(p), n) }
    });
    let c = COut::new(dw, 0, n, m, n);
    let t = threads.count_for(2 * m * n * k);
    run_panels(threads, t, m, a, b, c, Init::Accumulate);
}

/// The output gradients of a deferred weight-gradient product, packed as
/// they are produced: `k` rows of `m` floats laid out as the product's `A`
/// operand (per block of [`KC`] rows, panels of [`MR`] floats per row), so
/// that [`gemm_outer_acc_packed`] packs nothing but its inputs. Writing a
/// row here costs what keeping it unpacked did; packing it again later read
/// it back from memory (3–4 % of a Tree-LSTM training step).
#[derive(Clone, Copy, Debug)]
pub struct PackedRows {
    /// Floats of a row.
    pub m: usize,
    /// Rows.
    pub k: usize,
}

impl PackedRows {
    /// Floats the packed rows take.
    pub fn floats(&self) -> usize {
        self.m.div_ceil(MR) * MR * self.k
    }

    /// Puts row `p` (`m` floats of `src`) into `dst` (`floats()` of them; the
    /// padding floats are never written, so `dst` must start zeroed).
    pub fn put(&self, dst: &mut [f32], p: usize, src: &[f32]) {
        let m_pad = self.m.div_ceil(MR) * MR;
        let (kb, q) = (p / KC, p % KC);
        let kc = KC.min(self.k - kb * KC);
        let block = &mut dst[kb * KC * m_pad..][..m_pad * kc];
        let pieces = src[..self.m].chunks_exact(MR);
        let tail = pieces.remainder();
        let mut at = q * MR;
        for piece in pieces {
            // A fixed-size copy the compiler inlines (a memmove call per 48
            // bytes cost 2 % of a training step).
            let d: &mut [f32; MR] = (&mut block[at..at + MR]).try_into().expect("MR floats");
            *d = piece.try_into().expect("MR floats");
            at += kc * MR;
        }
        if !tail.is_empty() {
            block[at..at + tail.len()].copy_from_slice(tail);
        }
    }
}

/// [`gemm_outer_acc`] for several weights that read the same input, their
/// output gradients packed ahead ([`PackedRows`]): `dW_t[m_t × n] += Σ_p
/// dy_{t,p} ⊗ x_p` for every `(dy_t, layout_t, w_t)` of `outs` (`dW_t` at
/// `dw[w_t ..]`, row-major; the regions must not overlap), `xs` the
/// addresses of `x_p` (`n` floats each, `k = xs.len()` rows). Each block of
/// rows packs `x` once for all the weights — Tree-LSTM's five gates read
/// the same child state — while every `dW_t` stays its own cache-sized
/// product.
///
/// # Safety
/// Every address in `xs` points to `n` valid floats, none inside `dw`, and
/// nothing writes them meanwhile.
pub unsafe fn gemm_outer_acc_packed(
    threads: &super::threads::Threads,
    n: usize,
    xs: &[usize],
    outs: &[(&[f32], PackedRows, usize)],
    dw: &mut [f32],
    scratch: &mut OuterScratch,
) {
    let k = xs.len();
    for &(a, rows, w) in outs {
        assert!(
            rows.k == k && a.len() >= rows.floats(),
            "packed rows do not match"
        );
        assert!(dw.len() >= w + rows.m * n, "dW too small");
    }
    if k == 0 || n == 0 {
        return;
    }
    let b = scratch
        .b
        .get_or_insert_with(|| PackedB::new(0, 0, |_, _| 0.0, None));
    for k0 in (0..k).step_by(KC) {
        let kc = KC.min(k - k0);
        b.refill(n, kc, |p| {
            // SAFETY: x rows hold n floats (the caller's contract).
            unsafe { std::slice::from_raw_parts(std::ptr::with_exposed_provenance(xs[k0 + p]), n) }
        });
        let b: &PackedB = b;
        for &(a, rows, w) in outs {
            let m = rows.m;
            if m == 0 {
                continue;
            }
            let m_pad = m.div_ceil(MR) * MR;
            let packed = &a[k0 * m_pad..][..m_pad * kc];
            let c = COut::new(dw, w, n, m, n);
            let t = threads.count_for(2 * m * n * kc);
            run_panels(threads, t, m, packed, b, c, Init::Accumulate);
        }
    }
}

/// Scratch of the GEMM (packed activations), kept by the caller.
#[derive(Default)]
pub struct GemmScratch {
    a: AlignedBuf,
    /// `a` holds the packed A of the last product (false after one that
    /// read A in place).
    holds_a: bool,
}

/// `C[m × N] = init + A · Wᵀ` with `A`'s K axis given by `a` (segment lengths
/// must add up to `b.k()`). Runs on `threads` (1 = the calling thread).
pub fn gemm(
    threads: &super::threads::Threads,
    m: usize,
    a: &[ASeg<'_>],
    b: &PackedB,
    c: COut<'_>,
    init: Init,
    scratch: &mut GemmScratch,
) {
    gemm_reusing(threads, m, a, b, c, init, scratch, false)
}

/// [`gemm`], optionally with the activations `scratch` packed for the
/// previous call (`reuse_a`): the caller guarantees that call had the same
/// `m` and the same A rows with unchanged contents (a cell's products that
/// read the same inputs, e.g. Cavs' five gate affines over `[h_l | h_r]`).
#[allow(clippy::too_many_arguments)]
pub fn gemm_reusing(
    threads: &super::threads::Threads,
    m: usize,
    a: &[ASeg<'_>],
    b: &PackedB,
    c: COut<'_>,
    init: Init,
    scratch: &mut GemmScratch,
    reuse_a: bool,
) {
    gemm_read_a(threads, m, a, b, c, init, scratch, reuse_a, ReadA::Auto)
}

/// [`gemm_reusing`] with the way `A` is read chosen (benchmarks and tests
/// compare the two on the same products).
#[allow(clippy::too_many_arguments)]
pub fn gemm_read_a(
    threads: &super::threads::Threads,
    m: usize,
    a: &[ASeg<'_>],
    b: &PackedB,
    c: COut<'_>,
    init: Init,
    scratch: &mut GemmScratch,
    reuse_a: bool,
    read: ReadA,
) {
    let k = b.k;
    assert_eq!(
        a.iter().map(|s| s.len).sum::<usize>(),
        k,
        "A segments do not add up to K"
    );
    assert!(a.len() <= MAX_SEGS, "more than MAX_SEGS A segments");
    if m == 0 || b.n == 0 {
        return;
    }
    if k == 0 {
        // No product: C = bias (or unchanged when accumulating).
        if init == Init::Overwrite {
            for r in 0..m {
                for j in 0..b.n {
                    let v = b.bias.as_ref().map_or(0.0, |bb| bb.floats()[j]);
                    // SAFETY: within the C rectangle checked by `COut::new`.
                    unsafe { *c.ptr.add(r * c.ldc + j) = v };
                }
            }
        }
        return;
    }
    let m_pad = m.div_ceil(MR) * MR;
    let m_panels = m_pad / MR;
    let flops = 2 * m * b.n * k;
    let t = threads.count_for(flops);
    let isa = simd::isa();
    if direct_a(isa, b, read) {
        scratch.holds_a = false;
        let (n_panels, m_panels) = (b.n_pad() / NR, m.div_ceil(MR));
        for_panel_blocks(threads, t, n_panels, m_panels, |jps, ips| {
            run_block_direct(isa, m, a, b, c, init, jps, ips)
        });
        return;
    }
    let packed = scratch.a.reserve_floats(m_pad * k);
    // The previous product may have read A in place (its weights had fewer
    // panels): then there is nothing packed to reuse.
    if !(reuse_a && scratch.holds_a) {
        scratch.holds_a = true;
        if t > 1 && m_panels > 1 {
            // Row panels pack independently (disjoint parts of the buffer).
            let out = super::threads::SharedMut(packed.as_mut_ptr());
            // SAFETY: the buffer holds m_pad·k floats; each thread writes only
            // the panels `ips` it was given, disjoint from the others'.
            threads.split(m_panels, t, |ips| unsafe {
                pack_a_panels(m, a, k, out, ips)
            });
        } else {
            pack_a(m, a, k, packed);
        }
    }
    run_panels(threads, t, m, packed, b, c, init);
}

/// Whether a product reads `A` in place ([`run_block_direct`]) instead of packing it.
///
/// Packing copies every A float once so that the kernel reads a contiguous
/// panel, which pays when each panel is read by many weight panels. With few
/// weight panels (`N` ≤ [`DIRECT_A_MAX_PANELS`] · `NR`: the h128 and h256
/// cells' gate products, a loss's tag projection) the copy costs more than
/// the kernel's reads from `MR` separate rows: one thread, `cavs`,
/// interleaved (docs/benchmarks.md), lattice-gru b32 h128 1.07× faster,
/// lattice-lstm b64 h256 1.03×, bilstm-tagger b64 h256 1.03×, tree-lstm
/// b64 h256 1.02×; reading in place with 16 or more weight panels (h512) was
/// level to 2 % slower. AVX-512 only: the AVX2 kernel reads A in place
/// (`ReadA::InPlace`) but measured level with packing on the same products
/// (criterion `gemm/a_in_place` against `gemm/a_packed`, docs/benchmarks.md),
/// so it keeps packing.
fn direct_a(isa: Isa, b: &PackedB, read: ReadA) -> bool {
    match read {
        ReadA::Auto => isa == Isa::Avx512 && b.n_pad() / NR <= DIRECT_A_MAX_PANELS,
        ReadA::Packed => false,
        ReadA::InPlace => isa != Isa::Portable,
    }
}

/// How a product reads its activations `A` (see [`gemm_read_a`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadA {
    /// In place when the weights have at most [`DIRECT_A_MAX_PANELS`]
    /// panels (and the CPU has AVX-512), else packed: what [`gemm`] does.
    Auto,
    /// Always packed into `MR`-row panels first.
    Packed,
    /// Always in place where the CPU has AVX-512 or AVX2 (packed by the
    /// portable kernel).
    InPlace,
}

/// Most weight panels of a product that reads `A` in place (`direct_a`).
pub const DIRECT_A_MAX_PANELS: usize = 8;

/// [`run_block`] with `A` read in place: per K block, per piece of a
/// segment inside it, the kernel reads each row's floats from its own
/// address (the first piece starts from the bias or `C` as `init` says,
/// later ones from `C`).
#[allow(clippy::too_many_arguments)]
fn run_block_direct(
    isa: Isa,
    m: usize,
    a: &[ASeg<'_>],
    b: &PackedB,
    c: COut<'_>,
    init: Init,
    jps: std::ops::Range<usize>,
    ips: std::ops::Range<usize>,
) {
    let k = b.k;
    let rows_all = ips.len() * MR;
    let chunk = (C_BLOCK_BYTES / (rows_all.max(1) * NR * 4)).max(1);
    let mut j0 = jps.start;
    while j0 < jps.end {
        let j1 = (j0 + chunk).min(jps.end);
        let mut first = true;
        for kb in 0..k.div_ceil(KC) {
            let k0 = kb * KC;
            let kc = KC.min(k - k0);
            let mut col = 0;
            for s in a {
                let (lo, hi) = (col.max(k0), (col + s.len).min(k0 + kc));
                col += s.len;
                if lo >= hi {
                    continue;
                }
                let start = if first {
                    match init {
                        Init::Overwrite => Start::Bias,
                        Init::Accumulate => Start::LoadC,
                    }
                } else {
                    Start::LoadC
                };
                first = false;
                for jp in j0..j1 {
                    // SAFETY: the panel holds kc × NR floats; the piece's
                    // columns lo - k0 .. hi - k0 lie inside it.
                    let bp = unsafe { b.panel(kb, jp).skip(lo - k0) };
                    let cols = NR.min(b.n - jp * NR);
                    let bias = match (start, &b.bias) {
                        (Start::Bias, Some(bb)) => Some(bb.floats()[jp * NR..].as_ptr()),
                        _ => None,
                    };
                    for ip in ips.clone() {
                        let rows = MR.min(m - ip * MR);
                        let mut src = [std::ptr::null::<f32>(); MR];
                        for (ii, p) in src.iter_mut().enumerate().take(rows) {
                            // SAFETY: row ip·MR + ii < m of the segment,
                            // columns lo - (col - len) .. within its len.
                            *p = unsafe { s.row(ip * MR + ii).add(lo + s.len - col) };
                        }
                        // SAFETY: as in `run_block`, with A's rows valid for
                        // hi - lo floats from `src`.
                        unsafe {
                            let cp = c.ptr.add(ip * MR * c.ldc + jp * NR);
                            kernel_direct(
                                isa,
                                hi - lo,
                                &src,
                                bp,
                                cp,
                                c.ldc,
                                rows,
                                cols,
                                start,
                                bias,
                            );
                        }
                    }
                }
            }
        }
        j0 = j1;
    }
}

/// `$f::<R>(args)` with `R` = `$rows` (1 to [`MR`]) as a const generic: a
/// kernel is compiled once per tile height, so its row loops unroll.
macro_rules! by_rows {
    ($f:ident, $rows:expr, ($($arg:expr),*)) => {
        match $rows {
            1 => $f::<1>($($arg),*),
            2 => $f::<2>($($arg),*),
            3 => $f::<3>($($arg),*),
            4 => $f::<4>($($arg),*),
            5 => $f::<5>($($arg),*),
            6 => $f::<6>($($arg),*),
            7 => $f::<7>($($arg),*),
            8 => $f::<8>($($arg),*),
            9 => $f::<9>($($arg),*),
            10 => $f::<10>($($arg),*),
            11 => $f::<11>($($arg),*),
            _ => $f::<12>($($arg),*),
        }
    };
}

/// [`kernel`] with `A`'s rows read in place (AVX-512 and AVX2 only).
///
/// # Safety
/// As [`kernel`], with each of the first `rows` pointers of `a` valid for
/// `kc` floats.
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_direct(
    isa: Isa,
    kc: usize,
    a: &[*const f32; MR],
    b: Panel,
    c: *mut f32,
    ldc: usize,
    rows: usize,
    cols: usize,
    start: Start,
    bias: Option<*const f32>,
) {
    // SAFETY: forwarded from the caller; `direct_a` chooses this path only
    // on a CPU with the ISA's kernel.
    unsafe {
        match isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => by_rows!(
                kernel_avx512_direct,
                rows,
                (kc, a, b, c, ldc, cols, start, bias)
            ),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => by_rows!(
                kernel_avx2_direct,
                rows,
                (kc, a, b, c, ldc, cols, start, bias)
            ),
            Isa::Portable => unreachable!("A is read in place only by the SIMD kernels"),
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_avx512_direct<const R: usize>(
    kc: usize,
    a: &[*const f32; MR],
    b: Panel,
    c: *mut f32,
    ldc: usize,
    cols: usize,
    start: Start,
    bias: Option<*const f32>,
) {
    use std::arch::x86_64::*;
    let full = cols >= NR;
    let m0: __mmask16 = if cols >= 16 {
        0xFFFF
    } else {
        ((1u32 << cols) - 1) as u16
    };
    let m1: __mmask16 = if cols >= NR {
        0xFFFF
    } else if cols > 16 {
        ((1u32 << (cols - 16)) - 1) as u16
    } else {
        0
    };
    // SAFETY (whole body): the caller guarantees the extents.
    unsafe {
        let (b, bh) = (b.lo, b.hi);
        let mut acc = [[_mm512_setzero_ps(); 2]; R];
        match start {
            Start::Bias => {
                if let Some(bp) = bias {
                    let b0 = _mm512_loadu_ps(bp);
                    let b1 = _mm512_loadu_ps(bp.add(16));
                    for row in acc.iter_mut() {
                        *row = [b0, b1];
                    }
                }
            }
            Start::LoadC => {
                for (i, row) in acc.iter_mut().enumerate() {
                    let cp = c.add(i * ldc);
                    if full {
                        row[0] = _mm512_loadu_ps(cp);
                        row[1] = _mm512_loadu_ps(cp.add(16));
                    } else {
                        row[0] = _mm512_maskz_loadu_ps(m0, cp);
                        row[1] = _mm512_maskz_loadu_ps(m1, cp.add(16));
                    }
                }
            }
        }
        let mut ap: [*const f32; R] = [std::ptr::null(); R];
        ap.copy_from_slice(&a[..R]);
        let mut bp = b;
        for _ in 0..kc {
            _mm_prefetch::<_MM_HINT_T0>(bp.wrapping_add(32 * HALF).cast());
            _mm_prefetch::<_MM_HINT_T0>(bp.wrapping_add(32 * HALF + bh).cast());
            let b0 = _mm512_loadu_ps(bp);
            let b1 = _mm512_loadu_ps(bp.add(bh));
            for (i, row) in acc.iter_mut().enumerate() {
                let ai = _mm512_set1_ps(*ap[i]);
                ap[i] = ap[i].add(1);
                row[0] = _mm512_fmadd_ps(ai, b0, row[0]);
                row[1] = _mm512_fmadd_ps(ai, b1, row[1]);
            }
            bp = bp.add(HALF);
        }
        for (i, row) in acc.iter().enumerate() {
            let cp = c.add(i * ldc);
            if full {
                _mm512_storeu_ps(cp, row[0]);
                _mm512_storeu_ps(cp.add(16), row[1]);
            } else {
                _mm512_mask_storeu_ps(cp, m0, row[0]);
                _mm512_mask_storeu_ps(cp.add(16), m1, row[1]);
            }
        }
    }
}

/// Every kernel call of `C = init + A·Wᵀ` (`A` packed for `m` rows, one
/// or more K blocks as `b`) on `t` threads: split over weight panels when
/// there are enough of them, else over row panels.
fn run_panels(
    threads: &super::threads::Threads,
    t: usize,
    m: usize,
    packed: &[f32],
    b: &PackedB,
    c: COut<'_>,
    init: Init,
) {
    let isa = simd::isa();
    let (n_panels, m_panels) = (b.n_pad() / NR, m.div_ceil(MR));
    for_panel_blocks(threads, t, n_panels, m_panels, |jps, ips| {
        run_block(isa, m, packed, b, c, init, jps, ips)
    });
}

/// `block(weight panels, row panels)` over all `n_panels × m_panels` of a
/// product on `t` threads: split over the weight panels when there are
/// enough of them, else over the row panels.
fn for_panel_blocks(
    threads: &super::threads::Threads,
    t: usize,
    n_panels: usize,
    m_panels: usize,
    block: impl Fn(std::ops::Range<usize>, std::ops::Range<usize>) + Sync,
) {
    if t <= 1 {
        block(0..n_panels, 0..m_panels);
    } else if n_panels >= 2 * t || m_panels < t {
        threads.split(n_panels, t, |jps| block(jps, 0..m_panels));
    } else {
        threads.split(m_panels, t, |ips| block(0..n_panels, ips));
    }
}

/// Packs `A` (`m` rows, K axis = the segments) into `MR`-row panels per K
/// block: block `kb`'s panel `ip` at `kb·KC·m_pad + ip·kc·MR`, element `(p, ii)`
/// = row `ip·MR + ii`, column `kb·KC + p`; rows beyond `m` are zero
/// (`m_pad` = `m` rounded up to `MR`). What [`gemm`] does first; public for
/// its benchmark.
pub fn pack_a(m: usize, a: &[ASeg<'_>], k: usize, out: &mut [f32]) {
    assert!(
        out.len() >= m.div_ceil(MR) * MR * k,
        "packing buffer too small"
    );
    let out = super::threads::SharedMut(out.as_mut_ptr());
    // SAFETY: the buffer holds every panel (checked above), borrowed mutably.
    unsafe { pack_a_panels(m, a, k, out, 0..m.div_ceil(MR)) }
}

/// [`pack_a`] for row panels `ips` only.
///
/// # Safety
/// `out` points to at least `m_pad·k` floats, and no one else touches the
/// panels `ips` meanwhile.
unsafe fn pack_a_panels(
    m: usize,
    a: &[ASeg<'_>],
    k: usize,
    out: super::threads::SharedMut<f32>,
    ips: std::ops::Range<usize>,
) {
    let m_pad = m.div_ceil(MR) * MR;
    for kb in 0..k.div_ceil(KC) {
        let k0 = kb * KC;
        let kc = KC.min(k - k0);
        for ip in ips.clone() {
            // SAFETY: panel (kb, ip) lies inside the buffer; this call is its
            // only writer (the caller's contract).
            let panel = unsafe {
                std::slice::from_raw_parts_mut(out.get().add(k0 * m_pad + ip * kc * MR), kc * MR)
            };
            let rows = MR.min(m - ip * MR);
            if rows < MR {
                panel.fill(0.0);
            }
            // Walk the segments overlapping columns k0 .. k0 + kc; for each
            // column write the panel's MR floats consecutively (the rows are
            // read as MR sequential streams).
            let mut col = 0;
            for s in a {
                let (lo, hi) = (col.max(k0), (col + s.len).min(k0 + kc));
                if lo < hi {
                    let mut src = [std::ptr::null::<f32>(); MR];
                    for (ii, p) in src.iter_mut().enumerate().take(rows) {
                        // SAFETY: row `ip·MR + ii < m` of the segment is valid
                        // (`ASeg::new` checked it, or `ASeg::raw`'s contract),
                        // columns `lo - col .. hi - col` inside its `len`.
                        *p = unsafe { s.row(ip * MR + ii).add(lo - col) };
                    }
                    let dst = &mut panel[(lo - k0) * MR..(hi - k0) * MR];
                    if rows == MR {
                        // SAFETY: every row has `hi - lo` valid floats from
                        // its pointer (as above); `dst` holds that many
                        // columns of MR floats.
                        unsafe { transpose_rows(&src, hi - lo, dst.as_mut_ptr()) };
                    } else {
                        for (q, d) in dst.chunks_exact_mut(MR).enumerate() {
                            for (ii, v) in d.iter_mut().enumerate().take(rows) {
                                // SAFETY: as above.
                                *v = unsafe { *src[ii].add(q) };
                            }
                        }
                    }
                }
                col += s.len;
            }
        }
    }
}

/// `n` columns of the `MR` rows `src`, written column after column:
/// `dst[q·MR + ii] = src[ii][q]`. On x86-64, four columns of four rows at a
/// time as a 4 × 4 transpose in SSE registers (SSE2 is in the baseline):
/// the scalar copy was 9 % of a one-thread lattice-gru b128 h128 run.
///
/// # Safety
/// Each `src[ii]` is valid for `n` floats; `dst` for `n·MR`.
#[inline]
unsafe fn transpose_rows(src: &[*const f32; MR], n: usize, dst: *mut f32) {
    const { assert!(MR.is_multiple_of(4), "row groups of four") };
    let mut q = 0;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: loads read columns q .. q + 4 < n of rows g .. g + 4 < MR;
    // stores write columns q .. q + 4 of dst (the caller's extents).
    unsafe {
        use std::arch::x86_64::*;
        while q + 4 <= n {
            for g in (0..MR).step_by(4) {
                let r0 = _mm_loadu_ps(src[g].add(q));
                let r1 = _mm_loadu_ps(src[g + 1].add(q));
                let r2 = _mm_loadu_ps(src[g + 2].add(q));
                let r3 = _mm_loadu_ps(src[g + 3].add(q));
                // t0 = [r0₀ r1₀ r0₁ r1₁], t1 = [r2₀ r3₀ r2₁ r3₁], t2, t3 the same
                // for columns 2 and 3.
                let t0 = _mm_unpacklo_ps(r0, r1);
                let t1 = _mm_unpacklo_ps(r2, r3);
                let t2 = _mm_unpackhi_ps(r0, r1);
                let t3 = _mm_unpackhi_ps(r2, r3);
                let d = dst.add(q * MR + g);
                _mm_storeu_ps(d, _mm_movelh_ps(t0, t1));
                _mm_storeu_ps(d.add(MR), _mm_movehl_ps(t1, t0));
                _mm_storeu_ps(d.add(2 * MR), _mm_movelh_ps(t2, t3));
                _mm_storeu_ps(d.add(3 * MR), _mm_movehl_ps(t3, t2));
            }
            q += 4;
        }
    }
    for q in q..n {
        for (ii, s) in src.iter().enumerate() {
            // SAFETY: q < n (the caller's extents).
            unsafe { *dst.add(q * MR + ii) = *s.add(q) };
        }
    }
}

/// The kernel calls of weight panels `jps` × row panels `ips`, every K block.
#[allow(clippy::too_many_arguments)]
fn run_block(
    isa: Isa,
    m: usize,
    packed_a: &[f32],
    b: &PackedB,
    c: COut<'_>,
    init: Init,
    jps: std::ops::Range<usize>,
    ips: std::ops::Range<usize>,
) {
    let k = b.k;
    let m_pad = m.div_ceil(MR) * MR;
    // Column chunks whose C block (the rows' partial sums, re-read at every
    // K block) stays in L2: a stacked gate product's output (256 rows ×
    // 2560 columns = 2.6 MB) would not.
    let rows = ips.len() * MR;
    let chunk = (C_BLOCK_BYTES / (rows.max(1) * NR * 4)).max(1);
    let mut j0 = jps.start;
    while j0 < jps.end {
        let j1 = (j0 + chunk).min(jps.end);
        for kb in 0..k.div_ceil(KC) {
            let k0 = kb * KC;
            let kc = KC.min(k - k0);
            let start = if kb == 0 {
                match init {
                    Init::Overwrite => Start::Bias,
                    Init::Accumulate => Start::LoadC,
                }
            } else {
                Start::LoadC
            };
            for jp in j0..j1 {
                let bp = b.panel(kb, jp);
                let cols = NR.min(b.n - jp * NR);
                let bias = match (start, &b.bias) {
                    (Start::Bias, Some(bb)) => Some(bb.floats()[jp * NR..].as_ptr()),
                    _ => None,
                };
                for ip in ips.clone() {
                    let rows = MR.min(m - ip * MR);
                    let ap = packed_a[k0 * m_pad + ip * kc * MR..].as_ptr();
                    // SAFETY: `ap` holds `kc × MR` packed floats and `bp`
                    // `kc × NR` (both padded); C's rows `ip·MR .. + rows`,
                    // columns `jp·NR .. + cols` lie inside the rectangle
                    // checked by `COut::new`, and no other thread writes them
                    // (threads split disjoint panels).
                    unsafe {
                        let cp = c.ptr.add(ip * MR * c.ldc + jp * NR);
                        kernel(isa, kc, ap, bp, cp, c.ldc, rows, cols, start, bias);
                    }
                }
            }
        }
        j0 = j1;
    }
}

/// Bytes of C a column chunk may span (half of a 2 MB L2).
const C_BLOCK_BYTES: usize = 1 << 20;

/// How the accumulators start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Start {
    /// From the bias panel (zero when there is none).
    Bias,
    /// From `C`.
    LoadC,
}

/// One `rows × cols` tile (`rows ≤ MR`, `cols ≤ NR`) over `kc` K steps.
///
/// # Safety
/// `a` holds `kc × MR` floats, `b` `kc × NR`, `bias` (if any) `NR`; `c` is
/// valid for `rows` rows of `cols` floats at stride `ldc`.
#[allow(clippy::too_many_arguments)]
unsafe fn kernel(
    isa: Isa,
    kc: usize,
    a: *const f32,
    b: Panel,
    c: *mut f32,
    ldc: usize,
    rows: usize,
    cols: usize,
    start: Start,
    bias: Option<*const f32>,
) {
    // SAFETY: forwarded from the caller; the AVX-512 kernel only runs when
    // the CPU has AVX-512F (`simd::isa`).
    unsafe {
        match isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => by_rows!(kernel_avx512, rows, (kc, a, b, c, ldc, cols, start, bias)),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => by_rows!(kernel_avx2, rows, (kc, a, b, c, ldc, cols, start, bias)),
            Isa::Portable => by_rows!(kernel_portable, rows, (kc, a, b, c, ldc, cols, start, bias)),
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_avx512<const R: usize>(
    kc: usize,
    a: *const f32,
    b: Panel,
    c: *mut f32,
    ldc: usize,
    cols: usize,
    start: Start,
    bias: Option<*const f32>,
) {
    use std::arch::x86_64::*;
    // Column masks of the two 16-float halves.
    let full = cols >= NR;
    let m0: __mmask16 = if cols >= 16 {
        0xFFFF
    } else {
        ((1u32 << cols) - 1) as u16
    };
    let m1: __mmask16 = if cols >= NR {
        0xFFFF
    } else if cols > 16 {
        ((1u32 << (cols - 16)) - 1) as u16
    } else {
        0
    };
    // SAFETY (whole body): the caller guarantees the buffers' extents; masked
    // loads and stores touch only the `cols` valid columns of C.
    unsafe {
        let (b, bh) = (b.lo, b.hi);
        let mut acc = [[_mm512_setzero_ps(); 2]; R];
        match start {
            Start::Bias => {
                if let Some(bp) = bias {
                    let b0 = _mm512_loadu_ps(bp);
                    let b1 = _mm512_loadu_ps(bp.add(16));
                    for row in acc.iter_mut() {
                        *row = [b0, b1];
                    }
                }
            }
            Start::LoadC => {
                for (i, row) in acc.iter_mut().enumerate() {
                    let cp = c.add(i * ldc);
                    if full {
                        row[0] = _mm512_loadu_ps(cp);
                        row[1] = _mm512_loadu_ps(cp.add(16));
                    } else {
                        row[0] = _mm512_maskz_loadu_ps(m0, cp);
                        row[1] = _mm512_maskz_loadu_ps(m1, cp.add(16));
                    }
                }
            }
        }
        let (mut ap, mut bp) = (a, b);
        for _ in 0..kc {
            // The weights stream from L2/L3: fetch each half 32 K steps
            // (2 KB) ahead, past its end into what follows (harmless at the
            // buffer's end, hence wrapping). Eight steps left small batches'
            // weight streams waiting on L3 (1 % of a Tree-LSTM h512
            // training step).
            _mm_prefetch::<_MM_HINT_T0>(bp.wrapping_add(32 * HALF).cast());
            _mm_prefetch::<_MM_HINT_T0>(bp.wrapping_add(32 * HALF + bh).cast());
            let b0 = _mm512_loadu_ps(bp);
            let b1 = _mm512_loadu_ps(bp.add(bh));
            for (i, row) in acc.iter_mut().enumerate() {
                let ai = _mm512_set1_ps(*ap.add(i));
                row[0] = _mm512_fmadd_ps(ai, b0, row[0]);
                row[1] = _mm512_fmadd_ps(ai, b1, row[1]);
            }
            ap = ap.add(MR);
            bp = bp.add(HALF);
        }
        for (i, row) in acc.iter().enumerate() {
            let cp = c.add(i * ldc);
            if full {
                _mm512_storeu_ps(cp, row[0]);
                _mm512_storeu_ps(cp.add(16), row[1]);
            } else {
                _mm512_mask_storeu_ps(cp, m0, row[0]);
                _mm512_mask_storeu_ps(cp.add(16), m1, row[1]);
            }
        }
    }
}

/// The AVX2 + FMA kernel over a packed `A`: the `R × NR` tile as `6 × 16`
/// sub-tiles (12 accumulators, two weight vectors and a broadcast: 15 of the
/// 16 `ymm` registers). A whole `12 × 32` tile in registers would need 48
/// accumulators; the portable body the compiler vectorises spills them to the
/// stack on every K step (docs/journal.md, "The AVX2 kernel").
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_avx2<const R: usize>(
    kc: usize,
    a: *const f32,
    b: Panel,
    c: *mut f32,
    ldc: usize,
    cols: usize,
    start: Start,
    bias: Option<*const f32>,
) {
    let mut rows = [std::ptr::null::<f32>(); MR];
    for (i, r) in rows.iter_mut().enumerate() {
        *r = a.wrapping_add(i);
    }
    // SAFETY: forwarded; packed row `i`'s K step `p` is at `a + p·MR + i`.
    unsafe { avx2_tiles::<R, MR>(kc, &rows, b, c, ldc, cols, start, bias) }
}

/// [`kernel_avx2`] with `A`'s rows read in place (row `i`'s K step `p` at
/// `a[i] + p`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_avx2_direct<const R: usize>(
    kc: usize,
    a: &[*const f32; MR],
    b: Panel,
    c: *mut f32,
    ldc: usize,
    cols: usize,
    start: Start,
    bias: Option<*const f32>,
) {
    // SAFETY: forwarded.
    unsafe { avx2_tiles::<R, 1>(kc, a, b, c, ldc, cols, start, bias) }
}

/// The sub-tiles of an `R × cols` tile, `A` row `i`'s K step `p` at
/// `a[i] + p·STEP`. Up to 3 rows: one `R × 32` pass (`4R` accumulators: a
/// GEMV's row keeps four FMA chains going, not two). More: `6 × 16` passes,
/// column half outer (its `KC × 16` weights, 16 KiB, stay in L1 for both row
/// groups).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
#[inline]
unsafe fn avx2_tiles<const R: usize, const STEP: usize>(
    kc: usize,
    a: &[*const f32; MR],
    b: Panel,
    c: *mut f32,
    ldc: usize,
    cols: usize,
    start: Start,
    bias: Option<*const f32>,
) {
    // SAFETY (whole body): rows g0 .. g0 + n ≤ R and columns c0 .. c0 + w ≤
    // cols of the caller's tile.
    unsafe {
        if R <= 3 {
            let args = (kc, &a[..], b, c, ldc, cols, start, bias);
            match R {
                1 => avx2_sub::<1, 4, STEP>(args),
                2 => avx2_sub::<2, 4, STEP>(args),
                _ => avx2_sub::<3, 4, STEP>(args),
            }
            return;
        }
        for c0 in (0..cols).step_by(16) {
            let w = (cols - c0).min(16);
            for g0 in (0..R).step_by(6) {
                let args = (
                    kc,
                    &a[g0..],
                    // The half holding columns c0 .. c0 + 16.
                    Panel {
                        lo: b.lo.add(c0 / HALF * b.hi),
                        hi: b.hi,
                    },
                    c.add(g0 * ldc + c0),
                    ldc,
                    w,
                    start,
                    bias.map(|p| p.add(c0)),
                );
                match R - g0 {
                    1 => avx2_sub::<1, 2, STEP>(args),
                    2 => avx2_sub::<2, 2, STEP>(args),
                    3 => avx2_sub::<3, 2, STEP>(args),
                    4 => avx2_sub::<4, 2, STEP>(args),
                    5 => avx2_sub::<5, 2, STEP>(args),
                    _ => avx2_sub::<6, 2, STEP>(args),
                }
            }
        }
    }
}

/// Arguments of [`avx2_sub`]: `(kc, a rows, b, c, ldc, cols, start, bias)`.
#[cfg(target_arch = "x86_64")]
type Avx2Sub<'a> = (
    usize,
    &'a [*const f32],
    Panel,
    *mut f32,
    usize,
    usize,
    Start,
    Option<*const f32>,
);

/// One `G × 8V` sub-tile (`G·V ≤ 12` accumulators) over `kc` K steps;
/// weights from `b`'s first half (and, for `V > 2`, its second), columns past
/// `cols` neither read from nor written to `C`.
///
/// # Safety
/// `a[i] + p·STEP` valid for `i < G`, `p < kc`; `b`'s halves valid for `kc`
/// steps of [`HALF`] floats; `bias` for `8V` floats; `C` for `G` rows of
/// `cols` floats.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn avx2_sub<const G: usize, const V: usize, const STEP: usize>(
    (kc, a, b, c, ldc, cols, start, bias): Avx2Sub<'_>,
) {
    let (b, bh) = (b.lo, b.hi);
    use std::arch::x86_64::*;
    // SAFETY (whole body): the extents above; masked loads and stores touch
    // only the `cols` valid columns of C.
    unsafe {
        let full = cols >= 8 * V;
        let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        let mut mask = [_mm256_setzero_si256(); V];
        for (v, m) in mask.iter_mut().enumerate() {
            *m = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols as i32 - 8 * v as i32), lanes);
        }
        let mut acc = [[_mm256_setzero_ps(); V]; G];
        match start {
            Start::Bias => {
                if let Some(bp) = bias {
                    let mut bv = [_mm256_setzero_ps(); V];
                    for (v, x) in bv.iter_mut().enumerate() {
                        *x = _mm256_loadu_ps(bp.add(8 * v));
                    }
                    for row in acc.iter_mut() {
                        *row = bv;
                    }
                }
            }
            Start::LoadC => {
                for (i, row) in acc.iter_mut().enumerate() {
                    let cp = c.add(i * ldc);
                    for (v, x) in row.iter_mut().enumerate() {
                        *x = if full {
                            _mm256_loadu_ps(cp.add(8 * v))
                        } else {
                            _mm256_maskload_ps(cp.add(8 * v), mask[v])
                        };
                    }
                }
            }
        }
        let mut ap = [std::ptr::null::<f32>(); G];
        ap.copy_from_slice(&a[..G]);
        let mut bp = b;
        for _ in 0..kc {
            // As in the AVX-512 kernel: the weights stream from L2/L3, 32 K
            // steps ahead (a line per 16 columns).
            _mm_prefetch::<_MM_HINT_T0>(bp.wrapping_add(32 * HALF).cast());
            if V > 2 {
                _mm_prefetch::<_MM_HINT_T0>(bp.wrapping_add(32 * HALF + bh).cast());
            }
            let mut bv = [_mm256_setzero_ps(); V];
            for (v, x) in bv.iter_mut().enumerate() {
                *x = _mm256_loadu_ps(bp.add((v / 2) * bh + 8 * (v % 2)));
            }
            for (i, row) in acc.iter_mut().enumerate() {
                let ai = _mm256_broadcast_ss(&*ap[i]);
                ap[i] = ap[i].add(STEP);
                for (x, &w) in row.iter_mut().zip(&bv) {
                    *x = _mm256_fmadd_ps(ai, w, *x);
                }
            }
            bp = bp.add(HALF);
        }
        for (i, row) in acc.iter().enumerate() {
            let cp = c.add(i * ldc);
            for (v, &x) in row.iter().enumerate() {
                if full {
                    _mm256_storeu_ps(cp.add(8 * v), x);
                } else {
                    _mm256_maskstore_ps(cp.add(8 * v), mask[v], x);
                }
            }
        }
    }
}

/// The portable kernel: plain loops over `[f32; NR]` rows (vectorised by the
/// compiler for whatever the calling function enables).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_portable<const R: usize>(
    kc: usize,
    a: *const f32,
    b: Panel,
    c: *mut f32,
    ldc: usize,
    cols: usize,
    start: Start,
    bias: Option<*const f32>,
) {
    // SAFETY (whole body): extents guaranteed by the caller.
    unsafe {
        let mut acc = [[0.0f32; NR]; R];
        match start {
            Start::Bias => {
                if let Some(bp) = bias {
                    let brow = std::slice::from_raw_parts(bp, NR);
                    for row in acc.iter_mut() {
                        row.copy_from_slice(brow);
                    }
                }
            }
            Start::LoadC => {
                for (i, row) in acc.iter_mut().enumerate() {
                    let cr = std::slice::from_raw_parts(c.add(i * ldc), cols);
                    row[..cols].copy_from_slice(cr);
                }
            }
        }
        for p in 0..kc {
            // The step's two halves (`PackedB`'s layout).
            let lo = &*(b.lo.add(p * HALF) as *const [f32; HALF]);
            let hi = &*(b.lo.add(b.hi + p * HALF) as *const [f32; HALF]);
            for (i, row) in acc.iter_mut().enumerate() {
                let ai = *a.add(p * MR + i);
                let (r0, r1) = row.split_at_mut(HALF);
                for (x, &w) in r0.iter_mut().zip(lo) {
                    *x = ai.mul_add(w, *x);
                }
                for (x, &w) in r1.iter_mut().zip(hi) {
                    *x = ai.mul_add(w, *x);
                }
            }
        }
        for (i, row) in acc.iter().enumerate() {
            let cr = std::slice::from_raw_parts_mut(c.add(i * ldc), cols);
            cr.copy_from_slice(&row[..cols]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::threads::Threads;
    use super::*;

    /// Naive `C = bias + A Wᵀ` in f64.
    fn naive(m: usize, n: usize, k: usize, a: &[f32], w: &[f32], bias: Option<&[f32]>) -> Vec<f32> {
        let mut c = vec![0.0; m * n];
        for r in 0..m {
            for i in 0..n {
                let mut s = bias.map_or(0.0, |b| f64::from(b[i]));
                for p in 0..k {
                    s += f64::from(a[r * k + p]) * f64::from(w[i * k + p]);
                }
                c[r * n + i] = s as f32;
            }
        }
        c
    }

    fn data(len: usize, seed: u32) -> Vec<f32> {
        (0..len)
            .map(|i| {
                let h = (i as u32)
                    .wrapping_mul(2_654_435_761)
                    .wrapping_add(seed.wrapping_mul(97));
                (h % 2001) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    fn check(isa: Isa, threads: usize, m: usize, n: usize, k: usize, with_bias: bool, read: ReadA) {
        let a = data(m * k, 1);
        let w = data(n * k, 2);
        let bias = data(n, 3);
        let bias = with_bias.then_some(bias.as_slice());
        let want = naive(m, n, k, &a, &w, bias);
        let b = PackedB::new(n, k, |i, p| w[i * k + p], bias);
        // C inside a larger buffer with a row stride, sentinel elsewhere.
        let ldc = n + 3;
        let mut y = vec![7.0f32; 5 + m * ldc];
        // Split A's K axis in two segments to exercise concatenation.
        let k1 = k / 3;
        let segs = [ASeg::new(&a, 0, k, k1, m), ASeg::new(&a, k1, k, k - k1, m)];
        let th = Threads::new(threads).with_min_flops(0);
        let mut s = GemmScratch::default();
        let c = COut::new(&mut y, 5, ldc, m, n);
        gemm_with(isa, &th, m, &segs, &b, c, Init::Overwrite, &mut s, read);
        for r in 0..m {
            for i in 0..n {
                let (got, exp) = (y[5 + r * ldc + i], want[r * n + i]);
                assert!(
                    (got - exp).abs() <= 1e-4 * (1.0 + exp.abs()),
                    "{isa:?} t{threads} m{m} n{n} k{k}: C[{r}][{i}] = {got}, want {exp}"
                );
            }
            for g in n..ldc.min(y.len() - 5 - r * ldc) {
                assert_eq!(y[5 + r * ldc + g], 7.0, "wrote outside C");
            }
        }
        assert!(y[..5].iter().all(|&v| v == 7.0), "wrote before C");
        // Accumulate adds the product again (no bias).
        let c = COut::new(&mut y, 5, ldc, m, n);
        gemm_with(isa, &th, m, &segs, &b, c, Init::Accumulate, &mut s, read);
        let prod = naive(m, n, k, &a, &w, None);
        for r in 0..m {
            for i in 0..n {
                let exp = want[r * n + i] + prod[r * n + i];
                let got = y[5 + r * ldc + i];
                assert!(
                    (got - exp).abs() <= 2e-4 * (1.0 + exp.abs()),
                    "accumulate C[{r}][{i}]"
                );
            }
        }
    }

    /// `gemm` with a chosen ISA (the test runs every kernel the CPU has) and
    /// way of reading A.
    #[allow(clippy::too_many_arguments)]
    fn gemm_with(
        isa: Isa,
        th: &Threads,
        m: usize,
        a: &[ASeg<'_>],
        b: &PackedB,
        c: COut<'_>,
        init: Init,
        s: &mut GemmScratch,
        read: ReadA,
    ) {
        simd::with_isa(isa, || gemm_read_a(th, m, a, b, c, init, s, false, read));
    }

    /// Every kernel, with A packed and (the SIMD kernels) read in place, over shapes
    /// off the panel sizes and K split in two segments that straddle a K
    /// block (k 400).
    #[test]
    fn every_kernel_matches_a_naive_product_on_edge_shapes() {
        for isa in simd::available() {
            for &(m, n, k) in &[
                (1, 1, 1),
                (1, 32, 64),
                (3, 5, 7),
                (12, 32, 192),
                (13, 33, 193),
                (25, 96, 400),
                (40, 160, 64),
                (30, 300, 520),
                // Row panels of 2, 5, 8 and 11 rows (the AVX2 kernel's
                // `R × 32` pass and its second, partial group of six),
                // with partial column panels.
                (2, 70, 300),
                (17, 40, 33),
                (20, 48, 100),
                (23, 31, 257),
            ] {
                for bias in [false, true] {
                    for threads in [1, 2] {
                        for read in [ReadA::Packed, ReadA::InPlace] {
                            check(isa, threads, m, n, k, bias, read);
                        }
                    }
                }
            }
        }
    }

    /// A product that reuses the packed A of the previous one (`reuse_a`)
    /// packs it anyway when that one read A in place: there was nothing
    /// packed to reuse. Both orders, against the naive products.
    #[test]
    fn reusing_a_after_a_product_that_read_it_in_place_packs_it() {
        if !simd::available().contains(&Isa::Avx512) {
            eprintln!("skipped: reading A in place needs AVX-512, which this CPU lacks");
            return;
        }
        let (m, k) = (20, 96);
        let a = data(m * k, 1);
        let segs = [ASeg::new(&a, 0, k, k, m)];
        let th = Threads::new(1);
        // Fewer weight panels than the limit (read in place), and more (packed).
        let (small, big) = (NR * DIRECT_A_MAX_PANELS, NR * (DIRECT_A_MAX_PANELS + 1));
        for order in [[small, big], [big, small]] {
            let mut s = GemmScratch::default();
            // A stale packed A from an unrelated product first.
            let other = data(m * k, 9);
            let w0 = data(big * k, 8);
            let b0 = PackedB::new(big, k, |i, p| w0[i * k + p], None);
            let mut y0 = vec![0.0f32; m * big];
            gemm(
                &th,
                m,
                &[ASeg::new(&other, 0, k, k, m)],
                &b0,
                COut::new(&mut y0, 0, big, m, big),
                Init::Overwrite,
                &mut s,
            );
            for (step, &n) in order.iter().enumerate() {
                let w = data(n * k, 2 + step as u32);
                let b = PackedB::new(n, k, |i, p| w[i * k + p], None);
                let mut y = vec![0.0f32; m * n];
                let c = COut::new(&mut y, 0, n, m, n);
                simd::with_isa(Isa::Avx512, || {
                    gemm_reusing(&th, m, &segs, &b, c, Init::Overwrite, &mut s, step == 1)
                });
                let want = naive(m, n, k, &a, &w, None);
                for (i, (g, e)) in y.iter().zip(&want).enumerate() {
                    assert!(
                        (g - e).abs() <= 1e-4 * (1.0 + e.abs()),
                        "n{n} step {step}: C[{i}]"
                    );
                }
            }
        }
    }

    /// The packed activations are exactly the rows' floats, panel by panel
    /// and K block by K block, whatever the segments' lengths (4 × 4 transposes
    /// over full panels with scalar tails; ragged panels padded with zeros).
    #[test]
    fn packing_a_puts_every_row_float_in_its_panel_slot() {
        for m in [1, 4, 11, 12, 13, 24, 25, 37] {
            for lens in [
                vec![1],
                vec![7],
                vec![3, 130, 1],
                vec![KC + 5, 2],
                vec![64, 64, KC],
            ] {
                let k: usize = lens.iter().sum();
                // Each segment its own rows, stride wider than the segment.
                let datas: Vec<Vec<f32>> = lens
                    .iter()
                    .enumerate()
                    .map(|(i, &l)| data(m * (l + 3), 30 + i as u32))
                    .collect();
                let segs: Vec<ASeg<'_>> = datas
                    .iter()
                    .zip(&lens)
                    .map(|(d, &l)| ASeg::new(d, 1, l + 3, l, m))
                    .collect();
                let at = |r: usize, p: usize| {
                    let (mut col, mut i) = (p, 0);
                    while col >= lens[i] {
                        col -= lens[i];
                        i += 1;
                    }
                    datas[i][1 + r * (lens[i] + 3) + col]
                };
                let m_pad = m.div_ceil(MR) * MR;
                let mut out = vec![f32::NAN; m_pad * k];
                pack_a(m, &segs, k, &mut out);
                for p in 0..k {
                    let (kb, k0) = (p / KC, p / KC * KC);
                    let kc = KC.min(k - k0);
                    for r in 0..m_pad {
                        let (ip, ii) = (r / MR, r % MR);
                        let got = out[k0 * m_pad + ip * kc * MR + (p - k0) * MR + ii];
                        let want = if r < m { at(r, p) } else { 0.0 };
                        assert_eq!(
                            got.to_bits(),
                            want.to_bits(),
                            "m{m} lens{lens:?}: row {r}, column {p} (K block {kb})"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn zero_k_writes_the_bias() {
        let b = PackedB::new(3, 0, |_, _| 0.0, Some(&[1.0, 2.0, 3.0]));
        let mut y = vec![9.0; 6];
        let c = COut::new(&mut y, 0, 3, 2, 3);
        gemm(
            &Threads::new(1),
            2,
            &[],
            &b,
            c,
            Init::Overwrite,
            &mut GemmScratch::default(),
        );
        assert_eq!(y, [1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
    }

    /// `dW += Σ dy ⊗ x` over more rows than one KC block (a lazy weight
    /// gradient) equals the naive sum, on one thread and two, and
    /// accumulates onto what dW held.
    #[test]
    fn outer_product_over_many_rows_accumulates_block_by_block() {
        let (m, n, k) = (37, 45, 2 * KC + 77);
        let dy = data(m * k, 4);
        let x = data(n * k, 5);
        let rows: Vec<(usize, usize)> = (0..k)
            .map(|p| {
                (
                    dy[p * m..].as_ptr().expose_provenance(),
                    x[p * n..].as_ptr().expose_provenance(),
                )
            })
            .collect();
        let start = data(m * n, 6);
        for threads in [1, 2] {
            let mut dw = start.clone();
            let th = Threads::new(threads).with_min_flops(0);
            let mut scratch = OuterScratch::default();
            // SAFETY: every row points at m (dy) and n (x) live floats.
            unsafe { gemm_outer_acc(&th, m, n, &rows, &mut dw, &mut scratch) };
            for i in 0..m {
                for j in 0..n {
                    let want: f64 = f64::from(start[i * n + j])
                        + (0..k)
                            .map(|p| f64::from(dy[p * m + i]) * f64::from(x[p * n + j]))
                            .sum::<f64>();
                    let got = f64::from(dw[i * n + j]);
                    assert!(
                        (got - want).abs() < 1e-3 * want.abs().max(1.0),
                        "{i},{j}: {got} vs {want}"
                    );
                }
            }
        }
    }

    /// Weights reading the same input, their output gradients packed ahead
    /// (sizes off the panel heights, more rows than a block): each equals
    /// the naive sum and accumulates onto its own region, on one thread and
    /// two.
    #[test]
    fn outer_products_over_packed_rows_equal_the_naive_sums() {
        let (n, k) = (45, KC + 19);
        // (rows of dW, offset of dW).
        // 24 rows: whole panels only (a regression: the empty last piece
        // was sliced past the block's end).
        let outs = [(29usize, 0usize), (13, 29 * n + 5), (24, 42 * n + 9)];
        let dys: Vec<Vec<f32>> = outs
            .iter()
            .enumerate()
            .map(|(t, &(m, _))| data(m * k, 20 + t as u32))
            .collect();
        let layouts: Vec<PackedRows> = outs.iter().map(|&(m, _)| PackedRows { m, k }).collect();
        let packed: Vec<Vec<f32>> = layouts
            .iter()
            .zip(&dys)
            .map(|(l, dy)| {
                let mut a = vec![0.0; l.floats()];
                for p in 0..k {
                    l.put(&mut a, p, &dy[p * l.m..][..l.m]);
                }
                a
            })
            .collect();
        let x = data(n * k, 8);
        let xs: Vec<usize> = (0..k)
            .map(|p| x[p * n..].as_ptr().expose_provenance())
            .collect();
        let start = data(66 * n + 9, 11);
        for threads in [1, 2] {
            let mut dw = start.clone();
            let th = Threads::new(threads).with_min_flops(0);
            let mut scratch = OuterScratch::default();
            let args: Vec<(&[f32], PackedRows, usize)> = packed
                .iter()
                .zip(&layouts)
                .zip(&outs)
                .map(|((a, &l), &(_, w))| (a.as_slice(), l, w))
                .collect();
            // SAFETY: every x row points at n live floats.
            unsafe { gemm_outer_acc_packed(&th, n, &xs, &args, &mut dw, &mut scratch) };
            let mut touched = vec![false; dw.len()];
            for (t, &(m, w)) in outs.iter().enumerate() {
                for i in 0..m {
                    for j in 0..n {
                        let at = w + i * n + j;
                        touched[at] = true;
                        let want: f64 = f64::from(start[at])
                            + (0..k)
                                .map(|p| f64::from(dys[t][p * m + i]) * f64::from(x[p * n + j]))
                                .sum::<f64>();
                        let got = f64::from(dw[at]);
                        assert!(
                            (got - want).abs() < 1e-3 * want.abs().max(1.0),
                            "{t} {i},{j}: {got} vs {want}"
                        );
                    }
                }
            }
            for (at, t) in touched.iter().enumerate() {
                assert!(*t || dw[at] == start[at], "{at} written outside every dW");
            }
        }
    }
}
