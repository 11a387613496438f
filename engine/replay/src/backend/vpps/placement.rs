//! Placement (VPPS §III-A1): which virtual processor (a persistent CTA of
//! 256 threads) keeps which rows of which weight matrix, and where — in its
//! register file, in its shared memory, or (the per-matrix fall back) in
//! DRAM.
//!
//! The unit placed is a *resident product*: one `affine` or `matmul` of a
//! cell whose weights are parameters used by that op alone. Its row `i` is
//! the concatenation of every weight's row `i` (`[U_l[i] | U_r[i]]` for a
//! Tree-LSTM gate: length `L = Σ k`), plus the bias element `b[i]`. As in the
//! paper (and Persistent RNN), a row belongs to one warp: lane `t` holds
//! elements `t, t + 32, …` in `⌈L/32⌉` registers, so a row's dot product
//! needs only warp shuffles. Rows go to warps in chunks of `rpw` rows,
//! round robin over every warp of the grid, consecutive chunks on
//! consecutive processors (so each matrix spreads over as many processors as
//! it has chunks), each matrix starting where the previous one ended (so the
//! processors' loads even out across matrices).
//!
//! The register layout is the same in every processor (the paper's footnote
//! 2, Fig. 4): the kernel is one function, and NVCC keeps an array in
//! registers only if every index is a compile-time constant. Chunks are
//! numbered globally (all matrices in model order, each matrix's chunks
//! consecutive); chunk `n` lives on global warp `n mod W` in *partition*
//! `n / W` (`W` = warps of the grid). A partition is `rpw` rows of the
//! model's longest row (`⌈rowmax/32⌉` registers per lane, plus one for the
//! bias) in every warp — the paper's `P_size = 256 · rpw · ⌈rowmax/32⌉` —
//! and holds rows of whichever matrices the round robin put there, so
//! matrices share partitions and little is padded. A matrix spanning
//! partitions `q0 … q1` is multiplied by an unrolled loop over them with a
//! run-time test of which chunk each warp holds: every register index stays
//! a constant. The register budget per thread is `min(255, 65536 /
//! (256 · ctas_per_sm)) − 63` (VPPS footnote 6: 31 registers for the
//! interpreter, 32 for caching vectors): 192 with one CTA per SM, 65 with
//! two. Matrices are placed in model order: into register partitions while
//! they fit, else into shared-memory partitions, else left in DRAM — each
//! fall back listed with its reason. Gradients are placed after all
//! weights, by the same rule, in partitions of their own (VPPS §III-C2
//! keeps them on chip where registers allow). With `ctas_per_sm` automatic,
//! one CTA per SM is used. The paper (§III-A1) takes two when the weights are
//! small enough, but this kernel's interpreter alone needs more than the 128
//! registers a thread has with two: measured on an H200 (2026-11-27), every
//! workload's kernel spilled at two CTAs per SM (8–240 B of local memory per
//! thread even at hidden 8), and Tree-LSTM h = 256 ran its training kernel
//! in 4.9 ms with one CTA per SM (234 registers, no spills) against 9.5 ms
//! with two. Two remain available on request.

use serde::Serialize;

use super::target::Target;
use crate::cells::{PrimOp, ValueKind};
use crate::model::Model;

/// Threads per virtual processor (the paper's CTA width).
pub const BLOCK: u32 = 256;
/// Warps per virtual processor.
pub const WARPS: u32 = BLOCK / 32;
/// Registers per thread the paper sets aside for the interpreter (31) and
/// for caching vectors (32).
pub const RESERVED_REGS: u32 = 63;
/// Shared memory every processor keeps for its script window, bytes.
pub const SCRIPT_WINDOW_BYTES: u32 = 4096;

/// Where a matrix (or its gradient) lives during the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Storage {
    /// In the owning warp's registers (static indices).
    Registers,
    /// In the owning processor's shared memory.
    Shared,
    /// In DRAM (the pool), read through L2 at every use.
    Global,
}

/// A product whose weights can stay on chip.
#[derive(Clone, Debug, Serialize)]
pub struct Mat {
    /// Role index (the model's order).
    pub role: usize,
    /// Cell op index.
    pub op: usize,
    /// `<role>/<op result>`, e.g. `tree_lstm.internal/i_pre`.
    pub name: String,
    /// Rows (output length).
    pub m: usize,
    /// Row length: the weights' columns added up.
    pub l: usize,
    /// Columns of the right operand (1 for a matrix–vector product).
    pub pcols: usize,
    /// The weights (cell value ids) and their columns, in argument order.
    pub terms: Vec<(usize, usize)>,
    /// The bias (cell value id), kept with the rows (`affine` only).
    pub bias: Option<usize>,
}

/// How one matrix is placed.
#[derive(Clone, Debug, Serialize)]
pub struct MatPlan {
    /// The product.
    #[serde(flatten)]
    pub mat: Mat,
    /// Global index of its first chunk.
    pub a0: usize,
    /// First partition it occupies (`a0 / W`).
    pub q0: usize,
    /// Partitions it spans.
    pub nq: usize,
    /// Rows per warp in the static layout (`nq · rpw`): slot `s` is row
    /// `s mod rpw` of partition `q0 + s / rpw`.
    pub slots: usize,
    /// Registers per row per lane, `⌈L/32⌉`.
    pub rpr: usize,
    /// Where the weights are.
    pub weights: Storage,
    /// Where the gradient accumulates.
    pub grads: Storage,
    /// Per spanned partition, the first register (per thread) or shared
    /// float (per processor) of the weights' partition.
    pub wbase: Vec<usize>,
    /// The same for the gradient.
    pub gbase: Vec<usize>,
    /// Processors holding at least one row, ascending.
    pub participants: Vec<u32>,
    /// Why the weights or the gradient are not in registers (fall backs).
    pub note: Option<String>,
}

/// One processor's share.
#[derive(Clone, Debug, Default, Serialize)]
pub struct VpShare {
    /// Weight rows it holds (all matrices).
    pub rows: usize,
    /// Bytes of weights it keeps on chip (registers and shared).
    pub weight_bytes: usize,
    /// Bytes of gradients it keeps on chip.
    pub grad_bytes: usize,
    /// Its product work: row elements over all its rows.
    pub load: usize,
}

/// How to place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlaceOptions {
    /// CTAs (virtual processors) per SM; `None`: automatic (one: see the
    /// module's overview for why not two).
    pub ctas_per_sm: Option<u32>,
    /// Rows per warp chunk (the paper's `rpw`).
    pub rpw: usize,
    /// Keep gradients on chip where they fit.
    pub grads_on_chip: bool,
}

impl Default for PlaceOptions {
    fn default() -> Self {
        PlaceOptions {
            ctas_per_sm: None,
            rpw: 1,
            grads_on_chip: true,
        }
    }
}

/// A parameter the plan leaves in DRAM, and why.
#[derive(Clone, Debug, Serialize)]
pub struct DramParam {
    /// `<role>/<param>`.
    pub name: String,
    /// Bytes.
    pub bytes: usize,
    /// Why it is not a resident product's weight.
    pub why: String,
}

/// The placement of a model's weights over the virtual processors.
#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    /// The GPU.
    pub target: Target,
    /// CTAs per SM.
    pub ctas_per_sm: u32,
    /// Virtual processors (`sms × ctas_per_sm`).
    pub vps: u32,
    /// Rows per warp chunk.
    pub rpw: usize,
    /// Registers per thread available for weights and gradients.
    pub reg_budget: usize,
    /// Registers per thread the static layout reserves.
    pub regs_used: usize,
    /// Shared memory per processor available for weights and gradients, bytes.
    pub smem_budget: usize,
    /// Shared memory per processor the layout reserves, bytes.
    pub smem_used: usize,
    /// Shared floats per processor for staging a transposed product's
    /// per-warp partial sums (`8 × padded longest row`).
    pub staging_floats: usize,
    /// Registers per lane of one row in a partition: `⌈rowmax/32⌉ + 1`
    /// (the last holds the bias, on lane 0).
    pub row_regs: usize,
    /// Shared floats of one row in a partition: `32 ⌈rowmax/32⌉ + 1`.
    pub row_floats: usize,
    /// Registers per thread of one partition (`rpw · row_regs`).
    pub part_regs: usize,
    /// Shared floats per processor of one partition (`8 · rpw · row_floats`).
    pub part_floats: usize,
    /// The matrices, in model order.
    pub mats: Vec<MatPlan>,
    /// Every processor's share.
    pub per_vp: Vec<VpShare>,
    /// Parameters that are not resident products' weights.
    pub dram_params: Vec<DramParam>,
    /// Summary.
    pub summary: PlanSummary,
}

/// What the plan keeps on chip, in numbers.
#[derive(Clone, Debug, Serialize)]
pub struct PlanSummary {
    /// Bytes of weights in registers.
    pub weight_bytes_registers: usize,
    /// Bytes of weights in shared memory.
    pub weight_bytes_shared: usize,
    /// Bytes of resident-product weights left in DRAM (fall backs).
    pub weight_bytes_dram: usize,
    /// Bytes of gradients on chip (registers and shared).
    pub grad_bytes_on_chip: usize,
    /// Bytes of other parameters (tables, shared weights) in DRAM.
    pub other_param_bytes: usize,
    /// Bytes held in registers over the grid's register budget.
    pub register_utilisation: f64,
    /// Smallest, mean and largest on-chip bytes (weights + gradients) per processor.
    pub bytes_per_vp: [f64; 3],
    /// Largest processor load over the mean (1 = perfectly balanced).
    pub load_imbalance: f64,
    /// Every resident product's weights are on chip.
    pub fits_on_chip: bool,
}

/// The resident products of `model`: `matmul(W, x)` and `affine(b, W1, x1,
/// …)` whose weights are parameters used by that op alone and whose inputs
/// are not parameters. Everything else reads its parameters from DRAM (the
/// second list, with reasons).
pub fn resident_products(model: &Model) -> (Vec<Mat>, Vec<DramParam>) {
    let mut mats = Vec::new();
    let mut dram = Vec::new();
    for (ri, rm) in model.roles.iter().enumerate() {
        let cell = &rm.cell;
        let is_param = |v: usize| cell.values[v].kind == ValueKind::Param;
        let uses = |v: usize| {
            cell.ops
                .iter()
                .flat_map(|o| &o.args)
                .filter(|a| a.index() == v)
                .count()
        };
        let mut placed = vec![false; cell.values.len()];
        for (oi, op) in cell.ops.iter().enumerate() {
            let a: Vec<usize> = op.args.iter().map(|x| x.index()).collect();
            let (terms, bias) = match op.kind {
                PrimOp::Matmul => (vec![(a[0], a[1])], None),
                PrimOp::Affine => (
                    a[1..].chunks(2).map(|wx| (wx[0], wx[1])).collect(),
                    Some(a[0]),
                ),
                _ => continue,
            };
            let ok = terms
                .iter()
                .all(|&(w, x)| is_param(w) && uses(w) == 1 && !is_param(x));
            if !ok {
                continue;
            }
            let out = &cell.values[op.out.index()];
            let m = out.shape[0];
            let pcols = out.shape.get(1).copied().unwrap_or(1);
            let terms: Vec<(usize, usize)> = terms
                .iter()
                .map(|&(w, _)| (w, cell.values[w].shape[1]))
                .collect();
            let bias = bias.filter(|&b| is_param(b) && uses(b) == 1);
            for &(w, _) in &terms {
                placed[w] = true;
            }
            if let Some(b) = bias {
                placed[b] = true;
            }
            mats.push(Mat {
                role: ri,
                op: oi,
                name: format!("{}/{}", rm.role.role, out.name),
                m,
                l: terms.iter().map(|t| t.1).sum(),
                pcols,
                terms,
                bias,
            });
        }
        for &p in &cell.params {
            let v = p.index();
            if placed[v] {
                continue;
            }
            let why =
                if cell.ops.iter().any(|o| {
                    o.kind == PrimOp::Lookup && o.args.first().map(|x| x.index()) == Some(v)
                }) {
                    "lookup table: read one row per node"
                } else if uses(v) > 1 {
                    "used by several ops"
                } else {
                    "not the weight of a product"
                };
            dram.push(DramParam {
                name: format!("{}/{}", rm.role.role, cell.values[v].name),
                bytes: cell.values[v].numel() * 4,
                why: why.to_string(),
            });
        }
    }
    (mats, dram)
}

/// Places `model`'s resident products on `target`.
pub fn place(model: &Model, target: &Target, opts: &PlaceOptions) -> Plan {
    let (mats, dram) = resident_products(model);
    place_with(
        mats,
        dram,
        target,
        opts.ctas_per_sm.unwrap_or(1).max(1),
        opts,
    )
}

fn place_with(
    mats: Vec<Mat>,
    dram_params: Vec<DramParam>,
    target: &Target,
    ctas: u32,
    opts: &PlaceOptions,
) -> Plan {
    let rpw = opts.rpw.max(1);
    let vps = target.sms * ctas;
    let warps_total = (vps * WARPS) as usize;
    let regs_per_thread = target
        .max_regs_per_thread
        .min(target.regs_per_sm / (ctas * BLOCK));
    let reg_budget = regs_per_thread.saturating_sub(RESERVED_REGS) as usize;
    let rpr_max = mats.iter().map(|m| m.l.div_ceil(32)).max().unwrap_or(0);
    let staging_floats = WARPS as usize * rpr_max * 32;
    let (row_regs, row_floats) = (rpr_max + 1, rpr_max * 32 + 1);
    let (part_regs, part_floats) = (rpw * row_regs, WARPS as usize * rpw * row_floats);
    let smem_block = target
        .smem_per_block
        .min((target.smem_per_sm / ctas).saturating_sub(target.smem_reserved_per_block))
        as usize;
    let smem_budget = smem_block.saturating_sub(SCRIPT_WINDOW_BYTES as usize + 4 * staging_floats);
    let mut a0 = 0usize;
    let mut plans: Vec<MatPlan> = Vec::with_capacity(mats.len());
    for mat in mats {
        let chunks = mat.m.div_ceil(rpw);
        let q0 = a0 / warps_total;
        let nq = (a0 + chunks - 1) / warps_total - q0 + 1;
        plans.push(MatPlan {
            a0,
            q0,
            nq,
            slots: nq * rpw,
            rpr: mat.l.div_ceil(32),
            weights: Storage::Global,
            grads: Storage::Global,
            wbase: Vec::new(),
            gbase: Vec::new(),
            participants: Vec::new(),
            note: None,
            mat,
        });
        a0 += chunks;
    }
    let mut parts = Partitions {
        maps: Default::default(),
        regs_used: 0,
        smem_floats: 0,
        reg_budget,
        smem_budget,
        part_regs,
        part_floats,
    };
    for p in &mut plans {
        let (st, need_regs, need_floats) = parts.put(p, false);
        p.weights = st;
        p.note = match st {
            Storage::Registers => None,
            Storage::Shared => Some(format!(
                "weights in shared memory: {need_regs} more registers per thread needed, {} left",
                reg_budget - parts.regs_used
            )),
            Storage::Global => Some(format!(
                "weights in DRAM: {need_regs} more registers per thread or {} B more shared memory per processor needed, {} registers and {} B left",
                4 * need_floats,
                reg_budget - parts.regs_used,
                smem_budget.saturating_sub(4 * parts.smem_floats)
            )),
        };
    }
    if opts.grads_on_chip {
        for p in &mut plans {
            p.grads = parts.put(p, true).0;
        }
    }
    for p in &mut plans {
        if p.grads != Storage::Registers && p.weights != Storage::Global {
            let g = match p.grads {
                Storage::Shared => "gradient in shared memory",
                _ if opts.grads_on_chip => "gradient in DRAM: no registers or shared memory left",
                _ => "gradient in DRAM (gradients off chip by request)",
            };
            p.note = Some(match p.note.take() {
                Some(n) => format!("{n}; {g}"),
                None => g.to_string(),
            });
        }
    }
    let mut plan = Plan {
        target: target.clone(),
        ctas_per_sm: ctas,
        vps,
        rpw,
        reg_budget,
        regs_used: parts.regs_used,
        smem_budget,
        smem_used: 4 * parts.smem_floats,
        staging_floats,
        row_regs,
        row_floats,
        part_regs,
        part_floats,
        mats: plans,
        per_vp: vec![VpShare::default(); vps as usize],
        dram_params,
        summary: PlanSummary {
            weight_bytes_registers: 0,
            weight_bytes_shared: 0,
            weight_bytes_dram: 0,
            grad_bytes_on_chip: 0,
            other_param_bytes: 0,
            register_utilisation: 0.0,
            bytes_per_vp: [0.0; 3],
            load_imbalance: 1.0,
            fits_on_chip: true,
        },
    };
    plan.fill_shares();
    plan
}

/// The partitions allocated so far: per kind (weight registers, gradient
/// registers, weight shared, gradient shared), partition → first register
/// or float.
struct Partitions {
    maps: [std::collections::BTreeMap<usize, usize>; 4],
    regs_used: usize,
    smem_floats: usize,
    reg_budget: usize,
    smem_budget: usize,
    part_regs: usize,
    part_floats: usize,
}

impl Partitions {
    /// Puts `p`'s weights (or gradient) into register partitions if the
    /// ones it still needs fit, else shared ones, else leaves it in DRAM;
    /// returns the storage and what registers / floats it needed.
    fn put(&mut self, p: &mut MatPlan, grads: bool) -> (Storage, usize, usize) {
        let qs = p.q0..p.q0 + p.nq;
        let (ri, si) = if grads { (1, 3) } else { (0, 2) };
        let new_regs = qs
            .clone()
            .filter(|q| !self.maps[ri].contains_key(q))
            .count()
            * self.part_regs;
        let new_floats = qs
            .clone()
            .filter(|q| !self.maps[si].contains_key(q))
            .count()
            * self.part_floats;
        let (storage, map) = if self.regs_used + new_regs <= self.reg_budget {
            (Storage::Registers, ri)
        } else if 4 * (self.smem_floats + new_floats) <= self.smem_budget {
            (Storage::Shared, si)
        } else {
            return (Storage::Global, new_regs, new_floats);
        };
        let mut bases = Vec::with_capacity(p.nq);
        for q in qs {
            let base = match self.maps[map].get(&q) {
                Some(&b) => b,
                None => {
                    let b = if storage == Storage::Registers {
                        self.regs_used += self.part_regs;
                        self.regs_used - self.part_regs
                    } else {
                        self.smem_floats += self.part_floats;
                        self.smem_floats - self.part_floats
                    };
                    self.maps[map].insert(q, b);
                    b
                }
            };
            bases.push(base);
        }
        if grads {
            p.gbase = bases;
        } else {
            p.wbase = bases;
        }
        (storage, new_regs, new_floats)
    }
}

impl Plan {
    /// Total warps of the grid.
    pub fn warps_total(&self) -> usize {
        (self.vps * WARPS) as usize
    }

    /// Where row `row` of matrix `mi` lives: `(processor, warp, slot)`.
    pub fn owner(&self, mi: usize, row: usize) -> (u32, u32, usize) {
        let p = &self.mats[mi];
        let (wt, v) = (self.warps_total(), self.vps as usize);
        let n = p.a0 + row / self.rpw;
        let g = n % wt;
        (
            (g % v) as u32,
            (g / v) as u32,
            (n / wt - p.q0) * self.rpw + row % self.rpw,
        )
    }

    /// The row in `(processor, warp, slot)` of matrix `mi`, if any (the
    /// kernel's `row_of` computes the same closed form).
    pub fn row_at(&self, mi: usize, vp: u32, warp: u32, slot: usize) -> Option<usize> {
        let p = &self.mats[mi];
        let (wt, v) = (self.warps_total(), self.vps as usize);
        let n = (p.q0 + slot / self.rpw) * wt + warp as usize * v + vp as usize;
        let row = n.checked_sub(p.a0)? * self.rpw + slot % self.rpw;
        (slot < p.slots && row < p.mat.m).then_some(row)
    }

    /// Every row of matrix `mi` on processor `vp`: `(warp, slot, row)`.
    pub fn rows_on(&self, mi: usize, vp: u32) -> Vec<(u32, usize, usize)> {
        let p = &self.mats[mi];
        let mut out = Vec::new();
        for w in 0..WARPS {
            for s in 0..p.slots {
                if let Some(r) = self.row_at(mi, vp, w, s) {
                    out.push((w, s, r));
                }
            }
        }
        out
    }

    /// Index of `vp` among matrix `mi`'s participants.
    pub fn participant_index(&self, mi: usize, vp: u32) -> Option<usize> {
        self.mats[mi].participants.binary_search(&vp).ok()
    }

    /// The matrix of cell op `op` of role `role`, if it is a resident product.
    pub fn mat_of(&self, role: usize, op: usize) -> Option<usize> {
        self.mats
            .iter()
            .position(|p| p.mat.role == role && p.mat.op == op)
    }

    fn fill_shares(&mut self) {
        let v = self.vps as usize;
        let mut per_vp = vec![VpShare::default(); v];
        let mut s = PlanSummary {
            weight_bytes_registers: 0,
            weight_bytes_shared: 0,
            weight_bytes_dram: 0,
            grad_bytes_on_chip: 0,
            other_param_bytes: self.dram_params.iter().map(|d| d.bytes).sum(),
            register_utilisation: 0.0,
            bytes_per_vp: [0.0; 3],
            load_imbalance: 1.0,
            fits_on_chip: true,
        };
        let mut reg_bytes = 0usize;
        for mi in 0..self.mats.len() {
            let (m, l, bias) = {
                let p = &self.mats[mi].mat;
                (p.m, p.l, usize::from(p.bias.is_some()))
            };
            let row_bytes = 4 * (l + bias);
            let mut parts = Vec::new();
            for row in 0..m {
                let (vp, _, _) = self.owner(mi, row);
                let share = &mut per_vp[vp as usize];
                share.rows += 1;
                share.load += l;
                let p = &self.mats[mi];
                if p.weights != Storage::Global {
                    share.weight_bytes += row_bytes;
                }
                if p.grads != Storage::Global {
                    share.grad_bytes += row_bytes;
                }
                parts.push(vp);
            }
            parts.sort_unstable();
            parts.dedup();
            let p = &mut self.mats[mi];
            p.participants = parts;
            let bytes = m * row_bytes;
            match p.weights {
                Storage::Registers => {
                    s.weight_bytes_registers += bytes;
                    reg_bytes += bytes;
                }
                Storage::Shared => s.weight_bytes_shared += bytes,
                Storage::Global => {
                    s.weight_bytes_dram += bytes;
                    s.fits_on_chip = false;
                }
            }
            if p.grads == Storage::Registers {
                reg_bytes += bytes;
            }
            if p.grads != Storage::Global {
                s.grad_bytes_on_chip += bytes;
            }
        }
        let budget = v * BLOCK as usize * self.reg_budget * 4;
        s.register_utilisation = if budget == 0 {
            0.0
        } else {
            reg_bytes as f64 / budget as f64
        };
        let bytes: Vec<f64> = per_vp
            .iter()
            .map(|p| (p.weight_bytes + p.grad_bytes) as f64)
            .collect();
        let mean = bytes.iter().sum::<f64>() / v.max(1) as f64;
        s.bytes_per_vp = [
            bytes.iter().copied().fold(f64::INFINITY, f64::min),
            mean,
            bytes.iter().copied().fold(0.0, f64::max),
        ];
        let loads: Vec<f64> = per_vp.iter().map(|p| p.load as f64).collect();
        let lmean = loads.iter().sum::<f64>() / v.max(1) as f64;
        s.load_imbalance = if lmean > 0.0 {
            loads.iter().copied().fold(0.0, f64::max) / lmean
        } else {
            1.0
        };
        self.per_vp = per_vp;
        self.summary = s;
    }

    /// The plan in a few lines (what `engine script` prints).
    pub fn describe(&self) -> String {
        let s = &self.summary;
        let mut out = format!(
            "placement on {} ({} SMs × {} CTA/SM = {} virtual processors, {} threads each, rpw {}): {} registers/thread for weights (reserved {}), {} B shared/processor (reserved {})\n",
            self.target.name,
            self.target.sms,
            self.ctas_per_sm,
            self.vps,
            BLOCK,
            self.rpw,
            self.reg_budget,
            self.regs_used,
            self.smem_budget,
            self.smem_used
        );
        out.push_str(&format!(
            "  weights: {:.1} KB in registers, {:.1} KB in shared memory, {:.1} KB left in DRAM; gradients on chip {:.1} KB; other parameters in DRAM {:.1} KB\n",
            s.weight_bytes_registers as f64 / 1024.0,
            s.weight_bytes_shared as f64 / 1024.0,
            s.weight_bytes_dram as f64 / 1024.0,
            s.grad_bytes_on_chip as f64 / 1024.0,
            s.other_param_bytes as f64 / 1024.0
        ));
        out.push_str(&format!(
            "  on-chip bytes per processor min {:.0} / mean {:.0} / max {:.0}; register utilisation {:.1} %; load imbalance (max/mean) {:.2}; {}\n",
            s.bytes_per_vp[0],
            s.bytes_per_vp[1],
            s.bytes_per_vp[2],
            100.0 * s.register_utilisation,
            s.load_imbalance,
            if s.fits_on_chip {
                "every weight matrix on chip"
            } else {
                "DOES NOT FIT ON CHIP: some matrices stay in DRAM (below)"
            }
        ));
        for p in &self.mats {
            out.push_str(&format!(
                "  {:<32} {:>5} × {:<5} weights {:<9} gradient {:<9} on {:>3} processors, ≤ {} rows/warp{}\n",
                p.mat.name,
                p.mat.m,
                p.mat.l,
                format!("{:?}", p.weights).to_lowercase(),
                format!("{:?}", p.grads).to_lowercase(),
                p.participants.len(),
                p.slots,
                p.note
                    .as_ref()
                    .map_or(String::new(), |n| format!("  [{n}]"))
            ));
        }
        for d in &self.dram_params {
            out.push_str(&format!(
                "  {:<32} DRAM ({} B): {}\n",
                d.name, d.bytes, d.why
            ));
        }
        out
    }
}
