//! What the batchlab command-line tools (`engine`, `search`, `planner`) share:
//! JSON output, error reporting and exit codes, and the ranges of numeric
//! flags, so every binary behaves alike.

use std::process::ExitCode;

/// Prints `value` as pretty JSON on stdout (a closed pipe ends quietly).
pub fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    crate::outln!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// The error and its causes joined by ": ", skipping a cause whose text the
/// message before it already contains (library errors often embed their source).
pub fn error_chain(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !out.contains(&text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
    }
    out
}

/// The ranges of the tools' numeric flags: what a machine can do, not a
/// number that allocates gigabytes or loops for hours before failing. A
/// flag's `--help` states its range as `[range: LOW to HIGH]` (`above LOW`
/// for an open end); [`range_problems`] checks that every numeric flag of
/// a command does, and that its parser enforces exactly that.
pub mod ranges {
    /// `--repeat`: timed repetitions.
    pub const REPEAT: (usize, usize) = (1, 100_000);
    /// `--threads`: worker threads.
    pub const THREADS: (usize, usize) = (1, 4096);
    /// `--rpw`: VPPS rows per warp chunk.
    pub const RPW: (usize, usize) = (1, 1024);
    /// `--batch`: samples in a mini-batch (or instances in a cell batch).
    pub const BATCH: (usize, usize) = (1, 1_000_000);
    /// `--hidden`: the hidden size of every cell.
    pub const HIDDEN: (usize, usize) = (1, 65_536);
    /// `--ctas-per-sm`: CTAs per SM of the persistent kernel.
    pub const CTAS_PER_SM: (u32, u32) = (1, 2);
    /// `--epochs`: passes over the training data.
    pub const EPOCHS: (u32, u32) = (1, 100_000);
    /// `--max-batches`: mini-batches per epoch.
    pub const MAX_BATCHES: (usize, usize) = (1, 100_000_000);
    /// `--episodes`: Q-learning episodes.
    pub const EPISODES: (u32, u32) = (1, 100_000_000);
    /// `--n-step`: the N of N-step Q-learning.
    pub const N_STEP: (u32, u32) = (1, 10_000);
    /// `--rollout-every`: episodes between greedy rollouts.
    pub const ROLLOUT_EVERY: (u32, u32) = (1, 100_000_000);
    /// `--nodes` of a generated graph.
    pub const NODES: (usize, usize) = (1, 10_000_000);
    /// `--types` of a generated graph.
    pub const TYPES: (usize, usize) = (1, 1000);
    /// `--window` of a generated graph.
    pub const WINDOW: (usize, usize) = (1, 1_000_000);
    /// `--max-args` of a generated graph's nodes.
    pub const MAX_ARGS: (usize, usize) = (1, 64);
    /// `--instances` of a generated graph.
    pub const INSTANCES: (usize, usize) = (1, 10_000_000);
    /// `--max-width` of the beam search.
    pub const BEAM_WIDTH: (usize, usize) = (1, 1 << 20);
    /// `--memory-mib` of the beam search.
    pub const MEMORY_MIB: (usize, usize) = (1, 1 << 24);
    /// `--cap`: minimum-batch schedules the planner enumerates per cell.
    pub const SCHEDULE_CAP: (usize, usize) = (1, 1_000_000);
    /// `--rounds` of a measurement.
    pub const ROUNDS: (usize, usize) = (1, 1000);
    /// `--budget` of the exact search: node expansions.
    pub const EXPANSIONS: (u64, u64) = (1, 1_000_000_000_000);
    /// `--timeout`: seconds one measuring process may run.
    pub const TIMEOUT_S: (u64, u64) = (1, 604_800);
    /// A time budget, in seconds (0 stops at once with the best found).
    pub const BUDGET_S: (f64, f64) = (0.0, 604_800.0);
}

/// A whole-number flag's value within `[min, max]`: the parser for clap's
/// `value_parser`, with an error naming the range.
pub fn int_in<T>(
    (min, max): (T, T),
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy + Send + Sync + 'static,
{
    move |s: &str| {
        let v: T = s
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not a whole number from {min} to {max}"))?;
        if v < min || v > max {
            return Err(format!("{v} is outside {min} to {max}"));
        }
        Ok(v)
    }
}

/// The test every tool runs on its whole command (`Cli`, a clap `Parser`):
/// every numeric flag states its range in `--help` and its parser enforces
/// exactly that ([`range_problems`]). Regression: `--repeat 1000000000`
/// allocated tens of GB, `--threads 4294967296` aborted and `--rpw
/// 4294967295` hung.
#[macro_export]
macro_rules! flag_range_test {
    ($cli:ty) => {
        #[test]
        fn every_numeric_flag_states_and_enforces_its_range() {
            use clap::CommandFactory;
            let problems = $crate::tool::range_problems(&<$cli>::command());
            assert!(problems.is_empty(), "{}", problems.join("\n"));
        }
    };
}

/// A real-valued flag's value: finite, above `min` (or equal to it where
/// `min_open` is false) and at most `max`.
pub fn real_in(
    min: f64,
    min_open: bool,
    max: f64,
) -> impl Fn(&str) -> Result<f64, String> + Clone + Send + Sync + 'static {
    move |s: &str| {
        let v: f64 = s
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not a number"))?;
        let low = if min_open { v > min } else { v >= min };
        if !v.is_finite() || !low || v > max {
            let from = if min_open {
                format!("above {min}")
            } else {
                min.to_string()
            };
            return Err(format!("{v} is outside {from} to {max}"));
        }
        Ok(v)
    }
}

/// A duration: a number with unit `ms`, `s`, `m` or `h`, or a bare number
/// of seconds, within `range` (seconds).
pub fn duration_in(
    (min, max): (f64, f64),
) -> impl Fn(&str) -> Result<std::time::Duration, String> + Clone + Send + Sync + 'static {
    move |s: &str| {
        let t = s.trim();
        let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
            (n, 1e-3)
        } else if let Some(n) = t.strip_suffix('s') {
            (n, 1.0)
        } else if let Some(n) = t.strip_suffix('m') {
            (n, 60.0)
        } else if let Some(n) = t.strip_suffix('h') {
            (n, 3600.0)
        } else {
            (t, 1.0)
        };
        let v: f64 = num
            .trim()
            .parse()
            .map_err(|_| format!("invalid duration {s:?}: expected e.g. 30s, 500ms, 2m"))?;
        let secs = v * scale;
        if !(secs.is_finite() && secs >= min && secs <= max) {
            return Err(format!(
                "invalid duration {s:?}: outside {min}s to {}h",
                max / 3600.0
            ));
        }
        Ok(std::time::Duration::from_secs_f64(secs))
    }
}

/// Every numeric flag of `cmd` and its subcommands whose `--help` does not
/// state a `[range: LOW to HIGH]`, or whose parser does not enforce it: it
/// must take LOW, HIGH and its default, and refuse just below LOW (LOW
/// itself for `above LOW`), just above HIGH, and, for reals, NaN and
/// infinity. `any` (seeds: any 64-bit number) is stated, not probed. The
/// tools' tests call it on their whole command.
pub fn range_problems(cmd: &clap::Command) -> Vec<String> {
    let mut out = Vec::new();
    ranges_of(cmd, cmd.get_name(), &mut out);
    out
}

/// A range's end as stated: a number, for sizes with a suffix `k`, `M`,
/// `G` or `T` (powers of 1000, as `--max-memory` takes them).
fn stated_number(s: &str) -> Option<f64> {
    let (num, scale) = match s.char_indices().last() {
        Some((i, 'k')) => (&s[..i], 1e3),
        Some((i, 'M')) => (&s[..i], 1e6),
        Some((i, 'G')) => (&s[..i], 1e9),
        Some((i, 'T')) => (&s[..i], 1e12),
        _ => (s, 1.0),
    };
    num.parse::<f64>().ok().map(|v| v * scale)
}

fn ranges_of(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
    use std::any::TypeId;
    for arg in cmd.get_arguments() {
        let t = arg.get_value_parser().type_id();
        let int = [
            TypeId::of::<u8>(),
            TypeId::of::<u16>(),
            TypeId::of::<u32>(),
            TypeId::of::<u64>(),
            TypeId::of::<usize>(),
            TypeId::of::<i32>(),
            TypeId::of::<i64>(),
        ]
        .into_iter()
        .any(|x| t == x);
        let real = t == TypeId::of::<f64>() || t == TypeId::of::<f32>();
        let duration = t == TypeId::of::<std::time::Duration>();
        if !(int || real || duration) {
            continue;
        }
        let name = format!(
            "{path} --{}",
            arg.get_long().unwrap_or(arg.get_id().as_str())
        );
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default();
        let Some(stated) = help
            .split("[range: ")
            .nth(1)
            .and_then(|r| r.split(']').next())
        else {
            out.push(format!("{name}: its help states no [range: LOW to HIGH]"));
            continue;
        };
        let probe = |v: &str| {
            let a = clap::Arg::new("x")
                .long("x")
                .allow_hyphen_values(true)
                .action(clap::ArgAction::Set)
                .value_parser(arg.get_value_parser().clone());
            clap::Command::new("probe")
                .arg(a)
                .try_get_matches_from(["probe", "--x", v])
                .is_ok()
        };
        for d in arg.get_default_values() {
            let d = d.to_string_lossy();
            if !probe(&d) {
                out.push(format!("{name}: its default {d} is refused"));
            }
        }
        if stated.starts_with("any") {
            continue;
        }
        let Some((lo, hi)) = stated.split_once(" to ") else {
            out.push(format!("{name}: [range: {stated}] is not LOW to HIGH"));
            continue;
        };
        let (open, lo) = match lo.strip_prefix("above ") {
            Some(l) => (true, l),
            None => (false, lo),
        };
        let mut expect = |v: String, ok: bool| {
            if probe(&v) != ok {
                out.push(format!(
                    "{name}: [range: {stated}] but {v} is {}",
                    if ok { "refused" } else { "taken" }
                ));
            }
        };
        if duration {
            expect(lo.to_string(), !open);
            expect(hi.to_string(), true);
            expect("-1s".into(), false);
            continue;
        }
        let (Some(l), Some(h)) = (stated_number(lo), stated_number(hi)) else {
            out.push(format!(
                "{name}: [range: {stated}]: LOW and HIGH are not numbers"
            ));
            continue;
        };
        if int {
            let (l, h) = (l as i128, h as i128);
            expect(l.to_string(), !open);
            expect(h.to_string(), true);
            expect((l - 1).to_string(), false);
            expect((h + 1).to_string(), false);
        } else {
            let step = |x: f64| x.abs().max(1.0) * 1e-6;
            expect(lo.to_string(), !open);
            expect((l + step(l)).to_string(), true);
            expect((l - step(l)).to_string(), false);
            expect(hi.to_string(), true);
            expect((h + step(h)).to_string(), false);
            expect("NaN".into(), false);
            expect("inf".into(), false);
        }
    }
    for sub in cmd.get_subcommands() {
        ranges_of(sub, &format!("{path} {}", sub.get_name()), out);
    }
}

/// Turns a command's result into the process exit: success, or `error: …` on
/// stderr and status 1.
pub fn exit(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", error_chain(&e));
            if e.downcast_ref::<UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// Flags that do not go together (one the command would not read): a usage
/// error, exit status 2 as clap's own, raised where clap cannot see the
/// rule (a flag with a default, a rule on a flag's value).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// A [`UsageError`] as an `anyhow::Error`.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    UsageError(message.into()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_chain_skips_causes_already_in_the_message() {
        let io = std::io::Error::other("disk full");
        let e = anyhow::Error::new(io).context("t.json: disk full");
        assert_eq!(error_chain(&e), "t.json: disk full");
        let e = anyhow::anyhow!("inner").context("outer");
        assert_eq!(error_chain(&e), "outer: inner");
    }
}
