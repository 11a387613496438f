//! What the batchlab command-line tools (`engine`, `search`, `planner`) share:
//! JSON output, error reporting and exit codes, so every binary behaves alike.

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

/// The ranges of the tools' count flags: what a machine can do, not a
/// number that allocates gigabytes or loops for hours before failing.
pub mod ranges {
    /// `--repeat`: timed repetitions.
    pub const REPEAT: (usize, usize) = (1, 100_000);
    /// `--threads`: worker threads.
    pub const THREADS: (usize, usize) = (1, 4096);
    /// `--rpw`: VPPS rows per warp chunk.
    pub const RPW: (usize, usize) = (1, 1024);
}

/// A count flag's value within `[min, max]` (clap `value_parser`): an error
/// naming the range, never a value the command cannot run.
pub fn count_in(s: &str, (min, max): (usize, usize)) -> Result<usize, String> {
    let v: usize = s
        .parse()
        .map_err(|_| format!("{s:?} is not a count ({min} to {max})"))?;
    if !(min..=max).contains(&v) {
        return Err(format!("{v} is outside {min} to {max}"));
    }
    Ok(v)
}

/// Turns a command's result into the process exit: success, or `error: …` on
/// stderr and status 1.
pub fn exit(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", error_chain(&e));
            ExitCode::FAILURE
        }
    }
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
