//! Replay hot paths: the CPU GEMM kernel, and whole runs of the cavs and
//! reference executors on a tree-lstm mini-batch. Figures in docs/benchmarks.md.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use engine::cells::CellLibrary;
use engine::replay::{self, Executor, kernels};
use engine::trace::Level;
use engine::workloads::{self, DataChoice, RecordOptions};

fn gemm(c: &mut Criterion) {
    let mut g = c.benchmark_group("gemm_xwt");
    for (k, n) in [(32usize, 64usize), (128, 256), (256, 512)] {
        let x = vec![0.5f32; k * n];
        let w = vec![0.25f32; n * n];
        let mut y = vec![0.0f32; k * n];
        g.throughput(Throughput::Elements((2 * k * n * n) as u64));
        g.bench_function(format!("k{k}_n{n}"), |b| {
            b.iter(|| kernels::gemm_xwt(k, n, n, &x, &w, 0.0, &mut y))
        });
    }
    g.finish();
}

fn executors(c: &mut Criterion) {
    let cells = CellLibrary::builtin().expect("built-in cells");
    let trace = workloads::record(
        &RecordOptions {
            workload: workloads::workload("tree-lstm").expect("tree-lstm"),
            data: DataChoice::Default,
            batch: 32,
            hidden: 64,
            level: Level::Cell,
            seed: 7,
        },
        &cells,
    )
    .expect("records");
    let model = replay::model(&trace, &cells, 7).expect("model");
    let mut g = c.benchmark_group("replay_tree_lstm_b32_h64");
    g.sample_size(10);
    g.throughput(Throughput::Elements(32));
    g.bench_function("cavs", |b| {
        b.iter(|| replay::replay(&trace, &model, &cells, &mut Executor::Cavs).expect("runs"))
    });
    g.bench_function("reference", |b| {
        b.iter(|| replay::replay(&trace, &model, &cells, &mut Executor::Reference).expect("runs"))
    });
    g.finish();
}

criterion_group!(benches, gemm, executors);
criterion_main!(benches);
