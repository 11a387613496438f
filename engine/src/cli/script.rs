//! `engine script`: the VPPS placement and per-batch script of a trace
//! under a batching policy, for inspection; optionally the kernel source,
//! the binary script, and the CPU emulator's check against the reference.

use std::path::PathBuf;

use anyhow::{Context, bail};
use engine::backend::vpps;
use engine::compare;
use engine::device::DeviceKind;
use engine::executor::Executor;
use engine::model::Model;
use engine::run::BackwardSchedule;
use engine::sched::PolicyArg;
use engine::session::Session;
use engine::store::Store;
use engine::trace::{Level, Trace};
use serde::Serialize;

/// Arguments of `engine script`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Trace (recorded by `engine record`, cell level).
    #[arg(long, conflicts_with_all = ["workload", "model"])]
    trace: Option<PathBuf>,
    /// A model folder recorded from PyTorch (docs/torch.md): its trace,
    /// cells and weights.
    #[arg(long, conflicts_with = "workload")]
    model: Option<PathBuf>,
    /// Record this workload on the fly instead of reading a trace.
    #[arg(long)]
    workload: Option<String>,
    /// Batch size when recording on the fly (--workload; default 8). [range: 1 to 1000000]
    #[arg(long, value_parser = engine::tool::int_in(engine::tool::ranges::BATCH))]
    batch: Option<usize>,
    /// Hidden size when recording on the fly (--workload; default 64). [range: 1 to 65536]
    #[arg(long, value_parser = engine::tool::int_in(engine::tool::ranges::HIDDEN))]
    hidden: Option<usize>,
    /// Forward batching policy: depth (VPPS' level order), agenda,
    /// agenda-updated, cavs, typewise, or a policy file from `search train`.
    #[arg(long, default_value = "depth")]
    policy: String,
    /// The backward batches: `reverse` (the forward batches in reverse
    /// order, as Cavs and DyNet do), a heuristic on the reversed graph, or a
    /// policy file from `search train --pass backward` (as `engine replay
    /// --train`).
    #[arg(long, default_value = "reverse")]
    backward_policy: String,
    /// Forward pass only (what `engine replay` runs); default: forward and
    /// backward (training).
    #[arg(long)]
    forward_only: bool,
    /// GPU to plan for: h100, h200, a100, titan-v.
    #[arg(long, default_value = "h100")]
    target: String,
    /// CTAs (virtual processors) per SM: 1 or 2 (default: automatic). [range: 1 to 2]
    #[arg(long, value_parser = engine::tool::int_in(engine::tool::ranges::CTAS_PER_SM))]
    ctas_per_sm: Option<u32>,
    /// Rows per warp chunk (the paper's rpw). [range: 1 to 1024]
    #[arg(long, default_value_t = 1, value_parser = engine::tool::int_in(engine::tool::ranges::RPW))]
    rpw: usize,
    /// Keep gradients in DRAM instead of on chip.
    #[arg(long)]
    grads_off_chip: bool,
    /// Seed of the weights and per-node data (and of on-the-fly recording). [range: any 64-bit number]
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Write the script's words (little-endian u32, docs/vpps.md) here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Write the generated CUDA C++ kernel source here.
    #[arg(long)]
    kernel: Option<PathBuf>,
    /// Include every processor's decoded instructions.
    #[arg(long)]
    listing: bool,
    /// Run the script on the CPU emulator (race detector on) and compare
    /// it with the reference executor.
    #[arg(long)]
    emulate: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    memory: super::MaxMemory,
}

/// `engine script --json` output.
#[derive(Serialize)]
struct Report {
    format: &'static str,
    version: u32,
    workload: String,
    hidden: usize,
    nodes: usize,
    policy: String,
    backward_policy: Option<String>,
    training: bool,
    plan: vpps::Plan,
    script: ScriptSummary,
    emulation: Option<Emulation>,
    listing: Option<Vec<Vec<vpps::Ins>>>,
}

#[derive(Serialize)]
struct ScriptSummary {
    vps: u32,
    barriers: u32,
    words: usize,
    bytes: usize,
    data_words: usize,
    /// Smallest, mean and largest instruction count per processor.
    instructions_per_vp: [f64; 3],
    pool_floats: usize,
    #[serde(flatten)]
    stats: vpps::ScriptStats,
}

#[derive(Serialize)]
struct Emulation {
    loss: f64,
    reference_loss: f64,
    max_rel_error_outputs: f64,
    max_rel_error_gradients: Option<f64>,
    instructions: u64,
    barriers: u32,
    race_checked: bool,
}

/// `--policy NAME`: a heuristic or a forward-pass policy file.
fn policy(name: &str) -> anyhow::Result<Box<dyn engine::sched::BatchPolicy + Send>> {
    let arg = PolicyArg::parse(name).with_context(|| format!("--policy {name}"))?;
    if arg.trained_pass() == "backward" {
        bail!(
            "--policy {name}: a backward-pass policy (search train --pass backward); give it as --backward-policy"
        );
    }
    Ok(arg.instantiate()?)
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let mut owned = super::source_inputs(&a.model, &a.trace);
    owned.extend(super::policy_input("--policy", Some(&a.policy)));
    owned.extend(super::policy_input(
        "--backward-policy",
        Some(&a.backward_policy),
    ));
    let inputs = super::pairs(&owned);
    let outputs: Vec<(&str, &std::path::Path)> = [("--out", &a.out), ("--kernel", &a.kernel)]
        .into_iter()
        .filter_map(|(f, p)| Some((f, p.as_deref()?)))
        .collect();
    engine::io::distinct_outputs(&inputs, &outputs)?;
    let Some(target) = vpps::Target::preset(&a.target) else {
        bail!(
            "--target {}: unknown GPU; expected one of {}",
            a.target,
            vpps::Target::PRESETS.join(", ")
        );
    };
    let budget = a.memory.budget();
    let source = super::TraceInput::of(
        &a.trace,
        &a.model,
        &a.workload,
        (a.batch, a.hidden),
        (8, 64),
        a.seed,
    )?;
    let input = source.open(budget.as_ref())?;
    let (trace, cells) = (&input.trace, &input.cells);
    if trace.meta.level == Some(Level::Op) {
        bail!("engine script needs a cell-level trace (record without --level op)");
    }
    // The model's weights and per-node state, as a replay of the trace
    // would hold them: an upper bound of what compiling its script holds.
    let shape = engine::footprint::RunShape {
        op_level: false,
        check: false,
        roofline: false,
    };
    source.check_memory(&input, shape, "the script", budget.as_ref())?;
    let model = input.model(a.seed)?;
    let opts = vpps::VppsOptions {
        target,
        place: vpps::PlaceOptions {
            ctas_per_sm: a.ctas_per_sm,
            rpw: a.rpw,
            grads_on_chip: !a.grads_off_chip,
        },
    };
    let v = vpps::Vpps::new(&model, &opts)?;
    let mut fwd = policy(&a.policy)?;
    let mut bwd = match super::replay::backward_policy(&a.backward_policy)? {
        Some(arg) => Some(arg.instantiate()?),
        None => None,
    };
    let backward = match (a.forward_only, bwd.as_mut()) {
        (true, _) => None,
        (false, Some(p)) => Some(BackwardSchedule::Policy(p.as_mut())),
        (false, None) => Some(BackwardSchedule::ReverseForward),
    };
    let batches = vpps::schedule(trace, fwd.as_mut(), backward)?;
    let c = v.compile(trace, &model, &batches)?;
    if let Some(p) = &a.out {
        let bytes: Vec<u8> = c
            .script
            .to_words()
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        engine::io::write_atomic(p, &bytes).with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(p) = &a.kernel {
        engine::io::write_atomic(p, v.kernel_source().as_bytes())
            .with_context(|| format!("writing {}", p.display()))?;
    }
    let emulation = if a.emulate {
        let run = v.emulate(trace, &model, &c, true)?;
        let mut ex = Executor::Reference;
        let mut s = Session::open(DeviceKind::Cpu, trace, &model, cells, &mut ex)?;
        let (reference_loss, grads) = if c.training {
            let r = s.train(BackwardSchedule::ReverseForward, &Default::default())?;
            (r.loss, s.gradients())
        } else {
            s.run()?;
            (loss_of(trace, &model, s.outputs()), None)
        };
        let max_rel_error_gradients = match (&run.gradients, &grads) {
            (Some(got), Some(want)) => Some(compare::max_rel_error_gradients(got, want)),
            _ => None,
        };
        Some(Emulation {
            loss: run.loss,
            reference_loss,
            max_rel_error_outputs: compare::max_rel_error(trace, &run.outputs, s.outputs()),
            max_rel_error_gradients,
            instructions: run.stats.instructions,
            barriers: run.stats.barriers,
            race_checked: run.stats.race_checked,
        })
    } else {
        None
    };
    let counts = &c.stats.instructions;
    let report = Report {
        format: "vpps-script",
        version: vpps::script::VERSION,
        workload: trace.workload.clone(),
        hidden: model.hidden,
        nodes: trace.graph.len(),
        policy: a.policy.clone(),
        backward_policy: c.training.then(|| a.backward_policy.clone()),
        training: c.training,
        plan: v.plan().clone(),
        script: ScriptSummary {
            vps: c.script.vps,
            barriers: c.script.barriers,
            words: c.script.bytes() / 4,
            bytes: c.script.bytes(),
            data_words: c.script.data.len(),
            instructions_per_vp: [
                counts.iter().copied().min().unwrap_or(0) as f64,
                counts.iter().sum::<usize>() as f64 / counts.len().max(1) as f64,
                counts.iter().copied().max().unwrap_or(0) as f64,
            ],
            pool_floats: c.pool.total,
            stats: c.stats.clone(),
        },
        emulation,
        listing: if a.listing {
            Some(
                (0..c.script.vps)
                    .map(|vp| c.script.decode_stream(vp))
                    .collect::<Result<_, _>>()?,
            )
        } else {
            None
        },
    };
    if a.json {
        crate::cli::print_json(&report)?;
    } else {
        print_text(&report, &v);
    }
    // The emulator is the kernel's specification: a disagreement with the
    // reference is a failure, not a number to overlook.
    if let Some(e) = &report.emulation {
        let worst = e
            .max_rel_error_outputs
            .max(e.max_rel_error_gradients.unwrap_or(0.0));
        if worst >= TOLERANCE {
            bail!(
                "--emulate: the emulated script differs from the reference executor by {worst:.2e} (tolerance {TOLERANCE:.0e})"
            );
        }
    }
    Ok(())
}

/// Largest relative difference `--emulate` accepts (outputs and gradients).
const TOLERANCE: f64 = 1e-4;

fn print_text(report: &Report, v: &vpps::Vpps) {
    engine::outln!(
        "{} (h={}, {} nodes): {} script, forward policy {}{}",
        report.workload,
        report.hidden,
        report.nodes,
        if report.training {
            "training"
        } else {
            "forward-only"
        },
        report.policy,
        report
            .backward_policy
            .as_ref()
            .map_or(String::new(), |b| format!(", backward policy {b}"))
    );
    engine::outln!("{}", v.plan().describe().trim_end());
    let s = &report.script;
    engine::outln!(
        "script v{}: {} processors, {} forward + {} backward batches, {} grid barriers, {} B ({} data words); instructions per processor min {} / mean {:.1} / max {}; load imbalance {:.2}; pool {:.1} MB",
        report.version,
        s.vps,
        s.stats.forward_batches,
        s.stats.backward_batches,
        s.barriers,
        s.bytes,
        s.data_words,
        s.instructions_per_vp[0],
        s.instructions_per_vp[1],
        s.instructions_per_vp[2],
        s.stats.load_imbalance,
        s.pool_floats as f64 * 4.0 / 1e6
    );
    engine::outln!(
        "  weight bytes from DRAM: {:.1} KB (per-op executor: {:.1} KB)",
        s.stats.weight_bytes_loaded as f64 / 1024.0,
        s.stats.weight_bytes_per_op as f64 / 1024.0
    );
    if let Some(e) = &report.emulation {
        engine::outln!(
            "  emulator: loss {:.6} (reference {:.6}); max rel. error outputs {:.2e}, gradients {}; {} instructions, {} barriers, races checked",
            e.loss,
            e.reference_loss,
            e.max_rel_error_outputs,
            e.max_rel_error_gradients
                .map_or("-".to_string(), |g| format!("{g:.2e}")),
            e.instructions,
            e.barriers
        );
    }
    if let Some(l) = &report.listing {
        for (vp, ins) in l.iter().enumerate() {
            engine::outln!("processor {vp}:");
            for i in ins {
                engine::outln!("  {i:?}");
            }
        }
    }
}

fn loss_of(trace: &Trace, model: &Model, out: &Store) -> f64 {
    let g = &trace.graph;
    g.nodes()
        .filter(|&v| model.role_of(g, v).role.role == "loss.sum")
        .map(|v| out.node(v).iter().map(|&x| f64::from(x)).sum::<f64>())
        .sum()
}
