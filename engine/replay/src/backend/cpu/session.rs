//! The CPU backend's side of a [`Session`](crate::session::Session): the
//! [`Backend`] implementation of [`CpuReplay`]. The forward pass walks the
//! executor's batches on the schedule walker and runs each over the
//! session's threads; a training step is the forward pass with its records
//! kept, then the backward pass in the order `backward` says.

use std::time::Instant;

use super::backward::{Backward, run_backward, unpack_gradients};
use super::exec::{KeptRecords, run_batch};
use super::replay::{CpuOptions, CpuReplay, cell_programs, compiled_for};
use super::split::{chunk_rows, per_run_dag};
use super::team;
use crate::backend::{Backend, Work};
use crate::error::ReplayError;
use crate::executor::{Executor, instance_policy};
use crate::graph::{Graph, NodeId};
use crate::model::Model;
use crate::run::{
    BackwardSchedule, Counters, Decide, ForwardRun, Order, PassRun, TimeSplit, TrainOptions,
    TrainRun, Walk, walk,
};
use crate::sched::CavsPolicy;
use crate::store::Store;

impl CpuReplay {
    /// Runs the forward pass once (for `train`, with the records its
    /// backward pass reads kept, where `bufs.keep` is set).
    fn pass(
        &mut self,
        Work {
            trace,
            model,
            cells,
        }: Work<'_>,
        executor: &mut Executor,
    ) -> Result<PassRun, ReplayError> {
        if compiled_for(executor) != self.compiled {
            return Err(ReplayError::Internal(
                "a CPU replay run with another executor than it was compiled for",
            ));
        }
        if let Some(log) = &mut self.bufs.log {
            log.clear();
        }
        if let Some(log) = self.dynet.as_mut().and_then(|d| d.log.as_mut()) {
            log.clear();
        }
        if let (Executor::Dynet(policy), Some(d)) = (&mut *executor, self.dynet.as_mut()) {
            let (counters, time, misses) = d.run(
                trace,
                model,
                cells,
                policy.as_mut(),
                &self.threads,
                &mut self.store,
            )?;
            return Ok(PassRun {
                counters,
                time,
                misses,
            });
        }
        let g = &trace.graph;
        let mut counters = Counters::default();
        let mut time = TimeSplit::default();
        let (plans, store, bufs, threads) =
            (&self.plans, &mut self.store, &mut self.bufs, &self.threads);
        let mut run_one = |batch: &[NodeId], c: &mut Counters| {
            let role = model.type_role[g.node_type(batch[0]).index()];
            let rows = chunk_rows(threads, plans[role].chunk_rows());
            for (i, part) in batch.chunks(rows).enumerate() {
                let mut pc = Counters::default();
                run_batch(g, model, &plans[role], store, bufs, threads, part, &mut pc);
                c.add_chunk(&pc, i == 0);
            }
        };
        let t0 = Instant::now();
        let mut cavs = CavsPolicy::default();
        let order = match executor {
            Executor::Reference => Order::Nodes,
            _ => match instance_policy(executor, &mut cavs) {
                (Some(policy), _) => Order::Policy(policy),
                _ => {
                    return Err(ReplayError::Internal(
                        "the dynet executor without its op-level plan",
                    ));
                }
            },
        };
        // With no worker to wait for there is no wait to decide in: every
        // decision first, with the frontier in cache.
        let how = Walk {
            decide: if threads.count() <= 1 {
                Decide::AllFirst
            } else {
                Decide::WhileWaiting
            },
            id_order: true,
        };
        // The same-type DAG the policy reads is per-run construction, built
        // up front or, for an FSM that needs it only on a miss, at the first
        // miss (never when its table covers the run).
        let exact = |g: &crate::graph::Graph| per_run_dag(g, true, threads);
        let walked = walk(g, order, how, &exact, |batch, idle| {
            team::with_idle_work(idle, || run_one(batch, &mut counters));
            Ok(())
        })?;
        time.construction = walked.dag_s.unwrap_or(0.0);
        time.execution = walked.execution;
        time.overlapped = walked.overlapped;
        // What is left of the run's wall time is the decisions (and the
        // timers); with `execution` net of the overlapped ones, the three
        // parts add up to the run's wall time.
        time.scheduling =
            (t0.elapsed().as_secs_f64() - time.construction - time.execution).max(0.0);
        self.last_schedule = walked.schedule;
        let misses = walked.misses;
        Ok(PassRun {
            counters,
            time,
            misses,
        })
    }
}

impl Backend for CpuReplay {
    type Config = CpuOptions;

    fn open(config: CpuOptions, work: Work<'_>, executor: &Executor) -> Result<Self, ReplayError> {
        CpuReplay::new(work.trace, work.model, executor, &config)
    }

    fn forward(
        &mut self,
        work: Work<'_>,
        executor: &mut Executor,
    ) -> Result<ForwardRun, ReplayError> {
        Ok(ForwardRun {
            pass: self.pass(work, executor)?,
            device_s: None,
        })
    }

    /// Forward then backward over the trace: the loss, and every
    /// parameter's gradient in [`gradients`](Backend::gradients).
    /// `backward` batches the reversed graph (the reference runs it node by
    /// node in reverse topological order and ignores it).
    fn train(
        &mut self,
        work: Work<'_>,
        executor: &mut Executor,
        backward: BackwardSchedule<'_>,
        opts: &TrainOptions,
    ) -> Result<TrainRun, ReplayError> {
        let Work { trace, model, .. } = work;
        let g = &trace.graph;
        if matches!(executor, Executor::Dynet(_)) {
            let forward = self.pass(work, executor)?;
            let seeds: Vec<bool> = model.roles.iter().map(|r| r.role.loss).collect();
            if !g
                .nodes()
                .any(|v| seeds[model.type_role[g.node_type(v).index()]])
            {
                return Err(ReplayError::NoLoss(trace.workload.clone()));
            }
            let loss = loss_of(&self.store, g, model, &seeds);
            let d = self.dynet.as_mut().expect("a dynet session");
            let backward = d.backward(model, &self.threads, opts)?;
            return Ok(TrainRun {
                loss,
                forward,
                backward,
                kept_bytes: d.kept_bytes(),
                device_s: None,
            });
        }
        if self.backward.is_none() {
            let programs = cell_programs(model, executor);
            self.backward = Some(Box::new(Backward::new(trace, model, &programs)?));
            let total: usize = g
                .nodes()
                .map(|v| self.plans[model.type_role[g.node_type(v).index()]].units)
                .sum();
            self.bufs.keep = Some(KeptRecords {
                arena: vec![0.0; total],
                bump: 0,
                node_rec: vec![0; g.len()],
            });
        }
        if let Some(kept) = &mut self.bufs.keep {
            kept.bump = 0;
        }
        let forward = self.pass(work, executor)?;
        let kept_fwd = self
            .bufs
            .keep
            .as_ref()
            .map_or(0, |k| 4 * k.arena.len() as u64);
        let bw = self.backward.as_mut().expect("made above");
        let loss = loss_of(&self.store, g, model, &bw.seeds);
        // The reference (no forward schedule) runs node by node.
        let order = match (backward, &self.last_schedule) {
            (_, None) => Order::Nodes,
            (BackwardSchedule::ReverseForward, Some(s)) => Order::Reversed(s),
            (BackwardSchedule::Policy(p), Some(_)) => Order::Policy(p),
        };
        let backward = run_backward(
            g,
            model,
            &self.plans,
            bw,
            self.bufs.keep.as_ref().expect("kept for training"),
            &self.store,
            &self.threads,
            order,
            opts,
        )?;
        let kept_bytes = kept_fwd + bw.bytes();
        Ok(TrainRun {
            loss,
            forward,
            backward,
            kept_bytes,
            device_s: None,
        })
    }

    fn outputs(&self) -> &Store {
        &self.store
    }

    fn into_outputs(self: Box<Self>) -> Store {
        self.store
    }

    fn gradients(&self, model: &Model) -> Option<Vec<Vec<Vec<f32>>>> {
        if let Some(d) = &self.dynet {
            return d.gradients(model);
        }
        let bw = self.backward.as_ref()?;
        Some(unpack_gradients(model, &bw.plans, &bw.pgrads))
    }

    fn cpu(&self) -> Option<&CpuReplay> {
        Some(self)
    }

    fn cpu_mut(&mut self) -> Option<&mut CpuReplay> {
        Some(self)
    }
}

/// The mini-batch's loss: every output float of the nodes whose role is a
/// loss (`seeds`, per role), summed in double (each node's, then the nodes').
fn loss_of(store: &Store, g: &Graph, model: &Model, seeds: &[bool]) -> f64 {
    g.nodes()
        .filter(|&v| seeds[model.type_role[g.node_type(v).index()]])
        .map(|v| store.node(v).iter().map(|&x| f64::from(x)).sum::<f64>())
        .sum()
}
