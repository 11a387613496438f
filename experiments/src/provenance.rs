//! Where and from what a row was measured: git revision, machine, time.

use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// The machine a sweep runs on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machine {
    /// Host name (`/proc/sys/kernel/hostname`, else `unknown`).
    pub hostname: String,
    /// CPU model (`model name` in `/proc/cpuinfo`, else `unknown`).
    pub cpu: String,
    /// Logical cores available to the process.
    pub cores: usize,
}

impl Machine {
    /// Probes this machine.
    pub fn probe() -> Machine {
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .or_else(|_| std::fs::read_to_string("/etc/hostname"))
            .map(|s| s.trim().to_string())
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "unknown".into());
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|text| {
                text.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        Machine {
            hostname,
            cpu,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

/// The git revision of the source tree at `dir`: `git rev-parse --short
/// HEAD`, with `-dirty` appended when `git status --porcelain` lists
/// anything; `unknown` when git or the repository is missing.
pub fn git_revision(dir: &Path) -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match git(&["rev-parse", "--short", "HEAD"]) {
        Some(rev) if !rev.is_empty() => {
            let dirty = git(&["status", "--porcelain"]).is_some_and(|s| !s.is_empty());
            if dirty { format!("{rev}-dirty") } else { rev }
        }
        _ => "unknown".into(),
    }
}

/// The revision of the workspace this crate was built from, recorded at build
/// time (`build.rs`), so a binary carried to another machine still names its
/// own source; `-dirty` when the tree had uncommitted changes.
pub fn workspace_revision() -> String {
    env!("BATCHLAB_BUILD_REVISION").to_string()
}

/// Seconds since the UNIX epoch.
pub fn timestamp() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
