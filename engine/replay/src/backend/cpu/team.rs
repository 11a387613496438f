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
//!
//! Parts are *claimed*, not assigned: the caller runs part 0, then takes any
//! part no worker has claimed yet and runs it itself, and waits only for the
//! parts workers did claim. A worker that is parked, or whose core the VM has
//! given to someone else, therefore never holds a step up: on this 2-core VM
//! waiting for such a worker cost milliseconds (lattice-gru b32 h64 on two
//! threads: runs of 25 ms against 3–5 ms, bimodal, and the two-thread run
//! 2× slower than one thread before parts could be claimed).

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long an idle worker spins before it parks: long enough to bridge the
/// gaps between the steps of a run (microseconds), short enough that a team
/// between runs sleeps.
const SPIN: Duration = Duration::from_micros(200);

/// One published step: `f(c)` for every part `c < parts` (the caller runs
/// part 0). Lives on the caller's stack while the step runs.
struct Job<'a> {
    f: &'a (dyn Fn(usize) + Sync),
}

/// The step's state in one word, so that a claim is one compare-and-swap
/// that also proves the step is still the one the claimer saw: the epoch
/// (bits 24..), the parts (bits 12..24) and the next unclaimed part (bits
/// 0..12).
#[derive(Clone, Copy, PartialEq, Eq)]
struct StepState(u64);

impl StepState {
    const BITS: u32 = 12;
    const MASK: u64 = (1 << Self::BITS) - 1;

    fn new(epoch: u64, parts: usize, next: usize) -> StepState {
        StepState(epoch << (2 * Self::BITS) | (parts as u64) << Self::BITS | next as u64)
    }

    fn epoch(self) -> u64 {
        self.0 >> (2 * Self::BITS)
    }

    fn parts(self) -> usize {
        ((self.0 >> Self::BITS) & Self::MASK) as usize
    }

    fn next(self) -> usize {
        (self.0 & Self::MASK) as usize
    }

    /// The state after claiming part `next()`, if there is one to claim.
    fn claimed(self) -> Option<StepState> {
        (self.next() < self.parts()).then_some(StepState(self.0 + 1))
    }
}

/// The most parts a step can have (the claim counter's range).
const MAX_PARTS: usize = StepState::MASK as usize;

struct Shared {
    /// The current step's [`StepState`]; a new epoch publishes a step.
    state: AtomicU64,
    /// The step: a `*const Job`, valid while a part claimed by a worker has
    /// not finished (the caller waits for those before its frame goes).
    job: AtomicPtr<()>,
    /// Parts of the current step that workers claimed and finished.
    done: AtomicUsize,
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
    /// The calling thread's idle work (see [`with_idle_work`]), set only
    /// inside that call.
    static IDLE: Cell<Option<IdleWork>> = const { Cell::new(None) };
}

/// A pointer to the closure given to [`with_idle_work`], its lifetime erased;
/// valid while that call runs, which takes it out of `IDLE` before returning.
type IdleWork = NonNull<dyn FnMut() -> bool>;

/// Runs `body` with `idle` as the calling thread's *idle work*: whenever a
/// step that `body` starts on a [`Team`] has finished its own part and waits
/// for the workers, the caller calls `idle` instead of spinning, again and
/// again until the workers are done or `idle` returns false (nothing to do
/// for now; it is asked again at the next step's wait). The replay hands the
/// batching policy's next decisions to it: the schedule depends on the graph
/// alone, so decisions can run ahead of the batches while the caller would
/// otherwise spin (perf of lattice-lstm b128 h128 on two threads: the caller
/// waits in `Team::run` for about a fifth of the run).
///
/// Each call of `idle` should be short (microseconds): the step's end waits
/// for the call in progress. Steps started inside `idle` run inline, and
/// `idle` is not entered again from inside itself. A panic in `idle` is
/// resumed once the step's workers have finished.
pub fn with_idle_work<R>(idle: &mut dyn FnMut() -> bool, body: impl FnOnce() -> R) -> R {
    /// Puts the previous idle work back on return and on unwind, so the
    /// erased pointer never outlives `idle`.
    struct Restore(Option<IdleWork>);
    impl Drop for Restore {
        fn drop(&mut self) {
            IDLE.with(|c| c.set(self.0));
        }
    }
    let ptr: *mut (dyn FnMut() -> bool + '_) = idle;
    // SAFETY: only the trait object's lifetime bound changes (same layout);
    // the pointer is read only while `body` runs, and `Restore` removes it
    // from `IDLE` before `idle`'s borrow ends.
    let ptr: *mut (dyn FnMut() -> bool + 'static) = unsafe { std::mem::transmute(ptr) };
    let _restore = Restore(IDLE.with(|c| c.replace(NonNull::new(ptr))));
    body()
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
            state: AtomicU64::new(StepState::new(0, 0, 0).0),
            job: AtomicPtr::new(std::ptr::null_mut()),
            done: AtomicUsize::new(0),
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
                .spawn(move || worker(&s))?;
            team.workers.push(h);
        }
        Ok(team)
    }

    /// Runs `f(0)`, …, `f(parts − 1)` in parallel, part 0 on the calling
    /// thread, and returns when all have finished; a panic in any part is
    /// resumed here. `parts` is at most the team's threads (workers + 1);
    /// inside a part, or with `parts ≤ 1`, everything runs inline. Parts no
    /// worker has claimed when the caller is done with its own run on the
    /// caller (see the module docs), so which thread runs a part may differ
    /// from step to step; each part runs exactly once.
    pub fn run(&self, parts: usize, f: &(dyn Fn(usize) + Sync)) {
        let workers = self.workers.len();
        if parts <= 1 || workers == 0 || IN_STEP.with(Cell::get) {
            (0..parts).for_each(f);
            return;
        }
        assert!(
            parts <= workers + 1 && parts <= MAX_PARTS,
            "{parts} parts for {} threads",
            workers + 1
        );
        let job = Job { f };
        let s = &*self.shared;
        s.job
            .store(&job as *const Job as *mut (), Ordering::Relaxed);
        // No worker touches `done` now: the previous step's claimed parts
        // all finished before its `run` returned.
        s.done.store(0, Ordering::Relaxed);
        let epoch = StepState(s.state.load(Ordering::Relaxed)).epoch() + 1;
        // SeqCst pairs with the parking worker's SeqCst re-check: either it
        // sees this epoch, or this load sees it asleep. The store also
        // releases `job` and `done` to the workers' claims.
        s.state
            .store(StepState::new(epoch, parts, 1).0, Ordering::SeqCst);
        if s.sleepers.load(Ordering::SeqCst) > 0 {
            let _g = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.wake.notify_all();
        }
        let mut first_panic = run_part(f, 0).err();
        // The parts no worker has taken yet: run them here.
        let mut mine = 1;
        while let Some(c) = claim(s, epoch) {
            mine += 1;
            if let Err(p) = run_part(f, c) {
                first_panic.get_or_insert(p);
            }
        }
        let theirs = parts - mine;
        // Taken out while in use: `idle` is not re-entered from inside itself.
        let idle = IDLE.with(Cell::take);
        let mut work = idle;
        let mut idle_panic = None;
        // Every part a worker claimed finishes before `job` leaves this
        // frame; a worker that claims nothing never reads it.
        let mut spins = 0u32;
        while s.done.load(Ordering::Acquire) != theirs {
            if let Some(mut w) = work {
                IN_STEP.with(|b| b.set(true));
                // SAFETY: set by `with_idle_work`, whose closure outlives this
                // wait (the step started inside its `body`).
                let more = catch_unwind(AssertUnwindSafe(|| unsafe { w.as_mut()() }));
                IN_STEP.with(|b| b.set(false));
                match more {
                    Ok(true) => {}
                    Ok(false) => work = None,
                    Err(p) => {
                        idle_panic = Some(p);
                        work = None;
                    }
                }
                continue;
            }
            spins += 1;
            if spins < 1 << 14 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        IDLE.with(|c| c.set(idle));
        if let Some(p) = first_panic {
            resume_unwind(p);
        }
        if let Some(p) = idle_panic {
            resume_unwind(p);
        }
        if s.panicked.swap(false, Ordering::Relaxed) {
            panic!("a replay worker thread panicked");
        }
    }
}

/// Claims the next unclaimed part of step `epoch`, if that step is still
/// the current one and has one left.
fn claim(s: &Shared, epoch: u64) -> Option<usize> {
    let mut cur = StepState(s.state.load(Ordering::Acquire));
    loop {
        if cur.epoch() != epoch {
            return None;
        }
        let next = cur.claimed()?;
        match s
            .state
            .compare_exchange_weak(cur.0, next.0, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => return Some(cur.next()),
            Err(now) => cur = StepState(now),
        }
    }
}

fn run_part(f: &(dyn Fn(usize) + Sync), c: usize) -> std::thread::Result<()> {
    IN_STEP.with(|b| b.set(true));
    let r = catch_unwind(AssertUnwindSafe(|| f(c)));
    IN_STEP.with(|b| b.set(false));
    r
}

fn worker(s: &Shared) {
    let mut seen = 0u64;
    let epoch = || StepState(s.state.load(Ordering::Acquire)).epoch();
    loop {
        let mut since = Instant::now();
        let mut spins = 0u32;
        loop {
            if epoch() != seen {
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
            while StepState(s.state.load(Ordering::SeqCst)).epoch() == seen
                && !s.stop.load(Ordering::SeqCst)
            {
                g = s.wake.wait(g).unwrap_or_else(|e| e.into_inner());
            }
            s.sleepers.fetch_sub(1, Ordering::SeqCst);
            drop(g);
            since = Instant::now();
        }
        seen = epoch();
        while let Some(c) = claim(s, seen) {
            // SAFETY: the claim succeeded in step `seen`, whose caller keeps
            // the job alive until this part is counted in `done`.
            let job = unsafe { &*(s.job.load(Ordering::Relaxed) as *const Job) };
            if run_part(job.f, c).is_err() {
                s.panicked.store(true, Ordering::Relaxed);
            }
            s.done.fetch_add(1, Ordering::Release);
        }
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

    /// A worker that is asleep (or whose core is busy) does not hold a step
    /// up: the caller runs the part itself, and every part still runs once.
    #[test]
    fn the_caller_runs_the_parts_a_parked_worker_has_not_claimed() {
        let team = Team::new(1, "test").unwrap();
        std::thread::sleep(SPIN * 5);
        let on_caller = AtomicUsize::new(0);
        let hits: Vec<AtomicUsize> = (0..2).map(|_| AtomicUsize::new(0)).collect();
        let caller = std::thread::current().id();
        for _ in 0..200 {
            team.run(2, &|c| {
                hits[c].fetch_add(1, Ordering::Relaxed);
                if std::thread::current().id() == caller {
                    on_caller.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        let got: Vec<usize> = hits.iter().map(|h| h.load(Ordering::Relaxed)).collect();
        assert_eq!(got, [200, 200]);
        // Part 0 always runs on the caller; part 1 wherever it was claimed.
        assert!(on_caller.load(Ordering::Relaxed) >= 200);
    }

    /// Both threads run parts at once when the worker is awake: the step
    /// is really parallel, not the caller doing everything.
    #[test]
    fn an_awake_worker_claims_a_part_while_the_caller_runs_its_own() {
        let team = Team::new(1, "test").unwrap();
        let started = AtomicBool::new(false);
        team.run(2, &|c| {
            if c == 1 {
                started.store(true, Ordering::Release);
            } else {
                // Returns only once another thread has run part 1.
                while !started.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
            }
        });
        assert!(started.load(Ordering::Relaxed));
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

    /// A two-part step whose part 1, on the worker, holds until `gate` opens
    /// (the test's idle work opens it): part 0 (the caller's) returns only
    /// once part 1 has started, so the caller cannot claim it and has to wait
    /// for it, and the wait cannot end before the idle work ran. A sleeping
    /// part let a caller descheduled for the whole sleep (a loaded CI
    /// machine) find the step done and never wait. `each` runs at the end of
    /// both parts. The gate gives up after 10 s so that a broken team fails
    /// the test instead of hanging it.
    fn step_with_a_part_held_on_the_worker(
        team: &Team,
        gate: &AtomicBool,
        each: &(dyn Fn() + Sync),
    ) {
        let started = AtomicBool::new(false);
        team.run(2, &|c| {
            if c == 1 {
                started.store(true, Ordering::Release);
                let t0 = std::time::Instant::now();
                while !gate.load(Ordering::Acquire) && t0.elapsed() < Duration::from_secs(10) {
                    std::thread::yield_now();
                }
            } else {
                while !started.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
            }
            each();
        });
    }

    /// The caller's idle work runs while it waits for a slow worker, steps
    /// started inside it run inline, it is never entered from inside itself,
    /// and outside `with_idle_work` nothing calls it.
    #[test]
    fn idle_work_runs_while_the_caller_waits_and_is_not_reentered() {
        let team = Team::new(1, "test").unwrap();
        let parts = AtomicUsize::new(0);
        let calls = Cell::new(0usize);
        let depth = Cell::new(0usize);
        let inner = AtomicUsize::new(0);
        let gate = AtomicBool::new(false);
        let mut idle = || {
            depth.set(depth.get() + 1);
            assert_eq!(depth.get(), 1, "idle work entered from inside itself");
            calls.set(calls.get() + 1);
            gate.store(true, Ordering::Release);
            // Inline: the team is busy with the outer step.
            team.run(2, &|_| {
                inner.fetch_add(1, Ordering::Relaxed);
            });
            depth.set(depth.get() - 1);
            calls.get() < 1000
        };
        with_idle_work(&mut idle, || {
            step_with_a_part_held_on_the_worker(&team, &gate, &|| {
                parts.fetch_add(1, Ordering::Relaxed);
            });
        });
        assert_eq!(parts.load(Ordering::Relaxed), 2);
        let n = calls.get();
        assert!(n >= 1, "the caller waited without its idle work");
        assert_eq!(inner.load(Ordering::Relaxed), 2 * n);
        team.run(2, &|c| {
            if c == 1 {
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        assert_eq!(calls.get(), n, "idle work called outside with_idle_work");
    }

    #[test]
    fn a_panic_in_idle_work_is_resumed_after_the_step_and_the_team_goes_on() {
        let team = Team::new(1, "test").unwrap();
        let done = AtomicUsize::new(0);
        let gate = AtomicBool::new(false);
        let mut idle = || -> bool {
            gate.store(true, Ordering::Release);
            panic!("idle")
        };
        let r = catch_unwind(AssertUnwindSafe(|| {
            with_idle_work(&mut idle, || {
                step_with_a_part_held_on_the_worker(&team, &gate, &|| {
                    done.fetch_add(1, Ordering::Relaxed);
                });
            })
        }));
        assert!(r.is_err());
        // Both parts finished before the panic was resumed.
        assert_eq!(done.load(Ordering::Relaxed), 2);
        let n = AtomicUsize::new(0);
        team.run(2, &|_| {
            n.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(n.load(Ordering::Relaxed), 2);
    }
}
