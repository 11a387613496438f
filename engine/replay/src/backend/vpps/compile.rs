//! The script compiler: a schedule's batches (any policy; the backward
//! batches on the reversed graph) become per-processor instruction streams.
//!
//! Per batch, the role's templates are instantiated: row-wise work (gathers,
//! elementwise chains, lookups, losses) is split into row chunks, each given
//! to the processor with the least accumulated load (VPPS §III-B1's rule;
//! ties to the lowest id), the *same* split for every row-wise instruction of
//! the batch, so a chain of them stays on one processor and needs no grid
//! barrier; resident products go to every owner of the matrix's rows;
//! anything that accumulates into a parameter gradient in DRAM goes to that
//! parameter's owner (`parameter index mod processors`), so no two
//! processors race on it.
//!
//! Barriers: the compiler tracks, per phase (between grid barriers), which
//! processor wrote and read every (node, value) slot, parameter region and
//! partial-sum buffer; an instruction that would read what another processor
//! wrote in the phase, or write what another read or wrote, gets a grid
//! barrier before it. The emulator checks the result independently, float
//! by float.
//!
//! A resident product's backward writes, per participating processor, the
//! partial sums `Σ_its rows W_jᵀ dy` into a ring buffer in DRAM; a
//! `REDUCE` (after a barrier) adds the participants' partials in a fixed
//! order into the input gradient — deterministic, where the paper's atomic
//! adds are not.

use std::collections::HashMap;

use super::error::PoolTooLarge;
use super::lower::{Opd, RoleCode, Split, Template};
use super::placement::Plan;
use super::script::{Ins, MAX_OFFSET, Script, operand, space};
use crate::graph::{Graph, NodeId};
use crate::model::Model;

/// Row work (floats) a chunk should have before a batch is split further.
const GRAIN: usize = 2048;
/// Smallest partial-sum ring, floats.
const MIN_RING: usize = 1 << 20;

/// Where everything is in the pool (floats).
#[derive(Clone, Debug)]
pub struct Pool {
    /// Parameters start at 0; their gradients at `params`.
    pub params: usize,
    /// First forward record.
    pub fwd: usize,
    /// Forward record of every node.
    pub node_rec: Vec<u32>,
    /// Floats from a forward record to its gradient record.
    pub grad_shift: usize,
    /// The partial-sum ring.
    pub ring: usize,
    /// Its length.
    pub ring_len: usize,
    /// Total floats.
    pub total: usize,
}

impl Pool {
    pub(crate) fn new(
        g: &Graph,
        model: &Model,
        roles: &[RoleCode],
        plan: &Plan,
        params: usize,
    ) -> Result<Pool, PoolTooLarge> {
        let fwd = 2 * params;
        let mut node_rec = Vec::with_capacity(g.len());
        let mut at = fwd;
        for v in g.nodes() {
            node_rec.push(at as u32);
            at += roles[model.type_role[g.node_type(v).index()]].units;
        }
        let records = at - fwd;
        let widest = plan
            .mats
            .iter()
            .map(|p| p.participants.len() * p.mat.l * p.mat.pcols)
            .max()
            .unwrap_or(0);
        let ring_len = MIN_RING.max(2 * widest);
        let ring = fwd + 2 * records;
        let total = ring + ring_len;
        if total > MAX_OFFSET as usize {
            return Err(PoolTooLarge { floats: total });
        }
        Ok(Pool {
            params,
            fwd,
            node_rec,
            grad_shift: records,
            ring,
            ring_len,
            total,
        })
    }
}

/// Who touched a slot in the current phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Who {
    One(u32),
    Many,
}

fn differs(a: Who, b: Who) -> bool {
    a == Who::Many || b == Who::Many || a != b
}

fn merge(a: Option<Who>, b: Who) -> Who {
    match a {
        Some(x) if !differs(x, b) => x,
        None => b,
        _ => Who::Many,
    }
}

/// A tracked slot: (kind, node, value): kind 0 forward value, 1 gradient,
/// 2 pool region (node 0), 3 partial buffer (its allocation id).
type Key = (u8, u32, u32);

/// A multiply-rotate hasher for [`Key`]s (std's SipHash was 16 % of a
/// script compile, profiled on tree-lstm b8 h256). The map is only looked
/// into and cleared, never iterated, so its order never reaches the script.
#[derive(Default)]
struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u8(b);
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

type KeyMap<V> = HashMap<Key, V, std::hash::BuildHasherDefault<KeyHasher>>;

#[derive(Default)]
struct Phase {
    slots: KeyMap<(Option<Who>, Option<Who>)>,
    ring: Vec<(usize, usize)>,
}

/// What the compiler produced besides the script.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ScriptStats {
    /// Forward batches.
    pub forward_batches: usize,
    /// Backward batches.
    pub backward_batches: usize,
    /// Instructions per processor (barriers and `END` included).
    pub instructions: Vec<usize>,
    /// Grid barriers.
    pub barriers: u32,
    /// Largest processor load over the mean.
    pub load_imbalance: f64,
    /// Weight bytes the script reads from DRAM: the DRAM-resident matrices'
    /// rows at every use, plus every resident matrix loaded once.
    pub weight_bytes_loaded: u64,
    /// The same for a per-op executor that loads every matrix at every use
    /// (once per batch, as DyNet's batched kernels do).
    pub weight_bytes_per_op: u64,
}

/// The word buffers of a script (its streams and data section), kept by
/// [`super::Vpps`] between compiles so that a mini-batch's script grows into
/// memory the previous one already touched: fresh buffers cost page faults
/// and regrowth copies (perf, bilstm-tagger b32 h256: 15 % memmove, 12 %
/// page faults and page clearing).
#[derive(Default)]
pub(crate) struct ScriptBuffers {
    pub(crate) streams: Vec<Vec<u32>>,
    pub(crate) data: Vec<u32>,
}

/// The compiler's state over one mini-batch.
pub(crate) struct Compiler<'a> {
    g: &'a Graph,
    model: &'a Model,
    roles: &'a [RoleCode],
    plan: &'a Plan,
    pool: &'a Pool,
    vps: u32,
    streams: Vec<Vec<u32>>,
    counts: Vec<usize>,
    data: Vec<u32>,
    load: Vec<u64>,
    phase: Phase,
    barriers: u32,
    /// The batch (data index of its row table) each processor has selected.
    selected: Vec<u32>,
    table: u32,
    k: u32,
    ring_cursor: usize,
    allocs: u32,
    /// Per node, its consumers: `(consumer, port)`, once per binding.
    consumers: Vec<Vec<(u32, u32)>>,
    stats: ScriptStats,
    seed_role: Vec<bool>,
    /// Rows of matrix `mi` on processor `vp`: `rows_n[mi][vp]`.
    rows_n: Vec<Vec<usize>>,
}

impl<'a> Compiler<'a> {
    pub(crate) fn new(
        g: &'a Graph,
        model: &'a Model,
        roles: &'a [RoleCode],
        plan: &'a Plan,
        pool: &'a Pool,
        buffers: ScriptBuffers,
    ) -> Compiler<'a> {
        let vps = plan.vps;
        let ScriptBuffers {
            mut streams,
            mut data,
        } = buffers;
        streams.resize_with(vps as usize, Vec::new);
        streams.iter_mut().for_each(Vec::clear);
        data.clear();
        let mut consumers = vec![Vec::new(); g.len()];
        for v in g.nodes() {
            for (p, us) in model.bindings.ports(v).enumerate() {
                for &u in us {
                    consumers[u.index()].push((v.0, p as u32));
                }
            }
        }
        Compiler {
            g,
            model,
            roles,
            plan,
            pool,
            vps,
            streams,
            counts: vec![0; vps as usize],
            data,
            load: vec![0; vps as usize],
            phase: Phase::default(),
            barriers: 0,
            selected: vec![u32::MAX; vps as usize],
            table: 0,
            k: 0,
            ring_cursor: 0,
            allocs: 0,
            consumers,
            stats: ScriptStats::default(),
            seed_role: model.roles.iter().map(|r| r.role.loss).collect(),
            rows_n: (0..plan.mats.len())
                .map(|mi| (0..vps).map(|vp| plan.rows_on(mi, vp).len()).collect())
                .collect(),
        }
    }

    fn role(&self, v: NodeId) -> usize {
        self.model.type_role[self.g.node_type(v).index()]
    }

    fn push(&mut self, vp: u32, ins: &Ins) {
        if !matches!(ins, Ins::Bar { .. } | Ins::End) {
            self.select_batch(vp);
        }
        ins.encode(&mut self.streams[vp as usize]);
        self.counts[vp as usize] += 1;
    }

    /// `words`, one row instruction already encoded, pushed as
    /// [`Compiler::push`] does: a resident product goes to every owner of the
    /// matrix, so it is encoded once and copied (encoding it per processor
    /// was 12 % of a compile).
    fn push_encoded(&mut self, vp: u32, words: &[u32]) {
        self.select_batch(vp);
        self.streams[vp as usize].extend_from_slice(words);
        self.counts[vp as usize] += 1;
    }

    /// Selects the current batch's row table on `vp` unless it already has.
    fn select_batch(&mut self, vp: u32) {
        if self.selected[vp as usize] != self.table {
            self.selected[vp as usize] = self.table;
            Ins::Batch {
                table: self.table,
                k: self.k,
            }
            .encode(&mut self.streams[vp as usize]);
            self.counts[vp as usize] += 1;
        }
    }

    fn barrier(&mut self) {
        let n = self.barriers;
        for vp in 0..self.vps {
            self.push(vp, &Ins::Bar { n });
        }
        self.barriers += 1;
        self.phase.slots.clear();
        self.phase.ring.clear();
    }

    /// Records `accesses` (key, who, write), with a barrier first if any
    /// conflicts with the phase so far.
    fn access(&mut self, accesses: &[(Key, Who, bool)]) {
        let conflict = accesses.iter().any(|&(key, who, write)| {
            let Some(&(w, r)) = self.phase.slots.get(&key) else {
                return false;
            };
            w.is_some_and(|w| differs(w, who)) || (write && r.is_some_and(|r| differs(r, who)))
        });
        if conflict {
            self.barrier();
        }
        for &(key, who, write) in accesses {
            let e = self.phase.slots.entry(key).or_insert((None, None));
            if write {
                e.0 = Some(merge(e.0, who));
            } else {
                e.1 = Some(merge(e.1, who));
            }
        }
    }

    /// Splits `k` rows of `work` floats each into chunks on the least
    /// loaded processors.
    fn partition(&mut self, k: usize, work: usize) -> Vec<(u32, u32, u32)> {
        let work = work.max(1);
        let n = (k * work)
            .div_ceil(GRAIN)
            .clamp(1, k.min(self.vps as usize).max(1));
        let (base, extra) = (k / n, k % n);
        let mut out = Vec::with_capacity(n);
        let mut r = 0;
        for c in 0..n {
            let rows = base + usize::from(c < extra);
            let vp = self.least_loaded();
            self.load[vp as usize] += (rows * work) as u64;
            out.push((vp, r as u32, (r + rows) as u32));
            r += rows;
        }
        out
    }

    fn least_loaded(&self) -> u32 {
        let mut best = 0;
        for v in 1..self.load.len() {
            if self.load[v] < self.load[best] {
                best = v;
            }
        }
        best as u32
    }

    fn word(&self, o: Opd) -> u32 {
        match o {
            Opd::Fwd { off, .. } => operand(space::FWD, off),
            Opd::Grad { off, .. } => operand(space::GRAD, off),
            Opd::Abs { addr, .. } => operand(space::ABS, addr),
        }
    }

    fn keys(&self, o: Opd, batch: &[NodeId], r0: u32, r1: u32) -> Vec<Key> {
        match o {
            Opd::Fwd { value, .. } => (r0..r1).map(|r| (0, batch[r as usize].0, value)).collect(),
            Opd::Grad { value, .. } => (r0..r1).map(|r| (1, batch[r as usize].0, value)).collect(),
            Opd::Abs { region, .. } => vec![(2, 0, region)],
        }
    }

    fn begin_batch(&mut self, batch: &[NodeId]) -> usize {
        let role = self.role(batch[0]);
        self.table = self.data.len() as u32;
        self.k = batch.len() as u32;
        for &v in batch {
            self.data.push(self.pool.node_rec[v.index()]);
        }
        role
    }

    /// A per-row data table (lookup ids or labels) for the batch.
    fn node_data(&mut self, batch: &[NodeId], label: bool) -> u32 {
        let at = self.data.len() as u32;
        for &v in batch {
            let (id, lab) = self.model.node_data(v);
            self.data.push(if label { lab } else { id });
        }
        at
    }

    /// Emits a gather into `dst` (a record value of every row) from per-row
    /// source lists (absolute addresses, with the slots they read).
    fn gather(
        &mut self,
        batch: &[NodeId],
        part: &[(u32, u32, u32)],
        dst: Opd,
        len: u32,
        sources: Vec<Vec<(u32, Key)>>,
        init: f32,
    ) {
        let csr = self.data.len() as u32;
        let k = batch.len();
        let mut n = 0u32;
        for s in &sources {
            self.data.push(n);
            n += s.len() as u32;
        }
        self.data.push(n);
        for s in &sources {
            self.data.extend(s.iter().map(|x| x.0));
        }
        debug_assert_eq!(sources.len(), k);
        let mut acc = Vec::new();
        for &(vp, r0, r1) in part {
            for key in self.keys(dst, batch, r0, r1) {
                acc.push((key, Who::One(vp), true));
            }
            for s in &sources[r0 as usize..r1 as usize] {
                for &(_, key) in s {
                    acc.push((key, Who::One(vp), false));
                }
            }
        }
        self.access(&acc);
        let d = self.word(dst);
        for &(vp, r0, r1) in part {
            self.push(
                vp,
                &Ins::Gather {
                    r0,
                    r1,
                    len,
                    dst: d,
                    csr,
                    init,
                },
            );
        }
    }

    /// Compiles one forward batch.
    pub(crate) fn forward(&mut self, batch: &[NodeId]) {
        let role = self.begin_batch(batch);
        let code = &self.roles[role];
        let ids = code.needs_ids.then(|| self.node_data(batch, false));
        let labels = code.needs_labels.then(|| self.node_data(batch, true));
        let work: usize = code
            .inputs
            .iter()
            .flatten()
            .map(|i| i.1 as usize)
            .sum::<usize>()
            + code.fwd.iter().map(Template::work).sum::<usize>();
        let part = self.partition(batch.len(), work);
        for p in 0..code.inputs.len() {
            for j in 0..code.inputs[p].len() {
                let (off, len, value) = code.inputs[p][j];
                let sources = batch
                    .iter()
                    .map(|&v| {
                        self.model
                            .bindings
                            .port(v, p)
                            .iter()
                            .map(|&u| {
                                let (uo, _, uval) = self.roles[self.role(u)].outputs[j];
                                (self.pool.node_rec[u.index()] + uo, (0u8, u.0, uval))
                            })
                            .collect()
                    })
                    .collect();
                self.gather(batch, &part, Opd::Fwd { off, value }, len, sources, 0.0);
            }
        }
        for t in code.fwd.clone() {
            self.template(&t, batch, &part, ids, labels);
        }
        self.stats.forward_batches += 1;
    }

    /// Compiles one backward batch (of the reversed graph).
    pub(crate) fn backward(&mut self, batch: &[NodeId]) {
        let role = self.begin_batch(batch);
        let code = &self.roles[role];
        let ids = code.needs_ids.then(|| self.node_data(batch, false));
        let labels = code.needs_labels.then(|| self.node_data(batch, true));
        let work: usize = code.outputs.iter().map(|o| o.1 as usize).sum::<usize>()
            + code.bwd.iter().map(Template::work).sum::<usize>();
        let part = self.partition(batch.len(), work);
        let shift = self.pool.grad_shift as u32;
        for j in 0..code.outputs.len() {
            let (off, len, value) = code.outputs[j];
            let sources = batch
                .iter()
                .map(|&u| {
                    // A port with n inputs binds the producer's first n
                    // outputs: only those consumers read output j.
                    self.consumers[u.index()]
                        .iter()
                        .filter_map(|&(v, p)| {
                            let vr = self.role(NodeId(v));
                            let &(io, _, ival) = self.roles[vr].inputs[p as usize].get(j)?;
                            Some((self.pool.node_rec[v as usize] + shift + io, (1u8, v, ival)))
                        })
                        .collect()
                })
                .collect();
            let init = if self.seed_role[role] { 1.0 } else { 0.0 };
            self.gather(batch, &part, Opd::Grad { off, value }, len, sources, init);
        }
        for t in code.bwd.clone() {
            self.template(&t, batch, &part, ids, labels);
        }
        self.stats.backward_batches += 1;
    }

    fn template(
        &mut self,
        t: &Template,
        batch: &[NodeId],
        part: &[(u32, u32, u32)],
        ids: Option<u32>,
        labels: Option<u32>,
    ) {
        let k = batch.len() as u32;
        match t.split() {
            Split::Resident(mi) => self.resident(t, mi, batch),
            split => {
                let owner;
                let chunks: &[(u32, u32, u32)] = match split {
                    Split::Owner(param) => {
                        owner = [(param % self.vps, 0, k)];
                        self.load[owner[0].0 as usize] += (k as usize * t.work()) as u64;
                        &owner
                    }
                    _ => part,
                };
                let mut acc = Vec::new();
                for &(vp, r0, r1) in chunks {
                    for o in t.reads() {
                        for key in self.keys(o, batch, r0, r1) {
                            acc.push((key, Who::One(vp), false));
                        }
                    }
                    for o in t.writes() {
                        for key in self.keys(o, batch, r0, r1) {
                            acc.push((key, Who::One(vp), true));
                        }
                    }
                }
                self.access(&acc);
                for &(vp, r0, r1) in chunks {
                    let ins = self.row_ins(t, r0, r1, ids, labels);
                    self.push(vp, &ins);
                }
            }
        }
    }

    fn row_ins(
        &self,
        t: &Template,
        r0: u32,
        r1: u32,
        ids: Option<u32>,
        labels: Option<u32>,
    ) -> Ins {
        let w = |o: Opd| self.word(o);
        match t {
            Template::Map1 { f, len, dst, a } => Ins::Map1 {
                f: u32::from(*f),
                r0,
                r1,
                len: *len,
                dst: w(*dst),
                a: w(*a),
            },
            Template::Map2 { f, len, dst, a, b } => Ins::Map2 {
                f: u32::from(*f),
                r0,
                r1,
                len: *len,
                dst: w(*dst),
                a: w(*a),
                b: w(*b),
            },
            Template::SumN {
                len,
                dst,
                scale,
                args,
            } => Ins::SumN {
                r0,
                r1,
                len: *len,
                dst: w(*dst),
                scale: *scale,
                args: args.iter().map(|&a| w(a)).collect(),
            },
            Template::Lookup {
                len,
                dst,
                table,
                rows,
            } => Ins::Lookup {
                r0,
                r1,
                len: *len,
                dst: w(*dst),
                table: w(*table),
                rows: *rows,
                ids: ids.expect("a lookup role has ids"),
            },
            Template::Softmax { len, dst, a } => Ins::Softmax {
                r0,
                r1,
                len: *len,
                dst: w(*dst),
                a: w(*a),
            },
            Template::PickLoss { width, dst, a } => Ins::PickLoss {
                r0,
                r1,
                width: *width,
                dst: w(*dst),
                a: w(*a),
                labels: labels.expect("a loss role has labels"),
            },
            Template::GProd {
                m,
                n,
                p,
                ta,
                tb,
                acc,
                c,
                a,
                b,
            } => Ins::GProd {
                ta: *ta,
                tb: *tb,
                acc: *acc,
                r0,
                r1,
                m: *m,
                n: *n,
                p: *p,
                c: w(*c),
                a: w(*a),
                b: w(*b),
            },
            Template::DMap {
                kind,
                len,
                dx,
                dy,
                aux,
                scale,
            } => Ins::DMap {
                kind: u32::from(*kind),
                r0,
                r1,
                len: *len,
                dx: w(*dx),
                dy: w(*dy),
                aux: w(*aux),
                scale: *scale,
            },
            Template::DLookup {
                len,
                dy,
                dtable,
                rows,
            } => Ins::DLookup {
                r0,
                r1,
                len: *len,
                dy: w(*dy),
                dtable: w(*dtable),
                rows: *rows,
                ids: ids.expect("a lookup role has ids"),
            },
            Template::DSoftmax { len, dx, dy, y } => Ins::DSoftmax {
                r0,
                r1,
                len: *len,
                dx: w(*dx),
                dy: w(*dy),
                y: w(*y),
            },
            Template::DPickLoss { width, dx, dy, x } => Ins::DPickLoss {
                r0,
                r1,
                width: *width,
                dx: w(*dx),
                dy: w(*dy),
                x: w(*x),
                labels: labels.expect("a loss role has labels"),
            },
            Template::RProd { .. } | Template::RProdB { .. } => {
                unreachable!("resident products split by owner")
            }
        }
    }

    fn resident(&mut self, t: &Template, mi: u32, batch: &[NodeId]) {
        let k = batch.len() as u32;
        let p = &self.plan.mats[mi as usize];
        let parts = p.participants.clone();
        let who = if parts.len() == 1 {
            Who::One(parts[0])
        } else {
            Who::Many
        };
        let row_bytes = 4 * (p.mat.l + usize::from(p.mat.bias.is_some())) as u64;
        let (l, pcols) = (p.mat.l, p.mat.pcols);
        let offs: Vec<usize> = p
            .mat
            .terms
            .iter()
            .scan(0, |s, t| {
                *s += t.1;
                Some(*s - t.1)
            })
            .collect();
        let kterms: Vec<usize> = p.mat.terms.iter().map(|t| t.1).collect();
        let on_chip = p.weights != super::placement::Storage::Global;
        let m = p.mat.m as u64;
        self.stats.weight_bytes_per_op += m * row_bytes;
        if !on_chip {
            self.stats.weight_bytes_loaded += m * row_bytes;
        }
        for &vp in &parts {
            let rows = self.rows_n[mi as usize][vp as usize];
            self.load[vp as usize] += (rows * l * pcols * k as usize) as u64;
        }
        match t {
            Template::RProd { acc, dst, xs, .. } => {
                let mut a = Vec::new();
                for &x in xs {
                    for key in self.keys(x, batch, 0, k) {
                        a.push((key, who, false));
                    }
                }
                for key in self.keys(*dst, batch, 0, k) {
                    a.push((key, who, true));
                    if *acc {
                        a.push((key, who, false));
                    }
                }
                self.access(&a);
                let ins = Ins::RProd {
                    mat: mi,
                    acc: *acc,
                    r0: 0,
                    r1: k,
                    dst: self.word(*dst),
                    xs: xs.iter().map(|&x| self.word(x)).collect(),
                };
                let mut words = Vec::new();
                ins.encode(&mut words);
                for &vp in &parts {
                    self.push_encoded(vp, &words);
                }
            }
            Template::RProdB { dy, xs, dxs, .. } => {
                let width = l * pcols;
                let per_row = parts.len() * width;
                let kc = (self.pool.ring_len / 2 / per_row).clamp(1, k as usize) as u32;
                let mut c0 = 0;
                while c0 < k {
                    let c1 = (c0 + kc).min(k);
                    let size = per_row * (c1 - c0) as usize;
                    if self.ring_cursor + size > self.pool.ring_len {
                        self.ring_cursor = 0;
                    }
                    let range = (self.ring_cursor, self.ring_cursor + size);
                    if self
                        .phase
                        .ring
                        .iter()
                        .any(|&(a, b)| a < range.1 && range.0 < b)
                    {
                        self.barrier();
                    }
                    self.phase.ring.push(range);
                    self.ring_cursor += size;
                    let base = (self.pool.ring + range.0) as u32;
                    let alloc: Key = (3, self.allocs, 0);
                    self.allocs += 1;
                    let mut a = vec![(alloc, who, true)];
                    for key in self.keys(*dy, batch, c0, c1) {
                        a.push((key, who, false));
                    }
                    for &x in xs {
                        for key in self.keys(x, batch, c0, c1) {
                            a.push((key, who, false));
                        }
                    }
                    self.access(&a);
                    let (dyw, xw): (u32, Vec<u32>) =
                        (self.word(*dy), xs.iter().map(|&x| self.word(x)).collect());
                    // Encoded once; only the partial slot `pi` (the word after
                    // the preamble and `mat`) differs between the owners.
                    let mut words = Vec::new();
                    Ins::RProdB {
                        mat: mi,
                        pi: 0,
                        r0: c0,
                        r1: c1,
                        dy: dyw,
                        partial: base,
                        xs: xw,
                    }
                    .encode(&mut words);
                    for (pi, &vp) in parts.iter().enumerate() {
                        words[2] = pi as u32;
                        self.push_encoded(vp, &words);
                    }
                    // The reductions: rows split as any row work.
                    let red = self.partition((c1 - c0) as usize, width);
                    for (j, &dx) in dxs.iter().enumerate() {
                        let mut a = Vec::new();
                        for &(vp, r0, r1) in &red {
                            a.push((alloc, Who::One(vp), false));
                            for key in self.keys(dx, batch, c0 + r0, c0 + r1) {
                                a.push((key, Who::One(vp), false));
                                a.push((key, Who::One(vp), true));
                            }
                        }
                        self.access(&a);
                        // The reduction reads the buffer in this phase (a
                        // barrier above may have opened it): no later
                        // allocation may reuse it before the next barrier.
                        if !self.phase.ring.contains(&range) {
                            self.phase.ring.push(range);
                        }
                        let d = self.word(dx);
                        for &(vp, r0, r1) in &red {
                            self.push(
                                vp,
                                &Ins::Reduce {
                                    r0: c0 + r0,
                                    r1: c0 + r1,
                                    c0,
                                    kc: c1 - c0,
                                    w: width as u32,
                                    col: (offs[j] * pcols) as u32,
                                    len: (kterms[j] * pcols) as u32,
                                    parts: parts.len() as u32,
                                    partial: base,
                                    dst: d,
                                },
                            );
                        }
                    }
                    c0 = c1;
                }
            }
            _ => unreachable!("only products are resident"),
        }
    }

    /// Closes every stream and returns the script with its statistics.
    pub(crate) fn finish(mut self) -> (Script, ScriptStats) {
        for vp in 0..self.vps {
            self.push(vp, &Ins::End);
        }
        for p in &self.plan.mats {
            if p.weights != super::placement::Storage::Global {
                self.stats.weight_bytes_loaded +=
                    4 * (p.mat.m * (p.mat.l + usize::from(p.mat.bias.is_some()))) as u64;
            }
        }
        let mean = self.load.iter().sum::<u64>() as f64 / self.load.len().max(1) as f64;
        self.stats.load_imbalance = if mean > 0.0 {
            *self.load.iter().max().unwrap_or(&0) as f64 / mean
        } else {
            1.0
        };
        self.stats.instructions = self.counts;
        self.stats.barriers = self.barriers;
        (
            Script {
                vps: self.vps,
                barriers: self.barriers,
                grad_shift: self.pool.grad_shift as u32,
                streams: self.streams,
                data: self.data,
            },
            self.stats,
        )
    }
}
