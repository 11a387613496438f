//! The tools' global allocator: the system's, except that an allocation
//! that fails is an error, not an abort. Rust's default on a failed
//! allocation prints "memory allocation of N bytes failed" and aborts
//! (SIGABRT, a core dump); here the process prints one `error:` line saying
//! what ran out and what to change, and exits with status 1 like any other
//! error. The commands estimate their memory first and refuse what will not
//! fit (`crate::memory`); this catches what an estimate did not foresee, or
//! a `--max-memory` above what the machine allows.
//!
//! Each binary installs it:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: engine::alloc::Reporting = engine::alloc::Reporting;
//! ```
//!
//! Fallible allocation (`try_reserve`) ends the process the same way; no
//! batchlab code relies on it.

use std::alloc::{GlobalAlloc, Layout, System};

/// The system allocator, reporting a failed allocation as an error.
pub struct Reporting;

// SAFETY: every method forwards to `System` with the same arguments; only a
// null result is handled, by ending the process.
unsafe impl GlobalAlloc for Reporting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if p.is_null() {
            out_of_memory(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if p.is_null() {
            out_of_memory(layout.size());
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if p.is_null() {
            out_of_memory(new_size);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Writes the error and exits with status 1. It must not allocate: the
/// message is assembled in a stack buffer and written with write(2).
fn out_of_memory(size: usize) -> ! {
    let mut buf = [0u8; 512];
    let mut n = 0;
    let mut put = |bytes: &[u8]| {
        let k = bytes.len().min(buf.len() - n);
        buf[n..n + k].copy_from_slice(&bytes[..k]);
        n += k;
    };
    put(b"error: out of memory: an allocation of ");
    let mut digits = [0u8; 20];
    let mut d = digits.len();
    let mut v = size;
    loop {
        d -= 1;
        digits[d] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    put(&digits[d..]);
    put(
        b" bytes failed (the machine's memory, or its address-space limit: ulimit -v); \
give a smaller size (--hidden, --batch, a smaller trace), or a --max-memory this machine has\n",
    );
    #[cfg(unix)]
    // SAFETY: write(2) of a live buffer, then _exit(2): neither allocates.
    unsafe {
        libc::write(2, buf.as_ptr().cast(), n);
        libc::_exit(1);
    }
    #[cfg(not(unix))]
    std::process::abort();
}
