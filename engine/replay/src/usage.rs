//! Process resource usage around a run (`getrusage(RUSAGE_SELF)`): CPU time
//! (user + system, all threads) and minor page faults. CPU time beside wall
//! time shows contention on a shared machine; page faults show whether a run
//! touched fresh memory (a steady-state run should not).

/// A reading of the process's counters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Usage {
    /// User + system CPU seconds of every thread so far.
    pub cpu_s: f64,
    /// Minor page faults so far.
    pub minor_faults: u64,
}

#[cfg(target_os = "linux")]
mod sys {
    /// `struct timeval` on Linux.
    #[repr(C)]
    #[derive(Default)]
    struct Timeval {
        sec: i64,
        usec: i64,
    }

    /// `struct rusage` on Linux (two timevals, then fourteen longs).
    #[repr(C)]
    #[derive(Default)]
    struct Rusage {
        utime: Timeval,
        stime: Timeval,
        maxrss: i64,
        ixrss: i64,
        idrss: i64,
        isrss: i64,
        minflt: i64,
        majflt: i64,
        nswap: i64,
        inblock: i64,
        oublock: i64,
        msgsnd: i64,
        msgrcv: i64,
        nsignals: i64,
        nvcsw: i64,
        nivcsw: i64,
    }

    unsafe extern "C" {
        fn getrusage(who: i32, usage: *mut Rusage) -> i32;
    }

    pub fn now() -> Option<crate::usage::Usage> {
        let mut r = Rusage::default();
        // SAFETY: `r` is a valid, writable `struct rusage`; RUSAGE_SELF = 0.
        if unsafe { getrusage(0, &mut r) } != 0 {
            return None;
        }
        let t = |tv: &Timeval| tv.sec as f64 + tv.usec as f64 * 1e-6;
        Some(crate::usage::Usage {
            cpu_s: t(&r.utime) + t(&r.stime),
            minor_faults: r.minflt.max(0) as u64,
        })
    }
}

/// Keeps freed heap memory in the process (glibc: no heap trimming, a fixed
/// 32 MiB mmap threshold), once per process. Per-run structures — the
/// scheduler's frontier, the same-type DAG, DyNet's op graph — are freed and
/// allocated again every run; with glibc's defaults the freed pages are
/// returned to the OS and the next run faults them back in, which a
/// steady-state measurement should not pay. Elsewhere a no-op.
pub fn keep_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            unsafe extern "C" {
                fn mallopt(param: i32, value: i32) -> i32;
            }
            const M_TRIM_THRESHOLD: i32 = -1;
            const M_MMAP_THRESHOLD: i32 = -3;
            // SAFETY: mallopt only changes allocator tuning; called once,
            // before the session's first run. A refusal (0) leaves the
            // defaults, which costs page faults, not correctness.
            unsafe {
                mallopt(M_TRIM_THRESHOLD, i32::MAX);
                mallopt(M_MMAP_THRESHOLD, 32 << 20);
            }
        });
    }
}

/// The process's counters now (`None` where the OS does not tell).
pub fn now() -> Option<Usage> {
    #[cfg(target_os = "linux")]
    {
        sys::now()
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// `b − a` for each counter.
pub fn since(a: Option<Usage>, b: Option<Usage>) -> Option<Usage> {
    let (a, b) = (a?, b?);
    Some(Usage {
        cpu_s: (b.cpu_s - a.cpu_s).max(0.0),
        minor_faults: b.minor_faults.saturating_sub(a.minor_faults),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn touching_fresh_pages_counts_faults_and_cpu_time_advances() {
        let Some(a) = super::now() else {
            eprintln!("SKIPPED: getrusage is not available on this OS");
            return;
        };
        let mut v = vec![0u8; 64 << 20];
        for i in (0..v.len()).step_by(4096) {
            v[i] = 1;
        }
        std::hint::black_box(&v);
        let b = super::now().unwrap();
        // 16384 small pages, or 32 huge ones where transparent huge pages are on.
        assert!(b.minor_faults >= a.minor_faults + 16, "{a:?} -> {b:?}");
        assert!(b.cpu_s >= a.cpu_s);
    }
}
