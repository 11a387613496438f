//! `engine bench`: record, write and read throughput of a large trace, so the
//! numbers in docs/benchmarks.md can be reproduced without criterion.

use std::time::Instant;

use anyhow::bail;
use engine::cells::CellLibrary;
use engine::trace::{Level, Trace};
use engine::workloads::{self, DataChoice, RecordOptions};
use serde::Serialize;

/// Arguments of `engine bench`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Workload to record.
    #[arg(long, default_value = "tree-lstm")]
    workload: String,
    /// Mini-batch size (tree-lstm at 1200 gives about 110k nodes). [range: 1 to 1000000]
    #[arg(long, default_value_t = 1200, value_parser = engine::tool::int_in(engine::tool::ranges::BATCH))]
    batch: usize,
    /// Hidden size recorded in the type names. [range: 1 to 65536]
    #[arg(long, default_value_t = 64, value_parser = engine::tool::int_in(engine::tool::ranges::HIDDEN))]
    hidden: usize,
    /// Node granularity: `cell` or `op`.
    #[arg(long, default_value = "cell", value_parser = super::record::parse_level)]
    level: Level,
    /// Timed repetitions; the median is reported. [range: 1 to 100000]
    #[arg(long, default_value_t = 5, value_parser = engine::tool::int_in(engine::tool::ranges::REPEAT))]
    repeat: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// `engine bench --json` output: medians in seconds and nodes per second.
#[derive(Serialize)]
struct Report {
    workload: String,
    level: &'static str,
    nodes: usize,
    edges: usize,
    bytes: usize,
    repeat: usize,
    record_s: f64,
    write_s: f64,
    read_s: f64,
    record_nodes_per_s: f64,
    write_nodes_per_s: f64,
    read_nodes_per_s: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let Some(w) = workloads::workload(&a.workload) else {
        bail!("unknown workload {:?}", a.workload);
    };
    let cells = CellLibrary::builtin()?;
    let opts = RecordOptions {
        workload: w,
        data: DataChoice::Default,
        batch: a.batch,
        hidden: a.hidden,
        level: a.level,
        seed: 7,
    };
    let dir = std::env::temp_dir().join(format!("batchlab-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("bench-trace.json");
    let (mut rec, mut wr, mut rd) = (Vec::new(), Vec::new(), Vec::new());
    let mut shape = (0, 0, 0);
    for _ in 0..a.repeat {
        let t0 = Instant::now();
        let trace = workloads::record(&opts, &cells).map_err(super::flag_error)?;
        let t1 = Instant::now();
        trace.write(&path)?;
        let t2 = Instant::now();
        let back = Trace::read(&path)?;
        let t3 = Instant::now();
        if back != trace {
            bail!("bench: trace did not round-trip");
        }
        shape = (
            trace.graph.len(),
            trace.graph.num_edges(),
            std::fs::metadata(&path)?.len() as usize,
        );
        rec.push((t1 - t0).as_secs_f64());
        wr.push((t2 - t1).as_secs_f64());
        rd.push((t3 - t2).as_secs_f64());
    }
    let _ = std::fs::remove_dir_all(&dir);
    let (record_s, write_s, read_s) = (median(rec), median(wr), median(rd));
    let nodes = shape.0;
    let r = Report {
        workload: w.name.to_string(),
        level: a.level.name(),
        nodes,
        edges: shape.1,
        bytes: shape.2,
        repeat: a.repeat,
        record_s,
        write_s,
        read_s,
        record_nodes_per_s: nodes as f64 / record_s,
        write_nodes_per_s: nodes as f64 / write_s,
        read_nodes_per_s: nodes as f64 / read_s,
    };
    if a.json {
        return crate::cli::print_json(&r);
    }
    engine::outln!(
        "{} ({} level): {} nodes, {} edges, {} bytes; median of {}",
        r.workload,
        r.level,
        r.nodes,
        r.edges,
        r.bytes,
        r.repeat
    );
    for (what, s, rate) in [
        ("record", r.record_s, r.record_nodes_per_s),
        ("write", r.write_s, r.write_nodes_per_s),
        ("read", r.read_s, r.read_nodes_per_s),
    ] {
        engine::outln!(
            "  {what:<7} {:>9.3} ms  {:>7.2} M nodes/s",
            s * 1e3,
            rate / 1e6
        );
    }
    Ok(())
}
