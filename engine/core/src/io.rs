//! File input and output shared by every batchlab tool: user files read only
//! when they are regular files ([`read`], [`read_to_string`]: a FIFO or a
//! device would block or never end), atomic writes, so an interrupted run
//! never leaves a half-written trace, policy or layout behind, and
//! [`clean_up_on_interrupt`], so it leaves no temporary file either.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Refuses what is not a regular file (after symlinks): reading a FIFO
/// waits for a writer that may never come, a device may never end.
fn regular(path: &Path) -> std::io::Result<()> {
    let m = fs::metadata(path)?;
    if m.is_file() {
        return Ok(());
    }
    let what = if m.is_dir() {
        "a folder"
    } else {
        "a FIFO, socket or device"
    };
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("{what}, not a regular file"),
    ))
}

/// `std::fs::read` of a user's file, refusing what is not a regular file.
pub fn read(path: &Path) -> std::io::Result<Vec<u8>> {
    regular(path)?;
    fs::read(path)
}

/// `std::fs::read_to_string` of a user's file, refusing what is not a
/// regular file.
pub fn read_to_string(path: &Path) -> std::io::Result<String> {
    regular(path)?;
    fs::read_to_string(path)
}

/// Temporary files being written now: what an interrupt removes.
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn pending() -> MutexGuard<'static, Vec<PathBuf>> {
    // A panic while holding it leaves the list whole: go on with it.
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// A temporary file listed in [`PENDING`] for as long as this lives.
struct Pending(PathBuf);

impl Pending {
    fn new(path: PathBuf) -> Pending {
        pending().push(path.clone());
        Pending(path)
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        let mut list = pending();
        if let Some(i) = list.iter().position(|p| *p == self.0) {
            list.swap_remove(i);
        }
    }
}

/// Writes `bytes` to `path` atomically: a temporary file in the same directory
/// (same file system, so the rename is atomic), flushed and synced, then renamed
/// over the target. A missing parent folder is created first, so every tool's
/// `--out` behaves alike. The temporary file's name is unique in the process
/// (`.NAME.PID-N.tmp`: threads may write the same target), and it is removed
/// on failure, and on an interrupt where [`clean_up_on_interrupt`] is on.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other(format!("{} is not a file path", path.display())))?;
    let tmp = dir.join(format!(
        ".{}.{}-{}.tmp",
        name.to_string_lossy(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let _listed = Pending::new(tmp.clone());
    let result = (|| {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        // Best effort: the temporary file is garbage whatever happened.
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Makes SIGINT, SIGTERM and SIGHUP remove the temporary files of writes in
/// progress before the process ends (by the same signal, so a shell sees
/// the interrupt); the tools call it first thing. A signal the process was
/// started ignoring (`nohup`, a background job's SIGINT) stays ignored. The
/// handler only writes the signal to a pipe: a thread waiting on it does
/// the removing, which a handler may not. Idempotent; nothing off Unix.
pub fn clean_up_on_interrupt() {
    #[cfg(unix)]
    interrupt::install();
}

#[cfg(unix)]
mod interrupt {
    use std::sync::Once;
    use std::sync::atomic::{AtomicI32, Ordering};

    static WAKE: AtomicI32 = AtomicI32::new(-1);

    extern "C" fn on_signal(sig: libc::c_int) {
        let b = sig as u8;
        // SAFETY: write(2) is async-signal-safe; WAKE is the pipe's open
        // write end from before any handler was installed.
        unsafe {
            libc::write(WAKE.load(Ordering::Relaxed), (&b as *const u8).cast(), 1);
        }
    }

    pub(super) fn install() {
        static ONCE: Once = Once::new();
        ONCE.call_once(|| {
            let mut fds = [0 as libc::c_int; 2];
            // SAFETY: pipe(2) fills the two descriptors of the array.
            if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
                return;
            }
            WAKE.store(fds[1], Ordering::SeqCst);
            let read = fds[0];
            let waiter = std::thread::Builder::new()
                .name("batchlab-interrupt".into())
                .spawn(move || wait_and_clean(read));
            if waiter.is_err() {
                return;
            }
            for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                // SAFETY: sigaction with zeroed (valid) structs; the handler
                // only calls write(2).
                unsafe {
                    let mut old: libc::sigaction = std::mem::zeroed();
                    if libc::sigaction(sig, std::ptr::null(), &mut old) != 0
                        || old.sa_sigaction == libc::SIG_IGN
                    {
                        continue;
                    }
                    let mut new: libc::sigaction = std::mem::zeroed();
                    new.sa_sigaction =
                        on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
                    new.sa_flags = libc::SA_RESTART;
                    libc::sigemptyset(&mut new.sa_mask);
                    libc::sigaction(sig, &new, std::ptr::null_mut());
                }
            }
        });
    }

    fn wait_and_clean(read: libc::c_int) {
        let mut sig = 0u8;
        loop {
            // SAFETY: reads one byte into a live local.
            let n = unsafe { libc::read(read, (&mut sig as *mut u8).cast(), 1) };
            if n == 1 {
                break;
            }
            if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        // Held until the process ends: no write starts a new temporary file.
        let list = super::pending();
        for p in list.iter() {
            let _ = std::fs::remove_file(p);
        }
        let sig = libc::c_int::from(sig);
        // SAFETY: back to the default action, then the same signal again:
        // the process ends as the signal would have ended it.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
        std::process::exit(128 + sig);
    }
}

/// An output that would overwrite an input, or another output: refused
/// before anything is read or written (an atomic write over an input
/// destroys it however carefully it writes).
#[derive(Debug, thiserror::Error)]
#[error("{flag} {path}: {relation} {other_flag} {other}; refusing to overwrite {what}")]
pub struct SamePathError {
    /// The output flag (`--out`).
    pub flag: String,
    /// Its path as given.
    pub path: String,
    /// `the same file as`, or `inside` (an input that is a folder: every
    /// file in it is an input).
    pub relation: &'static str,
    /// The flag it collides with.
    pub other_flag: String,
    /// That path as given.
    pub other: String,
    /// `an input` or `another output`.
    pub what: &'static str,
}

/// Refuses outputs that are an input or each other: the same path after
/// resolving `.`, `..` and links, or, where both exist, the same file
/// (hard links). An input that is a folder (a model folder's `cells/`, a
/// layouts folder) makes every path inside it an input. Pairs are `(flag,
/// path)`; the first collision is named.
pub fn distinct_outputs(
    inputs: &[(&str, &Path)],
    outputs: &[(&str, &Path)],
) -> Result<(), Box<SamePathError>> {
    for (i, (flag, out)) in outputs.iter().enumerate() {
        let mine = Identity::of(out);
        let clash = |what: &'static str, (other_flag, other): &(&str, &Path)| {
            let theirs = Identity::of(other);
            let relation = if mine.same(&theirs) {
                "the same file as"
            } else if theirs.folder && mine.path.starts_with(&theirs.path) {
                "inside"
            } else {
                return None;
            };
            Some(Box::new(SamePathError {
                flag: flag.to_string(),
                path: out.display().to_string(),
                relation,
                other_flag: other_flag.to_string(),
                other: other.display().to_string(),
                what,
            }))
        };
        if let Some(e) = inputs.iter().find_map(|x| clash("an input", x)) {
            return Err(e);
        }
        if let Some(e) = outputs[..i].iter().find_map(|x| clash("another output", x)) {
            return Err(e);
        }
    }
    Ok(())
}

/// What identifies a file: its resolved path and, if it exists, its
/// device and inode.
struct Identity {
    path: std::path::PathBuf,
    /// An existing folder.
    folder: bool,
    #[cfg(unix)]
    inode: Option<(u64, u64)>,
}

impl Identity {
    fn of(p: &Path) -> Identity {
        let path = fs::canonicalize(p).unwrap_or_else(|_| {
            // Not there yet: its folder resolved, then its name.
            let abs = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
            match (abs.parent(), abs.file_name()) {
                (Some(dir), Some(name)) => fs::canonicalize(dir)
                    .map(|d| d.join(name))
                    .unwrap_or(abs.clone()),
                _ => abs.clone(),
            }
        });
        Identity {
            path,
            folder: p.is_dir(),
            #[cfg(unix)]
            inode: fs::metadata(p).ok().map(|m| {
                use std::os::unix::fs::MetadataExt;
                (m.dev(), m.ino())
            }),
        }
    }

    fn same(&self, other: &Identity) -> bool {
        #[cfg(unix)]
        if let (Some(a), Some(b)) = (self.inode, other.inode) {
            return a == b;
        }
        self.path == other.path
    }
}

/// Writes one line to stdout for the command-line tools. A closed pipe (the
/// output piped into `head`) ends the process quietly with status 0 instead of
/// the panic `println!` gives; any other write error is reported on stderr.
pub fn print_line(args: std::fmt::Arguments) {
    let mut out = std::io::stdout().lock();
    let result = out.write_fmt(args).and_then(|()| out.write_all(b"\n"));
    if let Err(e) = result {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: writing to stdout: {e}");
        std::process::exit(1);
    }
}

/// `println!` for the command-line tools, via [`print_line`].
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::io::print_line(format_args!($($arg)*))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_atomic_replaces_content_and_leaves_no_temp_file() {
        let dir = std::env::temp_dir().join(format!("batchlab-io-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out.json");
        write_atomic(&path, b"first").unwrap();
        write_atomic(&path, b"second").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"second");
        let leftovers: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn output_equal_to_input_is_refused_by_path_link_or_spelling() {
        let dir = std::env::temp_dir().join(format!("batchlab-io-same-{}", std::process::id()));
        fs::create_dir_all(dir.join("sub")).unwrap();
        let input = dir.join("t.json");
        fs::write(&input, b"{}").unwrap();
        let spelled = dir.join("sub/../t.json");
        let e = distinct_outputs(&[("--trace", &input)], &[("--out", &spelled)]).unwrap_err();
        assert!(
            e.to_string().contains("--out") && e.to_string().contains("--trace"),
            "{e}"
        );
        assert!(e.to_string().contains("an input"), "{e}");
        #[cfg(unix)]
        {
            let link = dir.join("hard.json");
            fs::hard_link(&input, &link).unwrap();
            assert!(distinct_outputs(&[("--trace", &input)], &[("--out", &link)]).is_err());
        }
        // Two outputs that are one file, neither there yet.
        let a = dir.join("new.json");
        let b = dir.join("sub/../new.json");
        let e = distinct_outputs(&[], &[("--out", &a), ("--baseline-out", &b)]).unwrap_err();
        assert!(e.to_string().contains("another output"), "{e}");
        // Different files are fine.
        distinct_outputs(&[("--trace", &input)], &[("--out", &a)]).unwrap();
        // A file inside an input folder is an input, spelled any way.
        let e = distinct_outputs(
            &[("--layouts", &dir.join("sub"))],
            &[("--out", &dir.join("sub/x.json"))],
        )
        .unwrap_err();
        assert!(e.to_string().contains("inside --layouts"), "{e}");
        let e = distinct_outputs(
            &[("--layouts", &dir.join("sub"))],
            &[("--out", &dir.join("./sub/../sub/y"))],
        )
        .unwrap_err();
        assert!(e.to_string().contains("inside"), "{e}");
        distinct_outputs(
            &[("--layouts", &dir.join("sub"))],
            &[("--out", &dir.join("subway.json"))],
        )
        .unwrap();
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn write_atomic_creates_a_missing_folder() {
        let dir = std::env::temp_dir().join(format!("batchlab-io-mkdir-{}", std::process::id()));
        let path = dir.join("a/b/out.json");
        write_atomic(&path, b"x").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"x");
        fs::remove_dir_all(&dir).unwrap();
    }
}
