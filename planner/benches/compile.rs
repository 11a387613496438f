//! Static-subgraph compile time (ED-Batch Table 5): in-cell schedule search,
//! alignment of every distinct minimum schedule, accounting and the choice,
//! per built-in cell at hidden 64, batch 8. Target: at most 1 ms each.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use engine::cells::CellLibrary;
use planner::{PlanOptions, plan_cell};

/// The Table 2 / Table 5 cells first, then the rest of the built-ins.
const CELLS: [&str; 7] = [
    "gru",
    "lstm",
    "mv.internal",
    "tree_gru.internal",
    "tree_gru.leaf",
    "tree_lstm.internal",
    "tree_lstm.leaf",
];

fn compile(c: &mut Criterion) {
    let lib = CellLibrary::builtin().expect("built-in cells load");
    let mut group = c.benchmark_group("compile");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    let others: Vec<String> = lib
        .names()
        .filter(|n| !CELLS.contains(n))
        .map(str::to_owned)
        .collect();
    for name in CELLS
        .iter()
        .copied()
        .chain(others.iter().map(String::as_str))
    {
        let cell = lib
            .instantiate(name, 64)
            .expect("built-in cell instantiates");
        group.bench_with_input(BenchmarkId::from_parameter(name), &cell, |b, cell| {
            b.iter(|| black_box(plan_cell(cell, 8, &PlanOptions::default())));
        });
    }
    group.finish();
}

criterion_group!(benches, compile);
criterion_main!(benches);
