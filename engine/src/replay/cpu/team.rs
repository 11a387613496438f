//! A fixed team of worker threads for fork–join steps a few microseconds long:
//! the caller publishes a step, runs its own share, and waits; workers that
//! have nothing to do *spin* for a while before they park.
//!
//! Why not rayon's pool: a replay runs hundreds of parallel steps per run
//! (every batch's GEMM and row steps), each 10–100 µs on lattices. A rayon
//! worker parks soon after its queue empties, and waking a parked thread on
//! this VM costs tens of microseconds (futex, scheduler), paid twice per step
//! when the caller waits outside the pool. perf of lattice-lstm b64 h128 on
//! two threads: a third of the samples in the scheduler, and the run 2× slower
//! than on one thread. Spinning workers pick a step up in well under a
//! microsecond (OpenMP runtimes spin the same way, `OMP_WAIT_POLICY=active`).
//! The cost: a spinning worker burns its core between steps, so process CPU
//! time of a multi-thread run counts up to `SPIN` of idle spinning per gap.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long an idle worker spins before it parks: long enough to bridge the
/// gaps between the steps of a run (microseconds), short enough that a team
/// between runs sleeps.
const SPIN: Duration = Duration::from_micros(200);

/// One published step: `f(c)` for every worker `c < parts` (the caller runs
/// part 0). Lives on the caller's stack while the step runs.
struct Job<'a> {
    f: &'a (dyn Fn(usize) + Sync),
    parts: usize,
}

struct Shared {
    /// Bumped by the caller to publish a step.
    epoch: AtomicU64,
    /// The step: a `*const Job` valid until `pending` reaches 0.
    job: AtomicPtr<()>,
    /// Workers that have not yet finished (or skipped) the current step.
    pending: AtomicUsize,
    /// A worker's part panicked in the current step.
    panicked: AtomicBool,
    /// Workers parked on `wake`.
    sleepers: AtomicUsize,
    stop: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
}

thread_local! {
    /// Set while a thread runs a part of a step: a step started from inside
    /// one runs inline (the team is busy with the outer step).
    static IN_STEP: Cell<bool> = const { Cell::new(false) };
}

/// `n − 1` spinning workers; the caller is the n-th thread.
pub struct Team {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
}

impl Team {
    /// Starts `workers` threads named `{name}-1`, `{name}-2`, ….
    pub fn new(workers: usize, name: &str) -> std::io::Result<Team> {
        let shared = Arc::new(Shared {
            epoch: AtomicU64::new(0),
            job: AtomicPtr::new(std::ptr::null_mut()),
            pending: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            sleepers: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            lock: Mutex::new(()),
            wake: Condvar::new(),
        });
        let mut team = Team {
            shared,
            workers: Vec::with_capacity(workers),
        };
        for w in 0..workers {
            let s = Arc::clone(&team.shared);
            // On an error the team built so far is dropped, which stops
            // and joins the workers already started.
            let h = std::thread::Builder::new()
                .name(format!("{name}-{}", w + 1))
                .spawn(move || worker(&s, w + 1))?;
            team.workers.push(h);
        }
        Ok(team)
    }

    /// Runs `f(0)`, …, `f(parts − 1)` in parallel, part 0 on the calling
    /// thread, and returns when all have finished; a panic in any part is
    /// resumed here. `parts` is at most the team's threads (workers + 1);
    /// inside a part, or with `parts ≤ 1`, everything runs inline.
    pub fn run(&self, parts: usize, f: &(dyn Fn(usize) + Sync)) {
        let workers = self.workers.len();
        if parts <= 1 || workers == 0 || IN_STEP.with(Cell::get) {
            (0..parts).for_each(f);
            return;
        }
        assert!(
            parts <= workers + 1,
            "{parts} parts for {} threads",
            workers + 1
        );
        let job = Job { f, parts };
        let s = &*self.shared;
        s.job
            .store(&job as *const Job as *mut (), Ordering::Relaxed);
        s.pending.store(workers, Ordering::Relaxed);
        // SeqCst pairs with the parking worker's SeqCst re-check: either it
        // sees this epoch, or this load sees it asleep.
        s.epoch.fetch_add(1, Ordering::SeqCst);
        if s.sleepers.load(Ordering::SeqCst) > 0 {
            let _g = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.wake.notify_all();
        }
        let mine = run_part(f, 0);
        // Every worker acknowledges the step (parts or not) before `job`
        // leaves this frame, so none can read it afterwards.
        let mut spins = 0u32;
        while s.pending.load(Ordering::Acquire) != 0 {
            spins += 1;
            if spins < 1 << 14 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        if let Err(p) = mine {
            resume_unwind(p);
        }
        if s.panicked.swap(false, Ordering::Relaxed) {
            panic!("a replay worker thread panicked");
        }
    }
}

fn run_part(f: &(dyn Fn(usize) + Sync), c: usize) -> std::thread::Result<()> {
    IN_STEP.with(|b| b.set(true));
    let r = catch_unwind(AssertUnwindSafe(|| f(c)));
    IN_STEP.with(|b| b.set(false));
    r
}

fn worker(s: &Shared, me: usize) {
    let mut seen = 0u64;
    loop {
        let mut since = Instant::now();
        let mut spins = 0u32;
        loop {
            if s.epoch.load(Ordering::Acquire) != seen {
                break;
            }
            if s.stop.load(Ordering::Acquire) {
                return;
            }
            spins += 1;
            if !spins.is_multiple_of(64) || since.elapsed() < SPIN {
                std::hint::spin_loop();
                continue;
            }
            let mut g = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.sleepers.fetch_add(1, Ordering::SeqCst);
            while s.epoch.load(Ordering::SeqCst) == seen && !s.stop.load(Ordering::SeqCst) {
                g = s.wake.wait(g).unwrap_or_else(|e| e.into_inner());
            }
            s.sleepers.fetch_sub(1, Ordering::SeqCst);
            drop(g);
            since = Instant::now();
        }
        seen = s.epoch.load(Ordering::Acquire);
        // SAFETY: the caller keeps the job alive until every worker has
        // decremented `pending` for this epoch, which happens below.
        let job = unsafe { &*(s.job.load(Ordering::Relaxed) as *const Job) };
        if me < job.parts && run_part(job.f, me).is_err() {
            s.panicked.store(true, Ordering::Relaxed);
        }
        s.pending.fetch_sub(1, Ordering::Release);
    }
}

impl Drop for Team {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        {
            let _g = self.shared.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.wake.notify_all();
        }
        for h in self.workers.drain(..) {
            // A worker that panicked outside a part has nothing to report.
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_runs_once_per_step_over_many_steps() {
        let team = Team::new(2, "test").unwrap();
        let hits: Vec<AtomicUsize> = (0..3).map(|_| AtomicUsize::new(0)).collect();
        for step in 0..10_000 {
            let parts = 1 + step % 3;
            team.run(parts, &|c| {
                hits[c].fetch_add(1, Ordering::Relaxed);
            });
        }
        let got: Vec<usize> = hits.iter().map(|h| h.load(Ordering::Relaxed)).collect();
        // Steps with 1, 2, 3 parts: 3 334, 3 333, 3 333.
        assert_eq!(got, [10_000, 6_666, 3_333]);
    }

    #[test]
    fn a_parked_team_wakes_for_the_next_step() {
        let team = Team::new(1, "test").unwrap();
        std::thread::sleep(SPIN * 5);
        let n = AtomicUsize::new(0);
        team.run(2, &|_| {
            n.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(n.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_panicking_part_is_resumed_by_the_caller_and_the_team_goes_on() {
        let team = Team::new(1, "test").unwrap();
        let r = catch_unwind(AssertUnwindSafe(|| {
            team.run(2, &|c| {
                if c == 1 {
                    panic!("part 1");
                }
            })
        }));
        assert!(r.is_err());
        let n = AtomicUsize::new(0);
        team.run(2, &|_| {
            n.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(n.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_step_inside_a_part_runs_inline() {
        let team = Team::new(1, "test").unwrap();
        let n = AtomicUsize::new(0);
        team.run(2, &|_| {
            team.run(2, &|_| {
                n.fetch_add(1, Ordering::Relaxed);
            });
        });
        assert_eq!(n.load(Ordering::Relaxed), 4);
    }
}
