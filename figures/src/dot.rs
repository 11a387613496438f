//! FSM diagrams as Graphviz dot text (no Graphviz dependency: render the
//! text with `dot -Tsvg` where Graphviz is installed).

use std::collections::HashSet;
use std::fmt::Write;

use serde::{Deserialize, Serialize};

use crate::error::FigureError;

/// One state of a finite-state machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsmState {
    /// Identifier used by edges.
    pub id: String,
    /// Text shown in the node (may contain `\n` line breaks).
    pub label: String,
    /// Marks the start state (drawn with an incoming arrow).
    #[serde(default)]
    pub initial: bool,
}

/// One transition: in state `from`, take action `label`, go to `to`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsmEdge {
    /// Source state id.
    pub from: String,
    /// Target state id.
    pub to: String,
    /// Action label, e.g. the operator type batched.
    pub label: String,
}

/// A finite-state machine to draw, e.g. a learned batching policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fsm {
    /// Graph title (drawn as the graph label).
    pub title: String,
    /// States, in output order.
    pub states: Vec<FsmState>,
    /// Transitions, in output order.
    pub edges: Vec<FsmEdge>,
}

/// The dot text of `fsm`: left-to-right, rounded boxes, labelled edges.
///
/// Fails with [`FigureError::UnknownState`] if an edge names a state that is
/// not declared. The output depends only on the input order (deterministic).
pub fn fsm_to_dot(fsm: &Fsm) -> Result<String, FigureError> {
    let ids: HashSet<&str> = fsm.states.iter().map(|s| s.id.as_str()).collect();
    for e in &fsm.edges {
        for state in [&e.from, &e.to] {
            if !ids.contains(state.as_str()) {
                return Err(FigureError::UnknownState {
                    from: e.from.clone(),
                    to: e.to.clone(),
                    state: state.clone(),
                });
            }
        }
    }
    let mut out = String::from("digraph fsm {\n");
    let _ = writeln!(out, "  label={};", quote(&fsm.title));
    out.push_str("  labelloc=t;\n  rankdir=LR;\n  fontname=\"DejaVu Sans\";\n");
    out.push_str("  node [shape=box, style=rounded, fontname=\"DejaVu Sans\"];\n");
    out.push_str("  edge [fontname=\"DejaVu Sans\", fontsize=10];\n");
    for (i, s) in fsm.states.iter().enumerate() {
        let _ = writeln!(out, "  {} [label={}];", quote(&s.id), quote(&s.label));
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
        Fsm {
            title: "policy \"lstm\"".into(),
            states: vec![
                FsmState {
                    id: "s0".into(),
                    label: "{}".into(),
                    initial: true,
                },
                FsmState {
                    id: "s1".into(),
                    label: "{lstm}\nready".into(),
                    initial: false,
                },
            ],
            edges: vec![FsmEdge {
                from: "s0".into(),
                to: "s1".into(),
                label: "batch lstm".into(),
            }],
        }
    }

    #[test]
    fn dot_has_states_edges_and_escapes() {
        let dot = fsm_to_dot(&fsm()).unwrap();
        assert!(dot.starts_with("digraph fsm {"));
        assert!(dot.contains("label=\"policy \\\"lstm\\\"\""), "{dot}");
        assert!(dot.contains("\"s1\" [label=\"{lstm}\\nready\"]"), "{dot}");
        assert!(
            dot.contains("\"s0\" -> \"s1\" [label=\"batch lstm\"]"),
            "{dot}"
        );
        assert!(dot.contains("__start0 -> \"s0\""), "{dot}");
        assert!(dot.trim_end().ends_with('}'));
    }

    #[test]
    fn unknown_state_is_named() {
        let mut f = fsm();
        f.edges[0].to = "s9".into();
        let err = fsm_to_dot(&f).unwrap_err();
        assert!(err.to_string().contains("`s9`"), "{err}");
    }
}
