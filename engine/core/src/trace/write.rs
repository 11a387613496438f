//! Canonical trace writer: fixed key order, two-space indent, one type and one
//! node per line. Hand-written rather than serde-derived so the layout is stable
//! (diff-friendly, byte-identical round trips) and integers are formatted
//! without the `fmt` machinery on the hot path. The version written is the
//! lowest that holds the trace: 1 without node data, else 2.

use super::{FORMAT, Trace, VERSION};
use crate::graph::NodeId;

pub(super) fn to_json(t: &Trace) -> String {
    let g = &t.graph;
    let mut out = String::with_capacity(256 + g.len() * 40 + g.num_edges() * 8);
    out.push_str("{\n  \"format\": ");
    push_json_str(&mut out, FORMAT);
    out.push_str(",\n  \"version\": ");
    push_u64(&mut out, if t.has_data() { u64::from(VERSION) } else { 1 });
    out.push_str(",\n  \"workload\": ");
    push_json_str(&mut out, &t.workload);
    out.push_str(",\n  \"meta\": ");
    // Meta is small and its keys are fixed fields then a BTreeMap: serde's output
    // order is deterministic.
    out.push_str(&serde_json::to_string(&t.meta).unwrap_or_else(|_| "{}".to_string()));
    out.push_str(",\n  \"types\": [");
    for (i, (_, op)) in g.types().iter().enumerate() {
        out.push_str(if i == 0 { "\n    " } else { ",\n    " });
        out.push_str("{\"name\": ");
        push_json_str(&mut out, &op.name);
        out.push_str(if op.batchable {
            ", \"batchable\": true}"
        } else {
            ", \"batchable\": false}"
        });
    }
    out.push_str(if g.types().is_empty() {
        "],\n"
    } else {
        "\n  ],\n"
    });
    out.push_str("  \"nodes\": [");
    for v in g.nodes() {
        out.push_str(if v.0 == 0 { "\n    " } else { ",\n    " });
        out.push_str("{\"type\": ");
        push_u64(&mut out, u64::from(g.node_type(v).0));
        out.push_str(", \"args\": [");
        push_args(&mut out, g.args(v));
        out.push(']');
        if let Some(i) = g.instance(v) {
            out.push_str(", \"instance\": ");
            push_u64(&mut out, u64::from(i));
        }
        let d = t.node_data(v);
        if !d.is_empty() {
            out.push_str(", \"data\": {");
            if let Some(id) = d.id {
                out.push_str("\"id\": ");
                push_u64(&mut out, u64::from(id));
            }
            if let Some(label) = d.label {
                out.push_str(if d.id.is_some() {
                    ", \"label\": "
                } else {
                    "\"label\": "
                });
                push_u64(&mut out, u64::from(label));
            }
            out.push('}');
        }
        out.push('}');
    }
    out.push_str(if g.is_empty() { "]\n}\n" } else { "\n  ]\n}\n" });
    out
}

fn push_args(out: &mut String, args: &[NodeId]) {
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        push_u64(out, u64::from(a.0));
    }
}

fn push_json_str(out: &mut String, s: &str) {
    // serde_json escapes exactly as JSON requires; strings here are short names.
    out.push_str(&serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string()));
}

fn push_u64(out: &mut String, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    // Only ASCII digits were written.
    out.push_str(std::str::from_utf8(&buf[i..]).unwrap_or("0"));
}
