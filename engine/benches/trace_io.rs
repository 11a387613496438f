//! Trace throughput: record, write (canonical JSON) and read (parse + validate)
//! of a tree-lstm mini-batch of about 110k nodes. Figures in docs/benchmarks.md.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use engine::cells::CellLibrary;
use engine::trace::{Level, Trace};
use engine::workloads::{self, DataChoice, RecordOptions};

fn trace_io(c: &mut Criterion) {
    let cells = CellLibrary::builtin().expect("built-in cells load");
    let opts = RecordOptions {
        workload: workloads::workload("tree-lstm").expect("tree-lstm exists"),
        data: DataChoice::Default,
        batch: 1200,
        hidden: 64,
        level: Level::Cell,
        seed: 7,
    };
    let trace = workloads::record(&opts, &cells).expect("records");
    let text = trace.to_json();
    let mut g = c.benchmark_group("trace_io");
    g.throughput(Throughput::Elements(trace.graph.len() as u64));
    g.sample_size(20);
    g.bench_function("record_tree_lstm_b1200", |b| {
        b.iter(|| workloads::record(&opts, &cells).expect("records"))
    });
    g.bench_function("write_json", |b| b.iter(|| trace.to_json()));
    g.bench_function("read_json", |b| {
        b.iter(|| Trace::from_json(&text, "bench").expect("parses"))
    });
    g.finish();
}

criterion_group!(benches, trace_io);
criterion_main!(benches);
