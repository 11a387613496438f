use crate::cells::CellLibrary;
use crate::compare::{max_rel_error, rel_error, worst_gradient};
use crate::device::DeviceKind;
use crate::error::ReplayError;
use crate::executor::{Executor, compile_layouts};
use crate::model::{Model, model};
use crate::run::Counters;
use crate::sched::{AgendaPolicy, DepthPolicy, TypewisePolicy};
use crate::session::{Session, SessionOptions, device_present, replay};
use crate::trace::Level;
use crate::trace::Trace;
use crate::workloads::{self, DataChoice, RecordOptions, WORKLOADS};

/// `name` recorded at cell level on its default data (seed 3); the replay,
/// VPPS and scheduling tests' trace.
pub(crate) fn record(name: &str, batch: usize, hidden: usize) -> Trace {
    workloads::record(
        &RecordOptions {
            workload: workloads::workload(name).unwrap(),
            data: DataChoice::Default,
            batch,
            hidden,
            level: Level::Cell,
            seed: 3,
        },
        &CellLibrary::builtin().unwrap(),
    )
    .unwrap()
}

/// Options of a fused CPU session on `threads` threads.
fn on_threads(threads: usize) -> SessionOptions {
    SessionOptions {
        cpu: crate::backend::cpu::CpuOptions {
            threads: Some(threads),
            fuse: true,
        },
    }
}

/// The body shared by the CPU test and its CUDA twin: the reference runs on
/// the CPU (the oracle); every executor `device` supports runs there.
fn batched_executors_match_the_reference_on(device: DeviceKind) {
    // The CUDA twin runs only when asked for (BATCHLAB_CUDA_TESTS=1): then a
    // missing device is a failure, never a silent pass.
    assert!(
        device_present(device).unwrap(),
        "{device:?} is not available on this machine, but its tests were asked for"
    );
    let cells = CellLibrary::builtin().unwrap();
    for w in WORKLOADS {
        let trace = record(w.name, 8, 32);
        let m = model(&trace, &cells, 11).unwrap();
        let (reference, ref_out) = replay(&trace, &m, &cells, &mut Executor::Reference).unwrap();
        // The final loss is finite and non-zero: the numbers are real.
        let sink = *trace.graph.topo_order().last().unwrap();
        let loss = ref_out.node(sink)[0];
        assert!(loss.is_finite() && loss > 0.0, "{}: loss {loss}", w.name);
        let mut executors = vec![
            Executor::Cavs,
            Executor::Policy(Box::new(AgendaPolicy::updated())),
            Executor::Policy(Box::new(TypewisePolicy)),
            Executor::Dynet(Box::new(AgendaPolicy::updated())),
            Executor::Dynet(Box::new(DepthPolicy::default())),
        ];
        if device != DeviceKind::Cpu {
            // The oracle itself on the device.
            executors.push(Executor::Reference);
        }
        for mut ex in executors {
            let mut session = Session::open(device, &trace, &m, &cells, &mut ex).unwrap();
            let run = session.run().unwrap();
            let err = max_rel_error(&trace, session.outputs(), &ref_out);
            assert!(
                err < 1e-4,
                "{} on {device:?}: max relative error {err}",
                w.name
            );
            if matches!(ex, Executor::Reference) {
                assert_eq!(run.counters.batches, reference.counters.batches);
                continue;
            }
            if !matches!(ex, Executor::Dynet(_)) {
                // Batching cells takes fewer steps than one node at a time (the
                // op-level executor batches ops, of which there are more).
                assert!(
                    run.counters.batches < reference.counters.batches,
                    "{}",
                    w.name
                );
            }
        }
    }
}

#[test]
fn batched_executors_match_the_reference_on_every_workload() {
    batched_executors_match_the_reference_on(DeviceKind::Cpu);
}

#[test]
#[cfg_attr(
    not(batchlab_cuda_tests),
    ignore = "needs a CUDA GPU: BATCHLAB_CUDA_TESTS=1 cargo test runs it"
)]
fn batched_executors_match_the_reference_on_every_workload_on_cuda() {
    batched_executors_match_the_reference_on(DeviceKind::Cuda(0));
}

/// One CPU run of `ex` on `threads` threads: its counters and every node's
/// output.
fn counters_and_outputs(
    trace: &Trace,
    m: &Model,
    cells: &CellLibrary,
    mut ex: Executor,
    threads: usize,
) -> (Counters, Vec<Vec<f32>>) {
    let opts = on_threads(threads);
    let mut session = Session::open_with(DeviceKind::Cpu, trace, m, cells, &mut ex, &opts).unwrap();
    let run = session.run().unwrap();
    let out = trace
        .graph
        .nodes()
        .map(|v| session.outputs().node(v).to_vec())
        .collect();
    (run.counters, out)
}

/// Large batches run in chunks of rows: chunked down to three rows, every
/// workload's outputs are bit-identical to the whole-batch run's (a row's
/// arithmetic does not depend on its batch), with the same counters.
#[test]
fn chunked_batches_give_the_same_outputs_and_counts() {
    use crate::backend::cpu::split::TEST_CHUNK_ROWS;
    let cells = CellLibrary::builtin().unwrap();
    // One thread chunks by `rows`, several by `2 × rows` per thread.
    for (w, threads) in WORKLOADS.iter().flat_map(|w| [(w, 1), (w, 2)]) {
        let trace = record(w.name, 8, 16);
        let m = model(&trace, &cells, 5).unwrap();
        let run = || {
            let ex = Executor::Policy(Box::new(TypewisePolicy));
            counters_and_outputs(&trace, &m, &cells, ex, threads)
        };
        let (whole_counts, whole) = run();
        let old = TEST_CHUNK_ROWS.with(|c| c.replace(Some(3)));
        let (chunked_counts, chunked) = run();
        TEST_CHUNK_ROWS.with(|c| c.set(old));
        assert_eq!(chunked, whole, "{} on {threads} threads", w.name);
        assert_eq!(
            chunked_counts, whole_counts,
            "{} on {threads} threads",
            w.name
        );
    }
}

/// A batch split by rows (each thread its rows through the whole cell) and
/// one split step by step (each product and row pass over the threads)
/// compute the same bits as one thread, with the same counters; the
/// thresholds are lowered so that the small test batches really split.
#[test]
fn batches_split_by_rows_or_step_by_step_give_the_same_bits() {
    use crate::backend::cpu::exec::TEST_ROW_SPLIT_MAX_WEIGHT_BYTES;
    use crate::backend::cpu::threads::TEST_MIN_WORK;
    let cells = CellLibrary::builtin().unwrap();
    for w in WORKLOADS {
        let trace = record(w.name, 8, 16);
        let m = model(&trace, &cells, 5).unwrap();
        let run = |threads: usize, row_split: bool| {
            let mut outs = Vec::new();
            for ex in [Executor::Cavs, Executor::Policy(Box::new(TypewisePolicy))] {
                TEST_MIN_WORK.with(|c| c.set(Some(0)));
                TEST_ROW_SPLIT_MAX_WEIGHT_BYTES
                    .with(|c| c.set(if row_split { usize::MAX } else { 0 }));
                outs.push(counters_and_outputs(&trace, &m, &cells, ex, threads));
                TEST_MIN_WORK.with(|c| c.set(None));
                TEST_ROW_SPLIT_MAX_WEIGHT_BYTES
                    .with(|c| c.set(crate::backend::cpu::exec::ROW_SPLIT_MAX_WEIGHT_BYTES));
            }
            outs
        };
        let one = run(1, false);
        assert_eq!(run(2, true), one, "{} split by rows", w.name);
        assert_eq!(run(2, false), one, "{} split step by step", w.name);
    }
}

#[test]
fn other_seed_gives_other_numbers() {
    let cells = CellLibrary::builtin().unwrap();
    let trace = record("tree-lstm", 2, 8);
    let (_, a) = replay(
        &trace,
        &model(&trace, &cells, 1).unwrap(),
        &cells,
        &mut Executor::Reference,
    )
    .unwrap();
    let (_, b) = replay(
        &trace,
        &model(&trace, &cells, 2).unwrap(),
        &cells,
        &mut Executor::Reference,
    )
    .unwrap();
    assert!(max_rel_error(&trace, &a, &b) > 1e-3);
}

#[test]
fn trace_without_cells_is_a_clear_error() {
    let cells = CellLibrary::builtin().unwrap();
    let mut trace = record("rvnn", 1, 8);
    trace.workload = "someone-elses-model".into();
    let e = model(&trace, &cells, 1).err().unwrap().to_string();
    assert!(e.contains("has no cell definitions"), "{e}");
}

#[test]
fn hidden_size_mismatch_is_a_clear_error() {
    let cells = CellLibrary::builtin().unwrap();
    let mut trace = record("rvnn", 1, 8);
    trace.meta.hidden = Some(16);
    let e = model(&trace, &cells, 1).err().unwrap().to_string();
    assert!(
        e.contains("does not have the trace's hidden size 16"),
        "{e}"
    );
}

mod training {
    use super::*;
    use crate::backend::cpu::CpuOptions;
    use crate::check::finite_difference;
    use crate::run::{BackwardSchedule, TrainOptions};
    use crate::sched::CavsPolicy;

    fn train(
        trace: &Trace,
        m: &Model,
        cells: &CellLibrary,
        mut ex: Executor,
        opts: SessionOptions,
        topts: TrainOptions,
    ) -> (f64, Vec<Vec<Vec<f32>>>) {
        let mut s = Session::open_with(DeviceKind::Cpu, trace, m, cells, &mut ex, &opts).unwrap();
        let mut backward = TypewisePolicy;
        let run = s
            .train(BackwardSchedule::Policy(&mut backward), &topts)
            .unwrap();
        let first = s.gradients().unwrap();
        // A second step on the same session gives the same (its state is
        // reset), and so does the other backward order: the forward batches
        // reversed instead of a policy on the reversed graph.
        let again = s.train(BackwardSchedule::ReverseForward, &topts).unwrap();
        assert_eq!(run.loss, again.loss);
        let second = s.gradients().unwrap();
        for (a, b) in first.iter().flatten().zip(second.iter().flatten()) {
            assert!(
                rel_error(a, b) < 1e-5,
                "backward orders disagree: {}",
                rel_error(a, b)
            );
        }
        (run.loss, second)
    }

    #[test]
    fn reference_gradients_match_float64_finite_differences_on_every_workload() {
        let cells = CellLibrary::builtin().unwrap();
        for w in WORKLOADS {
            let trace = record(w.name, 2, 4);
            let m = model(&trace, &cells, 5).unwrap();
            let (_, grads) = train(
                &trace,
                &m,
                &cells,
                Executor::Reference,
                SessionOptions::default(),
                TrainOptions::default(),
            );
            let fd = finite_difference(&trace, &m, 6, 1e-5);
            for (role, per_value) in fd.iter().enumerate() {
                for (v, pairs) in per_value.iter().enumerate() {
                    if pairs.is_empty() {
                        continue;
                    }
                    let got: Vec<f32> = pairs.iter().map(|&(e, _)| grads[role][v][e]).collect();
                    let want: Vec<f32> = pairs.iter().map(|&(_, d)| d as f32).collect();
                    let err = rel_error(&got, &want);
                    // f32 analytic gradients against exact f64 differences:
                    // a few thousand rounded f32 operations per path.
                    assert!(
                        err < 2e-3,
                        "{} role {} value {} ({}): rel. error {err:.2e}\n got {got:?}\nwant {want:?}",
                        w.name,
                        m.roles[role].role.role,
                        v,
                        m.roles[role].cell.values[v].name
                    );
                }
            }
        }
    }

    #[test]
    fn every_executor_computes_the_reference_gradients() {
        let cells = CellLibrary::builtin().unwrap();
        for w in WORKLOADS {
            let trace = record(w.name, 6, 8);
            let m = model(&trace, &cells, 9).unwrap();
            let (ref_loss, want) = train(
                &trace,
                &m,
                &cells,
                Executor::Reference,
                SessionOptions::default(),
                TrainOptions { lazy: false },
            );
            for (name, ex, threads, fuse, lazy) in [
                ("cavs", Executor::Cavs, 1, true, true),
                ("cavs-eager-unfused", Executor::Cavs, 1, false, false),
                (
                    "typewise-2threads",
                    Executor::Policy(Box::new(TypewisePolicy)),
                    2,
                    true,
                    true,
                ),
                (
                    "dynet-agenda",
                    Executor::Dynet(Box::new(AgendaPolicy::updated())),
                    1,
                    true,
                    true,
                ),
                (
                    "dynet-depth-eager",
                    Executor::Dynet(Box::new(DepthPolicy::default())),
                    2,
                    true,
                    false,
                ),
                (
                    "edbatch-opbyop",
                    Executor::EdBatch(
                        Box::new(CavsPolicy::default()),
                        compile_layouts(&m, &[]).unwrap(),
                    ),
                    2,
                    true,
                    false,
                ),
            ] {
                let opts = SessionOptions {
                    cpu: CpuOptions {
                        threads: Some(threads),
                        fuse,
                    },
                };
                let (loss, got) = train(&trace, &m, &cells, ex, opts, TrainOptions { lazy });
                assert!(
                    ((loss - ref_loss) / ref_loss).abs() < 1e-5,
                    "{} {name}: loss {loss} vs {ref_loss}",
                    w.name
                );
                let (err, role, v) = worst_gradient(&got, &want);
                assert!(
                    err < 1e-4,
                    "{} {name} role {role} value {v}: {err:.2e}",
                    w.name
                );
            }
        }
    }

    /// The builtin library with `rvnn.internal` rewritten to use `scale` (two
    /// factors on equal shapes, which must not share a kernel) and `exp`:
    /// `h = −0.5·e^{tanh(pre)} + 0.25·tanh(pre)`, same ports and outputs.
    fn scale_exp_library() -> CellLibrary {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/cells");
        let mut cells = CellLibrary::new();
        for f in std::fs::read_dir(&dir).unwrap() {
            let path = f.unwrap().path();
            if path.file_name().unwrap() != "rvnn.internal.yaml" {
                cells.load_file(&path).unwrap();
            }
        }
        cells
            .add_yaml(
                "name: rvnn.internal
ports:
  - {name: left, arity: one, inputs: [{name: h_l, shape: [h]}]}
  - {name: right, arity: one, inputs: [{name: h_r, shape: [h]}]}
params:
  - {name: b, shape: [h]}
  - {name: W, shape: [h, 2h]}
ops:
  - {out: hlr, op: concat, args: [h_l, h_r]}
  - {out: pre, op: affine, args: [b, W, hlr]}
  - {out: t, op: tanh, args: [pre]}
  - {out: e, op: exp, args: [t]}
  - {out: s, op: scale, args: [e], factor: -0.5}
  - {out: u, op: scale, args: [t], factor: 0.25}
  - {out: h, op: add, args: [s, u]}
outputs: [h]
",
                "scale-exp test cell",
            )
            .unwrap();
        cells
    }

    /// `scale` and `exp` forward and backward: the reference's analytic
    /// gradients against float64 finite differences, and every CPU executor's
    /// loss and gradients against the reference's.
    #[test]
    fn scale_and_exp_gradients_match_finite_differences_and_every_cpu_executor() {
        let cells = scale_exp_library();
        let trace = record("rvnn", 4, 8);
        let m = model(&trace, &cells, 5).unwrap();
        let (ref_loss, want) = train(
            &trace,
            &m,
            &cells,
            Executor::Reference,
            SessionOptions::default(),
            TrainOptions { lazy: false },
        );
        let fd = finite_difference(&trace, &m, 6, 1e-5);
        for (role, per_value) in fd.iter().enumerate() {
            for (v, pairs) in per_value.iter().enumerate() {
                if pairs.is_empty() {
                    continue;
                }
                let got: Vec<f32> = pairs.iter().map(|&(e, _)| want[role][v][e]).collect();
                let fdv: Vec<f32> = pairs.iter().map(|&(_, d)| d as f32).collect();
                let err = rel_error(&got, &fdv);
                assert!(
                    err < 2e-3,
                    "role {role} value {v}: {err:.2e} {got:?} {fdv:?}"
                );
            }
        }
        for (name, ex) in [
            ("cavs", Executor::Cavs),
            ("typewise", Executor::Policy(Box::new(TypewisePolicy))),
            ("dynet", Executor::Dynet(Box::new(AgendaPolicy::updated()))),
            (
                "edbatch-opbyop",
                Executor::EdBatch(
                    Box::new(CavsPolicy::default()),
                    compile_layouts(&m, &[]).unwrap(),
                ),
            ),
        ] {
            let (loss, got) = train(
                &trace,
                &m,
                &cells,
                ex,
                on_threads(2),
                TrainOptions { lazy: true },
            );
            assert!(
                ((loss - ref_loss) / ref_loss).abs() < 1e-5,
                "{name}: loss {loss} vs {ref_loss}"
            );
            let (err, role, v) = worst_gradient(&got, &want);
            assert!(err < 1e-4, "{name} role {role} value {v}: {err:.2e}");
        }
    }

    /// Large batches run in chunks of rows (their records kept in cache):
    /// chunked down to three rows, every workload's loss and gradients
    /// equal the whole-batch run's.
    #[test]
    fn chunked_backward_batches_compute_the_same_gradients() {
        use crate::backend::cpu::split::TEST_CHUNK_ROWS;
        let cells = CellLibrary::builtin().unwrap();
        for w in WORKLOADS {
            let trace = record(w.name, 6, 8);
            let m = model(&trace, &cells, 9).unwrap();
            let run = || {
                train(
                    &trace,
                    &m,
                    &cells,
                    Executor::Cavs,
                    // One thread: several run batches whole.
                    SessionOptions {
                        cpu: CpuOptions {
                            threads: Some(1),
                            fuse: true,
                        },
                    },
                    TrainOptions { lazy: true },
                )
            };
            let (loss, whole) = run();
            let old = TEST_CHUNK_ROWS.with(|c| c.replace(Some(3)));
            let (chunked_loss, chunked) = run();
            TEST_CHUNK_ROWS.with(|c| c.set(old));
            assert_eq!(loss, chunked_loss);
            let (err, role, v) = worst_gradient(&chunked, &whole);
            assert!(err < 1e-5, "{} role {role} value {v}: {err:.2e}", w.name);
        }
    }

    /// Regression: the DyNet executor's training step reported 0 bytes kept
    /// for the backward pass although it keeps every op result.
    #[test]
    fn dynet_training_reports_the_bytes_it_keeps() {
        let cells = CellLibrary::builtin().unwrap();
        let trace = record("tree-lstm", 2, 8);
        let m = model(&trace, &cells, 5).unwrap();
        let kept = |mut ex: Executor| {
            let mut s = Session::open(DeviceKind::Cpu, &trace, &m, &cells, &mut ex).unwrap();
            s.train(
                BackwardSchedule::ReverseForward,
                &TrainOptions { lazy: true },
            )
            .unwrap()
            .kept_bytes
        };
        let dynet = kept(Executor::Dynet(Box::new(AgendaPolicy::updated())));
        let cavs = kept(Executor::Cavs);
        // Both keep every intermediate value once and a gradient per value:
        // the same order of bytes (op level has no fused records, the cell
        // records keep a few more temporaries).
        assert!(cavs > 0 && dynet > 0, "dynet {dynet} bytes, cavs {cavs}");
        assert!(
            dynet * 4 > cavs && cavs * 4 > dynet,
            "dynet {dynet} bytes, cavs {cavs}"
        );
    }
}

/// A policy that behaves like typewise for `good` decisions, then picks a
/// type with no ready node.
struct StuckAfter {
    good: usize,
}

impl crate::sched::BatchPolicy for StuckAfter {
    fn name(&self) -> String {
        "stuck-after".into()
    }

    fn choose(&mut self, f: &crate::sched::Frontier) -> crate::sched::Choice {
        if self.good == 0 {
            let g = f.graph();
            let idle = g
                .types()
                .iter()
                .map(|(t, _)| t)
                .find(|&t| f.ready_count(t) == 0)
                .expect("a type with no ready node");
            return crate::sched::Choice::All(idle);
        }
        self.good -= 1;
        crate::sched::Choice::All(crate::sched::typewise_choice(f))
    }
}

/// Decisions made ahead of the batches, while the team waits for a worker
/// (two threads), are the policy's schedule: the same batches and kernels as
/// on one thread, where every decision is made before its batch.
#[test]
fn decisions_made_ahead_keep_the_policys_schedule() {
    let cells = CellLibrary::builtin().unwrap();
    for name in ["lattice-lstm", "tree-lstm", "bilstm-tagger"] {
        let trace = record(name, 16, 32);
        let m = model(&trace, &cells, 5).unwrap();
        let run = |threads| {
            let mut ex = Executor::Policy(Box::new(AgendaPolicy::updated()));
            let opts = on_threads(threads);
            let mut s =
                Session::open_with(DeviceKind::Cpu, &trace, &m, &cells, &mut ex, &opts).unwrap();
            let r = s.run().unwrap();
            let t = &r.time;
            assert!(
                t.overlapped >= 0.0 && t.execution >= 0.0 && t.scheduling >= 0.0,
                "{name}: {t:?}"
            );
            if threads == 1 {
                assert_eq!(t.overlapped, 0.0, "{name}: nothing overlaps on one thread");
            }
            r.counters
        };
        assert_eq!(run(2), run(1), "{name}");
    }
}

/// A policy that gets stuck mid-run is the run's error, on one thread and on
/// two (where the failing decision is likely first made ahead of the
/// batches), never a panic or a hang.
#[test]
fn a_stuck_policy_is_the_runs_error_on_one_thread_and_two() {
    let cells = CellLibrary::builtin().unwrap();
    let trace = record("lattice-lstm", 16, 32);
    let m = model(&trace, &cells, 5).unwrap();
    for threads in [1, 2] {
        let mut ex = Executor::Policy(Box::new(StuckAfter { good: 20 }));
        let opts = on_threads(threads);
        let mut s =
            Session::open_with(DeviceKind::Cpu, &trace, &m, &cells, &mut ex, &opts).unwrap();
        let Err(err) = s.run() else {
            panic!("{threads} threads: a stuck policy's run succeeded");
        };
        assert!(
            matches!(
                err,
                ReplayError::Policy(crate::sched::PolicyError::Stuck { .. })
            ),
            "{threads} threads: {err}"
        );
    }
}
