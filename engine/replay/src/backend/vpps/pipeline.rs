//! VPPS's pipeline from a model to a run: a [`Vpps`] is a model placed over
//! the virtual processors and lowered to instruction templates
//! ([`Vpps::new`]); [`schedule`] walks a mini-batch's batches (forward, and
//! backward for training); [`Vpps::compile`] turns them into a script
//! ([`Compiled`]), which [`Vpps::emulate`] runs on the CPU, or the kernel on
//! a GPU (`cuda`) with [`Vpps::read_back`] reading its pool ([`VppsRun`]).

use super::compile::{self, Pool, ScriptStats};
use super::emulator::{self, EmuStats, MatParams};
use super::error::VppsError;
use super::kernel;
use super::lower::{self, ParamLayout, RoleCode};
use super::placement::{self, PlaceOptions, Plan};
use super::script::Script;
use super::target::Target;
use crate::cells::PrimOp;
use crate::error::ReplayError;
use crate::graph::{Graph, NodeId};
use crate::model::Model;
use crate::run::{BackwardSchedule, Decide, Order, Walk, walk};
use crate::sched::{BatchPolicy, SameTypeDag};
use crate::store::Store;
use crate::trace::Trace;

/// Ops the instruction set (docs/vpps.md) has no instruction for.
const OUTSIDE_ISA: [PrimOp; 1] = [PrimOp::LayerNorm];

/// Refuses a model one of whose cells uses an op outside the instruction set.
fn check_ops(model: &Model) -> Result<(), VppsError> {
    for rm in &model.roles {
        if let Some(op) = rm.cell.ops.iter().find(|o| OUTSIDE_ISA.contains(&o.kind)) {
            return Err(VppsError::Unsupported {
                cell: rm.cell.name.clone(),
                op: op.kind.name(),
            });
        }
    }
    Ok(())
}

/// The compiled kernel as the driver reports it: a persistent kernel keeps
/// the weights in registers only if the register allocator did not spill
/// them (`local_bytes_per_thread` is then 0).
#[derive(Clone, Debug, serde::Serialize)]
pub struct KernelInfo {
    /// Registers per thread after the driver's compile.
    pub regs_per_thread: u32,
    /// Local memory per thread: register spills (and any array the compiler
    /// could not keep in registers).
    pub local_bytes_per_thread: u32,
    /// Static shared memory per processor (the dynamic part is the plan's).
    pub static_smem_bytes: u32,
    /// NVRTC compile and module load, ms (near 0 when `cached`).
    pub compile_ms: f64,
    /// Whether this process had already compiled the same source for this
    /// device (another batch size of the same model: the kernel depends on
    /// the model and the placement only).
    pub cached: bool,
}

/// How to build a VPPS executor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VppsOptions {
    /// The GPU to plan for (on a GPU, its own limits replace the preset's).
    pub target: Target,
    /// Placement options.
    pub place: PlaceOptions,
}

impl Default for VppsOptions {
    fn default() -> Self {
        VppsOptions {
            target: Target::h100(),
            place: PlaceOptions::default(),
        }
    }
}

/// The forward batches of a schedule and, for training, the backward
/// batches (on the reversed graph).
pub struct Batches {
    /// Forward batches.
    pub forward: Vec<Vec<NodeId>>,
    /// Backward batches (`None`: forward only).
    pub backward: Option<Vec<Vec<NodeId>>>,
}

/// Runs `forward` over `trace` and, for training, batches the backward pass
/// as `backward` says (the same [`BackwardSchedule`] the CPU training step
/// takes: the forward batches reversed, or a policy on the reversed graph).
pub fn schedule(
    trace: &Trace,
    forward: &mut dyn BatchPolicy,
    backward: Option<BackwardSchedule<'_>>,
) -> Result<Batches, ReplayError> {
    // The script is compiled whole before it runs: every decision first,
    // on the walker every pass runs on, the batches collected.
    let how = Walk {
        decide: Decide::AllFirst,
        id_order: false,
    };
    let batches = |g: &Graph, order: Order<'_>| -> Result<(Vec<Vec<NodeId>>, _), ReplayError> {
        let mut out = Vec::new();
        let walked = walk(g, order, how, &SameTypeDag::new, |b, _| {
            out.push(b.to_vec());
            Ok(())
        })?;
        Ok((out, walked.schedule))
    };
    let g = &trace.graph;
    let (forward, schedule) = batches(g, Order::Policy(forward))?;
    let backward = match (backward, &schedule) {
        (Some(BackwardSchedule::ReverseForward), Some(s)) => {
            Some(batches(g, Order::Reversed(s))?.0)
        }
        (Some(BackwardSchedule::Policy(p)), _) => Some(batches(&g.reversed(), Order::Policy(p))?.0),
        (Some(BackwardSchedule::ReverseForward), None) => {
            return Err(ReplayError::Internal("a policy walk without its schedule"));
        }
        (None, _) => None,
    };
    Ok(Batches { forward, backward })
}

/// A model prepared for VPPS: its placement and lowered cells.
pub struct Vpps {
    plan: Plan,
    params: ParamLayout,
    roles: Vec<RoleCode>,
    mats: Vec<MatParams>,
    rows_on: Vec<Vec<Vec<usize>>>,
    /// Word buffers of a script handed back by [`Vpps::recycle`], reused by
    /// the next [`Vpps::compile`].
    spare: std::sync::Mutex<compile::ScriptBuffers>,
}

/// A compiled mini-batch.
pub struct Compiled {
    /// The script.
    pub script: Script,
    /// Its statistics.
    pub stats: ScriptStats,
    /// The pool layout it addresses.
    pub pool: Pool,
    /// Whether it runs the backward pass.
    pub training: bool,
}

/// What one emulated (or GPU) run produced.
pub struct VppsRun {
    /// The mini-batch loss (sum of the loss-sum nodes' outputs).
    pub loss: f64,
    /// Every node's outputs.
    pub outputs: Store,
    /// Per role and cell value, the parameter gradients (training only).
    pub gradients: Option<Vec<Vec<Vec<f32>>>>,
    /// Emulator counters.
    pub stats: EmuStats,
}

impl Vpps {
    /// Places `model` and lowers its cells.
    pub fn new(model: &Model, opts: &VppsOptions) -> Result<Vpps, VppsError> {
        check_ops(model)?;
        let plan = placement::place(model, &opts.target, &opts.place);
        Vpps::with_plan(model, plan)
    }

    /// Lowers `model` against an existing plan.
    pub fn with_plan(model: &Model, plan: Plan) -> Result<Vpps, VppsError> {
        check_ops(model)?;
        let params = ParamLayout::new(model);
        let roles = lower::lower(model, &plan, &params);
        let mats = plan
            .mats
            .iter()
            .map(|p| MatParams {
                terms: p
                    .mat
                    .terms
                    .iter()
                    .map(|&(w, k)| (params.at[p.mat.role][w] as usize, k))
                    .collect(),
                bias: p.mat.bias.map(|b| params.at[p.mat.role][b] as usize),
                grad_shift: params.total,
            })
            .collect();
        let rows_on = (0..plan.mats.len())
            .map(|mi| {
                let mut per = vec![Vec::new(); plan.vps as usize];
                for row in 0..plan.mats[mi].mat.m {
                    per[plan.owner(mi, row).0 as usize].push(row);
                }
                per
            })
            .collect();
        Ok(Vpps {
            plan,
            params,
            roles,
            mats,
            rows_on,
            spare: Default::default(),
        })
    }

    /// The placement.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Compiles a mini-batch's schedule into a script.
    pub fn compile(
        &self,
        trace: &Trace,
        model: &Model,
        batches: &Batches,
    ) -> Result<Compiled, VppsError> {
        let g = &trace.graph;
        let pool = Pool::new(g, model, &self.roles, &self.plan, self.params.total)?;
        let training = batches.backward.is_some();
        if training && !g.nodes().any(|v| model.role_of(g, v).role.loss) {
            return Err(VppsError::NoLoss(trace.workload.clone()));
        }
        let buffers = std::mem::take(&mut *self.spare());
        let mut c = compile::Compiler::new(g, model, &self.roles, &self.plan, &pool, buffers);
        for b in &batches.forward {
            c.forward(b);
        }
        if let Some(bw) = &batches.backward {
            for b in bw {
                c.backward(b);
            }
        }
        let (script, stats) = c.finish();
        Ok(Compiled {
            script,
            stats,
            pool,
            training,
        })
    }

    /// Hands a compiled script's buffers back for the next [`Vpps::compile`]
    /// to fill (a session compiling one script per mini-batch calls it once
    /// the script is uploaded or emulated). The next script's words do not
    /// depend on it.
    pub fn recycle(&self, compiled: Compiled) {
        let Script { streams, data, .. } = compiled.script;
        *self.spare() = compile::ScriptBuffers { streams, data };
    }

    /// The kept buffers (a panic elsewhere cannot leave them inconsistent:
    /// every compile clears what it takes).
    fn spare(&self) -> std::sync::MutexGuard<'_, compile::ScriptBuffers> {
        self.spare.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The pool as the launch leaves it: parameters in place, everything
    /// else zero.
    pub fn initial_pool(&self, model: &Model, pool: &Pool) -> Vec<f32> {
        let mut p = self.initial_params(model, pool);
        p.resize(pool.total, 0.0);
        p
    }

    /// The pool's first `pool.params` floats: every parameter at its
    /// address (the rest of an initial pool is zero).
    pub fn initial_params(&self, model: &Model, pool: &Pool) -> Vec<f32> {
        let mut p = vec![0.0f32; pool.params];
        for (ri, rm) in model.roles.iter().enumerate() {
            for (v, data) in rm.params.iter().enumerate() {
                let at = self.params.at[ri][v];
                if at != u32::MAX {
                    p[at as usize..at as usize + data.len()].copy_from_slice(data);
                }
            }
        }
        p
    }

    /// Reads a run's loss, outputs and gradients from the final pool.
    pub fn read_back(&self, trace: &Trace, model: &Model, c: &Compiled, pool: &[f32]) -> VppsRun {
        let g = &trace.graph;
        let mut outputs = Store::new(g, model);
        let mut loss = 0.0;
        for v in g.nodes() {
            let role = model.type_role[g.node_type(v).index()];
            let rec = c.pool.node_rec[v.index()] as usize;
            for (j, &(off, len, _)) in self.roles[role].outputs.iter().enumerate() {
                let src = &pool[rec + off as usize..rec + (off + len) as usize];
                outputs.output_mut(v, role, j).copy_from_slice(src);
                if model.roles[role].role.loss {
                    loss += src.iter().map(|&x| f64::from(x)).sum::<f64>();
                }
            }
        }
        let gradients = c.training.then(|| {
            model
                .roles
                .iter()
                .enumerate()
                .map(|(ri, rm)| {
                    rm.params
                        .iter()
                        .enumerate()
                        .map(|(v, p)| {
                            let at = self.params.at[ri][v];
                            if at == u32::MAX {
                                Vec::new()
                            } else {
                                let g = at as usize + self.params.total;
                                pool[g..g + p.len()].to_vec()
                            }
                        })
                        .collect()
                })
                .collect()
        });
        VppsRun {
            loss,
            outputs,
            gradients,
            stats: EmuStats::default(),
        }
    }

    /// Runs a compiled mini-batch on the CPU emulator (`check_races`: the
    /// float-by-float race detector, slower).
    pub fn emulate(
        &self,
        trace: &Trace,
        model: &Model,
        c: &Compiled,
        check_races: bool,
    ) -> Result<VppsRun, VppsError> {
        let mut pool = self.initial_pool(model, &c.pool);
        let stats = emulator::run(
            &c.script,
            &self.plan,
            &self.mats,
            &self.rows_on,
            &mut pool,
            check_races,
        )?;
        let mut run = self.read_back(trace, model, c, &pool);
        run.stats = stats;
        Ok(run)
    }

    /// The kernel's CUDA C source for this model and plan.
    pub fn kernel_source(&self) -> String {
        kernel::source(&self.plan, &self.mats)
    }
}
