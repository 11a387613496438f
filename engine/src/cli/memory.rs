//! Keeping freed memory in a long-running process.
//!
//! `engine schedule --serve` answers one mini-batch after another, and each
//! request allocates the same few hundred kilobytes again (the request's
//! words, the graph, the schedule). glibc trims freed memory off the heap's
//! top and unmaps big blocks, so every request faulted its pages in afresh:
//! measured on a 5,948-node request, 78 minor faults and 0.4 ms a request,
//! a third of it in the kernel; with the thresholds fixed, no faults and
//! 0.25 ms. `bt.run` waits for each answer, so that is its latency.

/// Fixes glibc's `mmap` threshold (blocks up to 32 MiB come from the heap)
/// and its trim threshold (freed memory stays), so a process that repeats
/// the same work reuses its pages. True where it took; false elsewhere than
/// Linux with glibc, where the allocator is left as it is.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn keep_freed_memory() -> bool {
    // glibc's mallopt parameters (malloc.h).
    const M_TRIM_THRESHOLD: i32 = -1;
    const M_MMAP_THRESHOLD: i32 = -3;
    unsafe extern "C" {
        fn mallopt(param: i32, value: i32) -> i32;
    }
    // SAFETY: mallopt only sets two of the allocator's parameters (within
    // the ranges glibc documents); it touches no memory of ours, and glibc
    // takes its own lock.
    unsafe { mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1 && mallopt(M_TRIM_THRESHOLD, i32::MAX) == 1 }
}

/// Elsewhere: the allocator is left as it is.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn keep_freed_memory() -> bool {
    false
}
