//! Command-line interface. Each subcommand lives in its own module; every one
//! prints a human table by default and a documented JSON object with `--json`
//! (fields in `docs/cli.md`).

mod cells;
mod devices;
mod export_model;
mod fixtures;
mod inspect;
mod memory;
mod record;
mod replay;
mod schedule;
mod script;
mod train;
mod workloads;

use clap::{Parser, Subcommand};

/// batchlab engine: record operator-typed dataflow traces of dynamic neural
/// networks on real data, and inspect them.
#[derive(Debug, Parser)]
#[command(name = "engine", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Record the dataflow graph of one mini-batch of a workload into a trace file.
    Record(record::Args),
    /// Summarise a trace: nodes, edges, types with counts, depth, lower bound.
    Inspect(inspect::Args),
    /// List the workload zoo with its cells and data.
    Workloads(workloads::Args),
    /// List the built-in cells, or show one instantiated at a hidden size.
    Cells(cells::Args),
    /// Execute a trace with real kernels (reference, dynet, cavs, policy, edbatch, edbatch-nolayout, vpps) and measure it, forward or (--train) forward and backward.
    Replay(replay::Args),
    /// The batches a policy picks for a trace, as a schedule file; or a service scheduling each trace sent to it (batchlab_torch.run).
    Schedule(schedule::Args),
    /// Show the VPPS placement and per-batch script of a trace (docs/vpps.md); optionally emulate it.
    Script(script::Args),
    /// Train a workload's model on its real data: forward and backward by any executor, SGD or Adam, dev accuracy per epoch, checkpoints.
    Train(train::Args),
    /// Write the seeded model and bound program of a trace for another framework (docs/model-export.md).
    ExportModel(export_model::Args),
    /// List the devices (CPU, CUDA) and whether they can be used, and why not.
    Devices(devices::Args),
    /// Convert the raw ED-Batch data sets into the fixtures under data/ (shapes and integer annotations).
    Fixtures(fixtures::Args),
}

/// Runs the parsed command.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Record(a) => record::run(a),
        Command::Inspect(a) => inspect::run(a),
        Command::Workloads(a) => workloads::run(a),
        Command::Cells(a) => cells::run(a),
        Command::Replay(a) => replay::run(a),
        Command::Schedule(a) => schedule::run(a),
        Command::Script(a) => script::run(a),
        Command::Train(a) => train::run(a),
        Command::ExportModel(a) => export_model::run(a),
        Command::Devices(a) => devices::run(a),
        Command::Fixtures(a) => fixtures::run(a),
    }
}

/// Prints `value` as pretty JSON on stdout.
pub(crate) fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    engine::tool::print_json(value)
}

/// `--max-memory`, one definition for every command that estimates what
/// it will allocate before allocating it (`record`, `replay`, `script`,
/// `export-model`).
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct MaxMemory {
    /// Memory the command may use (e.g. 4G, 512MiB) [default: what this
    /// machine has available]; a run estimated larger is refused, with the
    /// estimate, before anything is allocated. [range: 1 to 1000T]
    #[arg(long = "max-memory", value_name = "SIZE", value_parser = engine::memory::parse_size)]
    pub max_memory: Option<u64>,
}

impl MaxMemory {
    /// The budget: `--max-memory`, else what the machine has.
    pub(crate) fn budget(&self) -> Option<engine::memory::Budget> {
        engine::memory::Budget::detect(self.max_memory)
    }
}

/// `--trace T`, `--model DIR` (a model folder: `docs/torch.md`) or
/// `--workload W` recorded on the fly at cell level with `--batch`,
/// `--hidden` and `--seed` (refused beyond `budget`, as `engine record`
/// does): the input of `replay`, `script` and `export-model`.
pub(crate) struct TraceInput<'a> {
    pub trace: Option<&'a std::path::Path>,
    pub model: Option<&'a std::path::Path>,
    pub workload: Option<&'a str>,
    pub batch: usize,
    pub hidden: usize,
    pub seed: u64,
}

/// A loaded input: the trace, the cells that define its workload, and the
/// model folder it came from (whose weights replace the seeded ones).
pub(crate) struct Loaded {
    pub trace: engine::trace::Trace,
    pub cells: engine::cells::CellLibrary,
    pub dir: Option<engine::modeldir::ModelDir>,
}

impl Loaded {
    /// The replay model: cells and seeded weights, or the folder's weights.
    pub(crate) fn model(&self, seed: u64) -> anyhow::Result<engine::model::Model> {
        use anyhow::Context;
        let mut model =
            engine::model::model(&self.trace, &self.cells, seed).context("building the model")?;
        if let Some(d) = &self.dir {
            model.load_weights(d.weights())?;
        }
        Ok(model)
    }

    /// What the input is, for reports: the trace file or the folder.
    pub(crate) fn source(&self) -> Option<String> {
        self.dir.as_ref().map(|d| d.path.display().to_string())
    }
}

impl<'a> TraceInput<'a> {
    /// From the flags (`--trace`, `--model`, `--workload`, `--batch`,
    /// `--hidden`, `--seed`); `size` is `(--batch, --hidden)` as given,
    /// `defaults` the command's. The one rule for every command that reads
    /// these: `--batch` and `--hidden` size a workload recorded on the fly,
    /// so with a trace or a folder (whose sizes are their own) they are
    /// refused, never ignored.
    pub(crate) fn of(
        trace: &'a Option<std::path::PathBuf>,
        model: &'a Option<std::path::PathBuf>,
        workload: &'a Option<String>,
        size: (Option<usize>, Option<usize>),
        defaults: (usize, usize),
        seed: u64,
    ) -> anyhow::Result<Self> {
        if workload.is_none() {
            let input = match (trace, model) {
                (Some(_), _) => "--trace",
                _ => "--model",
            };
            for (flag, v) in [("--batch", size.0), ("--hidden", size.1)] {
                if let Some(v) = v {
                    return Err(engine::tool::usage(format!(
                        "{flag} {v}: sizes a workload recorded on the fly (--workload); {input} brings its own sizes: drop {flag}"
                    )));
                }
            }
        }
        Ok(TraceInput {
            trace: trace.as_deref(),
            model: model.as_deref(),
            workload: workload.as_deref(),
            batch: size.0.unwrap_or(defaults.0),
            hidden: size.1.unwrap_or(defaults.1),
            seed,
        })
    }

    /// Refuses a command whose session (`shape`: the weights, their packed
    /// copies, every node's outputs, ...) would not fit in `budget`, before
    /// anything is allocated, naming what makes it large: `--hidden` where
    /// the weights dominate, else `--batch`; or the trace file or model
    /// folder, whose size is fixed. `what` is the command's work ("the
    /// replay").
    pub(crate) fn check_memory(
        &self,
        loaded: &Loaded,
        shape: engine::footprint::RunShape,
        what: &str,
        budget: Option<&engine::memory::Budget>,
    ) -> anyhow::Result<()> {
        let trace = &loaded.trace;
        let est = engine::footprint::estimate(trace, &loaded.cells, shape)?;
        let part = |name: &str| est.parts.iter().find(|p| p.0 == name).map_or(0, |p| p.1);
        // Weights grow with hidden², everything else with the nodes × hidden.
        let by_weights = 2 * (part("weights") + part("packed weights")) >= est.total();
        let hidden = trace.meta.hidden.map_or(self.hidden, |h| h as usize);
        let nodes = trace.graph.len();
        let flag = match (self.trace, self.model, by_weights) {
            (Some(p), _, _) => format!("--trace {} (hidden {hidden}, {nodes} nodes)", p.display()),
            (None, Some(d), _) => {
                format!("--model {} (hidden {hidden}, {nodes} nodes)", d.display())
            }
            (None, None, true) => format!("--hidden {hidden}"),
            (None, None, false) => format!("--batch {}", self.batch),
        };
        engine::memory::check(flag, what, est, budget)?;
        Ok(())
    }

    /// Reads the trace (or folder), or records the workload.
    pub(crate) fn open(&self, budget: Option<&engine::memory::Budget>) -> anyhow::Result<Loaded> {
        if let Some(dir) = self.model {
            let d = engine::modeldir::ModelDir::open(dir)?;
            return Ok(Loaded {
                trace: d.trace.clone(),
                cells: d.cells.clone(),
                dir: Some(d),
            });
        }
        let cells = engine::cells::CellLibrary::builtin()?;
        let trace = self.load(&cells, budget)?;
        Ok(Loaded {
            trace,
            cells,
            dir: None,
        })
    }

    pub(crate) fn load(
        &self,
        cells: &engine::cells::CellLibrary,
        budget: Option<&engine::memory::Budget>,
    ) -> anyhow::Result<engine::trace::Trace> {
        use engine::workloads::{self, DataChoice, RecordOptions};
        Ok(match (self.trace, self.workload) {
            (Some(p), _) => read_trace(p)?,
            (None, Some(w)) => {
                let Some(spec) = workloads::workload(w) else {
                    anyhow::bail!("unknown workload {w:?} (see `engine workloads`)");
                };
                workloads::record_within(
                    &RecordOptions {
                        workload: spec,
                        data: DataChoice::Default,
                        batch: self.batch,
                        hidden: self.hidden,
                        level: engine::trace::Level::Cell,
                        seed: self.seed,
                    },
                    cells,
                    budget,
                )
                .map_err(flag_error)?
            }
            (None, None) => anyhow::bail!("give --trace T.json, --model DIR or --workload W"),
        })
    }
}

/// Reads a trace; a model folder given where a trace file goes is named
/// as such, with the flag that takes it.
pub(crate) fn read_trace(p: &std::path::Path) -> anyhow::Result<engine::trace::Trace> {
    if engine::modeldir::ModelDir::is_model_dir(p) {
        anyhow::bail!(
            "{}: a model folder, not a trace file; give it as --model {} (or its trace, {}/trace.json)",
            p.display(),
            p.display(),
            p.display()
        );
    }
    Ok(engine::trace::Trace::read(p)?)
}

/// A recording error as the tools report it: a zero size names its flag
/// (`--batch must be at least 1`), everything else is unchanged.
pub(crate) fn flag_error(e: engine::workloads::RecordError) -> anyhow::Error {
    match e {
        engine::workloads::RecordError::Zero { what } => {
            anyhow::anyhow!("--{what} must be at least 1")
        }
        e => e.into(),
    }
}

/// What a command reading `--model DIR` or `--trace T` must not overwrite
/// (with [`engine::io::distinct_outputs`]): the folder's recording, or the
/// trace and, when it lies in a model folder, that folder's recording.
pub(crate) fn source_inputs(
    model: &Option<std::path::PathBuf>,
    trace: &Option<std::path::PathBuf>,
) -> Vec<(&'static str, std::path::PathBuf)> {
    let folder = model
        .iter()
        .flat_map(|d| engine::modeldir::ModelDir::own_files(d))
        .map(|p| ("--model", p));
    let trace = trace
        .iter()
        .flat_map(|t| engine::modeldir::ModelDir::with_its_folder(t))
        .map(|p| ("--trace", p));
    folder.chain(trace).collect()
}

/// `--policy VALUE` as an input: the file, when VALUE names one (a policy
/// from `search train`); nothing for a heuristic's name.
pub(crate) fn policy_input(
    flag: &'static str,
    value: Option<&str>,
) -> Option<(&'static str, std::path::PathBuf)> {
    let path = std::path::PathBuf::from(value?);
    path.is_file().then_some((flag, path))
}

/// Borrowed `(flag, path)` pairs of `owned`.
pub(crate) fn pairs<'a>(
    owned: &'a [(&'static str, std::path::PathBuf)],
) -> Vec<(&'a str, &'a std::path::Path)> {
    owned.iter().map(|(f, p)| (*f, p.as_path())).collect()
}

#[cfg(test)]
engine::flag_range_test!(Cli);

/// Regression (issue 45, class 10): `engine --help` described `replay`
/// with four executors of seven.
#[cfg(test)]
#[test]
fn help_of_replay_names_every_executor() {
    use clap::CommandFactory;
    let cmd = Cli::command();
    let replay = cmd
        .get_subcommands()
        .find(|c| c.get_name() == "replay")
        .expect("a replay subcommand");
    let about = replay
        .get_about()
        .map(|a| a.to_string())
        .unwrap_or_default();
    for kind in engine::sched::ExecutorKind::ALL {
        assert!(
            about.contains(kind.name()),
            "{} missing from: {about}",
            kind.name()
        );
    }
}
