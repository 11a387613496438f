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
pub const HARNESS: [(&str, &str); 13] = [
    (
        "__init__.py",
        include_str!("../peers/batchlab_peers/__init__.py"),
    ),
    (
        "__main__.py",
        include_str!("../peers/batchlab_peers/__main__.py"),
    ),
    (
        "batched.py",
        include_str!("../peers/batchlab_peers/batched.py"),
    ),
    (
        "codegen.py",
        include_str!("../peers/batchlab_peers/codegen.py"),
    ),
    (
        "dgl_peer.py",
        include_str!("../peers/batchlab_peers/dgl_peer.py"),
    ),
    (
        "dgl_pull.py",
        include_str!("../peers/batchlab_peers/dgl_pull.py"),
    ),
    (
        "explain.py",
        include_str!("../peers/batchlab_peers/explain.py"),
    ),
    (
        "export.py",
        include_str!("../peers/batchlab_peers/export.py"),
    ),
    (
        "levels.py",
        include_str!("../peers/batchlab_peers/levels.py"),
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
    (
        "torch_bench.py",
        include_str!("../peers/batchlab_peers/torch_bench.py"),
    ),
];

/// Pinned requirements per framework: (framework, file name, text, what it costs).
pub const REQUIREMENTS: [(&str, &str, &str, &str); 3] = [
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
    (
        "dgl",
        "requirements-dgl.txt",
        include_str!("../peers/requirements-dgl.txt"),
        "DGL 2.1.0 with the PyTorch it supports (2.2.1, the CUDA build) in its own environment: about 2.5 GB to download, 4.5 GB installed",
    ),
];

/// The frameworks `--peers` may name.
pub const FRAMEWORKS: [&str; 3] = ["dynet", "torch", "dgl"];

/// The framework that has an environment of its own (`DIR/dgl-venv`): DGL
/// pins an older PyTorch than the project's.
const OWN_VENV: &str = "dgl";

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

fn dgl_python_of(dir: &Path) -> PathBuf {
    dir.join("dgl-venv").join("bin").join("python")
}

/// The harness's `probe` run by `python`: per framework, its version or
/// why it is unavailable.
fn probe(
    python: &Path,
    harness: &Path,
    result: &Path,
) -> std::result::Result<serde_json::Value, String> {
    let out = Command::new(python)
        .args(["-m", "batchlab_peers", "probe", "--result"])
        .arg(result)
        .env("PYTHONPATH", harness)
        .output()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} does not run the harness: {}",
            python.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let text = std::fs::read_to_string(result).map_err(|e| format!("{}: {e}", result.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", result.display()))
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
    let v = probe(&python, &harness, &dir.join("probe.json"))?;
    // DGL is probed in its own environment, where there is one.
    let dgl = dgl_python_of(dir);
    let dgl_probe = dgl
        .exists()
        .then(|| probe(&dgl, &harness, &dir.join("probe-dgl.json")));
    let mut frameworks = BTreeMap::new();
    for fw in FRAMEWORKS {
        let install = format!("install it with `paper-repro peers --install --peers {fw}`");
        let entry = match (fw, &dgl_probe) {
            (OWN_VENV, None) => Err(format!(
                "no DGL environment in {} ({install})",
                dir.join("dgl-venv").display()
            )),
            (OWN_VENV, Some(Err(e))) => Err(format!("{e} ({install})")),
            (fw, got) => {
                let f = match (fw, got) {
                    (OWN_VENV, Some(Ok(d))) => &d["frameworks"][fw],
                    _ => &v["frameworks"][fw],
                };
                match f["version"].as_str() {
                    Some(ver) => Ok(ver.to_string()),
                    None => Err(format!(
                        "{} ({install})",
                        f["reason"].as_str().unwrap_or("not installed")
                    )),
                }
            }
        };
        frameworks.insert(fw.to_string(), entry);
    }
    Ok(PeersEnv {
        python,
        harness,
        frameworks,
        dgl_python: dgl.exists().then_some(dgl),
    })
}

/// Parses `--peers a,b`: each a framework name.
pub fn parse_frameworks(list: &str) -> Result<Vec<&'static str>> {
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let fw = FRAMEWORKS.iter().find(|f| **f == name).ok_or_else(|| {
            ReproError::Usage(format!(
                "--peers: unknown peer framework {name:?} (expected dynet, torch, dgl)"
            ))
        })?;
        if !out.contains(fw) {
            out.push(*fw);
        }
    }
    if out.is_empty() {
        return Err(ReproError::Usage(
            "--peers: name at least one of dynet, torch, dgl".into(),
        ));
    }
    Ok(out)
}

/// Creates the environment in `dir` (if missing) and installs the pinned
/// requirements of `frameworks`, saying what it downloads first. pip's own
/// progress goes to standard error.
pub fn install(dir: &Path, frameworks: &[&str]) -> Result<PeersEnv> {
    let python = python_of(dir);
    make_venv(dir, "venv")?;
    if frameworks.contains(&OWN_VENV) {
        make_venv(dir, "dgl-venv")?;
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
        let py = if *fw == OWN_VENV {
            dgl_python_of(dir)
        } else {
            python.clone()
        };
        let mut pip = Command::new(&py);
        pip.args(["-m", "pip", "install", "--disable-pip-version-check"]);
        if *fw == OWN_VENV {
            // A full lock whose torchdata declares an older torch than
            // DGL's: installed as locked, without pip's resolver.
            pip.arg("--no-deps");
        }
        let st = pip
            .arg("-r")
            .arg(&req)
            .stdout(std::process::Stdio::inherit())
            .status()
            .map_err(|e| ReproError::Peers(format!("{}: {e}", py.display())))?;
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

/// Creates the virtual environment `dir/name` unless it exists.
fn make_venv(dir: &Path, name: &str) -> Result<()> {
    let python = dir.join(name).join("bin").join("python");
    if !python.exists() {
        let base = std::env::var_os("BATCHLAB_PYTHON").unwrap_or_else(|| "python3".into());
        eprintln!(
            "paper-repro peers: creating a virtual environment in {} with {}",
            dir.join(name).display(),
            base.to_string_lossy()
        );
        std::fs::create_dir_all(dir).map_err(|e| ReproError::io(dir, e))?;
        let st = Command::new(&base)
            .args(["-m", "venv"])
            .arg(dir.join(name))
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
    Ok(())
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
    fn every_harness_module_is_embedded() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/batchlab_peers");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| {
                let name = e.ok()?.file_name().into_string().ok()?;
                name.ends_with(".py").then_some(name)
            })
            .collect();
        files.sort();
        let embedded: Vec<&str> = HARNESS.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            files, embedded,
            "HARNESS must list every module, in name order"
        );
    }

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
