//! Running a trace on the GPU. The host walks the schedule exactly as the CPU
//! executors do (the policy runs in the loop, its time is "scheduling"); each
//! batch writes its entry/exit segments and per-node data into a fresh region
//! of one pinned staging buffer, copies it up asynchronously and launches its
//! kernels, without waiting: the GPU runs batch `k` while the host schedules
//! batch `k + 1`. Regions are never reused within a run, so no copy has to wait
//! for an earlier one; the run synchronises once, at the end.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaSlice};

use super::dynet::DynetGpu;
use super::exec::run_program;
use super::program::{GpuProgram, build};
use super::staging::{Staging, addr, overflow};
use crate::cells::CellLibrary;
use crate::device::{CudaDevice, DeviceError};
use crate::error::ReplayError;
use crate::executor::{Executor, instance_policy};
use crate::graph::{Graph, NodeId};
use crate::incell::CellProgram;
use crate::model::Model;
use crate::run::{Counters, Decide, Order, TimeSplit, Walk, walk};
use crate::sched::{BatchPolicy, CavsPolicy, SameTypeDag};
use crate::store::Store;
use crate::trace::Trace;

/// What one GPU run measured, with the outputs copied back.
pub struct GpuRun {
    /// Every node's outputs.
    pub store: Store,
    /// Work counters.
    pub counters: Counters,
    /// Host time split.
    pub time: TimeSplit,
    /// Policy fallbacks (FSM misses).
    pub misses: u64,
    /// GPU time (CUDA events).
    pub device_s: Option<f64>,
}

/// A trace's executor prepared on a GPU: programs (tables, parameters) and
/// buffers are uploaded once and reused by every [`run`](Self::run).
pub struct CudaReplay {
    dev: Arc<CudaDevice>,
    progs: Vec<GpuProgram>,
    /// Host copy of the node outputs; also gives every output's offset.
    layout: Store,
    store: CudaSlice<f32>,
    work: CudaSlice<f32>,
    staging: Staging,
    /// The op-level program and buffers of the DyNet executor.
    dynet: Option<DynetGpu>,
}

/// Upper bound of the i64 entries a run uploads: per node, its entry segments
/// (4 + one per producer, per input value), exit segments (5 per output) and
/// its lookup row and label.
fn upload_bound(g: &Graph, model: &Model) -> usize {
    g.nodes()
        .map(|v| {
            let cell = &model.role_of(g, v).cell;
            let entry: usize = cell
                .ports
                .iter()
                .zip(model.bindings.ports(v))
                .map(|(port, bound)| port.inputs.len() * (4 + bound.len()))
                .sum();
            entry + 5 * cell.outputs.len() + 2
        })
        .sum()
}

impl CudaReplay {
    /// Uploads the programs of `executor` for `trace` (ED-Batch: the layouts'
    /// programs; the others run each cell op by op over the batch).
    pub fn new(
        dev: Arc<CudaDevice>,
        trace: &Trace,
        model: &Model,
        cells: &CellLibrary,
        executor: &Executor,
    ) -> Result<CudaReplay, ReplayError> {
        let dynet = match executor {
            Executor::Dynet(_) => Some(DynetGpu::new(&dev, trace, model, cells)?),
            _ => None,
        };
        let progs = model
            .roles
            .iter()
            .enumerate()
            .map(|(ri, rm)| {
                let layout = match executor {
                    Executor::EdBatch(_, ps) => ps.get(ri).and_then(Option::as_ref),
                    _ => None,
                };
                match layout {
                    Some(p) => build(&dev, &rm.cell, p),
                    None => build(&dev, &rm.cell, &CellProgram::op_by_op(rm)),
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        let g = &trace.graph;
        let layout = Store::new(g, model);
        let s = dev.stream();
        let store = s
            .alloc_zeros::<f32>(layout.arena.len().max(1))
            .map_err(DeviceError::cuda)?;
        let staging = Staging::new(&dev, upload_bound(g, model))?;
        let work = s.alloc_zeros::<f32>(1).map_err(DeviceError::cuda)?;
        Ok(CudaReplay {
            dev,
            progs,
            layout,
            store,
            work,
            staging,
            dynet,
        })
    }

    /// Runs the trace once; the outputs are copied back after the timed part.
    pub fn run(
        &mut self,
        trace: &Trace,
        model: &Model,
        executor: &mut Executor,
    ) -> Result<GpuRun, ReplayError> {
        let g = &trace.graph;
        let mut clock = RunClock::new(&self.dev)?;
        let dev = self.dev.clone();
        if let (Some(dg), Executor::Dynet(policy)) = (self.dynet.as_mut(), &mut *executor) {
            return run_dynet(&dev, dg, trace, model, policy.as_mut(), clock);
        }
        let mut b = Batcher {
            dev: &dev,
            progs: &self.progs,
            layout: &self.layout,
            store: addr(&self.store, &dev),
            work: &mut self.work,
            staging: &mut self.staging,
            cursor: 0,
            counters: Counters::default(),
            exec_s: 0.0,
        };
        let mut cavs = CavsPolicy::default();
        let order = match instance_policy(executor, &mut cavs) {
            (Some(p), _) => Order::Policy(p),
            _ => Order::Nodes,
        };
        clock.begin(&dev)?;
        // Launches return at once: the host decides the next batch while the
        // GPU runs this one.
        let how = Walk {
            decide: Decide::EachBatch,
            id_order: false,
        };
        let walked = walk(g, order, how, &SameTypeDag::new, |batch, _| {
            Ok(b.batch(g, model, batch)?)
        })?;
        let misses = walked.misses;
        let (time, device_s) = clock.finish(&dev, b.exec_s, walked.dag_s)?;
        let counters = b.counters;
        let mut store = Store::new(g, model);
        dev.stream()
            .memcpy_dtoh(&self.store, store.arena.as_mut_slice())
            .map_err(DeviceError::cuda)?;
        Ok(GpuRun {
            store,
            counters,
            time,
            misses,
            device_s: Some(device_s),
        })
    }
}

/// The clocks of one GPU run: CUDA events around its kernels, and host time
/// split into construction (until [`begin`](Self::begin)), scheduling (the
/// loop minus the time spent launching) and execution (launching plus the
/// final wait for the GPU).
struct RunClock {
    t0: Instant,
    start: CudaEvent,
    end: CudaEvent,
    construction: f64,
    loop_start: Instant,
}

impl RunClock {
    fn new(dev: &CudaDevice) -> Result<RunClock, DeviceError> {
        let ev = || {
            dev.context()
                .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(DeviceError::cuda)
        };
        let now = Instant::now();
        Ok(RunClock {
            t0: now,
            start: ev()?,
            end: ev()?,
            construction: 0.0,
            loop_start: now,
        })
    }

    /// Construction is over; the schedule loop starts.
    fn begin(&mut self, dev: &CudaDevice) -> Result<(), DeviceError> {
        self.start.record(dev.stream()).map_err(DeviceError::cuda)?;
        self.construction = self.t0.elapsed().as_secs_f64();
        self.loop_start = Instant::now();
        Ok(())
    }

    /// The loop is over (`exec_s` of it spent launching, `dag_s` building
    /// the policy's same-type DAG, which is construction): waits for the GPU
    /// and returns the split and the GPU seconds between the events.
    fn finish(
        self,
        dev: &CudaDevice,
        exec_s: f64,
        dag_s: Option<f64>,
    ) -> Result<(TimeSplit, f64), DeviceError> {
        let dag_s = dag_s.unwrap_or(0.0);
        let loop_s = self.loop_start.elapsed().as_secs_f64();
        self.end.record(dev.stream()).map_err(DeviceError::cuda)?;
        let t = Instant::now();
        dev.stream().synchronize().map_err(DeviceError::cuda)?;
        let wait_s = t.elapsed().as_secs_f64();
        let device_s = f64::from(
            self.start
                .elapsed_ms(&self.end)
                .map_err(DeviceError::cuda)?,
        ) / 1e3;
        let time = TimeSplit {
            construction: self.construction + dag_s,
            scheduling: (loop_s - exec_s - dag_s).max(0.0),
            execution: exec_s + wait_s,
            overlapped: 0.0,
        };
        Ok((time, device_s))
    }
}

/// Per-run state of the batch callback.
struct Batcher<'a> {
    dev: &'a CudaDevice,
    progs: &'a [GpuProgram],
    layout: &'a Store,
    store: u64,
    work: &'a mut CudaSlice<f32>,
    staging: &'a mut Staging,
    cursor: usize,
    counters: Counters,
    exec_s: f64,
}

impl Batcher<'_> {
    fn batch(&mut self, g: &Graph, model: &Model, batch: &[NodeId]) -> Result<(), DeviceError> {
        if batch.is_empty() {
            return Ok(());
        }
        let t = Instant::now();
        let r = self.try_batch(g, model, batch);
        self.exec_s += t.elapsed().as_secs_f64();
        r
    }

    fn try_batch(&mut self, g: &Graph, model: &Model, batch: &[NodeId]) -> Result<(), DeviceError> {
        let role = model.type_role[g.node_type(batch[0]).index()];
        let cell = &model.roles[role].cell;
        let prog = &self.progs[role];
        let k = batch.len();
        let need = k * prog.work_units;
        if self.work.len() < need {
            // The old buffer is freed in stream order, after the kernels using it.
            *self.work = self
                .dev
                .stream()
                .alloc_zeros::<f32>(need.next_power_of_two())
                .map_err(DeviceError::cuda)?;
        }
        let work = addr(self.work, self.dev);
        let at = |v: usize, r: usize| (r * prog.units + prog.unit[v]) as i64;
        let numel = |v: usize| cell.values[v].numel() as i64;
        let n_in: usize = cell.ports.iter().map(|p| p.inputs.len()).sum::<usize>() * k;
        let n_out = cell.outputs.len() * k;
        let base = self.cursor;
        let buf = self.staging.host();
        // Region: entry segments, their sources, exit segments, their sources,
        // lookup rows, labels.
        let (in_segs, in_srcs) = (base, base + 4 * n_in);
        let mut w = in_srcs;
        let mut seg = in_segs;
        let mut gathered = 0u64;
        for (r, &v) in batch.iter().enumerate() {
            for (p, port) in cell.ports.iter().enumerate() {
                for (j, input) in port.inputs.iter().enumerate() {
                    let first = (w - in_srcs) as i64;
                    for &u in model.bindings.port(v, p) {
                        let u_role = model.type_role[g.node_type(u).index()];
                        let (off, len) = self.layout.output_range(u, u_role, j);
                        overflow(buf, w)?;
                        buf[w] = off as i64;
                        w += 1;
                        gathered += len as u64 * 4;
                    }
                    let i = input.0 as usize;
                    let entry = [at(i, r), numel(i), first, (w - in_srcs) as i64];
                    overflow(buf, seg + 3)?;
                    buf[seg..seg + 4].copy_from_slice(&entry);
                    seg += 4;
                }
            }
        }
        let (out_segs, out_srcs) = (w, w + 4 * n_out);
        let (mut seg, mut w) = (out_segs, out_srcs);
        let mut scattered = 0u64;
        for (j, o) in cell.outputs.iter().enumerate() {
            for (r, &v) in batch.iter().enumerate() {
                let (off, len) = self.layout.output_range(v, role, j);
                overflow(buf, w)?;
                buf[w] = at(o.0 as usize, r);
                let entry = [
                    off as i64,
                    len as i64,
                    (w - out_srcs) as i64,
                    (w - out_srcs + 1) as i64,
                ];
                buf[seg..seg + 4].copy_from_slice(&entry);
                seg += 4;
                w += 1;
                scattered += len as u64 * 4;
            }
        }
        let (idx, labels) = (w, w + k);
        overflow(buf, labels + k - 1)?;
        for (r, &v) in batch.iter().enumerate() {
            let (row, label) = model.node_data(v);
            buf[idx + r] = i64::from(row);
            buf[labels + r] = i64::from(label);
        }
        let end = labels + k;
        self.staging.upload(self.dev, base, end)?;
        let up = |i: usize| self.staging.dev(i);
        // SAFETY: every segment addresses a node output inside the store or a
        // record inside the work buffer (sized for k instances above).
        unsafe {
            self.dev
                .seg_sum(work, self.store, up(in_segs), n_in, up(in_srcs))?;
        }
        let counts = run_program(self.dev, prog, k, work, up(idx), up(labels))?;
        // SAFETY: as for the entry segments, with the buffers swapped.
        unsafe {
            self.dev
                .seg_sum(self.store, work, up(out_segs), n_out, up(out_srcs))?;
        }
        self.cursor = end;
        let c = &mut self.counters;
        c.batches += 1;
        c.kernels += counts.kernels + 2;
        c.bytes_gathered += gathered + counts.copy_bytes;
        c.bytes_scattered += scattered;
        Ok(())
    }
}

/// The DyNet executor's run: the policy batches the op-level graph; each batch
/// is launched by [`DynetRun::batch`](super::dynet::DynetRun::batch).
fn run_dynet(
    dev: &CudaDevice,
    dg: &mut DynetGpu,
    trace: &Trace,
    model: &Model,
    policy: &mut dyn BatchPolicy,
    mut clock: RunClock,
) -> Result<GpuRun, ReplayError> {
    let prog = dg.program();
    let og = &prog.graph;
    let mut run = dg.start();
    let mut counters = Counters::default();
    let mut exec_s = 0.0;
    clock.begin(dev)?;
    let how = Walk {
        decide: Decide::EachBatch,
        id_order: false,
    };
    let walked = walk(
        og,
        Order::Policy(policy),
        how,
        &SameTypeDag::new,
        |batch, _| {
            if batch.is_empty() {
                return Ok(());
            }
            let t = Instant::now();
            run.batch(dev, model, batch, &mut counters)?;
            exec_s += t.elapsed().as_secs_f64();
            Ok(())
        },
    )?;
    let (time, device_s) = clock.finish(dev, exec_s, walked.dag_s)?;
    let slot = std::mem::take(&mut run.slot);
    drop(run);
    let store = dg.outputs(dev, trace, model, &slot)?;
    Ok(GpuRun {
        store,
        counters,
        time,
        misses: walked.misses,
        device_s: Some(device_s),
    })
}
