//! Which kinds use which field: a field present for a kind that does not use
//! it is an error at its line (a `batches` in a planner spec means something,
//! an `executors` in a policies spec is a mistake).

use super::Cx;
use crate::error::SpecError;
use crate::spec::{Kind, RawSpec};

use Kind::{
    Peers as Pe, PlannerCompile as Pc, PlannerMemory as Pm, Policies as Po, Replay as Re,
    Training as Tr,
};

/// The kinds that use `field` (a path without its `quick.` / `exclude[i].`
/// prefix; `episodes` is the quick form of `fsm.episodes`).
pub(super) fn users(field: &str) -> &'static [Kind] {
    match field {
        "seeds" | "workloads" | "fsm" | "fsm.trainer_seed" | "fsm.episodes" | "episodes" => {
            &[Po, Tr, Re, Pe]
        }
        "repeats" => &[Tr, Pc, Re, Pe],
        "cells" | "fixed_inputs" => &[Pm, Pc],
        "policies" | "optimise" | "optimise.budget" | "optimise.max_width" | "optimise.timed"
        | "optimise_budget" | "data" | "nodes" | "max_nodes" | "random_dag" | "traces"
        | "fsm.nodes" | "fsm.teacher_budget" => &[Po],
        "encodings" => &[Tr],
        "executors" | "check" => &[Re],
        "devices" => &[Re, Pe],
        "layout_batch" => &[Re, Pe],
        "fsm.encodings" => &[Po, Re, Pe],
        "fsm.batch" | "fsm.hidden" | "fsm.seed" => &[Po, Re, Pe],
        "threads" => &[Re, Pe],
        "systems" => &[Pe],
        "rounds" => &[Re, Pe],
        "train" => &[Re, Pe],
        "lazy" | "fuse" => &[Re],
        _ => &[Po, Tr, Pm, Pc, Re, Pe],
    }
}

/// The field name without its `quick.` or `exclude[i].` prefix.
pub(super) fn base(path: &str) -> &str {
    let p = path.strip_prefix("quick.").unwrap_or(path);
    match p.strip_prefix("exclude[") {
        Some(rest) => rest.split_once("].").map_or(rest, |(_, f)| f),
        None => p,
    }
}

pub(super) fn check_fields(cx: &Cx, raw: &RawSpec) -> Result<(), SpecError> {
    for (path, loc) in raw.present() {
        let kinds = users(base(&path));
        if !kinds.contains(&cx.kind) {
            let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
            let msg = format!(
                "not used by kind {} (only by {})",
                cx.kind.name(),
                names.join(", ")
            );
            return Err(cx.at(loc, &path, msg));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::base;

    #[test]
    fn base_strips_prefixes() {
        assert_eq!(base("quick.batches"), "batches");
        assert_eq!(base("exclude[3].executors"), "executors");
        assert_eq!(base("fsm.batch"), "fsm.batch");
    }
}
