//! The peers' Python environment: a virtual environment made and reused by
//! the project, with pinned requirements (`paper-repro/peers/requirements-*.txt`)
//! and the harness (`paper-repro/peers/batchlab_peers`, embedded in the binary
//! so it runs from any folder).
//!
//! Folder (`--peers-env DIR`, else `$BATCHLAB_PEERS_ENV`, else
//! `$XDG_CACHE_HOME/batchlab/peers` or `~/.cache/batchlab/peers`):
//!
//! ```text
//! DIR/venv/                      the virtual environment (python3 -m venv)
//! DIR/harness/batchlab_peers/    the harness, rewritten from the binary's copy on use
//! DIR/requirements-<fw>.txt      what `--install` installed
//! ```
//!
//! Nothing is created or downloaded unless `paper-repro peers --install` asks:
//! without the folder, the `peers` item is skipped and says how to install.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use experiments::peers::PeersEnv;

use crate::error::{ReproError, Result};

/// The harness files, embedded: (path under `batchlab_peers/`, text).
pub const HARNESS: [(&str, &str); 8] = [
    (
        "__init__.py",
        include_str!("../peers/batchlab_peers/__init__.py"),
    ),
    (
        "__main__.py",
        include_str!("../peers/batchlab_peers/__main__.py"),
    ),
    (
        "codegen.py",
        include_str!("../peers/batchlab_peers/codegen.py"),
    ),
    (
        "explain.py",
        include_str!("../peers/batchlab_peers/explain.py"),
    ),
    (
        "export.py",
        include_str!("../peers/batchlab_peers/export.py"),
    ),
    ("peers.py", include_str!("../peers/batchlab_peers/peers.py")),
    (
        "profile.py",
        include_str!("../peers/batchlab_peers/profile.py"),
    ),
    (
        "program.py",
        include_str!("../peers/batchlab_peers/program.py"),
    ),
];

/// Pinned requirements per framework: (framework, file name, text, what it costs).
pub const REQUIREMENTS: [(&str, &str, &str, &str); 2] = [
    (
        "dynet",
        "requirements-dynet.txt",
        include_str!("../peers/requirements-dynet.txt"),
        "dynet38 2.2 and numpy: about 25 MB to download, 140 MB installed",
    ),
    (
        "torch",
        "requirements-torch.txt",
        include_str!("../peers/requirements-torch.txt"),
        "PyTorch from PyPI is the CUDA build: about 3 GB to download, 5 GB installed (its nvidia-* wheels are needed even on the CPU)",
    ),
];

/// The frameworks `--peers` may name.
pub const FRAMEWORKS: [&str; 2] = ["dynet", "torch"];

/// The environment folder (see the module docs).
pub fn default_dir(flag: Option<&Path>) -> PathBuf {
    if let Some(d) = flag {
        return d.to_path_buf();
    }
    if let Some(d) = std::env::var_os("BATCHLAB_PEERS_ENV") {
        return PathBuf::from(d);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from(".cache"));
    cache.join("batchlab").join("peers")
}

fn python_of(dir: &Path) -> PathBuf {
    dir.join("venv").join("bin").join("python")
}

/// Writes the embedded harness into `dir/harness` where it differs.
fn write_harness(dir: &Path) -> Result<PathBuf> {
    let root = dir.join("harness");
    let pkg = root.join("batchlab_peers");
    std::fs::create_dir_all(&pkg).map_err(|e| ReproError::io(&pkg, e))?;
    for (name, text) in HARNESS {
        let path = pkg.join(name);
        if std::fs::read_to_string(&path).ok().as_deref() != Some(text) {
            engine::io::write_atomic(&path, text.as_bytes())
                .map_err(|e| ReproError::io(&path, e))?;
        }
    }
    Ok(root)
}

/// Why the environment in `dir` cannot be used, or the environment.
pub fn open(dir: &Path) -> std::result::Result<PeersEnv, String> {
    let python = python_of(dir);
    if !python.exists() {
        return Err(format!(
            "no peers environment in {} (install it with `paper-repro peers --install`; \
             `--peers dynet,torch` adds the PyTorch peer)",
            dir.display()
        ));
    }
    let harness = write_harness(dir).map_err(|e| e.to_string())?;
    let result = dir.join("probe.json");
    let out = Command::new(&python)
        .args(["-m", "batchlab_peers", "probe", "--result"])
        .arg(&result)
        .env("PYTHONPATH", &harness)
        .output()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} does not run the harness: {}",
            python.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let text =
        std::fs::read_to_string(&result).map_err(|e| format!("{}: {e}", result.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", result.display()))?;
    let mut frameworks = BTreeMap::new();
    for fw in FRAMEWORKS {
        let f = &v["frameworks"][fw];
        let entry = match f["version"].as_str() {
            Some(ver) => Ok(ver.to_string()),
            None => Err(format!(
                "{} (install it with `paper-repro peers --install --peers {fw}`)",
                f["reason"].as_str().unwrap_or("not installed")
            )),
        };
        frameworks.insert(fw.to_string(), entry);
    }
    Ok(PeersEnv {
        python,
        harness,
        frameworks,
    })
}

/// Parses `--peers a,b`: each a framework name.
pub fn parse_frameworks(list: &str) -> Result<Vec<&'static str>> {
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let fw = FRAMEWORKS.iter().find(|f| **f == name).ok_or_else(|| {
            ReproError::Usage(format!(
                "--peers: unknown peer framework {name:?} (expected dynet, torch)"
            ))
        })?;
        if !out.contains(fw) {
            out.push(*fw);
        }
    }
    if out.is_empty() {
        return Err(ReproError::Usage(
            "--peers: name at least one of dynet, torch".into(),
        ));
    }
    Ok(out)
}

/// Creates the environment in `dir` (if missing) and installs the pinned
/// requirements of `frameworks`, saying what it downloads first. pip's own
/// progress goes to standard error.
pub fn install(dir: &Path, frameworks: &[&str]) -> Result<PeersEnv> {
    let python = python_of(dir);
    if !python.exists() {
        let base = std::env::var_os("BATCHLAB_PYTHON").unwrap_or_else(|| "python3".into());
        eprintln!(
            "paper-repro peers: creating a virtual environment in {} with {}",
            dir.join("venv").display(),
            base.to_string_lossy()
        );
        std::fs::create_dir_all(dir).map_err(|e| ReproError::io(dir, e))?;
        let st = Command::new(&base)
            .args(["-m", "venv"])
            .arg(dir.join("venv"))
            .status()
            .map_err(|e| {
                ReproError::Peers(format!(
                    "{}: {e} (the peers need Python 3 with the venv module; set BATCHLAB_PYTHON to choose one)",
                    base.to_string_lossy()
                ))
            })?;
        if !st.success() {
            return Err(ReproError::Peers(format!(
                "`{} -m venv` failed ({st}); on Debian, `apt-get install python3-venv`",
                base.to_string_lossy()
            )));
        }
    }
    for fw in frameworks {
        let (_, file, text, cost) = REQUIREMENTS
            .iter()
            .find(|r| r.0 == *fw)
            .copied()
            .ok_or_else(|| ReproError::Usage(format!("unknown peer framework {fw}")))?;
        let req = dir.join(file);
        engine::io::write_atomic(&req, text.as_bytes()).map_err(|e| ReproError::io(&req, e))?;
        eprintln!("paper-repro peers: installing the {fw} peer from PyPI ({cost}) ...");
        let st = Command::new(&python)
            .args(["-m", "pip", "install", "--disable-pip-version-check", "-r"])
            .arg(&req)
            .stdout(std::process::Stdio::inherit())
            .status()
            .map_err(|e| ReproError::Peers(format!("{}: {e}", python.display())))?;
        if !st.success() {
            return Err(ReproError::Peers(format!(
                "pip failed installing {} ({st}); the environment is kept, run the install again",
                req.display()
            )));
        }
        if *fw == "torch" {
            install_batchlab_torch(&python)?;
        }
    }
    open(dir).map_err(ReproError::Peers)
}

/// The checkout's `engine/torch` package (batchlab_torch, `docs/torch.md`),
/// where this binary was built from.
pub fn batchlab_torch_source() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("engine")
        .join("torch")
}

/// `pip install -e engine/torch` into the environment: editable, so the
/// environment's `batchlab_torch` is always this checkout's (a copy would go
/// stale with the next edit). No dependencies fetched (the torch
/// requirements pin them), no build isolation (nothing is downloaded to
/// build it).
fn install_batchlab_torch(python: &Path) -> Result<()> {
    let src = batchlab_torch_source();
    if !src.join("pyproject.toml").is_file() {
        return Err(ReproError::Peers(format!(
            "{}: no batchlab_torch package here (this binary was built from another checkout); install it with `pip install ./engine/torch`",
            src.display()
        )));
    }
    eprintln!(
        "paper-repro peers: installing batchlab_torch from {}",
        src.display()
    );
    let st = Command::new(python)
        .args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-deps",
            "--no-build-isolation",
            "--editable",
        ])
        .arg(&src)
        .stdout(std::process::Stdio::inherit())
        .status()
        .map_err(|e| ReproError::Peers(format!("{}: {e}", python.display())))?;
    if !st.success() {
        return Err(ReproError::Peers(format!(
            "pip failed installing {} ({st}); the environment is kept, run the install again",
            src.display()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frameworks_are_checked() {
        assert_eq!(
            parse_frameworks("dynet, torch,dynet").unwrap(),
            ["dynet", "torch"]
        );
        let e = parse_frameworks("dynet,tf").unwrap_err().to_string();
        assert!(e.contains("\"tf\""), "{e}");
        assert!(parse_frameworks(",").is_err());
    }

    #[test]
    fn a_missing_environment_says_how_to_install() {
        let dir = std::env::temp_dir().join(format!("batchlab-peers-none-{}", std::process::id()));
        let e = open(&dir).unwrap_err();
        assert!(e.contains("paper-repro peers --install"), "{e}");
        assert!(!dir.exists(), "opening must not create anything");
    }

    #[test]
    fn requirements_are_pinned() {
        for (_, file, text, _) in REQUIREMENTS {
            for line in text.lines().map(str::trim) {
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                assert!(line.contains("=="), "{file}: {line} is not pinned");
            }
        }
    }
}
