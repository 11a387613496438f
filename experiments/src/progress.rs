//! Progress reporting. The runner never prints: it calls an observer with
//! [`Event`]s. [`terminal_bar`] is the observer used when none is given and
//! stderr is a terminal (an indicatif bar; warnings printed above it);
//! [`log_lines`] when stderr is not a terminal (a log, CI): a line every 30
//! seconds, so a long sweep (fig6: minutes) shows it is moving.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::expand::Run;

/// What the runner reports while it works.
#[derive(Debug)]
pub enum Event<'a> {
    /// The sweep starts: `total` runs in the spec, `todo` of them to run.
    Start {
        /// Spec name.
        spec: &'a str,
        /// Runs in the expansion.
        total: usize,
        /// Runs without a successful row yet.
        todo: usize,
    },
    /// A run starts.
    RunStarted(&'a Run),
    /// A run finished (`error` set when it failed).
    RunFinished {
        /// The run.
        run: &'a Run,
        /// Its error, if any.
        error: Option<&'a str>,
    },
    /// Something the user should know (a dropped truncated row...).
    Warning(&'a str),
    /// The sweep is over.
    Done,
}

/// An observer of [`Event`]s.
pub type Observer = Arc<dyn Fn(&Event) + Send + Sync>;

/// An indicatif progress bar on stderr.
pub fn terminal_bar() -> Observer {
    let bar = ProgressBar::new(0);
    if let Ok(style) =
        ProgressStyle::with_template("{prefix} {bar:30} {pos}/{len} [{elapsed}<{eta}] {msg}")
    {
        bar.set_style(style);
    }
    Arc::new(move |e: &Event| match e {
        Event::Start { spec, todo, .. } => {
            bar.set_prefix(spec.to_string());
            bar.set_length(*todo as u64);
        }
        Event::RunStarted(run) => bar.set_message(run.label()),
        Event::RunFinished { run, error } => {
            if let Some(err) = error {
                bar.println(format!("failed: {}: {err}", run.label()));
            }
            bar.inc(1);
        }
        Event::Warning(w) => bar.println(format!("warning: {w}")),
        Event::Done => bar.finish_and_clear(),
    })
}

/// Progress as plain lines on stderr, for logs: failures and warnings as
/// they come, and `spec: done/todo runs (failed), elapsed` at most every
/// `every` (and at the end of a sweep that took longer than that).
pub fn log_lines(every: Duration) -> Observer {
    log_lines_to(every, Arc::new(|l: String| eprintln!("{l}")))
}

/// [`log_lines`], handing each line to `out`.
pub fn log_lines_to(every: Duration, out: Arc<dyn Fn(String) + Send + Sync>) -> Observer {
    struct State {
        spec: String,
        todo: usize,
        done: usize,
        failed: usize,
        start: Instant,
        last: Instant,
    }
    let state = Mutex::new(State {
        spec: String::new(),
        todo: 0,
        done: 0,
        failed: 0,
        start: Instant::now(),
        last: Instant::now(),
    });
    Arc::new(move |e: &Event| {
        let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
        let line = |s: &State| {
            format!(
                "{}: {}/{} runs done ({} failed), {:.0} s",
                s.spec,
                s.done,
                s.todo,
                s.failed,
                s.start.elapsed().as_secs_f64()
            )
        };
        match e {
            Event::Start { spec, todo, .. } => {
                *s = State {
                    spec: spec.to_string(),
                    todo: *todo,
                    done: 0,
                    failed: 0,
                    start: Instant::now(),
                    last: Instant::now(),
                };
            }
            Event::RunStarted(_) => {}
            Event::RunFinished { run, error } => {
                s.done += 1;
                if let Some(err) = error {
                    s.failed += 1;
                    out(format!("{}: failed: {}: {err}", s.spec, run.label()));
                }
                if s.last.elapsed() >= every {
                    s.last = Instant::now();
                    out(line(&s));
                }
            }
            Event::Warning(w) => out(format!("{}: warning: {w}", s.spec)),
            Event::Done => {
                if s.start.elapsed() >= every {
                    out(line(&s));
                }
            }
        }
    })
}
