//! What a replay run takes and gives, whatever the device: the schedule
//! walker every pass runs on (`walk`), a run's work and time
//! ([`Counters`], [`TimeSplit`]; [`Replayed`], what a session's run
//! returns), a pass's measurement ([`PassRun`]; `ForwardRun`, what a
//! backend's forward run returns), how to train
//! ([`TrainOptions`], [`BackwardSchedule`]) and a training step's measurement
//! ([`TrainRun`]). The CPU, CUDA and VPPS backends all use these.

use std::cell::{Cell, RefCell};
use std::time::Instant;

use serde::Serialize;

use crate::error::ReplayError;
use crate::graph::{Graph, NodeId};
use crate::sched::{BatchPolicy, PolicyRun, RunDags, SameTypeDag, Schedule};
use crate::usage::Usage;

/// Where a pass's batches come from.
pub(crate) enum Order<'a> {
    /// One node per batch, in topological order (the reference executor).
    Nodes,
    /// A batching policy deciding on the pass's graph.
    Policy(&'a mut dyn BatchPolicy),
    /// The batches of a schedule already made, last first: a backward pass
    /// that reverses its forward pass's batches (every consumer of a node
    /// sits in a later forward batch, so the reversed list is a schedule of
    /// the reversed graph).
    Reversed(&'a Schedule),
}

/// When a policy makes its decisions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decide {
    /// One before each batch: a backend whose batches return at once (GPU
    /// launches are asynchronous) overlaps them with the device's work.
    EachBatch,
    /// Every decision before the first batch: back to back, they find the
    /// frontier and the policy's state in cache ([`PolicyRun::decide_all`]);
    /// for a backend whose decisions could not overlap its batches.
    AllFirst,
    /// One before each batch when none is ready, and more while the backend
    /// waits for its workers (the `idle` hook the walker hands each batch):
    /// a decision costs microseconds, the wait for the slowest worker is
    /// otherwise spin. A decision that builds the exact same-type DAG is
    /// left to the loop, where the build may use every thread.
    WhileWaiting,
}

/// How a pass walks its batches.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Walk {
    pub decide: Decide,
    /// List each policy batch's nodes in id order ([`PolicyRun::in_id_order`]).
    pub id_order: bool,
}

/// What the walk took besides the batches.
pub(crate) struct Walked {
    /// The batches a policy chose (`None` for [`Order::Nodes`] and
    /// [`Order::Reversed`]).
    pub schedule: Option<Schedule>,
    /// Policy fallbacks (FSM misses).
    pub misses: u64,
    /// Seconds spent building the exact same-type DAG, if one was built.
    pub dag_s: Option<f64>,
    /// Seconds inside the backend's batches, net of the decisions made in
    /// their waits.
    pub execution: f64,
    /// Seconds of decisions made in the backend's waits.
    pub overlapped: f64,
}

/// The schedule walker every executor's passes run on, forward and
/// backward, on every device: turns `order` into batches of `g` and hands
/// each to `batch` once, in order. `batch` gets an `idle` hook that makes
/// one decision ahead and says whether it did ([`Decide::WhileWaiting`];
/// otherwise it does nothing); it may call it while it waits. `exact`
/// builds the exact same-type DAG, up front or at the policy's first
/// |Frontier(G^t)| read ([`RunDags`]). The first error, the policy's or a
/// batch's, ends the walk.
pub(crate) fn walk(
    g: &Graph,
    order: Order<'_>,
    how: Walk,
    exact: &dyn Fn(&Graph) -> SameTypeDag,
    mut batch: impl FnMut(&[NodeId], &mut dyn FnMut() -> bool) -> Result<(), ReplayError>,
) -> Result<Walked, ReplayError> {
    let mut no_idle = || false;
    let mut execution = 0.0;
    let mut timed = |b: &[NodeId], idle: &mut dyn FnMut() -> bool| {
        let t = Instant::now();
        let r = batch(b, idle);
        execution += t.elapsed().as_secs_f64();
        r
    };
    let policy = match order {
        Order::Nodes => {
            for &v in g.topo_order() {
                timed(&[v], &mut no_idle)?;
            }
            None
        }
        Order::Reversed(s) => {
            for i in (0..s.len()).rev() {
                timed(s.batch(i).1, &mut no_idle)?;
            }
            None
        }
        Order::Policy(p) => Some(p),
    };
    let Some(policy) = policy else {
        return Ok(Walked {
            schedule: None,
            misses: 0,
            dag_s: None,
            execution,
            overlapped: 0.0,
        });
    };
    let dags = RunDags::new(g, &*policy, exact);
    let mut run = PolicyRun::on_demand(g, &dags, policy, exact)?;
    if how.id_order {
        run = run.in_id_order();
    }
    if how.decide == Decide::AllFirst {
        run.decide_all()?;
    }
    let run = RefCell::new(run);
    let hidden = Cell::new(0.0f64);
    let stopped = Cell::new(how.decide != Decide::WhileWaiting);
    let mut idle = || {
        // Not borrowed elsewhere while a batch runs; stay idle if it were.
        let Ok(mut r) = run.try_borrow_mut() else {
            return false;
        };
        if stopped.get() || r.is_done() || r.next_builds_dag() {
            return false;
        }
        let t = Instant::now();
        // A failed decision changes nothing: the loop makes it again when
        // the batches reach it and returns its error.
        if r.advance().is_err() {
            stopped.set(true);
        }
        hidden.set(hidden.get() + t.elapsed().as_secs_f64());
        !stopped.get()
    };
    let mut next = 0usize;
    let mut nodes: Vec<NodeId> = Vec::new();
    loop {
        {
            let mut r = run.borrow_mut();
            if next == r.schedule().len() && r.advance()?.is_none() {
                break;
            }
            nodes.clear();
            nodes.extend_from_slice(r.schedule().batch(next).1);
        }
        next += 1;
        timed(&nodes, &mut idle)?;
    }
    let (schedule, stats, dag_s) = run.into_inner().finish();
    Ok(Walked {
        schedule: Some(schedule),
        misses: stats.misses,
        dag_s,
        execution: (execution - hidden.get()).max(0.0),
        overlapped: hidden.get(),
    })
}

/// Work counters of one run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    /// Batches executed.
    pub batches: u64,
    /// Kernels launched (cell ops plus gather/scatter kernels).
    pub kernels: u64,
    /// Bytes copied into batch inputs.
    pub bytes_gathered: u64,
    /// Bytes copied out of batch outputs.
    pub bytes_scattered: u64,
}

impl Counters {
    /// Adds what one chunk of a batch's rows did: its bytes always, its
    /// batch and kernels only for the first chunk (a batch is one launch
    /// however the CPU splits its rows).
    pub(crate) fn add_chunk(&mut self, part: &Counters, first: bool) {
        if first {
            self.batches += part.batches;
            self.kernels += part.kernels;
        }
        self.bytes_gathered += part.bytes_gathered;
        self.bytes_scattered += part.bytes_scattered;
    }
}

/// Timing split of one run (ED-Batch Fig. 9), in seconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TimeSplit {
    /// Building the run's structures (model binding, arena, same-type DAG).
    pub construction: f64,
    /// Choosing batches (the policy, frontier updates).
    pub scheduling: f64,
    /// Running kernels and copies.
    pub execution: f64,
    /// The part of scheduling that ran while execution waited for a worker
    /// thread (CPU, two or more threads: the policy decides ahead of the
    /// batches, see `backend::cpu`), so it added next to no wall time;
    /// `execution` is net of it, and the three parts above add up to the
    /// run's wall time. 0 where nothing overlaps.
    pub overlapped: f64,
}

/// What one run measured. The node outputs stay in the session
/// ([`Session::outputs`](crate::session::Session::outputs));
/// [`replay`](crate::session::replay) returns them beside.
pub struct Replayed {
    /// Work counters.
    pub counters: Counters,
    /// Time split.
    pub time: TimeSplit,
    /// Fallback decisions of the policy (FSM misses).
    pub misses: u64,
    /// GPU time between the run's first and last kernel (CUDA events); `None`
    /// on the CPU.
    pub device_s: Option<f64>,
    /// Process CPU time and minor page faults during the run.
    pub usage: Option<Usage>,
}

/// What one pass (forward or backward) measured, on any device (the
/// session keeps the outputs).
pub struct PassRun {
    /// Work counters.
    pub counters: Counters,
    /// Time split.
    pub time: TimeSplit,
    /// Policy fallbacks (FSM misses).
    pub misses: u64,
}

/// What a backend's forward run measured, as it hands it to the session
/// (which adds the run's [`Usage`] to make a [`Replayed`]).
pub(crate) struct ForwardRun {
    /// The pass's counters, time split and policy misses.
    pub pass: PassRun,
    /// GPU time between the run's first and last kernel (CUDA events);
    /// `None` on the CPU.
    pub device_s: Option<f64>,
}

/// How the backward pass picks its batches.
pub enum BackwardSchedule<'a> {
    /// The forward pass's batches in reverse order: what Cavs (its task
    /// stack, §3.3) and DyNet do. The reference runs node by node in reverse
    /// topological order either way.
    ReverseForward,
    /// A batching policy on the reversed graph (a heuristic, or an FSM from
    /// `search train --pass backward`).
    Policy(&'a mut dyn BatchPolicy),
}

/// How to train.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrainOptions {
    /// Defer every weight-gradient product to the end of the backward pass:
    /// one product per parameter over all its rows (Cavs §3.5).
    pub lazy: bool,
}

impl Default for TrainOptions {
    fn default() -> Self {
        TrainOptions { lazy: true }
    }
}

/// What one training run (forward + backward) measured.
pub struct TrainRun {
    /// The mini-batch loss: the sum of the loss-sum nodes' outputs.
    pub loss: f64,
    /// The forward pass.
    pub forward: PassRun,
    /// The backward pass (batches on the reversed graph; construction is
    /// the reversed graph's same-type DAG, execution includes the parameter
    /// gradients).
    pub backward: PassRun,
    /// Bytes kept for and by the backward pass (forward records, gradient
    /// records, output and parameter gradients).
    pub kept_bytes: u64,
    /// GPU seconds of the step, between CUDA events (`None` on the CPU).
    pub device_s: Option<f64>,
}

/// Median of `v` (the upper one of an even count); 0 for an empty slice.
pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cells::CellLibrary;
    use crate::sched::{heuristic, run_policy};
    use crate::trace::Level;
    use crate::workloads::{self, DataChoice, RecordOptions};

    fn graph(workload: &str) -> Graph {
        let cells = CellLibrary::builtin().unwrap();
        workloads::record(
            &RecordOptions {
                workload: workloads::workload(workload).unwrap(),
                data: DataChoice::Default,
                batch: 16,
                hidden: 8,
                level: Level::Cell,
                seed: 3,
            },
            &cells,
        )
        .unwrap()
        .graph
    }

    /// Deciding as it goes, every decision first, or ahead inside the
    /// backend's waits: the walker hands over the very batches, in the very
    /// order, of the policy's schedule, and reversing a schedule hands its
    /// batches over last first.
    #[test]
    fn every_way_of_deciding_walks_the_policys_schedule() {
        for workload in ["lattice-lstm", "tree-lstm"] {
            let g = graph(workload);
            for name in ["typewise", "agenda", "cavs", "depth"] {
                let st = SameTypeDag::new(&g);
                let (want, _) = run_policy(&g, &st, heuristic(name).unwrap().as_mut()).unwrap();
                let want: Vec<Vec<NodeId>> = want.batches().map(|(_, b)| b.to_vec()).collect();
                for decide in [Decide::EachBatch, Decide::AllFirst, Decide::WhileWaiting] {
                    let mut p = heuristic(name).unwrap();
                    let mut got = Vec::new();
                    let mut ahead = 0;
                    let how = Walk {
                        decide,
                        id_order: false,
                    };
                    let walked = walk(
                        &g,
                        Order::Policy(p.as_mut()),
                        how,
                        &SameTypeDag::new,
                        |b, idle| {
                            got.push(b.to_vec());
                            // A backend waiting for its workers: two decisions ahead.
                            ahead += usize::from(idle()) + usize::from(idle());
                            Ok(())
                        },
                    )
                    .unwrap();
                    assert_eq!(got, want, "{workload} {name} {decide:?}");
                    assert_eq!(decide == Decide::WhileWaiting, ahead > 0, "{decide:?}");
                    let s = walked.schedule.unwrap();
                    let mut back = Vec::new();
                    walk(&g, Order::Reversed(&s), how, &SameTypeDag::new, |b, _| {
                        back.push(b.to_vec());
                        Ok(())
                    })
                    .unwrap();
                    back.reverse();
                    assert_eq!(back, want, "{workload} {name} reversed");
                }
            }
        }
    }

    /// A backend's error ends the walk there.
    #[test]
    fn a_batchs_error_ends_the_walk() {
        let g = graph("tree-lstm");
        let mut seen = 0;
        let how = Walk {
            decide: Decide::EachBatch,
            id_order: false,
        };
        let r = walk(&g, Order::Nodes, how, &SameTypeDag::new, |_, _| {
            seen += 1;
            if seen == 3 {
                Err(ReplayError::Internal("the third batch"))
            } else {
                Ok(())
            }
        });
        assert!(matches!(r, Err(ReplayError::Internal("the third batch"))));
        assert_eq!(seen, 3);
    }
}
