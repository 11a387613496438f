use super::*;
use crate::cells::CellLibrary;
use crate::compare::{max_rel_error, worst_gradient};
use crate::device::DeviceKind;
use crate::executor::Executor;
use crate::model::{Model, model};
use crate::run::BackwardSchedule;
use crate::sched::{AgendaPolicy, CavsPolicy, DepthPolicy, TypewisePolicy};
use crate::session::{Session, device_present, replay};
use crate::store::Store;
use crate::tests::record;
use crate::trace::Trace;
use crate::workloads::WORKLOADS;

/// The reference's loss, outputs and gradients (CPU, one node at a time).
fn reference(trace: &Trace, m: &Model, cells: &CellLibrary) -> (f64, Store, Vec<Vec<Vec<f32>>>) {
    let mut ex = Executor::Reference;
    let mut s = Session::open(DeviceKind::Cpu, trace, m, cells, &mut ex).unwrap();
    let run = s
        .train(BackwardSchedule::ReverseForward, &Default::default())
        .unwrap();
    let grads = s.gradients().unwrap();
    (run.loss, s.into_outputs(), grads)
}

/// Emulates a training script of `trace` with `v` and checks loss, every
/// node's outputs and every gradient against the reference.
fn check(
    name: &str,
    trace: &Trace,
    m: &Model,
    v: &Vpps,
    fwd: &mut dyn crate::sched::BatchPolicy,
    bwd: BackwardSchedule<'_>,
    want: &(f64, Store, Vec<Vec<Vec<f32>>>),
) {
    let batches = schedule(trace, fwd, Some(bwd)).unwrap();
    let c = v.compile(trace, m, &batches).unwrap();
    // The words the kernel reads decode to the same script.
    assert_eq!(Script::from_words(&c.script.to_words()).unwrap(), c.script);
    let run = v.emulate(trace, m, &c, true).unwrap();
    let got = run.gradients.as_ref().unwrap();
    assert_matches(name, trace, m, (run.loss, &run.outputs, got), want);
}

/// Loss, every node's outputs and every gradient of a run (emulated or on a
/// GPU) within 1e-4 of the reference's.
fn assert_matches(
    name: &str,
    trace: &Trace,
    m: &Model,
    (loss, out, grads): (f64, &Store, &[Vec<Vec<f32>>]),
    want: &(f64, Store, Vec<Vec<Vec<f32>>>),
) {
    let (want_loss, want_out, want_grads) = want;
    assert!(
        ((loss - want_loss) / want_loss).abs() < 1e-4,
        "{name}: loss {loss} vs {want_loss}"
    );
    let err = max_rel_error(trace, out, want_out);
    assert!(err < 1e-4, "{name}: outputs differ by {err:.2e}");
    let (e, role, val) = worst_gradient(grads, want_grads);
    assert!(
        e < 1e-4,
        "{name}: gradient of role {} value {} ({}) differs by {e:.2e}",
        m.roles[role].role.role,
        val,
        m.roles[role].cell.values[val].name
    );
}

/// The acceptance check: on every workload, the emulated kernel (H100
/// plan, race detector on) computes the reference's loss, outputs and
/// gradients within 1e-4.
#[test]
fn emulator_matches_the_reference_on_every_workload() {
    let cells = CellLibrary::builtin().unwrap();
    for w in WORKLOADS {
        let trace = record(w.name, 6, 8);
        let m = model(&trace, &cells, 9).unwrap();
        let want = reference(&trace, &m, &cells);
        let v =
            Vpps::new(&m, &VppsOptions::default()).expect("the model is in the instruction set");
        // The backward as Cavs runs it (the forward batches reversed) and
        // as a policy on the reversed graph batches it.
        check(
            w.name,
            &trace,
            &m,
            &v,
            &mut CavsPolicy::default(),
            BackwardSchedule::ReverseForward,
            &want,
        );
        check(
            w.name,
            &trace,
            &m,
            &v,
            &mut CavsPolicy::default(),
            BackwardSchedule::Policy(&mut TypewisePolicy),
            &want,
        );
    }
}

/// The CUDA twin of the emulator test: the kernel itself, launched on the
/// GPU, computes the reference's outputs (forward-only script) and its loss,
/// outputs and gradients (training script, both backward schedules) within
/// 1e-4 on every workload, and with matrices fallen back to shared memory
/// and DRAM, several rows per warp and gradients off chip.
#[test]
#[cfg_attr(
    not(batchlab_cuda_tests),
    ignore = "needs a CUDA GPU: BATCHLAB_CUDA_TESTS=1 cargo test runs it"
)]
fn kernel_matches_the_reference_on_every_workload_on_cuda() {
    let gpu = DeviceKind::Cuda(0);
    assert!(
        device_present(gpu).unwrap(),
        "CUDA is not available on this machine, but its tests were asked for"
    );
    let cells = CellLibrary::builtin().unwrap();
    let mut cases: Vec<(&str, usize, usize, VppsOptions, bool)> = WORKLOADS
        .iter()
        .map(|w| (w.name, 6, 8, VppsOptions::default(), false))
        .collect();
    // Few registers for weights: matrices go to shared memory and DRAM.
    let mut tight = VppsOptions::default();
    tight.target.max_regs_per_thread = 72;
    tight.place = PlaceOptions {
        ctas_per_sm: Some(1),
        rpw: 2,
        grads_on_chip: true,
    };
    cases.push(("tree-lstm", 4, 64, tight, true));
    let off_chip = VppsOptions {
        place: PlaceOptions {
            ctas_per_sm: Some(1),
            rpw: 3,
            grads_on_chip: false,
        },
        ..VppsOptions::default()
    };
    cases.push(("bilstm-tagger", 4, 32, off_chip, false));
    for (name, batch, hidden, opts, falls_back) in cases {
        let trace = record(name, batch, hidden);
        let m = model(&trace, &cells, 9).unwrap();
        let want = reference(&trace, &m, &cells);
        let mut ex = Executor::Vpps(Box::new(CavsPolicy::default()), opts);
        let mut s = Session::open(gpu, &trace, &m, &cells, &mut ex)
            .unwrap_or_else(|e| panic!("{name} h{hidden}: {e}"));
        let (plan, kernel) = s.vpps_plan().unwrap();
        if falls_back {
            assert!(
                plan.mats.iter().any(|p| p.weights != Storage::Registers),
                "{name}: every matrix in registers:\n{}",
                plan.describe()
            );
        }
        eprintln!(
            "{name} h{hidden}: {} processors, {} registers/thread, {} B local/thread",
            plan.vps, kernel.regs_per_thread, kernel.local_bytes_per_thread
        );
        s.run().unwrap();
        let err = max_rel_error(&trace, s.outputs(), &want.1);
        assert!(
            err < 1e-4,
            "{name} h{hidden} forward: outputs differ by {err:.2e}"
        );
        let mut typewise = TypewisePolicy;
        for bwd in [
            BackwardSchedule::ReverseForward,
            BackwardSchedule::Policy(&mut typewise),
        ] {
            let run = s.train(bwd, &Default::default()).unwrap();
            assert!(run.device_s.is_some_and(|d| d > 0.0), "{name}: no GPU time");
            let got = s.gradients().unwrap();
            let label = format!("{name} h{hidden}");
            assert_matches(&label, &trace, &m, (run.loss, s.outputs(), &got), &want);
        }
    }
}

/// A GPU too small for the model: matrices fall back to shared memory and
/// DRAM, several rows per warp, gradients off chip — the emulator still
/// matches, and the plan says what did not fit.
#[test]
fn fallbacks_to_shared_memory_and_dram_still_match() {
    let cells = CellLibrary::builtin().unwrap();
    let tiny = Target {
        name: "tiny".into(),
        sms: 2,
        // 103 registers per thread: 40 for weights after the 63 reserved.
        regs_per_sm: 256 * 103,
        max_regs_per_thread: 255,
        smem_per_sm: 32 * 1024,
        smem_per_block: 32 * 1024,
        smem_reserved_per_block: 0,
        arch: "compute_90".into(),
    };
    for (name, hidden, rpw) in [
        ("tree-lstm", 64, 2),
        ("mv-rnn", 24, 1),
        ("bilstm-tagger", 32, 3),
    ] {
        let trace = record(name, 4, hidden);
        let m = model(&trace, &cells, 4).unwrap();
        let want = reference(&trace, &m, &cells);
        let opts = VppsOptions {
            target: tiny.clone(),
            place: PlaceOptions {
                ctas_per_sm: Some(1),
                rpw,
                grads_on_chip: true,
            },
        };
        let v = Vpps::new(&m, &opts).expect("the model is in the instruction set");
        let plan = v.plan();
        assert!(
            plan.mats.iter().any(|p| p.slots > 1),
            "{name}: one row per warp"
        );
        check(
            name,
            &trace,
            &m,
            &v,
            &mut AgendaPolicy::updated(),
            BackwardSchedule::Policy(&mut DepthPolicy::default()),
            &want,
        );
        if name == "tree-lstm" {
            assert!(!plan.summary.fits_on_chip, "{}", plan.describe());
            assert!(plan.describe().contains("DOES NOT FIT ON CHIP"));
            for s in [Storage::Registers, Storage::Shared, Storage::Global] {
                assert!(
                    plan.mats.iter().any(|p| p.weights == s),
                    "no matrix in {s:?}:\n{}",
                    plan.describe()
                );
            }
        }
    }
}

/// Forward-only scripts (replay) match too, and every processor passes
/// every barrier.
#[test]
fn forward_scripts_match_and_agree_on_barriers() {
    let cells = CellLibrary::builtin().unwrap();
    let trace = record("td-lstm", 4, 16);
    let m = model(&trace, &cells, 2).unwrap();
    let (_, want) = replay(&trace, &m, &cells, &mut Executor::Reference).unwrap();
    let v = Vpps::new(&m, &VppsOptions::default()).expect("the model is in the instruction set");
    let b = schedule(&trace, &mut DepthPolicy::default(), None).unwrap();
    let c = v.compile(&trace, &m, &b).unwrap();
    assert!(!c.training);
    let run = v.emulate(&trace, &m, &c, true).unwrap();
    assert!(run.gradients.is_none());
    assert!(max_rel_error(&trace, &run.outputs, &want) < 1e-4);
    assert_eq!(run.stats.barriers, c.script.barriers);
    for vp in 0..c.script.vps {
        let bars = c
            .script
            .decode_stream(vp)
            .unwrap()
            .iter()
            .filter(|i| matches!(i, Ins::Bar { .. }))
            .count();
        assert_eq!(bars as u32, c.script.barriers);
    }
}

/// A compile that fills the buffers a previous script handed back
/// ([`Vpps::recycle`]) writes the same words as a compile from fresh ones,
/// whether the previous script was longer or shorter.
#[test]
fn recycled_script_buffers_give_the_same_words() {
    let cells = CellLibrary::builtin().unwrap();
    for name in ["tree-lstm", "lattice-lstm", "bilstm-tagger-char"] {
        let trace = record(name, 4, 16);
        let m = model(&trace, &cells, 2).unwrap();
        let fresh = |b: &Batches| {
            let v = Vpps::new(&m, &VppsOptions::default())
                .expect("the model is in the instruction set");
            v.compile(&trace, &m, b).unwrap().script.to_words()
        };
        let train = schedule(
            &trace,
            &mut DepthPolicy::default(),
            Some(BackwardSchedule::ReverseForward),
        )
        .unwrap();
        let infer = schedule(&trace, &mut TypewisePolicy, None).unwrap();
        let (want_train, want_infer) = (fresh(&train), fresh(&infer));
        let v =
            Vpps::new(&m, &VppsOptions::default()).expect("the model is in the instruction set");
        let mut words = Vec::new();
        for (b, want) in [
            (&train, &want_train),
            (&infer, &want_infer),
            (&train, &want_train),
            (&train, &want_train),
        ] {
            let c = v.compile(&trace, &m, b).unwrap();
            c.script.to_words_into(&mut words);
            assert_eq!(&words, want, "{name}");
            v.recycle(c);
        }
    }
}

/// Regression guard for the barrier rule: dropping one barrier from a
/// script makes the emulator report a race or a deadlock, never a silent
/// wrong answer.
#[test]
fn a_missing_barrier_is_caught() {
    let cells = CellLibrary::builtin().unwrap();
    let trace = record("tree-lstm", 2, 8);
    let m = model(&trace, &cells, 2).unwrap();
    let v = Vpps::new(&m, &VppsOptions::default()).expect("the model is in the instruction set");
    let b = schedule(
        &trace,
        &mut CavsPolicy::default(),
        Some(BackwardSchedule::Policy(&mut TypewisePolicy)),
    )
    .unwrap();
    let mut c = v.compile(&trace, &m, &b).unwrap();
    // Remove barrier 1 from every stream and renumber the later ones.
    for vp in 0..c.script.vps {
        let ins = c.script.decode_stream(vp).unwrap();
        let mut words = Vec::new();
        for i in ins {
            match i {
                Ins::Bar { n: 1 } => {}
                Ins::Bar { n } if n > 1 => Ins::Bar { n: n - 1 }.encode(&mut words),
                other => other.encode(&mut words),
            }
        }
        c.script.streams[vp as usize] = words;
    }
    c.script.barriers -= 1;
    let e = v.emulate(&trace, &m, &c, true).err().expect("a race");
    assert!(matches!(e, VppsError::Race { .. }), "{e}");
}

#[test]
fn the_vpps_executor_never_runs_on_the_cpu() {
    let cells = CellLibrary::builtin().unwrap();
    let trace = record("rvnn", 2, 8);
    let m = model(&trace, &cells, 1).unwrap();
    let mut ex = Executor::Vpps(Box::new(CavsPolicy::default()), VppsOptions::default());
    let e = Session::open(DeviceKind::Cpu, &trace, &m, &cells, &mut ex)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("runs on CUDA only"), "{e}");
    // On a machine without CUDA (CI), asking for it is the typed error.
    if !device_present(DeviceKind::Cuda(0)).unwrap() {
        let e = Session::open(DeviceKind::Cuda(0), &trace, &m, &cells, &mut ex)
            .err()
            .unwrap()
            .to_string();
        assert!(e.starts_with("CUDA unavailable"), "{e}");
    }
}

/// The paper's Tree-LSTM at h = 256 fits an H100's registers with one CTA
/// per SM (the automatic choice), weights and gradients, spread evenly.
#[test]
fn tree_lstm_h256_fits_an_h100() {
    let cells = CellLibrary::builtin().unwrap();
    let trace = record("tree-lstm", 1, 256);
    let m = model(&trace, &cells, 1).unwrap();
    let plan = placement::place(&m, &Target::h100(), &PlaceOptions::default());
    assert!(plan.summary.fits_on_chip, "{}", plan.describe());
    assert_eq!(plan.vps, 132);
    assert!(plan.mats.iter().all(|p| p.weights == Storage::Registers));
    assert!(plan.mats.iter().all(|p| p.grads == Storage::Registers));
    assert!(plan.regs_used <= plan.reg_budget);
    // Every row has exactly one owner, and row_at inverts owner.
    for mi in 0..plan.mats.len() {
        for row in 0..plan.mats[mi].mat.m {
            let (vp, w, s) = plan.owner(mi, row);
            assert_eq!(plan.row_at(mi, vp, w, s), Some(row));
        }
    }
    assert!(plan.summary.load_imbalance < 1.2, "{}", plan.describe());
}

/// Regression: a reduction's partial-sum buffer was reused by a later
/// allocation in the same phase once the ring wrapped (the race detector
/// caught it on Tree-LSTM h = 256 with the depth policy).
#[test]
fn partial_ring_reuse_waits_for_the_reductions() {
    let cells = CellLibrary::builtin().unwrap();
    let trace = record("tree-lstm", 4, 128);
    let m = model(&trace, &cells, 7).unwrap();
    let v = Vpps::new(&m, &VppsOptions::default()).expect("the model is in the instruction set");
    let b = schedule(
        &trace,
        &mut DepthPolicy::default(),
        Some(BackwardSchedule::Policy(&mut TypewisePolicy)),
    )
    .unwrap();
    let c = v.compile(&trace, &m, &b).unwrap();
    let widest = v
        .plan()
        .mats
        .iter()
        .map(|p| p.participants.len() * p.mat.l)
        .max()
        .unwrap();
    let rows: usize = b.backward.as_ref().unwrap().iter().map(Vec::len).sum();
    assert!(c.pool.ring_len < 5 * widest * rows, "the ring must wrap");
    let run = v.emulate(&trace, &m, &c, true).unwrap();
    assert!(run.loss.is_finite());
}
