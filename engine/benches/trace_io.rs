//! Trace throughput: record, write (canonical JSON) and read (parse + validate)
//! of a tree-lstm mini-batch of about 110k nodes, at cell level and at op
//! level, in memory and through a file (the atomic write: temporary file,
//! fsync, rename; the read: file, parse, validate). Figures in
//! docs/benchmarks.md.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use engine::cells::CellLibrary;
use engine::trace::{Level, Trace};
use engine::workloads::{self, DataChoice, RecordOptions};

fn trace_io(c: &mut Criterion) {
    let cells = CellLibrary::builtin().expect("built-in cells load");
    let dir = std::env::temp_dir().join(format!("batchlab-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary folder");
    // Cell level at batch 1200 and op level at batch 200: about 110k nodes each.
    for (level, batch, group) in [
        (Level::Cell, 1200, "trace_io"),
        (Level::Op, 200, "trace_io_op"),
    ] {
        let opts = RecordOptions {
            workload: workloads::workload("tree-lstm").expect("tree-lstm exists"),
            data: DataChoice::Default,
            batch,
            hidden: 64,
            level,
            seed: 7,
        };
        let trace = workloads::record(&opts, &cells).expect("records");
        let text = trace.to_json();
        let path = dir.join(format!("{group}.json"));
        trace.write(&path).expect("writes");
        let mut g = c.benchmark_group(group);
        g.throughput(Throughput::Elements(trace.graph.len() as u64));
        g.sample_size(20);
        g.bench_function(format!("record_tree_lstm_b{batch}"), |b| {
            b.iter(|| workloads::record(&opts, &cells).expect("records"))
        });
        g.bench_function("write_json", |b| b.iter(|| trace.to_json()));
        g.bench_function("read_json", |b| {
            b.iter(|| Trace::from_json(&text, "bench").expect("parses"))
        });
        g.bench_function("write_file", |b| {
            b.iter(|| trace.write(&path).expect("writes"))
        });
        g.bench_function("read_file", |b| {
            b.iter(|| Trace::read(&path).expect("reads"))
        });
        g.finish();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, trace_io);
criterion_main!(benches);
