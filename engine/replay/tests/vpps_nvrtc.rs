//! Compiles the replay kernels and the VPPS persistent kernel of every
//! workload (and the paper's Tree-LSTM at h = 256) to PTX with NVIDIA's
//! NVRTC, without a GPU: the library comes from the `nvidia-cuda-nvrtc` wheel that
//! `scripts/nvrtc-venv.sh` installs under `target/nvrtc-venv` (or the
//! folder named by `BATCHLAB_NVRTC_DIR`). cudarc loads it by name, so the
//! test re-runs itself with `LD_LIBRARY_PATH` pointing there. A compile
//! error fails the test. The test never downloads anything.
//!
//! It has its own harness (`harness = false` in Cargo.toml) so that a skip
//! is visible: libtest hides a passing test's output, and a skipped compile
//! check must not read as a silent "ok". Its lines always reach the
//! `cargo test` output.
//!
//! It also checks what the specialisation is for: the weight registers
//! stay registers. An array indexed at run time is placed in local memory,
//! which PTX declares as a `__local_depot`; the kernel must have none.

use std::path::PathBuf;
use std::process::{Command, ExitCode};

const NAME: &str = "every_workload_kernel_compiles_with_nvrtc";
const CHILD: &str = "BATCHLAB_NVRTC_CHILD";

fn nvrtc_dir() -> Option<PathBuf> {
    let has = |d: &PathBuf| d.join("libnvrtc.so.13").exists();
    if let Some(d) = std::env::var_os("BATCHLAB_NVRTC_DIR").map(PathBuf::from) {
        return has(&d).then_some(d);
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/nvrtc-venv/lib");
    std::fs::read_dir(venv)
        .ok()?
        .flatten()
        .map(|e| e.path().join("site-packages/nvidia/cu13/lib"))
        .find(has)
}

/// Whether libtest-style arguments select this file's one test: `--list`
/// lists it, `--ignored` selects none (it is not ignored), a filter selects
/// it when the name contains it (`--exact`: equals it).
fn selected(args: &[String]) -> Option<bool> {
    const VALUED: [&str; 5] = [
        "--test-threads",
        "--skip",
        "--format",
        "--color",
        "--logfile",
    ];
    let mut filters = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--list" => {
                println!("{NAME}: test");
                return None;
            }
            "--ignored" => return Some(false),
            v if VALUED.contains(&v) => {
                it.next();
            }
            f if !f.starts_with('-') => filters.push(f),
            _ => {}
        }
    }
    let exact = args.iter().any(|a| a == "--exact");
    Some(
        filters.is_empty()
            || filters
                .iter()
                .any(|f| if exact { *f == NAME } else { NAME.contains(f) }),
    )
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if std::env::var_os(CHILD).is_some() {
        #[cfg(feature = "cuda")]
        compile_all();
        return ExitCode::SUCCESS;
    }
    match selected(&args) {
        None | Some(false) => return ExitCode::SUCCESS,
        Some(true) => {}
    }
    if !cfg!(feature = "cuda") {
        println!("test {NAME} ... SKIPPED: this build has no cuda feature (cudarc)");
        return ExitCode::SUCCESS;
    }
    let Some(dir) = nvrtc_dir() else {
        println!(
            "test {NAME} ... SKIPPED: no libnvrtc.so.13 (run scripts/nvrtc-venv.sh, which .ci/run does, or set BATCHLAB_NVRTC_DIR)"
        );
        return ExitCode::SUCCESS;
    };
    let path = match std::env::var_os("LD_LIBRARY_PATH") {
        Some(p) => {
            let mut v = vec![dir.clone()];
            v.extend(std::env::split_paths(&p));
            std::env::join_paths(v).expect("LD_LIBRARY_PATH entries")
        }
        None => dir.clone().into_os_string(),
    };
    let out = Command::new(std::env::current_exe().expect("own path"))
        .env("LD_LIBRARY_PATH", path)
        .env(CHILD, "1")
        .output()
        .expect("the test re-runs itself");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    print!("{text}");
    if !out.status.success() {
        println!("test {NAME} ... FAILED (NVRTC from {})", dir.display());
        return ExitCode::FAILURE;
    }
    if !text.contains("compiled ") {
        println!("test {NAME} ... FAILED: the child compiled nothing");
        return ExitCode::FAILURE;
    }
    println!("test {NAME} ... ok (NVRTC from {})", dir.display());
    ExitCode::SUCCESS
}

#[cfg(feature = "cuda")]
fn compile_all() {
    use cudarc::nvrtc::{CompileOptions, compile_ptx_with_opts};
    use engine_core::cells::CellLibrary;
    use engine_core::trace::Level;
    use engine_core::workloads::{self, DataChoice, RecordOptions, WORKLOADS};
    use engine_replay::backend::vpps;
    use engine_replay::model;

    // SAFETY: only tries to dlopen the library.
    assert!(
        unsafe { cudarc::nvrtc::sys::is_culib_present() },
        "libnvrtc not loadable from LD_LIBRARY_PATH"
    );
    // The replay's own kernels (every executor's gathers, elementwise ops and
    // fused chains), as `CudaDevice` compiles them.
    let ptx = cudarc::nvrtc::compile_ptx(engine_replay::device::KERNELS_CU)
        .unwrap_or_else(|e| panic!("the replay kernels: NVRTC failed: {e:?}"));
    assert!(ptx.to_src().contains(".entry ew_f32"), "no ew_f32 entry");
    println!("compiled the replay kernels (KERNELS_CU)");
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
        let model = model::model(&trace, &cells, 1).unwrap();
        let v = vpps::Vpps::new(&model, &vpps::VppsOptions::default())
            .expect("the model is in the instruction set");
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
