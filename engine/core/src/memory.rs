//! Memory a run will need, against what the machine can give it.
//!
//! Recording a huge mini-batch or replaying at a huge hidden size used to grow
//! until the kernel killed the process, or abort on a failed allocation. Now
//! the tools estimate first ([`crate::workloads::estimate`],
//! `engine::footprint::estimate`) and refuse, naming the flag to lower
//! and both numbers, when the estimate exceeds the [`Budget`]: `--max-memory`
//! where given, else the least of the machine's available memory
//! (`MemAvailable`), the cgroup's remaining limit and the address-space limit
//! (`ulimit -v`) left to this process.

use std::fmt;

use thiserror::Error;

/// An estimate, itemised (bytes per part, in the order they are listed).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Estimate {
    /// `(what, bytes)`.
    pub parts: Vec<(&'static str, u64)>,
}

impl Estimate {
    /// Adds a part (zero-byte parts are left out of the description).
    pub fn add(&mut self, what: &'static str, bytes: u64) {
        self.parts.push((what, bytes));
    }

    /// All parts together.
    pub fn total(&self) -> u64 {
        self.parts.iter().fold(0u64, |s, p| s.saturating_add(p.1))
    }
}

impl fmt::Display for Estimate {
    /// `1.2 GB (weights 1.0 GB, node outputs 200 MB)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .parts
            .iter()
            .filter(|p| p.1 > 0)
            .map(|(w, b)| format!("{w} {}", human(*b)))
            .collect();
        write!(f, "{} ({})", human(self.total()), parts.join(", "))
    }
}

/// How much memory a run may use, and where that number comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Bytes.
    pub bytes: u64,
    /// `--max-memory`, `MemAvailable`, `the cgroup limit`, `the address-space
    /// limit (ulimit -v)`.
    pub source: String,
}

impl Budget {
    /// The budget given by `--max-memory`, or else what this machine and
    /// process have left (`None` where none of it can be read).
    pub fn detect(max_memory: Option<u64>) -> Option<Budget> {
        if let Some(bytes) = max_memory {
            return Some(Budget {
                bytes,
                source: "--max-memory".into(),
            });
        }
        machine_budget()
    }
}

/// A run that would not fit.
#[derive(Debug, Error)]
#[error(
    "{flag}: {what} needs about {estimate}, more than the {} available ({}); lower {flag}{raise}",
    human(budget.bytes),
    budget.source,
    raise = if budget.source == "--max-memory" { " or raise --max-memory" } else { " (or set --max-memory if the estimate is too cautious)" }
)]
pub struct TooLarge {
    /// The flag (with its value) that makes it large: `--batch 100000000`.
    pub flag: String,
    /// What would be built: `the trace`, `the replay`.
    pub what: String,
    /// The estimate.
    pub estimate: Estimate,
    /// The budget it exceeds.
    pub budget: Budget,
}

/// `Err` when `estimate` exceeds `budget` (no budget: always fits).
pub fn check(
    flag: String,
    what: &str,
    estimate: Estimate,
    budget: Option<&Budget>,
) -> Result<(), Box<TooLarge>> {
    match budget {
        Some(b) if estimate.total() > b.bytes => Err(Box::new(TooLarge {
            flag,
            what: what.into(),
            estimate,
            budget: b.clone(),
        })),
        _ => Ok(()),
    }
}

/// Bytes for people: `512 B`, `1.5 MB`, `40.0 GB` (powers of 1000).
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "kB", "MB", "GB", "TB", "PB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1000.0 && u + 1 < UNITS.len() {
        v /= 1000.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// The largest size [`parse_size`] takes: 1 PB (`1000T`), beyond any
/// machine, with every byte count below it exact in an `f64`.
pub const MAX_SIZE: f64 = 1e15;

/// Parses a size for `--max-memory`: bytes, or a number with `k`, `M`, `G`,
/// `T` (powers of 1000) or `KiB`, `MiB`, `GiB`, `TiB` (powers of 1024); `B`
/// optional.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?}: expected a size such as 4G, 512M or 1073741824"))?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().trim_end_matches('b') {
        "" => 1.0,
        "k" => 1e3,
        "m" => 1e6,
        "g" => 1e9,
        "t" => 1e12,
        "ki" => 1024.0,
        "mi" => 1024.0 * 1024.0,
        "gi" => 1024.0 * 1024.0 * 1024.0,
        "ti" => 1024f64.powi(4),
        _ => {
            return Err(format!(
                "{s:?}: unknown unit (use k, M, G, T or KiB, MiB, GiB, TiB)"
            ));
        }
    };
    let bytes = n * mult;
    if !(bytes.is_finite() && bytes >= 1.0) {
        return Err(format!("{s:?}: a size must be at least 1 byte"));
    }
    if bytes > MAX_SIZE {
        return Err(format!("{s:?}: a size is at most 1000T (1 PB)"));
    }
    Ok(bytes as u64)
}

/// The least of what the machine, the cgroup and the address-space limit
/// leave this process (Linux; `None` elsewhere).
fn machine_budget() -> Option<Budget> {
    let mut best: Option<Budget> = None;
    let mut offer = |bytes: Option<u64>, source: &str| {
        if let Some(bytes) = bytes
            && best.as_ref().is_none_or(|b| bytes < b.bytes)
        {
            best = Some(Budget {
                bytes,
                source: source.into(),
            });
        }
    };
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
    offer(
        meminfo
            .as_deref()
            .and_then(|t| kib_field(t, "MemAvailable:")),
        "MemAvailable",
    );
    offer(cgroup_left(), "the cgroup's memory limit");
    let status = std::fs::read_to_string("/proc/self/status").ok();
    let limits = std::fs::read_to_string("/proc/self/limits").ok();
    let address_left = limits
        .as_deref()
        .and_then(address_space_limit)
        .map(|limit| {
            let used = status
                .as_deref()
                .and_then(|t| kib_field(t, "VmSize:"))
                .unwrap_or(0);
            limit.saturating_sub(used)
        });
    offer(address_left, "the address-space limit (ulimit -v)");
    best
}

/// A `Name:   123 kB` field of /proc/meminfo or /proc/self/status, in bytes.
fn kib_field(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    let kib: u64 = line[name.len()..].split_whitespace().next()?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// The soft `Max address space` of /proc/self/limits (None when unlimited).
fn address_space_limit(limits: &str) -> Option<u64> {
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max address space"))?;
    line["Max address space".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// cgroup v2: `memory.max - memory.current` of this process's cgroup.
fn cgroup_left() -> Option<u64> {
    let cg = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = cg.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = std::path::Path::new("/sys/fs/cgroup").join(rel.trim_start_matches('/'));
    let max: u64 = std::fs::read_to_string(dir.join("memory.max"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let current: u64 = std::fs::read_to_string(dir.join("memory.current"))
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0);
    Some(max.saturating_sub(current))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_and_print() {
        assert_eq!(parse_size("4G").unwrap(), 4_000_000_000);
        assert_eq!(parse_size("512MiB").unwrap(), 512 << 20);
        assert_eq!(parse_size("1.5GB").unwrap(), 1_500_000_000);
        assert_eq!(parse_size("1024").unwrap(), 1024);
        assert!(parse_size("lots").is_err() && parse_size("4X").is_err());
        assert!(parse_size("0").is_err());
        assert_eq!(human(999), "999 B");
        assert_eq!(human(40_000_000_000), "40.0 GB");
    }

    #[test]
    fn check_names_flag_estimate_and_budget() {
        let mut e = Estimate::default();
        e.add("weights", 3_000_000_000);
        e.add("node outputs", 0);
        let b = Budget {
            bytes: 1_000_000_000,
            source: "--max-memory".into(),
        };
        let err = check("--hidden 100000".into(), "the replay", e.clone(), Some(&b))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--hidden 100000")
                && err.contains("3.0 GB (weights 3.0 GB)")
                && err.contains("1.0 GB available (--max-memory)"),
            "{err}"
        );
        assert!(check("--hidden 8".into(), "x", e.clone(), None).is_ok());
        let big = Budget {
            bytes: u64::MAX,
            source: "MemAvailable".into(),
        };
        assert!(check("--hidden 8".into(), "x", e, Some(&big)).is_ok());
    }

    #[test]
    fn proc_fields_parse() {
        assert_eq!(
            kib_field("MemTotal: 10 kB\nMemAvailable:   2 kB\n", "MemAvailable:"),
            Some(2048)
        );
        let limits = "Limit                     Soft Limit           Hard Limit           Units\nMax address space         unlimited            unlimited            bytes\n";
        assert_eq!(address_space_limit(limits), None);
        let limits = "Max address space         4294967296           unlimited            bytes\n";
        assert_eq!(address_space_limit(limits), Some(4_294_967_296));
        // This machine has some budget (the tests run on Linux).
        if cfg!(target_os = "linux") {
            assert!(Budget::detect(None).is_some());
        }
    }
}
