//! Progress reporting. The runner never prints: it calls an observer with
//! [`Event`]s. [`terminal_bar`] is the observer used when none is given and
//! stderr is a terminal (an indicatif bar; warnings printed above it).

use std::sync::Arc;

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
