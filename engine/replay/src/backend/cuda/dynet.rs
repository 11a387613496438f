//! DyNet on the GPU: the trace expanded to primitive ops, batched op by op by
//! the policy, every operand gathered by one segment kernel unless it is
//! already contiguous and in order, every batch's results allocated
//! contiguously in one device arena (as `backend::cpu::dynet` does on the CPU).

use std::sync::Arc;

use cudarc::driver::CudaSlice;

use super::exec::{LaunchArg, LaunchExtra, LaunchOp, LaunchView, launch_op};
use super::staging::{Staging, addr};
use crate::cells::CellLibrary;
use crate::device::{CudaDevice, DeviceError, TabView};
use crate::error::ReplayError;
use crate::graph::NodeId;
use crate::incell::CellProgram;
use crate::model::Model;
use crate::run::Counters;
use crate::store::Store;
use crate::trace::Trace;
use crate::workloads::{ArgSrc, OpOrigin, OpProgram, expand};

/// The op-level program and its device buffers.
pub(super) struct DynetGpu {
    prog: Arc<OpProgram>,
    numel: Vec<usize>,
    arena: CudaSlice<f32>,
    tmp: CudaSlice<f32>,
    /// Per role: parameters (cell value order) and each value's offset.
    params: Vec<(CudaSlice<f32>, Vec<usize>)>,
    zero_tab: CudaSlice<i64>,
    pub(super) staging: Staging,
}

impl DynetGpu {
    pub(super) fn new(
        dev: &CudaDevice,
        trace: &Trace,
        model: &Model,
        cells: &CellLibrary,
    ) -> Result<DynetGpu, ReplayError> {
        let prog = expand(&model.workload, &trace.graph, cells, model.hidden)?;
        let numel: Vec<usize> = prog
            .origins
            .iter()
            .map(|o| match o {
                OpOrigin::PortSum { numel, .. } => *numel as usize,
                OpOrigin::CellOp { role, op, .. } => {
                    let cell = &model.roles[*role as usize].cell;
                    cell.values[cell.ops[*op as usize].out.0 as usize].numel()
                }
            })
            .collect();
        let og = &prog.graph;
        let bound: usize = og
            .nodes()
            .map(|v| {
                let arity = match &prog.origins[v.index()] {
                    OpOrigin::CellOp { args, .. } => args.len(),
                    OpOrigin::PortSum { .. } => 0,
                };
                4 * (arity + 1) + og.args(v).len() + arity + 2
            })
            .sum();
        let s = dev.stream();
        let params = model
            .roles
            .iter()
            .map(|rm| {
                let p = CellProgram::op_by_op(rm);
                let buf = if p.params.is_empty() {
                    s.alloc_zeros::<f32>(1)
                } else {
                    s.clone_htod(&p.params)
                };
                buf.map(|b| (b, p.param_at))
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(DeviceError::cuda)?;
        Ok(DynetGpu {
            arena: s
                .alloc_zeros::<f32>(numel.iter().sum::<usize>().max(1))
                .map_err(DeviceError::cuda)?,
            tmp: s.alloc_zeros::<f32>(1).map_err(DeviceError::cuda)?,
            params,
            zero_tab: s.clone_htod(&[0i64]).map_err(DeviceError::cuda)?,
            staging: Staging::new(dev, bound)?,
            prog: Arc::new(prog),
            numel,
        })
    }

    /// The op-level program (its graph is what the policy batches).
    pub(super) fn program(&self) -> Arc<OpProgram> {
        self.prog.clone()
    }

    /// Per-run state.
    pub(super) fn start(&mut self) -> DynetRun<'_> {
        DynetRun {
            slot: vec![0; self.prog.graph.len()],
            bump: 0,
            cursor: 0,
            gpu: self,
        }
    }

    /// The cell-level outputs after a run (copied from the device).
    pub(super) fn outputs(
        &self,
        dev: &CudaDevice,
        trace: &Trace,
        model: &Model,
        slot: &[usize],
    ) -> Result<Store, DeviceError> {
        let arena = dev
            .stream()
            .clone_dtoh(&self.arena)
            .map_err(DeviceError::cuda)?;
        let g = &trace.graph;
        let mut store = Store::new(g, model);
        for v in g.nodes() {
            let role = model.type_role[g.node_type(v).index()];
            for (j, out) in self.prog.cell_outputs[v.index()].iter().enumerate() {
                if let Some(o) = out {
                    let (s, n) = (slot[o.index()], self.numel[o.index()]);
                    store
                        .output_mut(v, role, j)
                        .copy_from_slice(&arena[s..s + n]);
                }
            }
        }
        Ok(store)
    }
}

/// One run's allocation state.
pub(super) struct DynetRun<'a> {
    pub(super) slot: Vec<usize>,
    bump: usize,
    cursor: usize,
    gpu: &'a mut DynetGpu,
}

impl DynetRun<'_> {
    /// Launches one op-level batch.
    pub(super) fn batch(
        &mut self,
        dev: &CudaDevice,
        model: &Model,
        batch: &[NodeId],
        c: &mut Counters,
    ) -> Result<(), DeviceError> {
        let gpu = &mut *self.gpu;
        let og = &gpu.prog.graph;
        let k = batch.len();
        let n = gpu.numel[batch[0].index()];
        let arena = addr(&gpu.arena, dev);
        let zero = addr(&gpu.zero_tab, dev);
        let flat = |ptr: u64, rs: usize, shift: usize| LaunchView {
            tv: TabView {
                ptr,
                tab: zero,
                rs: rs as i64,
                shift: shift as i64,
            },
            addr: ptr + 4 * shift as u64,
            os: 0,
        };
        let base = self.cursor;
        let st = gpu.staging.host();
        let mut w = base;
        // Segments (dst, len, first, end) then sources, per gathered operand.
        let mut push = |st: &mut [i64], entries: &[i64]| -> Result<usize, DeviceError> {
            let at = w;
            super::staging::overflow(st, w + entries.len() - 1)?;
            st[w..w + entries.len()].copy_from_slice(entries);
            w += entries.len();
            Ok(at)
        };
        let y = flat(arena, n, self.bump);
        let origin = &gpu.prog.origins[batch[0].index()];
        let mut gathers: Vec<(u64, usize, usize, usize)> = Vec::new();
        match origin {
            OpOrigin::PortSum { .. } => {
                let mut segs = Vec::with_capacity(4 * k);
                let mut srcs = Vec::new();
                for (r, &v) in batch.iter().enumerate() {
                    let first = srcs.len() as i64;
                    for a in og.args(v) {
                        srcs.push(self.slot[a.index()] as i64);
                        c.bytes_gathered += n as u64 * 4;
                    }
                    segs.extend([
                        (self.bump + r * n) as i64,
                        n as i64,
                        first,
                        srcs.len() as i64,
                    ]);
                }
                let (s0, r0) = (push(st, &segs)?, push(st, &srcs)?);
                gathers.push((arena, s0, k, r0));
            }
            OpOrigin::CellOp { role, op, args, .. } => {
                let cell = &model.roles[*role as usize].cell;
                let cop = &cell.ops[*op as usize];
                let (pbuf, param_at) = &gpu.params[*role as usize];
                let pptr = addr(pbuf, dev);
                let mut tmp_need = 0usize;
                let mut views = Vec::with_capacity(args.len());
                let mut pending = Vec::new();
                for (i, a) in args.iter().enumerate() {
                    let info = &cell.values[cop.args[i].0 as usize];
                    let m = info.numel();
                    if let ArgSrc::Param(vid) = a {
                        views.push(flat(pptr, 0, param_at[*vid as usize]));
                        continue;
                    }
                    let src_of = |v: NodeId| match &gpu.prog.origins[v.index()] {
                        OpOrigin::CellOp { args, .. } => args[i],
                        OpOrigin::PortSum { .. } => ArgSrc::Zero,
                    };
                    let first = match src_of(batch[0]) {
                        ArgSrc::Node(u) => Some(self.slot[u.index()]),
                        _ => None,
                    };
                    let contiguous = first.is_some_and(|s0| {
                        batch.iter().enumerate().all(|(r, &v)| {
                            matches!(src_of(v), ArgSrc::Node(u) if self.slot[u.index()] == s0 + r * m)
                        })
                    });
                    if let (true, Some(s0)) = (contiguous, first) {
                        views.push(flat(arena, m, s0));
                        continue;
                    }
                    let mut segs = Vec::with_capacity(4 * k);
                    let mut srcs = Vec::new();
                    for (r, &v) in batch.iter().enumerate() {
                        let f = srcs.len() as i64;
                        if let ArgSrc::Node(u) = src_of(v) {
                            srcs.push(self.slot[u.index()] as i64);
                        }
                        segs.extend([(tmp_need + r * m) as i64, m as i64, f, srcs.len() as i64]);
                    }
                    let (s0, r0) = (push(st, &segs)?, push(st, &srcs)?);
                    pending.push((views.len(), tmp_need, m, s0, r0));
                    views.push(flat(0, m, tmp_need));
                    tmp_need += k * m;
                    c.bytes_gathered += (k * m) as u64 * 4;
                }
                if gpu.tmp.len() < tmp_need {
                    gpu.tmp = dev
                        .stream()
                        .alloc_zeros::<f32>(tmp_need.next_power_of_two())
                        .map_err(DeviceError::cuda)?;
                }
                let tmp = addr(&gpu.tmp, dev);
                for &(vi, off, m, s0, r0) in &pending {
                    views[vi] = flat(tmp, m, off);
                    gathers.push((tmp, s0, k, r0));
                }
                let mut data = Vec::with_capacity(2 * k);
                for pass in 0..2 {
                    for &v in batch {
                        let node = match &gpu.prog.origins[v.index()] {
                            OpOrigin::CellOp { node, .. } | OpOrigin::PortSum { node, .. } => *node,
                        };
                        let d = model.node_data(node);
                        data.push(i64::from(if pass == 0 { d.0 } else { d.1 }));
                    }
                }
                let d0 = push(st, &data)?;
                let extra = match cop.kind {
                    crate::cells::PrimOp::Concat => {
                        let mut off = 0;
                        LaunchExtra::Concat(
                            (0..args.len())
                                .map(|i| {
                                    let v = flat(arena, n, self.bump + off);
                                    off += cell.values[cop.args[i].0 as usize].numel();
                                    v
                                })
                                .collect(),
                        )
                    }
                    crate::cells::PrimOp::Slice => {
                        let shape = &cell.values[cop.args[0].0 as usize].shape;
                        let inner: usize = shape[1..].iter().product();
                        let mut x = views[0];
                        let d = (cop.slice.map_or(0, |s| s.0) * inner) as i64;
                        x.tv.shift += d;
                        x.addr += 4 * d as u64;
                        LaunchExtra::Slice(x)
                    }
                    _ => LaunchExtra::None,
                };
                let rop = LaunchOp {
                    kind: cop.kind,
                    factor: cop.factor.unwrap_or(1.0),
                    k,
                    m: 1,
                    out: n,
                    args: views
                        .iter()
                        .enumerate()
                        .map(|(i, v)| {
                            let info = &cell.values[cop.args[i].0 as usize];
                            LaunchArg {
                                v: *v,
                                per_row: info.kind != crate::cells::ValueKind::Param,
                                numel: info.numel(),
                                shape: &info.shape,
                            }
                        })
                        .collect(),
                    y,
                    extra,
                    rows0: cell.values[cop.args.first().map_or(cop.out, |a| *a).0 as usize]
                        .shape
                        .first()
                        .copied()
                        .unwrap_or(1)
                        .max(1),
                };
                self.cursor = w;
                gpu.staging.upload(dev, base, w)?;
                // SAFETY: the segments address the arena / temporary buffer
                // (sized above); the op's views lie in the arena, the
                // temporaries or the role's parameters.
                unsafe {
                    for &(dst, s0, nseg, r0) in &gathers {
                        dev.seg_sum(dst, arena, gpu.staging.dev(s0), nseg, gpu.staging.dev(r0))?;
                    }
                    c.kernels += gathers.len() as u64;
                    let up = gpu.staging.dev(d0);
                    c.kernels += launch_op(dev, &rop, up, up + 8 * k as u64)?;
                }
                self.finish(batch, n, c);
                return Ok(());
            }
        }
        self.cursor = w;
        gpu.staging.upload(dev, base, w)?;
        // SAFETY: the port sums read producers and write the batch's new slots,
        // all inside the arena.
        unsafe {
            for &(dst, s0, nseg, r0) in &gathers {
                dev.seg_sum(dst, arena, gpu.staging.dev(s0), nseg, gpu.staging.dev(r0))?;
            }
        }
        c.kernels += 1;
        self.finish(batch, n, c);
        Ok(())
    }

    fn finish(&mut self, batch: &[NodeId], n: usize, c: &mut Counters) {
        for (r, &v) in batch.iter().enumerate() {
            self.slot[v.index()] = self.bump + r * n;
        }
        self.bump += batch.len() * n;
        c.batches += 1;
    }
}
