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
