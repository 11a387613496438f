//! Records the git revision the crate is built from (`BATCHLAB_BUILD_REVISION`),
//! so result rows name the code that produced them even when the binary runs
//! elsewhere (a GPU machine with another checkout, or none).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    Command::new("git")
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

fn main() {
    let rev = match git(&["rev-parse", "--short", "HEAD"]) {
        Some(r) if !r.is_empty() => {
            let dirty = git(&["status", "--porcelain"]).is_some_and(|s| !s.is_empty());
            if dirty { format!("{r}-dirty") } else { r }
        }
        _ => "unknown".into(),
    };
    println!("cargo:rustc-env=BATCHLAB_BUILD_REVISION={rev}");
    // Rebuilt on a commit, a checkout, or an edit of any crate's sources.
    for path in [
        "../.git/HEAD",
        "../.git/index",
        "../engine/src",
        "../search/src",
        "../planner/src",
        "src",
    ] {
        println!("cargo:rerun-if-changed={path}");
    }
}
