//! Compiles the VPPS persistent kernel of every workload (and the paper's
//! Tree-LSTM at h = 256) to PTX with NVIDIA's NVRTC, without a GPU: the
//! library comes from the `nvidia-cuda-nvrtc` wheel that
//! `scripts/nvrtc-venv.sh` installs under `target/nvrtc-venv` (or the
//! folder named by `BATCHLAB_NVRTC_DIR`). cudarc loads it by name, so the
//! test re-runs itself with `LD_LIBRARY_PATH` pointing there. A compile
//! error fails the test; a missing wheel skips it visibly.
//!
//! It also checks what the specialisation is for: the weight registers
//! stay registers. An array indexed at run time is placed in local memory,
//! which PTX declares as a `__local_depot`; the kernel must have none.

use std::path::PathBuf;
use std::process::Command;

const CHILD: &str = "BATCHLAB_NVRTC_CHILD";

fn nvrtc_dir() -> Option<PathBuf> {
    let has = |d: &PathBuf| d.join("libnvrtc.so.13").exists();
    if let Some(d) = std::env::var_os("BATCHLAB_NVRTC_DIR").map(PathBuf::from) {
        return has(&d).then_some(d);
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/nvrtc-venv/lib");
    std::fs::read_dir(venv)
        .ok()?
        .flatten()
        .map(|e| e.path().join("site-packages/nvidia/cu13/lib"))
        .find(has)
}

#[test]
fn every_workload_kernel_compiles_with_nvrtc() {
    if !cfg!(feature = "cuda") {
        println!("SKIPPED: NVRTC compile check: this build has no cuda feature (cudarc)");
        return;
    }
    let Some(dir) = nvrtc_dir() else {
        println!(
            "SKIPPED: NVRTC compile check: no libnvrtc.so.13 (run scripts/nvrtc-venv.sh, or set BATCHLAB_NVRTC_DIR)"
        );
        return;
    };
    if std::env::var_os(CHILD).is_none() {
        let path = match std::env::var_os("LD_LIBRARY_PATH") {
            Some(p) => {
                let mut v = vec![dir.clone()];
                v.extend(std::env::split_paths(&p));
                std::env::join_paths(v).unwrap()
            }
            None => dir.clone().into_os_string(),
        };
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "every_workload_kernel_compiles_with_nvrtc",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("LD_LIBRARY_PATH", path)
            .env(CHILD, "1")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        println!("{text}");
        assert!(out.status.success(), "the NVRTC compile check failed");
        assert!(text.contains("compiled "), "the child compiled nothing");
    } else {
        #[cfg(feature = "cuda")]
        compile_all();
    }
}

#[cfg(feature = "cuda")]
fn compile_all() {
    use cudarc::nvrtc::{CompileOptions, compile_ptx_with_opts};
    use engine::cells::CellLibrary;
    use engine::replay::{self, vpps};
    use engine::trace::Level;
    use engine::workloads::{self, DataChoice, RecordOptions, WORKLOADS};

    // SAFETY: only tries to dlopen the library.
    assert!(
        unsafe { cudarc::nvrtc::sys::is_culib_present() },
        "libnvrtc not loadable from LD_LIBRARY_PATH"
    );
    let cells = CellLibrary::builtin().unwrap();
    let mut cases: Vec<(&str, usize)> = WORKLOADS.iter().map(|w| (w.name, 64)).collect();
    cases.push(("tree-lstm", 256));
    for (name, hidden) in cases {
        let trace = workloads::record(
            &RecordOptions {
                workload: workloads::workload(name).unwrap(),
                data: DataChoice::Default,
                batch: 1,
                hidden,
                level: Level::Cell,
                seed: 1,
            },
            &cells,
        )
        .unwrap();
        let model = replay::model(&trace, &cells, 1).unwrap();
        let v = vpps::Vpps::new(&model, &vpps::VppsOptions::default());
        let src = v.kernel_source();
        let t = std::time::Instant::now();
        let ptx = compile_ptx_with_opts(
            &src,
            CompileOptions {
                arch: Some("compute_90"),
                options: vec!["--std=c++17".into()],
                ..Default::default()
            },
        )
        .unwrap_or_else(|e| panic!("{name} h={hidden}: NVRTC failed: {e:?}\n{src}"));
        let text = ptx.to_src();
        assert!(
            text.contains(".entry vpps_kernel"),
            "{name}: no kernel entry"
        );
        assert!(
            !text.contains("__local_depot"),
            "{name} h={hidden}: the kernel uses local memory (a register array indexed at run time)"
        );
        println!(
            "compiled {name} h={hidden}: {} matrices, {} registers/thread reserved, PTX {} KB in {:.1} s",
            v.plan().mats.len(),
            v.plan().regs_used,
            text.len() / 1024,
            t.elapsed().as_secs_f64()
        );
    }
}
