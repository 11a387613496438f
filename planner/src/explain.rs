//! `planner explain`: the planner's decisions as text, for teaching.
//!
//! Prints the in-cell schedule, the adjacency constraints, the PQ-tree after
//! each phase of Algorithm 2 (P-nodes `{..}`, Q-nodes `[..]`, a node whose
//! children were reordered by DECIDENODESORDER marked `*`), the final order
//! and every batch's copy plan. Variables print by name.

use std::fmt::Write;

use engine::cells::Cell;

use crate::align::Phase;
use crate::cost::{Access, Evaluation};
use crate::plan::{CellPlan, LayoutSource};

/// The explanation of `plan` (made from `cell` with `PlanOptions::record`
/// set, or the tree sections say they were not recorded).
///
/// # Panics
/// If `cell` is not the cell `plan` was made from.
pub fn explain(cell: &Cell, plan: &CellPlan) -> String {
    let mut s = String::new();
    // Leaf ids past the values are the pinned-prefix sentinel.
    let name = |v: usize| {
        cell.values
            .get(v)
            .map_or("^start".to_owned(), |x| x.name.clone())
    };
    let op_name = |o: usize| name(cell.ops[o].out.index());
    // Writing to a String cannot fail; the results are ignored throughout.
    let _ = writeln!(
        s,
        "cell `{}` at hidden {}, batch {}",
        plan.cell, plan.hidden, plan.batch
    );
    let _ = writeln!(
        s,
        "\n== 1. in-cell schedule (ops batched by kind + arg shapes) =="
    );
    for (t, sig) in plan.dag.type_names.iter().enumerate() {
        let ops: Vec<String> = (0..plan.dag.len())
            .filter(|&o| plan.dag.types[o] == t)
            .map(op_name)
            .collect();
        let _ = writeln!(s, "  type {t}: {sig}: {}", ops.join(", "));
    }
    let sr = &plan.search;
    let _ = writeln!(
        s,
        "  lower bound {}, minimum {} batches ({}), {} minimum schedule(s) enumerated{}, {} distinct composition(s) planned; chose #{}:",
        sr.lower_bound,
        sr.min_batches,
        if sr.exhaustive {
            "proven by exhaustive search"
        } else {
            "greedy: DAG too large to search"
        },
        sr.schedules.len(),
        if sr.truncated { " (capped)" } else { "" },
        plan.compositions,
        plan.chosen
    );
    for (b, ops) in plan.schedule().iter().enumerate() {
        let names: Vec<String> = ops.iter().map(|&o| op_name(o)).collect();
        let _ = writeln!(
            s,
            "  B{b}: {} {{{}}}",
            cell.ops[ops[0]].kind,
            names.join(", ")
        );
    }
    let _ = writeln!(
        s,
        "\n== 2. adjacency constraints (result first; broadcasts skipped) =="
    );
    for (b, spec) in plan.problem.batches.iter().enumerate() {
        if spec.len() < 2 {
            continue;
        }
        let list = |l: &[usize]| {
            let names: Vec<String> = l.iter().map(|&v| name(v)).collect();
            if l.iter().all(|&v| v == l[0]) {
                format!("({} broadcast)", names[0])
            } else {
                format!("{{{}}}", names.join(" "))
            }
        };
        let args: Vec<String> = spec.args.iter().map(|a| list(a)).collect();
        let _ = writeln!(s, "  B{b}: {} <- {}", list(&spec.result), args.join(", "));
    }
    let al = &plan.planned.alignment;
    match &al.trace {
        Some(t) => {
            let _ = writeln!(
                s,
                "\n== 3. PQ-tree after construction ==\n  {}",
                t.constructed.render(&name)
            );
            for d in al.dropped.iter().filter(|d| d.phase == Phase::Construction) {
                let _ = writeln!(
                    s,
                    "  dropped B{}: its operands cannot all be consecutive",
                    d.batch
                );
            }
            let _ = writeln!(
                s,
                "\n== 4. after BROADCASTCONSTRAINT ({} batch visits) ==\n  {}",
                al.broadcast_steps,
                t.broadcast.render(&name)
            );
            for d in al.dropped.iter().filter(|d| d.phase == Phase::Broadcast) {
                let _ = writeln!(s, "  dropped B{}: a broadcast constraint failed", d.batch);
            }
            let _ = writeln!(
                s,
                "\n== 5. DECIDENODESORDER: {} relation(s) accepted, {} refused, {} shape mismatch(es); `*` = reordered ==\n  {}",
                al.relations,
                al.conflicts,
                al.mismatches,
                t.decided.render(&name)
            );
        }
        None => {
            let _ = writeln!(s, "\n(PQ-tree phases not recorded: plan with `record` set)");
        }
    }
    let planned = &plan.planned.planned;
    let source = match plan.planned.source {
        LayoutSource::PqTree => "PQ-tree",
        LayoutSource::DynetFallback => "DyNet order (copied less than the alignment)",
    };
    let _ = writeln!(
        s,
        "\n== 6. layout ({source}), {} bytes ==",
        planned.layout.arena_bytes
    );
    for &v in &planned.layout.order {
        let _ = writeln!(
            s,
            "  {:>10}  {:>8} B  {}",
            planned.layout.offsets[v],
            plan.problem.vars[v].bytes,
            name(v)
        );
    }
    let _ = writeln!(s, "\n== 7. copy plan per batch (planned) ==");
    write_plan(&mut s, plan, &planned.eval, &name);
    let (p, b) = (&planned.eval.totals, &plan.baseline.eval.totals);
    let _ = writeln!(
        s,
        "\n== 8. totals ==\n  planned : {} memory kernels, {} bytes copied; {} broadcast(s) ({} bytes if materialised)\n  baseline: {} memory kernels, {} bytes copied (DyNet order, same schedule)",
        p.memory_kernels,
        p.copy_bytes,
        p.broadcasts,
        p.broadcast_bytes,
        b.memory_kernels,
        b.copy_bytes
    );
    s
}

fn write_plan(s: &mut String, plan: &CellPlan, eval: &Evaluation, name: &dyn Fn(usize) -> String) {
    for (b, (spec, cost)) in plan.problem.batches.iter().zip(&eval.batches).enumerate() {
        if spec.len() < 2 {
            continue;
        }
        let show = |list: &[usize], access: Access, bytes: u64| {
            let names: Vec<String> = cost.order.iter().map(|&i| name(list[i])).collect();
            if bytes > 0 {
                format!("{} [{}] {bytes} B", access.name(), names.join(" "))
            } else {
                format!("{} [{}]", access.name(), names.join(" "))
            }
        };
        let _ = writeln!(
            s,
            "  B{b}: result {}",
            show(&spec.result, cost.result.access, cost.result.copy_bytes)
        );
        for (j, (list, c)) in spec.args.iter().zip(&cost.args).enumerate() {
            let _ = writeln!(
                s,
                "       arg {} {}",
                j + 1,
                show(list, c.access, c.copy_bytes)
            );
        }
    }
}
