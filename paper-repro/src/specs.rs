//! The experiment specs behind the items: embedded in the binary (so it runs
//! from any folder), or read from `--specs DIR`, whose `<spec>.yaml` files
//! replace the embedded ones of the same name. Every spec is loaded and
//! checked — full and quick grid, by `experiments::parse_spec` — before any
//! run starts; an error names the file, line and column.

use std::path::{Path, PathBuf};

use experiments::{Kind, Spec};

use crate::error::{ReproError, Result};
use crate::items::{ITEMS, Item};

/// A spec shipped inside the binary.
#[derive(Clone, Copy, Debug)]
pub struct Embedded {
    /// Spec name (file stem).
    pub name: &'static str,
    /// Where it lives in the repository (used in error messages).
    pub path: &'static str,
    /// The YAML text.
    pub text: &'static str,
}

macro_rules! embedded {
    ($name:literal, $dir:literal) => {
        Embedded {
            name: $name,
            path: concat!($dir, "/", $name, ".yaml"),
            text: include_str!(concat!("../../", $dir, "/", $name, ".yaml")),
        }
    };
}

/// The embedded specs: the `experiments` crate's shipped specs, plus
/// paper-repro's own `vpps` and `vpps-train` specs.
pub const EMBEDDED: [Embedded; 19] = [
    embedded!("fig7", "experiments/specs"),
    embedded!("fig7-gap", "experiments/specs"),
    embedded!("table2", "experiments/specs"),
    embedded!("table4", "experiments/specs"),
    embedded!("table5", "experiments/specs"),
    embedded!("fig6", "experiments/specs"),
    embedded!("fig9", "experiments/specs"),
    embedded!("table6", "experiments/specs"),
    embedded!("cavs-fig8", "experiments/specs"),
    embedded!("cavs-fig10", "experiments/specs"),
    embedded!("policies", "experiments/specs"),
    embedded!("policies-exact", "experiments/specs"),
    embedded!("policies-hard", "experiments/specs"),
    embedded!("policies-unseen", "experiments/specs"),
    embedded!("optimise-scaling", "experiments/specs"),
    embedded!("vpps", "paper-repro/specs"),
    embedded!("vpps-train", "paper-repro/specs"),
    embedded!("peers", "experiments/specs"),
    embedded!("peers-train", "experiments/specs"),
];

/// A checked spec and where it came from.
#[derive(Clone, Debug)]
pub struct LoadedSpec {
    /// The item it serves.
    pub item: &'static Item,
    /// The checked spec (quick overrides applied in quick mode).
    pub spec: Spec,
    /// `embedded:<repository path>` or the file it was read from.
    pub origin: String,
}

/// Loads and checks the spec of every item (not only the selected ones, so a
/// broken spec is caught whatever is asked for). `dir` replaces embedded
/// specs by `<dir>/<spec>.yaml` where such a file exists; a `.yaml` file
/// there that names no spec is an error (a typo would otherwise be ignored).
pub fn load_all(dir: Option<&Path>, quick: bool) -> Result<Vec<LoadedSpec>> {
    let overrides = match dir {
        Some(d) => overrides(d)?,
        None => Vec::new(),
    };
    let mut out = Vec::new();
    for item in &ITEMS {
        let emb = EMBEDDED
            .iter()
            .find(|e| e.name == item.spec)
            .expect("every item has an embedded spec (checked by a test)");
        let (spec, origin) = match overrides.iter().find(|(n, _)| n == item.spec) {
            Some((_, path)) => (
                experiments::load_spec(path, quick)?,
                path.display().to_string(),
            ),
            None => (
                experiments::parse_spec(emb.text, emb.path, quick)?,
                format!("embedded:{}", emb.path),
            ),
        };
        out.push(LoadedSpec { item, spec, origin });
    }
    Ok(out)
}

/// The `<stem>.yaml` files of `dir`, each checked to name a spec.
fn overrides(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let entries = std::fs::read_dir(dir).map_err(|e| ReproError::io(dir, e))?;
    let mut out = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| ReproError::io(dir, e))?.path();
        let is_yaml = path.extension().is_some_and(|x| x == "yaml" || x == "yml");
        if !is_yaml {
            continue;
        }
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !EMBEDDED.iter().any(|e| e.name == stem) {
            let valid = EMBEDDED.iter().map(|e| e.name).collect::<Vec<_>>();
            return Err(ReproError::StraySpec {
                path,
                valid: valid.join(", "),
            });
        }
        out.push((stem, path));
    }
    out.sort();
    Ok(out)
}

/// Checks a `--device` value: `cpu`, `cuda` or `cuda:N`.
pub fn parse_device(s: &str) -> Result<String> {
    engine::device::DeviceKind::parse(s)
        .map(|_| s.to_string())
        .map_err(|_| ReproError::BadDevice(s.to_string()))
}

/// Whether `device` names a CUDA device.
pub fn is_cuda(device: &str) -> bool {
    device.starts_with("cuda")
}

/// Runs a replay or peers spec on `device` (other kinds do not use a device).
pub fn set_device(spec: &mut Spec, device: &str) {
    if matches!(spec.kind, Kind::Replay | Kind::Peers) {
        spec.grid.devices = vec![device.to_string()];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_item_has_an_embedded_spec_that_checks() {
        for quick in [false, true] {
            let all = load_all(None, quick).unwrap();
            assert_eq!(all.len(), ITEMS.len());
            for l in &all {
                assert_eq!(l.spec.name, l.item.spec, "{}", l.origin);
                assert_eq!(l.spec.quick, quick);
            }
        }
    }

    /// Regression (issue 15): quick mode timed one run, so a ratio had no
    /// spread to judge it by (tree-lstm edbatch/cavs 3.51 at h64, 0.41 at h128).
    #[test]
    fn every_timed_spec_times_at_least_three_runs_in_quick_mode_too() {
        for quick in [false, true] {
            for l in load_all(None, quick).unwrap() {
                let timed = matches!(
                    l.spec.kind,
                    Kind::Replay | Kind::Training | Kind::PlannerCompile | Kind::Peers
                );
                // Peers repeat inside each round; replay rounds each add
                // `repeats` samples to the row.
                let samples = match l.spec.kind {
                    Kind::Replay => l.spec.grid.repeats * l.spec.grid.rounds,
                    _ => l.spec.grid.repeats,
                };
                if timed {
                    assert!(samples >= 3, "{} (quick {quick})", l.origin);
                }
            }
        }
    }

    #[test]
    fn devices_parse() {
        assert_eq!(parse_device("cuda:1").unwrap(), "cuda:1");
        assert!(parse_device("gpu").is_err());
        assert!(is_cuda("cuda") && !is_cuda("cpu"));
    }
}
