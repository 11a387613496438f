//! The CPU emulator of the persistent kernel: it interprets the same script
//! words with the same placement semantics, so it is what CI checks against
//! the reference executor.
//!
//! - Every virtual processor runs its own stream; a processor's resident
//!   rows are loaded from the pool at the start (its "registers" / shared
//!   memory) and only it reads them; resident gradients accumulate there
//!   and are written to the pool at the end, as the kernel's epilogue does.
//! - Execution is phase by phase (between grid barriers). Within a phase the
//!   processors run one after another in *descending* id order, the reverse
//!   of the compiler's usual assignment order, so a missing barrier shows as
//!   a wrong number too.
//! - With `check_races`, every float of the pool carries the processor that
//!   last wrote and read it in the current phase: a read of what another
//!   processor wrote in the phase, or a write of what another read or
//!   wrote, is a [`Race`](super::VppsError::Race) naming both and the
//!   instruction — what a GPU would do silently.
//! - Every processor must arrive at the same barriers in the same order; one
//!   ending its stream while others wait is a
//!   [`Deadlock`](super::VppsError::Deadlock).

use super::error::VppsError;
use super::lower::{dmap, map1, map2};
use super::placement::{Plan, Storage};
use super::script::{Ins, Script};

/// Resident state of one matrix: its rows as the owners hold them.
pub(crate) struct Resident {
    /// Rows × L weights (only owners' rows are ever read).
    w: Vec<f32>,
    b: Vec<f32>,
    /// Gradient accumulators (on-chip gradients only).
    gw: Vec<f32>,
    gb: Vec<f32>,
}

/// What the model's parameters are, for the prologue and epilogue.
pub(crate) struct MatParams {
    /// Per term: pool address of the weight and its columns.
    pub terms: Vec<(usize, usize)>,
    /// Pool address of the bias, if kept with the rows.
    pub bias: Option<usize>,
    /// Floats between a parameter and its gradient.
    pub grad_shift: usize,
}

/// Counters of one emulated kernel.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct EmuStats {
    /// Instructions executed, all processors.
    pub instructions: u64,
    /// Grid barriers passed.
    pub barriers: u32,
    /// Whether every access was checked for races.
    pub race_checked: bool,
}

const NONE: u32 = u32::MAX;
const MANY: u32 = u32::MAX - 1;

struct Shadow {
    on: bool,
    phase: u32,
    w_phase: Vec<u32>,
    w_who: Vec<u32>,
    r_phase: Vec<u32>,
    r_who: Vec<u32>,
}

impl Shadow {
    fn new(n: usize, on: bool) -> Shadow {
        let v = |x| if on { vec![x; n] } else { Vec::new() };
        Shadow {
            on,
            phase: 1,
            w_phase: v(0),
            w_who: v(NONE),
            r_phase: v(0),
            r_who: v(NONE),
        }
    }

    fn read(&mut self, at: usize, len: usize, vp: u32, ins: &Ins) -> Result<(), VppsError> {
        if !self.on {
            return Ok(());
        }
        for i in at..at + len {
            if self.w_phase[i] == self.phase && self.w_who[i] != vp {
                return Err(race(i, vp, "reads", self.w_who[i], "wrote", ins));
            }
            if self.r_phase[i] != self.phase {
                self.r_phase[i] = self.phase;
                self.r_who[i] = vp;
            } else if self.r_who[i] != vp {
                self.r_who[i] = MANY;
            }
        }
        Ok(())
    }

    fn write(&mut self, at: usize, len: usize, vp: u32, ins: &Ins) -> Result<(), VppsError> {
        if !self.on {
            return Ok(());
        }
        for i in at..at + len {
            if self.w_phase[i] == self.phase && self.w_who[i] != vp {
                return Err(race(i, vp, "writes", self.w_who[i], "wrote", ins));
            }
            if self.r_phase[i] == self.phase && self.r_who[i] != vp {
                return Err(race(i, vp, "writes", self.r_who[i], "read", ins));
            }
            self.w_phase[i] = self.phase;
            self.w_who[i] = vp;
        }
        Ok(())
    }
}

fn race(addr: usize, vp: u32, action: &str, other: u32, did: &str, ins: &Ins) -> VppsError {
    VppsError::Race {
        addr,
        vp,
        action: action.to_string(),
        other: if other == MANY {
            "several processors".to_string()
        } else {
            format!("processor {other}")
        },
        did: did.to_string(),
        ins: format!("{ins:?}"),
    }
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// Runs `script` on `pool` (parameters in place, gradient records and
/// parameter gradients zero, as the launch leaves them).
pub(crate) fn run(
    script: &Script,
    plan: &Plan,
    mats: &[MatParams],
    rows_on: &[Vec<Vec<usize>>],
    pool: &mut [f32],
    check_races: bool,
) -> Result<EmuStats, VppsError> {
    let vps = script.vps as usize;
    let streams: Vec<Vec<Ins>> = (0..script.vps)
        .map(|v| script.decode_stream(v))
        .collect::<Result<_, _>>()?;
    // Prologue: every owner loads its rows.
    let mut res: Vec<Resident> = plan
        .mats
        .iter()
        .zip(mats)
        .map(|(p, mp)| {
            let (m, l) = (p.mat.m, p.mat.l);
            let mut r = Resident {
                w: Vec::new(),
                b: Vec::new(),
                gw: Vec::new(),
                gb: Vec::new(),
            };
            if p.weights != Storage::Global {
                r.w = vec![0.0; m * l];
                r.b = vec![0.0; m];
                for row in 0..m {
                    let mut e = 0;
                    for &(addr, k) in &mp.terms {
                        r.w[row * l + e..row * l + e + k]
                            .copy_from_slice(&pool[addr + row * k..addr + (row + 1) * k]);
                        e += k;
                    }
                    if let Some(b) = mp.bias {
                        r.b[row] = pool[b + row];
                    }
                }
            }
            if p.grads != Storage::Global {
                r.gw = vec![0.0; m * l];
                r.gb = vec![0.0; m];
            }
            r
        })
        .collect();
    let mut sh = Shadow::new(pool.len(), check_races);
    let mut pc = vec![0usize; vps];
    let mut table = vec![(0u32, 0u32); vps];
    let mut stats = EmuStats {
        race_checked: check_races,
        ..EmuStats::default()
    };
    let mut done = vec![false; vps];
    loop {
        // One phase: every processor runs up to its next barrier or its end.
        let mut at_barrier: Option<u32> = None;
        for vp in (0..vps).rev() {
            if done[vp] {
                continue;
            }
            loop {
                let ins = &streams[vp][pc[vp]];
                pc[vp] += 1;
                stats.instructions += 1;
                match ins {
                    Ins::End => {
                        done[vp] = true;
                        break;
                    }
                    Ins::Bar { n } => {
                        if *n != stats.barriers || at_barrier.is_some_and(|b| b != *n) {
                            return Err(VppsError::Deadlock(format!(
                                "processor {vp} waits at barrier {n}, others at {}",
                                at_barrier.unwrap_or(stats.barriers)
                            )));
                        }
                        at_barrier = Some(*n);
                        break;
                    }
                    Ins::Batch { table: t, k } => table[vp] = (*t, *k),
                    _ => exec(
                        ins, vp as u32, table[vp], script, plan, mats, rows_on, &mut res, pool,
                        &mut sh,
                    )?,
                }
            }
        }
        let finished = done.iter().filter(|d| **d).count();
        match at_barrier {
            None if finished == vps => break,
            Some(n) if finished == 0 => {
                stats.barriers = n + 1;
                sh.phase += 1;
            }
            _ => {
                return Err(VppsError::Deadlock(format!(
                    "{finished} processor(s) ended while the others wait at barrier {}",
                    at_barrier.unwrap_or(0)
                )));
            }
        }
    }
    // Epilogue: on-chip gradients to the pool.
    for ((p, mp), r) in plan.mats.iter().zip(mats).zip(&res) {
        if p.grads == Storage::Global {
            continue;
        }
        let l = p.mat.l;
        for row in 0..p.mat.m {
            let mut e = 0;
            for &(addr, k) in &mp.terms {
                let g = addr + mp.grad_shift;
                pool[g + row * k..g + (row + 1) * k]
                    .copy_from_slice(&r.gw[row * l + e..row * l + e + k]);
                e += k;
            }
            if let Some(b) = mp.bias {
                pool[b + mp.grad_shift + row] = r.gb[row];
            }
        }
    }
    Ok(stats)
}

#[allow(clippy::too_many_arguments)]
fn exec(
    ins: &Ins,
    vp: u32,
    (tab, k): (u32, u32),
    script: &Script,
    plan: &Plan,
    mats: &[MatParams],
    rows_on: &[Vec<Vec<usize>>],
    res: &mut [Resident],
    pool: &mut [f32],
    sh: &mut Shadow,
) -> Result<(), VppsError> {
    let data = &script.data;
    let gs = script.grad_shift as usize;
    let addr = |word: u32, r: u32| -> usize {
        let off = (word & super::script::MAX_OFFSET) as usize;
        match word >> 30 {
            0 => data[(tab + r) as usize] as usize + off,
            1 => data[(tab + r) as usize] as usize + gs + off,
            _ => off,
        }
    };
    match ins {
        Ins::Gather {
            r0,
            r1,
            len,
            dst,
            csr,
            init,
        } => {
            let (csr, n) = (*csr as usize, *len as usize);
            let base = csr + k as usize + 1;
            for r in *r0..*r1 {
                let mut acc = vec![*init; n];
                for i in data[csr + r as usize]..data[csr + r as usize + 1] {
                    let src = data[base + i as usize] as usize;
                    sh.read(src, n, vp, ins)?;
                    for (a, s) in acc.iter_mut().zip(&pool[src..src + n]) {
                        *a += s;
                    }
                }
                let d = addr(*dst, r);
                sh.write(d, n, vp, ins)?;
                pool[d..d + n].copy_from_slice(&acc);
            }
        }
        Ins::Map1 {
            f,
            r0,
            r1,
            len,
            dst,
            a,
        } => {
            let n = *len as usize;
            for r in *r0..*r1 {
                let (x, d) = (addr(*a, r), addr(*dst, r));
                sh.read(x, n, vp, ins)?;
                sh.write(d, n, vp, ins)?;
                for i in 0..n {
                    let v = pool[x + i];
                    pool[d + i] = match *f as u8 {
                        map1::SIGMOID => sigmoid(v),
                        map1::TANH => v.tanh(),
                        map1::RELU => v.max(0.0),
                        map1::ONE_MINUS => 1.0 - v,
                        map1::GELU => crate::backend::cpu::simd::gelu1(v),
                        map1::EXP => v.exp(),
                        _ => v,
                    };
                }
            }
        }
        Ins::Map2 {
            f,
            r0,
            r1,
            len,
            dst,
            a,
            b,
        } => {
            let n = *len as usize;
            for r in *r0..*r1 {
                let (x, y, d) = (addr(*a, r), addr(*b, r), addr(*dst, r));
                sh.read(x, n, vp, ins)?;
                sh.read(y, n, vp, ins)?;
                sh.write(d, n, vp, ins)?;
                for i in 0..n {
                    let (p, q) = (pool[x + i], pool[y + i]);
                    pool[d + i] = match *f as u8 {
                        map2::ADD => p + q,
                        map2::SUB => p - q,
                        _ => p * q,
                    };
                }
            }
        }
        Ins::SumN {
            r0,
            r1,
            len,
            dst,
            scale,
            args,
        } => {
            let n = *len as usize;
            for r in *r0..*r1 {
                let mut acc = vec![0.0f32; n];
                for &a in args {
                    let x = addr(a, r);
                    sh.read(x, n, vp, ins)?;
                    for (s, v) in acc.iter_mut().zip(&pool[x..x + n]) {
                        *s += v;
                    }
                }
                let d = addr(*dst, r);
                sh.write(d, n, vp, ins)?;
                for (o, s) in pool[d..d + n].iter_mut().zip(&acc) {
                    *o = s * scale;
                }
            }
        }
        Ins::Lookup {
            r0,
            r1,
            len,
            dst,
            table,
            rows,
            ids,
        } => {
            let n = *len as usize;
            for r in *r0..*r1 {
                let row = (data[(*ids + r) as usize] % (*rows).max(1)) as usize;
                let (t, d) = (addr(*table, r) + row * n, addr(*dst, r));
                sh.read(t, n, vp, ins)?;
                sh.write(d, n, vp, ins)?;
                pool.copy_within(t..t + n, d);
            }
        }
        Ins::Softmax {
            r0,
            r1,
            len,
            dst,
            a,
        } => {
            let n = *len as usize;
            for r in *r0..*r1 {
                let (x, d) = (addr(*a, r), addr(*dst, r));
                sh.read(x, n, vp, ins)?;
                sh.write(d, n, vp, ins)?;
                let max = pool[x..x + n]
                    .iter()
                    .copied()
                    .fold(f32::NEG_INFINITY, f32::max);
                let e: Vec<f32> = pool[x..x + n].iter().map(|v| (v - max).exp()).collect();
                let s: f32 = e.iter().sum();
                for (o, v) in pool[d..d + n].iter_mut().zip(&e) {
                    *o = v / s;
                }
            }
        }
        Ins::PickLoss {
            r0,
            r1,
            width,
            dst,
            a,
            labels,
        } => {
            let n = *width as usize;
            for r in *r0..*r1 {
                let (x, d) = (addr(*a, r), addr(*dst, r));
                sh.read(x, n, vp, ins)?;
                sh.write(d, 1, vp, ins)?;
                let xs = &pool[x..x + n];
                let max = xs.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let s: f32 = xs.iter().map(|v| (v - max).exp()).sum();
                let label = data[(*labels + r) as usize] as usize % n.max(1);
                pool[d] = s.ln() + max - xs[label];
            }
        }
        Ins::RProd {
            mat,
            acc,
            r0,
            r1,
            dst,
            xs,
        } => {
            let mi = *mat as usize;
            let p = &plan.mats[mi];
            let (l, pc) = (p.mat.l, p.mat.pcols);
            let mp = &mats[mi];
            for &row in &rows_on[mi][vp as usize] {
                let (w, bias) = weight_row(p.weights, &res[mi], mp, pool, row, l, sh, vp, ins)?;
                for r in *r0..*r1 {
                    for c in 0..pc {
                        let mut s = 0.0f32;
                        let mut e = 0;
                        for (t, &(_, kt)) in mp.terms.iter().enumerate() {
                            let x = addr(xs[t], r);
                            for i in 0..kt {
                                let xa = x + i * pc + c;
                                sh.read(xa, 1, vp, ins)?;
                                s += w[e + i] * pool[xa];
                            }
                            e += kt;
                        }
                        let d = addr(*dst, r) + row * pc + c;
                        if *acc {
                            sh.read(d, 1, vp, ins)?;
                        }
                        sh.write(d, 1, vp, ins)?;
                        pool[d] = s + if mp.bias.is_some() {
                            bias
                        } else if *acc {
                            pool[d]
                        } else {
                            0.0
                        };
                    }
                }
            }
        }
        Ins::RProdB {
            mat,
            pi,
            r0,
            r1,
            dy,
            partial,
            xs,
        } => {
            let mi = *mat as usize;
            let p = &plan.mats[mi];
            let (l, pc) = (p.mat.l, p.mat.pcols);
            let width = l * pc;
            let mp = &mats[mi];
            let kc = (*r1 - *r0) as usize;
            for r in *r0..*r1 {
                let base = *partial as usize + (*pi as usize * kc + (r - *r0) as usize) * width;
                sh.write(base, width, vp, ins)?;
                pool[base..base + width].fill(0.0);
            }
            for &row in &rows_on[mi][vp as usize] {
                let (w, _) = weight_row(p.weights, &res[mi], mp, pool, row, l, sh, vp, ins)?;
                let mut gw = vec![0.0f32; l];
                let mut gb = 0.0f32;
                for r in *r0..*r1 {
                    let base = *partial as usize + (*pi as usize * kc + (r - *r0) as usize) * width;
                    let dya = addr(*dy, r) + row * pc;
                    sh.read(dya, pc, vp, ins)?;
                    let dyv: Vec<f32> = pool[dya..dya + pc].to_vec();
                    for e in 0..l {
                        for (c, &g) in dyv.iter().enumerate() {
                            pool[base + e * pc + c] += w[e] * g;
                        }
                    }
                    let mut e = 0;
                    for (t, &(_, kt)) in mp.terms.iter().enumerate() {
                        let x = addr(xs[t], r);
                        sh.read(x, kt * pc, vp, ins)?;
                        for i in 0..kt {
                            let xr = &pool[x + i * pc..x + (i + 1) * pc];
                            gw[e + i] += dyv.iter().zip(xr).map(|(a, b)| a * b).sum::<f32>();
                        }
                        e += kt;
                    }
                    gb += dyv[0];
                }
                // Accumulate into the gradient where it lives.
                if p.grads == Storage::Global {
                    let mut e = 0;
                    for &(a, kt) in &mp.terms {
                        let g = a + mp.grad_shift + row * kt;
                        sh.read(g, kt, vp, ins)?;
                        sh.write(g, kt, vp, ins)?;
                        for i in 0..kt {
                            pool[g + i] += gw[e + i];
                        }
                        e += kt;
                    }
                    if let Some(b) = mp.bias {
                        let g = b + mp.grad_shift + row;
                        sh.read(g, 1, vp, ins)?;
                        sh.write(g, 1, vp, ins)?;
                        pool[g] += gb;
                    }
                } else {
                    let rm = &mut res[mi];
                    for (a, g) in rm.gw[row * l..(row + 1) * l].iter_mut().zip(&gw) {
                        *a += g;
                    }
                    if mp.bias.is_some() {
                        rm.gb[row] += gb;
                    }
                }
            }
        }
        Ins::Reduce {
            r0,
            r1,
            c0,
            kc,
            w,
            col,
            len,
            parts,
            partial,
            dst,
        } => {
            let n = *len as usize;
            for r in *r0..*r1 {
                let mut s = vec![0.0f32; n];
                for pi in 0..*parts {
                    let at =
                        *partial as usize + ((pi * kc + (r - c0)) * w) as usize + *col as usize;
                    sh.read(at, n, vp, ins)?;
                    for (a, v) in s.iter_mut().zip(&pool[at..at + n]) {
                        *a += v;
                    }
                }
                let d = addr(*dst, r);
                sh.read(d, n, vp, ins)?;
                sh.write(d, n, vp, ins)?;
                for (o, v) in pool[d..d + n].iter_mut().zip(&s) {
                    *o += v;
                }
            }
        }
        Ins::GProd {
            ta,
            tb,
            acc,
            r0,
            r1,
            m,
            n,
            p,
            c,
            a,
            b,
        } => {
            let (m, n, p) = (*m as usize, *n as usize, *p as usize);
            for r in *r0..*r1 {
                let (aa, ba, ca) = (addr(*a, r), addr(*b, r), addr(*c, r));
                sh.read(aa, m * n, vp, ins)?;
                sh.read(ba, n * p, vp, ins)?;
                if *acc {
                    sh.read(ca, m * p, vp, ins)?;
                }
                sh.write(ca, m * p, vp, ins)?;
                let mut out = vec![0.0f32; m * p];
                for i in 0..m {
                    for q in 0..n {
                        let av = if *ta {
                            pool[aa + q * m + i]
                        } else {
                            pool[aa + i * n + q]
                        };
                        for j in 0..p {
                            let bv = if *tb {
                                pool[ba + j * n + q]
                            } else {
                                pool[ba + q * p + j]
                            };
                            out[i * p + j] += av * bv;
                        }
                    }
                }
                for (i, v) in out.iter().enumerate() {
                    pool[ca + i] = if *acc { pool[ca + i] + v } else { *v };
                }
            }
        }
        Ins::DMap {
            kind,
            r0,
            r1,
            len,
            dx,
            dy,
            aux,
            scale,
        } => {
            let n = *len as usize;
            for r in *r0..*r1 {
                let (d, g, x) = (addr(*dx, r), addr(*dy, r), addr(*aux, r));
                sh.read(g, n, vp, ins)?;
                sh.read(x, n, vp, ins)?;
                sh.read(d, n, vp, ins)?;
                sh.write(d, n, vp, ins)?;
                for i in 0..n {
                    let (gv, xv) = (pool[g + i], pool[x + i]);
                    let v = match *kind as u8 {
                        dmap::FMA => gv * xv,
                        dmap::SIGMOID => gv * xv * (1.0 - xv),
                        dmap::TANH => gv * (1.0 - xv * xv),
                        dmap::GELU => gv * crate::backend::cpu::simd::gelu_grad1(xv),
                        dmap::RELU => {
                            if xv > 0.0 {
                                gv
                            } else {
                                0.0
                            }
                        }
                        _ => gv,
                    };
                    pool[d + i] += scale * v;
                }
            }
        }
        Ins::DLookup {
            r0,
            r1,
            len,
            dy,
            dtable,
            rows,
            ids,
        } => {
            let n = *len as usize;
            for r in *r0..*r1 {
                let row = (data[(*ids + r) as usize] % (*rows).max(1)) as usize;
                let (g, d) = (addr(*dy, r), addr(*dtable, r) + row * n);
                sh.read(g, n, vp, ins)?;
                sh.read(d, n, vp, ins)?;
                sh.write(d, n, vp, ins)?;
                for i in 0..n {
                    pool[d + i] += pool[g + i];
                }
            }
        }
        Ins::DSoftmax {
            r0,
            r1,
            len,
            dx,
            dy,
            y,
        } => {
            let n = *len as usize;
            for r in *r0..*r1 {
                let (d, g, ya) = (addr(*dx, r), addr(*dy, r), addr(*y, r));
                sh.read(g, n, vp, ins)?;
                sh.read(ya, n, vp, ins)?;
                sh.read(d, n, vp, ins)?;
                sh.write(d, n, vp, ins)?;
                let s: f32 = (0..n).map(|i| pool[ya + i] * pool[g + i]).sum();
                for i in 0..n {
                    pool[d + i] += pool[ya + i] * (pool[g + i] - s);
                }
            }
        }
        Ins::DPickLoss {
            r0,
            r1,
            width,
            dx,
            dy,
            x,
            labels,
        } => {
            let n = *width as usize;
            for r in *r0..*r1 {
                let (d, g, xa) = (addr(*dx, r), addr(*dy, r), addr(*x, r));
                sh.read(g, 1, vp, ins)?;
                sh.read(xa, n, vp, ins)?;
                sh.read(d, n, vp, ins)?;
                sh.write(d, n, vp, ins)?;
                let gv = pool[g];
                let max = pool[xa..xa + n]
                    .iter()
                    .copied()
                    .fold(f32::NEG_INFINITY, f32::max);
                let e: Vec<f32> = pool[xa..xa + n].iter().map(|v| (v - max).exp()).collect();
                let s: f32 = e.iter().sum();
                let label = data[(*labels + r) as usize] as usize % n.max(1);
                for i in 0..n {
                    let onehot = if i == label { 1.0 } else { 0.0 };
                    pool[d + i] += gv * (e[i] / s - onehot);
                }
            }
        }
        Ins::End | Ins::Bar { .. } | Ins::Batch { .. } => {}
    }
    Ok(())
}

/// Row `row` of a matrix (and its bias) as its owner reads it: from its
/// resident copy, or from DRAM (a checked read).
#[allow(clippy::too_many_arguments)]
fn weight_row(
    storage: Storage,
    r: &Resident,
    mp: &MatParams,
    pool: &[f32],
    row: usize,
    l: usize,
    sh: &mut Shadow,
    vp: u32,
    ins: &Ins,
) -> Result<(Vec<f32>, f32), VppsError> {
    if storage != Storage::Global {
        return Ok((r.w[row * l..(row + 1) * l].to_vec(), r.b[row]));
    }
    let mut w = Vec::with_capacity(l);
    for &(a, k) in &mp.terms {
        sh.read(a + row * k, k, vp, ins)?;
        w.extend_from_slice(&pool[a + row * k..a + (row + 1) * k]);
    }
    let b = match mp.bias {
        Some(b) => {
            sh.read(b + row, 1, vp, ins)?;
            pool[b + row]
        }
        None => 0.0,
    };
    Ok((w, b))
}
