//! Enables the CUDA twins of the device tests (`*_on_cuda`) when
//! `BATCHLAB_CUDA_TESTS=1`; otherwise they are `#[ignore]`d, so a green run
//! on a machine without a GPU lists them as ignored instead of hiding an
//! untested GPU path behind an "ok". (planner's tests use this script too.)

fn main() {
    println!("cargo::rustc-check-cfg=cfg(batchlab_cuda_tests)");
    println!("cargo::rerun-if-env-changed=BATCHLAB_CUDA_TESTS");
    if std::env::var_os("BATCHLAB_CUDA_TESTS").is_some_and(|v| v == "1") {
        println!("cargo::rustc-cfg=batchlab_cuda_tests");
    }
}
