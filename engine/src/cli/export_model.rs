//! `engine export-model`: the seeded model and bound program of a trace, for
//! the peer frameworks (`docs/model-export.md`).

use std::path::PathBuf;

use anyhow::{Context, bail};
use engine::export::{Reference, export_model};
use serde::Serialize;

/// Arguments of `engine export-model`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Cell-level trace to export (recorded by `engine record`).
    #[arg(long, conflicts_with_all = ["workload", "model"])]
    trace: Option<PathBuf>,
    /// A model folder recorded from PyTorch (docs/torch.md): its trace,
    /// cells and weights.
    #[arg(long, conflicts_with = "workload")]
    model: Option<PathBuf>,
    /// Record this workload on the fly instead of reading a trace.
    #[arg(long)]
    workload: Option<String>,
    /// Batch size when recording on the fly (--workload; default 32). [range: 1 to 1000000]
    #[arg(long, value_parser = engine::tool::int_in(engine::tool::ranges::BATCH))]
    batch: Option<usize>,
    /// Hidden size when recording on the fly (--workload; default 64). [range: 1 to 65536]
    #[arg(long, value_parser = engine::tool::int_in(engine::tool::ranges::HIDDEN))]
    hidden: Option<usize>,
    /// Seed of the weights and of the per-node data the trace does not record
    /// (as `engine replay --seed`; also
    /// the record seed when recording on the fly). [range: any 64-bit number]
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Skip the reference run that gives `reference_loss` (null then).
    #[arg(long, conflicts_with = "gradients")]
    no_reference: bool,
    /// Also run one reference training step and store every parameter's
    /// gradient of the loss (tensors `grad/<role>/<param>`), so a peer
    /// checks its gradients too.
    #[arg(long)]
    gradients: bool,
    /// Output file, a safetensors file (written atomically).
    #[arg(long)]
    out: PathBuf,
    /// Print a JSON summary instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    memory: super::MaxMemory,
}

/// `engine export-model --json` output.
#[derive(Serialize)]
struct Summary {
    out: String,
    workload: String,
    hidden: usize,
    seed: u64,
    nodes: usize,
    instances: usize,
    roles: usize,
    params: usize,
    op_nodes: usize,
    agenda_batches: u64,
    reference_loss: Option<f64>,
    bytes: usize,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    // The export may not land on what it is made from: the trace, or a
    // model folder's files.
    let owned = super::source_inputs(&a.model, &a.trace);
    engine::io::distinct_outputs(&super::pairs(&owned), &[("--out", &a.out)])?;
    let budget = a.memory.budget();
    let source = super::TraceInput::of(
        &a.trace,
        &a.model,
        &a.workload,
        (a.batch, a.hidden),
        (32, 64),
        a.seed,
    )?;
    let input = source.open(budget.as_ref())?;
    let (trace, cells) = (&input.trace, &input.cells);
    let what = a
        .trace
        .as_ref()
        .map(|p| p.display().to_string())
        .or_else(|| input.source())
        .unwrap_or_else(|| trace.workload.clone());
    let reference = if a.no_reference {
        Reference::None
    } else if a.gradients {
        Reference::Gradients
    } else {
        Reference::Loss
    };
    if trace.meta.level == Some(engine::trace::Level::Op) {
        bail!("{what}: an op-level trace; export a cell-level one (record without --level op)");
    }
    // The export expands every cell to ops and runs the reference for its
    // loss: the op-level arena and a store of node outputs beside the weights.
    let shape = engine::footprint::RunShape {
        op_level: true,
        check: !a.no_reference,
        roofline: false,
    };
    source.check_memory(&input, shape, "the export", budget.as_ref())?;
    let model = input.model(a.seed)?;
    let e = export_model(trace, &model, cells, a.seed, reference)
        .with_context(|| format!("exporting {what}"))?;
    let bytes = e.to_bytes();
    engine::io::write_atomic(&a.out, &bytes)
        .with_context(|| format!("writing {}", a.out.display()))?;
    let h = &e.header;
    let s = Summary {
        out: a.out.display().to_string(),
        workload: h.workload.clone(),
        hidden: h.hidden,
        seed: h.seed,
        nodes: h.nodes.len(),
        instances: h.instances,
        roles: h.roles.len(),
        params: e.param_floats(),
        op_nodes: h.op_nodes,
        agenda_batches: h.agenda_batches,
        reference_loss: h.reference_loss,
        bytes: bytes.len(),
    };
    if a.json {
        return crate::cli::print_json(&s);
    }
    engine::outln!(
        "{}: {} h={} seed {}: {} nodes ({} instances), {} roles, {} parameters; {} op-level nodes, {} agenda batches; reference loss {}",
        s.out,
        s.workload,
        s.hidden,
        s.seed,
        s.nodes,
        s.instances,
        s.roles,
        s.params,
        s.op_nodes,
        s.agenda_batches,
        s.reference_loss
            .map_or("-".to_string(), |l| format!("{l:.6}"))
    );
    Ok(())
}
