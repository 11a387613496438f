//! PQ-tree reduction throughput: n constraints on n leaves, n = 1e3..1e5.
//! Linear growth is the target (Booth–Lueker), 1e5 within 100 ms.

mod pq_workloads;

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use pq_workloads::{hidden_intervals, run, sliding_pairs};

fn reduce_scaling(c: &mut Criterion) {
    let mut group = c.benchmark_group("pqtree_reduce");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for n in [1_000usize, 10_000, 100_000] {
        group.throughput(Throughput::Elements(n as u64));
        let workloads = [
            ("sliding_pairs", sliding_pairs(n)),
            ("hidden_intervals", hidden_intervals(n)),
        ];
        for (name, sets) in &workloads {
            group.bench_with_input(BenchmarkId::new(*name, n), sets, |b, sets| {
                b.iter(|| black_box(run(n, sets)));
            });
        }
    }
    group.finish();
}

criterion_group!(benches, reduce_scaling);
criterion_main!(benches);
