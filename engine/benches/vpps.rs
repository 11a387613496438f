//! VPPS host-side hot paths: what the host does before every kernel launch
//! (schedule the mini-batch, compile its script, encode the words), and the
//! CPU emulator that CI checks against the reference (with and without the
//! float-by-float race detector). Figures in docs/benchmarks.md.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use engine::backend::vpps;
use engine::cells::CellLibrary;
use engine::model::{self, Model};
use engine::run::BackwardSchedule;
use engine::sched::DepthPolicy;
use engine::trace::{Level, Trace};
use engine::workloads::{self, DataChoice, RecordOptions};

fn record(cells: &CellLibrary, name: &str, batch: usize, hidden: usize, seed: u64) -> Trace {
    workloads::record(
        &RecordOptions {
            workload: workloads::workload(name).expect("a workload"),
            data: DataChoice::Default,
            batch,
            hidden,
            level: Level::Cell,
            seed,
        },
        cells,
    )
    .expect("records")
}

/// A training script (forward by depth, backward the forward reversed), as
/// `engine replay --executor vpps --train` builds one per mini-batch.
fn compile(v: &vpps::Vpps, trace: &Trace, model: &Model) -> vpps::Compiled {
    let batches = vpps::schedule(
        trace,
        &mut DepthPolicy::default(),
        Some(BackwardSchedule::ReverseForward),
    )
    .expect("schedules");
    v.compile(trace, model, &batches).expect("compiles")
}

/// What the CUDA executor does per mini-batch, timed: the script compiled,
/// its words written into one kept buffer, its buffers handed back for the
/// next compile.
fn bench_host_step(b: &mut criterion::Bencher, v: &vpps::Vpps, trace: &Trace, model: &Model) {
    let mut words = Vec::new();
    b.iter(|| {
        let c = compile(v, trace, model);
        c.script.to_words_into(&mut words);
        v.recycle(c);
        words.len()
    })
}

/// The paper's sizes (h = 256, VPPS §IV) at batch 1, 8 and 32.
fn script_compile(c: &mut Criterion) {
    let cells = CellLibrary::builtin().unwrap();
    let mut g = c.benchmark_group("vpps_compile");
    for (name, batch) in [
        ("tree-lstm", 1),
        ("tree-lstm", 8),
        ("tree-lstm", 32),
        ("bilstm-tagger", 32),
    ] {
        let trace = record(&cells, name, batch, 256, 1);
        let model = model::model(&trace, &cells, 1).unwrap();
        let v = vpps::Vpps::new(&model, &vpps::VppsOptions::default())
            .expect("the model is in the instruction set");
        g.throughput(Throughput::Elements(trace.graph.len() as u64));
        let id = format!("{name}_b{batch}_h256");
        g.bench_function(BenchmarkId::new("schedule+compile+encode", &id), |b| {
            bench_host_step(b, &v, &trace, &model)
        });
    }
    g.finish();
}

/// Every point of VPPS' Fig. 11/12 as `results/2026-11-27-h200-vpps`
/// measured it on the GPU (spec `vpps-train`: six models, batch 1–128,
/// h = 256, seed 101, the H200's plan, training): the host's work per
/// mini-batch, to set beside the kernel's time there (docs/benchmarks.md,
/// "VPPS host side"). `BATCHLAB_VPPS_GRID=quick` keeps tree-lstm and
/// bilstm-tagger at batch 2 and 32.
fn fig11_12_host_path(c: &mut Criterion) {
    let cells = CellLibrary::builtin().unwrap();
    let quick = std::env::var("BATCHLAB_VPPS_GRID").is_ok_and(|v| v == "quick");
    let (names, batches): (&[&str], &[usize]) = if quick {
        (&["tree-lstm", "bilstm-tagger"], &[2, 32])
    } else {
        (
            &[
                "tree-lstm",
                "bilstm-tagger",
                "bilstm-tagger-char",
                "td-rnn",
                "td-lstm",
                "rvnn",
            ],
            &[1, 2, 4, 8, 16, 32, 64, 128],
        )
    };
    let opts = vpps::VppsOptions {
        target: vpps::Target::preset("h200").expect("the H200 preset"),
        ..vpps::VppsOptions::default()
    };
    let mut g = c.benchmark_group("vpps_fig11_12");
    g.sample_size(10)
        .warm_up_time(std::time::Duration::from_millis(300))
        .measurement_time(std::time::Duration::from_secs(1));
    for name in names {
        for &batch in batches {
            let trace = record(&cells, name, batch, 256, 101);
            let model = model::model(&trace, &cells, 101).unwrap();
            let v = vpps::Vpps::new(&model, &opts).expect("the model is in the instruction set");
            g.bench_function(BenchmarkId::new(*name, batch), |b| {
                bench_host_step(b, &v, &trace, &model)
            });
        }
    }
    g.finish();
}

/// Emulating a training script: tree-lstm b8 h64 (the emulator interprets
/// every processor's stream; CI runs it with the race detector).
fn emulate(c: &mut Criterion) {
    let cells = CellLibrary::builtin().unwrap();
    let mut g = c.benchmark_group("vpps_emulate");
    g.sample_size(10);
    let trace = record(&cells, "tree-lstm", 8, 64, 1);
    let model = model::model(&trace, &cells, 1).unwrap();
    let v = vpps::Vpps::new(&model, &vpps::VppsOptions::default())
        .expect("the model is in the instruction set");
    let compiled = compile(&v, &trace, &model);
    g.throughput(Throughput::Elements(trace.graph.len() as u64));
    for races in [false, true] {
        let id = if races { "race_detector" } else { "plain" };
        g.bench_function(BenchmarkId::new("tree-lstm_b8_h64", id), |b| {
            b.iter(|| v.emulate(&trace, &model, &compiled, races).unwrap().loss)
        });
    }
    g.finish();
}

criterion_group!(benches, script_compile, fig11_12_host_path, emulate);
criterion_main!(benches);
