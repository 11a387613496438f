//! `engine replay`: run a trace with real kernels and measure.

use std::path::PathBuf;

use anyhow::{Context, bail};
use engine::backend::cpu;
use engine::backend::vpps;
use engine::compare;
use engine::executor::{Executor, compile_layouts};
use engine::expected;
use engine::footprint;
use engine::layout::LayoutFile;
use engine::measure;
use engine::model::Model;
use engine::run::{Counters, TimeSplit, TrainOptions};
use engine::sched::PolicyArg;
use engine::session::{self, Session, SessionOptions};
use engine::trace::Level;
use serde::Serialize;

/// Arguments of `engine replay`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Trace to replay (recorded by `engine record`, cell level).
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
    /// Executor, `NAME[:POLICY]` (the specs' grammar; `:POLICY` is the same
    /// as --policy): `reference` (one node at a time), `dynet` (primitive ops
    /// batched by the policy, agenda|agenda-updated|depth), `cavs` (all ready
    /// vertices), `policy` (cells batched by the policy: a heuristic name or a
    /// policy file from `search train`), `edbatch` (cells batched by the
    /// policy, each cell run by its planned layout from --layouts),
    /// `edbatch-nolayout` (same, DyNet-order layouts: the layout's own
    /// contribution), `vpps` (CUDA only: one persistent kernel with the
    /// weights on chip, batches by the policy, default depth; docs/vpps.md).
    #[arg(long)]
    executor: String,
    /// Batching policy for `dynet` (agenda, agenda-updated, depth), `policy` and
    /// `edbatch*` (depth, agenda, agenda-updated, cavs, typewise, or a policy
    /// file P.yaml from `search train`).
    #[arg(long)]
    policy: Option<String>,
    /// For `edbatch` / `edbatch-nolayout`: the folder of layout files written by
    /// `planner layout --all --hidden H --batch B --out-dir DIR` (`<cell>.json`
    /// planned, `<cell>.baseline.json` DyNet order).
    #[arg(long)]
    layouts: Option<PathBuf>,
    /// Device: `cpu`, or `cuda` / `cuda:N` (every executor; a machine without
    /// CUDA is an error, never a CPU fall back).
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Timed repetitions (the median is reported) after one warm-up run, 1 to
    /// 100000. [range: 1 to 100000]
    #[arg(long, default_value_t = 3, value_parser = engine::tool::int_in(engine::tool::ranges::REPEAT))]
    repeat: usize,
    /// CPU worker threads: every step of a batch (GEMM panels, gathers,
    /// elementwise passes, scatters) splits over them, 1 to 4096 (default:
    /// the machine's available parallelism). [range: 1 to 4096]
    #[arg(long, value_parser = engine::tool::int_in(engine::tool::ranges::THREADS))]
    threads: Option<usize>,
    /// CPU: run each in-cell batch as its own pass over the rows instead of
    /// fusing a cell's row work into one pass per instance (Cavs §3.5
    /// ablation).
    #[arg(long)]
    no_fuse: bool,
    /// CPU: also execute the run's GEMMs alone, paired with runs round by
    /// round (--repeat rounds), and report how close the run comes to doing
    /// only its GEMMs (`roofline` in --json).
    #[arg(long)]
    roofline: bool,
    /// Seed of the weights and of the per-node data the trace does not record
    /// (and of on-the-fly recording). [range: any 64-bit number]
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Skip the comparison with the reference executor.
    #[arg(long)]
    no_check: bool,
    /// Fail (exit 1) where the run differs by more than 1e-4 relative: from
    /// the recording's own numbers with a model folder (every node's
    /// outputs, the loss and, with --train, every gradient against
    /// expected.safetensors; the error names the node, its role and the
    /// cell op that differs), else from the reference executor.
    #[arg(long, conflicts_with = "no_check")]
    check: bool,
    /// For `vpps`: CTAs (virtual processors) per SM, 1 or 2 (default:
    /// automatic, as `engine script` plans). [range: 1 to 2]
    #[arg(long, value_parser = engine::tool::int_in(engine::tool::ranges::CTAS_PER_SM))]
    ctas_per_sm: Option<u32>,
    /// Measure training steps instead: forward, then backward (batched on the
    /// reversed graph by --backward-policy), no optimiser update.
    #[arg(long)]
    train: bool,
    /// With --train: the backward batches — `reverse` (the forward batches in
    /// reverse order, as Cavs and DyNet do), a heuristic on the reversed
    /// graph, or an FSM from `search train --pass backward`.
    #[arg(long, requires = "train", default_value = "reverse")]
    backward_policy: String,
    /// With --train: weight-gradient products per batch, not lazily once per
    /// parameter (Cavs §3.5 ablation).
    #[arg(long, requires = "train")]
    eager: bool,
    #[command(flatten)]
    memory: super::MaxMemory,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

impl Args {
    /// The flags [`executor`] reads, for `engine train`.
    pub(super) fn for_training(
        executor: &str,
        policy: Option<String>,
        layouts: Option<PathBuf>,
    ) -> Args {
        Args {
            trace: None,
            model: None,
            workload: None,
            batch: None,
            hidden: None,
            executor: executor.to_string(),
            policy,
            layouts,
            device: "cpu".into(),
            repeat: 1,
            threads: None,
            no_fuse: false,
            roofline: false,
            seed: 7,
            no_check: true,
            check: false,
            ctas_per_sm: None,
            train: false,
            backward_policy: "reverse".into(),
            eager: false,
            memory: super::MaxMemory::default(),
            json: false,
        }
    }
}

/// `engine replay --json` output.
#[derive(Serialize)]
struct Report {
    workload: String,
    threads: usize,
    fused: bool,
    executor: String,
    policy: Option<String>,
    device: String,
    nodes: usize,
    instances: usize,
    hidden: usize,
    repeat: usize,
    counters: Counters,
    time: TimeSplit,
    total_s: f64,
    instances_per_s: f64,
    policy_misses: u64,
    max_rel_error: Option<f64>,
    device_s: Option<f64>,
    /// Median process CPU seconds per timed run (all threads).
    cpu_s: Option<f64>,
    /// Most minor page faults of a timed run.
    page_faults: Option<u64>,
    /// GEMM flops per run (shared-weight and per-instance products).
    gemm_flops: u64,
    /// gemm_flops / total_s.
    gemm_gflops: f64,
    /// With --roofline: the run's GEMMs timed alone, and the fraction of that
    /// the whole run reaches.
    roofline: Option<cpu::roofline::Roofline>,
    /// The vpps executor's placement on this GPU and kernel compile time.
    vpps: Option<VppsReport>,
    /// With a model folder: the run against the recording's own outputs
    /// and loss (`expected.safetensors`).
    expected: Option<expected::ExpectedCheck>,
}

/// What a VPPS session planned and compiled (`engine script` shows the
/// full plan).
#[derive(Serialize)]
struct VppsReport {
    /// The device's name.
    target: String,
    /// Virtual processors (persistent CTAs).
    vps: u32,
    ctas_per_sm: u32,
    /// The compiled kernel: registers and spills per thread, NVRTC compile
    /// and module load (ms; cached within a process per model).
    kernel: vpps::KernelInfo,
    #[serde(flatten)]
    summary: vpps::placement::PlanSummary,
}

fn vpps_report(session: &Session) -> Option<VppsReport> {
    session.vpps_plan().map(|(p, kernel)| VppsReport {
        target: p.target.name.clone(),
        vps: p.vps,
        ctas_per_sm: p.ctas_per_sm,
        kernel: kernel.clone(),
        summary: p.summary.clone(),
    })
}

/// The command that writes the layouts of this input into `out`: a model
/// folder's cells are planned from the folder, a zoo workload's by name.
fn layout_command(model: &Model, folder: Option<&std::path::Path>, out: &str) -> String {
    match folder {
        Some(m) => format!(
            "planner layout --model {} --batch 8 --out-dir {out}",
            m.display()
        ),
        None => format!(
            "planner layout --all --hidden {} --batch 8 --out-dir {out}",
            model.hidden
        ),
    }
}

/// Reads the layout file of every role's cell from `dir` (`<cell>.json`, or
/// `<cell>.baseline.json` for the DyNet order).
pub(super) fn layouts(
    model: &Model,
    folder: Option<&std::path::Path>,
    dir: &std::path::Path,
    baseline: bool,
) -> anyhow::Result<Vec<(String, LayoutFile)>> {
    let write = |out: &str| layout_command(model, folder, out);
    if !dir.is_dir() {
        bail!(
            "--layouts {}: {}; give the folder `{}` writes",
            dir.display(),
            if dir.exists() {
                "not a folder"
            } else {
                "no such folder"
            },
            write("DIR")
        );
    }
    let mut files = Vec::new();
    for rm in &model.roles {
        let name = &rm.cell.name;
        if files
            .iter()
            .any(|(_, f): &(String, LayoutFile)| f.cell == *name)
        {
            continue;
        }
        let path = dir.join(if baseline {
            format!("{name}.baseline.json")
        } else {
            format!("{name}.json")
        });
        if !path.exists() {
            bail!(
                "{}: no layout for cell {name}; write them with `{}`",
                path.display(),
                write(&dir.display().to_string())
            );
        }
        let file = LayoutFile::read(&path)?;
        // Files are found by name but matched to roles by their `cell`
        // field: a renamed or copied file would leave its role unplanned.
        if file.cell != *name {
            bail!(
                "{}: field `cell` is {:?}, but the file's name makes it the layout of cell {name:?}; write the folder again with `{}`",
                path.display(),
                file.cell,
                write(&dir.display().to_string())
            );
        }
        files.push((path.display().to_string(), file));
    }
    Ok(files)
}

pub(super) fn executor(a: &Args, model: &Model) -> anyhow::Result<Executor> {
    use engine::sched::{ExecutorKind, ExecutorName};
    let name = ExecutorName::parse(&a.executor).map_err(|e| anyhow::anyhow!("--executor: {e}"))?;
    if a.ctas_per_sm.is_some() && name.kind != ExecutorKind::Vpps {
        bail!("--ctas-per-sm is for --executor vpps (got {})", a.executor);
    }
    // `--executor NAME:POLICY` (the grammar the specs use) and `--policy
    // POLICY` name the same thing: either, or both alike.
    let given = match (&name.policy, &a.policy) {
        (Some(x), Some(y)) if x != y => bail!(
            "--executor {} names the policy {x}, --policy {y}: give it once",
            a.executor
        ),
        (Some(x), _) => Some(x.clone()),
        (None, y) => y.clone(),
    };
    let policy = |default: &str| -> anyhow::Result<Box<dyn engine::sched::BatchPolicy + Send>> {
        let name = given.as_deref().unwrap_or(default);
        let arg = PolicyArg::parse(name)?;
        if arg.trained_pass() == "backward" {
            bail!(
                "{name}: a backward-pass policy (search train --pass backward); replay runs the forward pass: give a policy trained without --pass backward"
            );
        }
        if let Some(trained) = arg.trained_workload()
            && trained != model.workload.name
        {
            bail!(
                "{name}: policy trained for workload {trained} but the trace is {}; train one on this workload with `search train --trace T.json --out P.yaml`",
                model.workload.name
            );
        }
        Ok(arg.instantiate()?)
    };
    let kind = name.kind;
    // A flag the executor would not read is refused, never ignored.
    if let (Some(p), false) = (&a.policy, kind.takes_policy()) {
        return Err(engine::tool::usage(format!(
            "--policy {p}: --executor {} batches by no policy; drop --policy",
            kind.name()
        )));
    }
    if a.layouts.is_some() && !matches!(kind, ExecutorKind::EdBatch | ExecutorKind::EdBatchNoLayout)
    {
        return Err(engine::tool::usage(format!(
            "--layouts is read by --executor edbatch and edbatch-nolayout only (got {}); drop it",
            a.executor
        )));
    }
    Ok(match kind {
        ExecutorKind::Reference => Executor::Reference,
        ExecutorKind::Cavs => Executor::Cavs,
        ExecutorKind::Dynet => Executor::Dynet(policy("agenda-updated")?),
        ExecutorKind::EdBatch | ExecutorKind::EdBatchNoLayout => {
            let Some(dir) = &a.layouts else {
                bail!(
                    "--executor {} needs --layouts DIR (write them with `{}`)",
                    a.executor,
                    layout_command(model, a.model.as_deref(), "DIR")
                );
            };
            if given.is_none() {
                bail!(
                    "--executor {} needs a policy (`--executor {}:P` or --policy P): a policy file (train one with `search train --trace T.json --out P.yaml`) or a heuristic name",
                    a.executor,
                    kind.name()
                );
            }
            let files = layouts(
                model,
                a.model.as_deref(),
                dir,
                kind == ExecutorKind::EdBatchNoLayout,
            )?;
            Executor::EdBatch(policy("typewise")?, compile_layouts(model, &files)?)
        }
        ExecutorKind::Policy => {
            if given.is_none() {
                bail!(
                    "--executor policy needs a policy (`--executor policy:P` or --policy P: a heuristic name, or a policy file: train one with `search train --trace T.json --out P.yaml`)"
                );
            }
            Executor::Policy(policy("typewise")?)
        }
        ExecutorKind::Vpps => {
            let mut opts = vpps::VppsOptions::default();
            opts.place.ctas_per_sm = a.ctas_per_sm;
            Executor::Vpps(policy("depth")?, opts)
        }
    })
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let device = engine::device::DeviceKind::parse(&a.device)?;
    // A missing library or GPU is reported as such (never a CPU fall back).
    engine::device::check_available(device)?;
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
    if trace.meta.level == Some(Level::Op) {
        bail!(
            "replay needs a cell-level trace (record without --level op); the dynet executor expands cells itself"
        );
    }
    let shape = footprint::RunShape {
        op_level: engine::sched::ExecutorName::parse(&a.executor)
            .is_ok_and(|e| e.kind == engine::sched::ExecutorKind::Dynet),
        check: !a.no_check,
        roofline: a.roofline,
    };
    source.check_memory(&input, shape, "the replay", budget.as_ref())?;
    let model = input.model(a.seed)?;
    let mut ex = executor(&a, &model)?;
    let cpu = cpu::CpuOptions {
        threads: a.threads,
        fuse: !a.no_fuse,
    };
    let sopts = SessionOptions { cpu };
    let mut session = Session::open_with(device, trace, &model, cells, &mut ex, &sopts)?;
    if a.roofline {
        match session.cpu_mut() {
            Some(c) => c.log_gemms(true),
            None => bail!(
                "--roofline measures the CPU GEMM; it does not apply to --device {}",
                a.device
            ),
        }
    }
    // Warm-up, then timed repeats (engine::measure).
    let opts = measure::MeasureOptions {
        warmup: true,
        repeats: a.repeat,
    };
    let expected = match &input.dir {
        Some(d) => d.expected()?,
        None => None,
    };
    if a.check && input.dir.is_some() && expected.is_none() {
        bail!(
            "--check: {} has no expected.safetensors to check against",
            input.source().unwrap_or_default()
        );
    }
    if a.train {
        return run_train(&a, &mut session, &opts, cpu, expected.as_ref());
    }
    let m = measure::measure_on(&mut session, &opts)?;
    let gemm_flops = match session.cpu() {
        Some(c) => c.gemm_flops(trace, &model),
        None => {
            cpu::CpuReplay::new(trace, &model, &Executor::Cavs, &cpu)?.gemm_flops(trace, &model)
        }
    };
    let roofline = if a.roofline {
        measure::roofline(&mut session, a.repeat)?
    } else {
        None
    };
    let max_rel_error = if a.no_check {
        None
    } else {
        let (_, reference) = session::replay(trace, &model, cells, &mut Executor::Reference)?;
        Some(compare::max_rel_error(trace, &m.store, &reference))
    };
    let expected = match &expected {
        Some(e) => Some(expected::check_outputs(trace, &model, &m.store, e)?),
        None => None,
    };
    if a.check {
        gate(&a.executor, expected.as_ref(), max_rel_error, None)?;
    }
    let (cpu_s, page_faults) = (m.cpu_s(), m.max_page_faults());
    let (time, total_s) = (m.time, m.total_s);
    let instances = trace.graph.num_instances();
    let device_s = m.device_s;
    let session_ref = &session;
    let report = Report {
        workload: trace.workload.clone(),
        threads: cpu.thread_count(),
        fused: cpu.fuse,
        executor: a.executor.clone(),
        policy: a.policy.clone(),
        device: a.device.clone(),
        nodes: trace.graph.len(),
        instances,
        hidden: model.hidden,
        repeat: a.repeat,
        counters: m.counters,
        time,
        total_s,
        instances_per_s: instances as f64 / total_s.max(1e-12),
        policy_misses: m.misses,
        max_rel_error,
        device_s,
        cpu_s,
        page_faults,
        gemm_flops,
        gemm_gflops: gemm_flops as f64 / total_s.max(1e-12) / 1e9,
        roofline,
        vpps: vpps_report(session_ref),
        expected,
    };
    if a.json {
        return crate::cli::print_json(&report);
    }
    let c = &report.counters;
    engine::outln!(
        "{} {} ({} nodes, {} instances, h={}): {} batches, {} kernels, {:.1} kB gathered, {:.1} kB scattered",
        report.workload,
        report.executor,
        report.nodes,
        report.instances,
        report.hidden,
        c.batches,
        c.kernels,
        c.bytes_gathered as f64 / 1e3,
        c.bytes_scattered as f64 / 1e3
    );
    engine::outln!(
        "  time {:.3} ms (construction {:.3}, scheduling {:.3}, execution {:.3}; {:.3} of the scheduling ran while execution waited); {:.0} instances/s; misses {}; max rel error {}",
        report.total_s * 1e3,
        report.time.construction * 1e3,
        report.time.scheduling * 1e3,
        report.time.execution * 1e3,
        report.time.overlapped * 1e3,
        report.instances_per_s,
        report.policy_misses,
        report
            .max_rel_error
            .map_or("-".to_string(), |e| format!("{e:.2e}"))
    );
    engine::outln!(
        "  {} thread(s){}; cpu {}; page faults {}; GEMM {:.2} GFLOP at {:.1} GFLOP/s",
        report.threads,
        if report.fused { "" } else { ", unfused" },
        report
            .cpu_s
            .map_or("-".to_string(), |s| format!("{:.3} ms", s * 1e3)),
        report
            .page_faults
            .map_or("-".to_string(), |f| f.to_string()),
        report.gemm_flops as f64 / 1e9,
        report.gemm_gflops
    );
    if let Some(r) = &report.roofline {
        engine::outln!(
            "  roofline ({} rounds, each a run and its GEMMs alone): the run's {} GEMM shapes alone take {:.3} ms ({:.1} GFLOP/s, best shape {:.1}): the run is at {:.0} % of its GEMM peak (CPU time: {})",
            r.rounds,
            r.shapes,
            r.gemm_only_s * 1e3,
            r.peak_gflops,
            r.best_shape_gflops,
            r.fraction_of_peak * 100.0,
            r.fraction_of_peak_cpu
                .map_or("-".to_string(), |f| format!("{:.0} %", f * 100.0))
        );
    }
    if let Some(v) = &report.vpps {
        print_vpps(v);
    }
    if let Some(e) = &report.expected {
        print_expected(e);
    }
    Ok(())
}

/// One line on a run against the recording's own numbers.
fn print_expected(e: &expected::ExpectedCheck) {
    engine::outln!(
        "  against the recording (expected.safetensors): outputs {:.2e}, loss {} (max relative error){}",
        e.max_rel_error,
        e.loss_rel_error
            .map_or("-".to_string(), |l| format!("{l:.2e}")),
        if e.passed { "" } else { ": DIFFERS" }
    );
}

/// `--check`: an error naming where the run differs by more than the
/// tolerance (from the recording with a model folder, else from the
/// reference executor).
fn gate(
    executor: &str,
    expected: Option<&expected::ExpectedCheck>,
    reference: Option<f64>,
    gradients: Option<&(f64, String)>,
) -> anyhow::Result<()> {
    let tol = expected::TOLERANCE;
    // An infinite error is a NaN or an infinity on one side (`rel_error`).
    let by = |e: f64, what: &str| {
        if e.is_finite() {
            format!("{what} by {e:.2e} (> {tol:.0e})")
        } else {
            format!(
                "holds a NaN or an infinity (in the run or in the recording): {what} by any measure"
            )
        }
    };
    if let Some(e) = expected {
        if let Some(w) = e.worst.as_ref().filter(|w| w.rel_error > tol) {
            bail!(
                "--check: executor {executor}: node {} (role {}, cell {}{}) output {} {}: {}",
                w.node,
                w.role,
                w.cell,
                w.instance
                    .map_or(String::new(), |i| format!(", sample {i}")),
                w.output,
                by(w.rel_error, "differs from the recording"),
                w.diagnosis
            );
        }
        if let (Some(l), Some(ours), Some(theirs)) = (e.loss_rel_error, e.loss, e.expected_loss)
            && l > tol
        {
            bail!(
                "--check: executor {executor}: the loss {ours:.6} {} ({theirs:.6})",
                by(l, "differs from the recording's")
            );
        }
    } else if let Some(r) = reference.filter(|r| *r > tol) {
        bail!(
            "--check: executor {executor}: the outputs {}",
            by(r, "differ from the reference executor's")
        );
    }
    if let Some((g, name)) = gradients.filter(|g| g.0 > tol) {
        bail!(
            "--check: executor {executor}: the gradient of parameter `{name}` {}",
            by(*g, "differs from the recording's")
        );
    }
    Ok(())
}

fn print_vpps(v: &VppsReport) {
    engine::outln!(
        "  vpps on {}: {} virtual processors ({} per SM), weights {:.1} KB in registers, {:.1} KB in shared memory, {:.1} KB in DRAM{}; kernel {} registers/thread, {} B local (spills)/thread, compiled in {:.1} ms{}",
        v.target,
        v.vps,
        v.ctas_per_sm,
        v.summary.weight_bytes_registers as f64 / 1024.0,
        v.summary.weight_bytes_shared as f64 / 1024.0,
        v.summary.weight_bytes_dram as f64 / 1024.0,
        if v.summary.fits_on_chip {
            ""
        } else {
            " (does not fit on chip)"
        },
        v.kernel.regs_per_thread,
        v.kernel.local_bytes_per_thread,
        v.kernel.compile_ms,
        if v.kernel.cached { " (cached)" } else { "" }
    );
}

/// `--backward-policy NAME`: `None` for `reverse`, else the policy (a
/// backward-pass FSM or a heuristic; a forward FSM is refused).
pub(super) fn backward_policy(name: &str) -> anyhow::Result<Option<PolicyArg>> {
    if name == "reverse" {
        return Ok(None);
    }
    let arg = PolicyArg::parse(name).with_context(|| format!("--backward-policy {name}"))?;
    if arg.trained_pass() == "forward" {
        bail!(
            "--backward-policy {name}: a forward-pass policy; train one for the backward pass with `search train --pass backward`"
        );
    }
    Ok(Some(arg))
}

/// `engine replay --train --json` output.
#[derive(Serialize)]
struct TrainReport {
    workload: String,
    executor: String,
    policy: Option<String>,
    backward_policy: String,
    threads: usize,
    fused: bool,
    lazy: bool,
    nodes: usize,
    instances: usize,
    hidden: usize,
    repeat: usize,
    loss: f64,
    forward: Counters,
    backward: Counters,
    /// Lower bound of the reversed graph (ED-Batch A.3).
    backward_lower_bound: u64,
    forward_time: TimeSplit,
    backward_time: TimeSplit,
    total_s: f64,
    cpu_s: Option<f64>,
    /// Training instances per second (forward + backward).
    instances_per_s: f64,
    kept_bytes: u64,
    /// Median GPU seconds per step between CUDA events (GPU executors).
    device_s: Option<f64>,
    /// The step against the reference's on the CPU (loss, every node's
    /// outputs, every parameter gradient); `null` with --no-check.
    check: Option<compare::TrainCheck>,
    /// With a model folder: the step against the recording's outputs and
    /// loss, and `expected_gradients`: the largest relative error of a
    /// parameter gradient against the recording's, and that parameter.
    expected: Option<expected::ExpectedCheck>,
    expected_gradients: Option<(f64, String)>,
    /// As `engine replay --json`'s `vpps`.
    vpps: Option<VppsReport>,
}

fn run_train(
    a: &Args,
    session: &mut Session<'_>,
    opts: &measure::MeasureOptions,
    cpu: cpu::CpuOptions,
    expected: Option<&engine::modeldir::Tensors>,
) -> anyhow::Result<()> {
    let (trace, model) = (session.trace(), session.model());
    let name = a.backward_policy.clone();
    let mut back = match backward_policy(&name)? {
        Some(arg) => Some(arg.instantiate()?),
        None => None,
    };
    let train = TrainOptions { lazy: !a.eager };
    let back_ref: Option<&mut dyn engine::sched::BatchPolicy> = match back.as_mut() {
        Some(b) => Some(b.as_mut()),
        None => None,
    };
    let m = measure::measure_train(session, back_ref, &train, opts)?;
    let check = if a.no_check {
        None
    } else {
        Some(compare::check_train(session, m.loss)?)
    };
    let (expected, expected_gradients) = match expected {
        Some(e) => {
            let out = expected::check_outputs(trace, model, session.outputs(), e)?;
            let grads = match session.gradients() {
                Some(g) => expected::check_gradients(model, &g, e)?,
                None => None,
            };
            (Some(out), grads)
        }
        None => (None, None),
    };
    if a.check {
        gate(
            &a.executor,
            expected.as_ref(),
            check.as_ref().map(|c| c.max_rel_error_outputs),
            expected_gradients.as_ref(),
        )?;
    }
    let instances = trace.graph.num_instances();
    let report = TrainReport {
        workload: trace.workload.clone(),
        executor: a.executor.clone(),
        policy: a.policy.clone(),
        backward_policy: name,
        threads: cpu.thread_count(),
        fused: cpu.fuse,
        lazy: train.lazy,
        nodes: trace.graph.len(),
        instances,
        hidden: model.hidden,
        repeat: a.repeat,
        loss: m.loss,
        forward: m.forward,
        backward: m.backward,
        backward_lower_bound: engine::graph::lower_bound(&trace.graph.reversed()).total,
        forward_time: m.forward_time,
        backward_time: m.backward_time,
        total_s: m.total_s,
        cpu_s: (!m.cpu_samples.is_empty()).then(|| measure::median(&m.cpu_samples)),
        instances_per_s: instances as f64 / m.total_s.max(1e-12),
        kept_bytes: m.kept_bytes,
        device_s: m.device_s,
        check,
        vpps: vpps_report(session),
        expected,
        expected_gradients,
    };
    if a.json {
        return crate::cli::print_json(&report);
    }
    engine::outln!(
        "{} {} training step ({} nodes, {} instances, h={}): loss {:.4}; forward {} batches, backward {} batches (reversed-graph lower bound {})",
        report.workload,
        report.executor,
        report.nodes,
        report.instances,
        report.hidden,
        report.loss,
        report.forward.batches,
        report.backward.batches,
        report.backward_lower_bound
    );
    engine::outln!(
        "  time {:.3} ms (forward {:.3}, backward {:.3}); {:.0} training instances/s; {} thread(s){}{}; kept {:.1} MB",
        report.total_s * 1e3,
        report.forward_time.total() * 1e3,
        report.backward_time.total() * 1e3,
        report.instances_per_s,
        report.threads,
        if report.fused { "" } else { ", unfused" },
        if report.lazy {
            ", lazy weight gradients"
        } else {
            ", eager weight gradients"
        },
        report.kept_bytes as f64 / 1e6
    );
    if let Some(d) = report.device_s {
        engine::outln!("  GPU time {:.3} ms per step (CUDA events)", d * 1e3);
    }
    if let Some(c) = &report.check {
        engine::outln!(
            "  against the reference: loss {:.2e}, outputs {:.2e}, gradients {:.2e} (max relative error)",
            c.loss_rel_error,
            c.max_rel_error_outputs,
            c.max_rel_error_gradients
        );
    }
    if let Some(e) = &report.expected {
        print_expected(e);
    }
    if let Some((g, name)) = &report.expected_gradients {
        engine::outln!(
            "  gradients against the recording: {g:.2e} (max relative error, at `{name}`)"
        );
    }
    if let Some(v) = &report.vpps {
        print_vpps(v);
    }
    Ok(())
}
