//! Prints how long n PQ-tree reductions take on n leaves, for the docs.
//!
//! Run with `cargo run --release -p planner --example pq_scaling`. Output:
//! one line per n with the best-of-5 wall time in milliseconds for the two
//! seeded workloads of `benches/pqtree.rs` (tree construction included).

#[path = "../benches/pq_workloads/mod.rs"]
mod pq_workloads;

use std::hint::black_box;
use std::time::Instant;

use pq_workloads::{hidden_intervals, run, sliding_pairs};

/// Best of `reps` runs, in milliseconds.
fn best_ms(n: usize, sets: &[Vec<usize>], reps: usize) -> f64 {
    (0..reps)
        .map(|_| {
            let start = Instant::now();
            black_box(run(n, sets));
            start.elapsed().as_secs_f64() * 1e3
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    println!(
        "{:>8} {:>18} {:>21}",
        "n", "sliding_pairs_ms", "hidden_intervals_ms"
    );
    for n in [1_000usize, 3_000, 10_000, 30_000, 100_000] {
        let pairs = best_ms(n, &sliding_pairs(n), 5);
        let intervals = best_ms(n, &hidden_intervals(n), 5);
        println!("{n:>8} {pairs:>18.3} {intervals:>21.3}");
    }
}
