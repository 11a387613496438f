//! batchlab's one Graphviz DOT writer: finite-state machines (ED-Batch Fig.
//! 2(a) style, `search show --dot`) as dot text. No Graphviz dependency:
//! render the text with `dot -Tsvg` where Graphviz is installed.
//!
//! It lives in `engine` because the FSM does (the runtime policy), and the
//! crates that draw one (`search`) may depend on `engine` only. Every id and
//! label goes through one quoting function: quotes and backslashes escaped,
//! newlines as `\n`, so no label can break the file.

use std::collections::HashSet;
use std::fmt::Write;

use thiserror::Error;

/// One state of a finite-state machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsmState {
    /// Identifier used by edges.
    pub id: String,
    /// Text shown in the node (may contain line breaks).
    pub label: String,
    /// Marks the start state (drawn with an incoming arrow from a point).
    pub initial: bool,
    /// Extra node attributes (`shape`, `style`...), in order.
    pub attrs: Vec<(String, String)>,
}

impl FsmState {
    /// A plain state.
    pub fn new(id: impl Into<String>, label: impl Into<String>) -> FsmState {
        FsmState {
            id: id.into(),
            label: label.into(),
            initial: false,
            attrs: Vec::new(),
        }
    }

    /// The state with attribute `key = value` added.
    pub fn with(mut self, key: &str, value: &str) -> FsmState {
        self.attrs.push((key.into(), value.into()));
        self
    }
}

/// One transition: from state `from` to `to`, labelled (the action, a count).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsmEdge {
    /// Source state id.
    pub from: String,
    /// Target state id.
    pub to: String,
    /// Edge label.
    pub label: String,
}

/// A finite-state machine to draw.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Fsm {
    /// `//` comment lines at the top of the file (where the edges come from...).
    pub comments: Vec<String>,
    /// Graph title (drawn as the graph label; none when empty).
    pub title: String,
    /// States, in output order.
    pub states: Vec<FsmState>,
    /// Transitions, in output order.
    pub edges: Vec<FsmEdge>,
}

/// An edge names a state that is not declared.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("FSM edge {from} -> {to} names the undeclared state `{state}`")]
pub struct UnknownState {
    /// Edge source.
    pub from: String,
    /// Edge target.
    pub to: String,
    /// The undeclared state.
    pub state: String,
}

/// The dot text of `fsm`: left-to-right boxes, labelled edges. The output
/// depends only on the input order (deterministic).
pub fn fsm_to_dot(fsm: &Fsm) -> Result<String, UnknownState> {
    let ids: HashSet<&str> = fsm.states.iter().map(|s| s.id.as_str()).collect();
    for e in &fsm.edges {
        for state in [&e.from, &e.to] {
            if !ids.contains(state.as_str()) {
                return Err(UnknownState {
                    from: e.from.clone(),
                    to: e.to.clone(),
                    state: state.clone(),
                });
            }
        }
    }
    let mut out = String::new();
    for c in &fsm.comments {
        let _ = writeln!(out, "// {}", c.replace(['\n', '\r'], " "));
    }
    out.push_str("digraph fsm {\n");
    if !fsm.title.is_empty() {
        let _ = writeln!(out, "  label={};\n  labelloc=t;", quote(&fsm.title));
    }
    out.push_str("  rankdir=LR;\n");
    out.push_str("  node [shape=box, style=rounded, fontname=\"DejaVu Sans\"];\n");
    out.push_str("  edge [fontname=\"DejaVu Sans\", fontsize=10];\n");
    for (i, s) in fsm.states.iter().enumerate() {
        let mut attrs = format!("label={}", quote(&s.label));
        for (k, v) in &s.attrs {
            let _ = write!(attrs, ", {k}={}", quote(v));
        }
        let _ = writeln!(out, "  {} [{attrs}];", quote(&s.id));
        if s.initial {
            let _ = writeln!(out, "  __start{i} [shape=point, label=\"\"];");
            let _ = writeln!(out, "  __start{i} -> {};", quote(&s.id));
        }
    }
    for e in &fsm.edges {
        let _ = writeln!(
            out,
            "  {} -> {} [label={}];",
            quote(&e.from),
            quote(&e.to),
            quote(&e.label)
        );
    }
    out.push_str("}\n");
    Ok(out)
}

/// A dot string literal: quotes and backslashes escaped, newlines as `\n`.
fn quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for ch in s.chars() {
        match ch {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            '\r' => {}
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fsm() -> Fsm {
        let mut s0 = FsmState::new("s0", "{}");
        s0.initial = true;
        Fsm {
            comments: vec!["two\nlines".into()],
            title: "policy \"lstm\"".into(),
            states: vec![
                s0,
                FsmState::new("s1", "{lstm}\nready").with("style", "dashed"),
            ],
            edges: vec![FsmEdge {
                from: "s0".into(),
                to: "s1".into(),
                label: "batch \\ lstm".into(),
            }],
        }
    }

    #[test]
    fn dot_has_states_edges_and_escapes() {
        let dot = fsm_to_dot(&fsm()).unwrap();
        assert!(dot.starts_with("// two lines\ndigraph fsm {"), "{dot}");
        assert!(dot.contains("label=\"policy \\\"lstm\\\"\""), "{dot}");
        assert!(
            dot.contains("\"s1\" [label=\"{lstm}\\nready\", style=\"dashed\"]"),
            "{dot}"
        );
        assert!(
            dot.contains("\"s0\" -> \"s1\" [label=\"batch \\\\ lstm\"]"),
            "{dot}"
        );
        assert!(dot.contains("__start0 -> \"s0\""), "{dot}");
        assert!(dot.trim_end().ends_with('}'));
    }

    /// Regression: `search show --dot` did not escape newlines in labels,
    /// so a state token with a line break split the dot statement.
    #[test]
    fn a_label_with_a_newline_stays_on_one_dot_line() {
        let f = Fsm {
            states: vec![FsmState::new("S0", "S0: [a\nb]/x")],
            ..Fsm::default()
        };
        let dot = fsm_to_dot(&f).unwrap();
        let line = dot.lines().find(|l| l.contains("\"S0\" [")).unwrap();
        assert!(line.ends_with("[label=\"S0: [a\\nb]/x\"];"), "{dot}");
    }

    #[test]
    fn unknown_state_is_named() {
        let mut f = fsm();
        f.edges[0].to = "s9".into();
        let err = fsm_to_dot(&f).unwrap_err();
        assert!(err.to_string().contains("`s9`"), "{err}");
    }
}
