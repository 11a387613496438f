//! Why tabular Q-learning (ED-Batch's scheme) stalls at episode 0 on hard
//! graphs: the evidence behind docs/results/policies.md, "Why the Q-learning
//! stalled". For each trace given (a trace file, or `dag` for the default
//! random DAG):
//!
//! 1. time aliasing: along typewise's own schedule, per state key, the spread
//!    (max − min over the key's visits) of the return-to-go under the −1
//!    reward (batches still to come) and under the bound-shaped reward
//!    (batches still to come − remaining lower bound);
//! 2. exploration noise: what one random decision costs — at every decision
//!    of typewise's schedule, each other ready type is taken once and
//!    typewise continues: the extra batches;
//! 3. representability: decisions of typewise's schedule that contradict an
//!    earlier decision in the same key, per encoding;
//! 4. the reference trainer's learning curve (greedy rollouts every 50
//!    episodes), per encoding.
//!
//! `cargo run --release -p search --example stall -- out/lattice.json dag`

use engine::graph::{Graph, NodeId, TypeId};
use engine::sched::{
    Encoding, Frontier, RemainingBound, SameTypeDag, StateEncoder, typewise_choice,
};
use engine::trace::Trace;
use search::trainer::{TrainConfig, reference_hyperparameters, train, type_ranks};

/// Typewise's schedule as types.
fn typewise(g: &Graph, st: &SameTypeDag) -> Vec<TypeId> {
    let mut f = Frontier::new(g, st);
    let mut out = Vec::new();
    let mut types = Vec::new();
    while !f.is_done() {
        let t = typewise_choice(&f);
        types.push(t);
        out.clear();
        f.step(t, &mut out);
    }
    types
}

/// Keys (under `enc`) and remaining bounds before every decision of `types`.
fn walk(g: &Graph, st: &SameTypeDag, enc: Encoding, types: &[TypeId]) -> Vec<(Vec<u16>, u32)> {
    let (_, rank) = type_ranks(g);
    let mut f = Frontier::new(g, st);
    let mut e = StateEncoder::new(enc);
    e.start(&f);
    let mut b = RemainingBound::new(&f);
    let mut out: Vec<NodeId> = Vec::new();
    let mut key = Vec::new();
    let mut seen = Vec::new();
    for &t in types {
        e.encode(&f, &rank, &mut key);
        seen.push((key.clone(), b.bound()));
        out.clear();
        f.step(t, &mut out);
        e.observe(&f, t, &out);
        b.after_step(&f, t, &out);
    }
    seen
}

fn spreads(walked: &[(Vec<u16>, u32)]) -> (f64, f64, usize) {
    let n = walked.len();
    let mut keys: Vec<&Vec<u16>> = walked.iter().map(|w| &w.0).collect();
    keys.sort();
    keys.dedup();
    let (mut plain, mut shaped) = (0.0, 0.0);
    for k in &keys {
        let visits: Vec<(u32, u32)> = walked
            .iter()
            .enumerate()
            .filter(|(_, w)| &&w.0 == k)
            .map(|(i, w)| ((n - i) as u32, w.1))
            .collect();
        let r = |f: &dyn Fn(&(u32, u32)) -> i64| {
            let v: Vec<i64> = visits.iter().map(f).collect();
            (v.iter().max().unwrap_or(&0) - v.iter().min().unwrap_or(&0)) as f64
        };
        plain += r(&|x| i64::from(x.0));
        shaped += r(&|x| i64::from(x.0) - i64::from(x.1));
    }
    let k = keys.len().max(1) as f64;
    (plain / k, shaped / k, keys.len())
}

fn conflicts(walked: &[(Vec<u16>, u32)], types: &[TypeId]) -> usize {
    let mut first: Vec<(&Vec<u16>, TypeId)> = Vec::new();
    let mut n = 0;
    for (w, &t) in walked.iter().zip(types) {
        match first.iter().find(|x| x.0 == &w.0) {
            Some(x) if x.1 != t => n += 1,
            Some(_) => {}
            None => first.push((&w.0, t)),
        }
    }
    n
}

/// Extra batches of one deviation from typewise, over every decision and
/// every other ready type.
fn deviation_cost(g: &Graph, st: &SameTypeDag, types: &[TypeId]) -> (f64, usize) {
    let base = types.len() as i64;
    let mut f = Frontier::new(g, st);
    let mut out = Vec::new();
    let (mut sum, mut count) = (0i64, 0usize);
    for &t in types {
        let alts: Vec<TypeId> = f.ready_types().filter(|&a| a != t).collect();
        for a in alts {
            let mut h = f.clone();
            out.clear();
            h.step(a, &mut out);
            while !h.is_done() {
                let c = typewise_choice(&h);
                out.clear();
                h.step(c, &mut out);
            }
            sum += h.batches() as i64 - base;
            count += 1;
        }
        out.clear();
        f.step(t, &mut out);
    }
    (sum as f64 / count.max(1) as f64, count)
}

fn main() -> anyhow::Result<()> {
    for arg in std::env::args().skip(1) {
        let trace = if arg == "dag" {
            search::synth::random_dag(&search::synth::DagParams::default())?
        } else {
            Trace::read(std::path::Path::new(&arg))?
        };
        let g = &trace.graph;
        let st = SameTypeDag::new(g);
        let tw = typewise(g, &st);
        let (cost, n) = deviation_cost(g, &st, &tw);
        println!(
            "{arg} ({}, {} nodes): typewise {} batches; one deviation from it costs {cost:.2} batches on average ({n} tried)",
            trace.workload,
            g.len(),
            tw.len()
        );
        println!(
            "  encoding         keys  conflicts  rtg spread (-1)  rtg spread (bound)  reference curve (greedy rollout every 50 episodes)"
        );
        for enc in Encoding::ALL {
            let walked = walk(g, &st, enc, &tw);
            let (plain, shaped, keys) = spreads(&walked);
            let cfg = TrainConfig {
                encoding: enc,
                hyper: reference_hyperparameters(),
                seed: 1,
            };
            let t = train(g, &st, &cfg, &mut |_, _| {});
            let curve: Vec<String> = t
                .report
                .rollouts
                .iter()
                .map(|r| r.batches.to_string())
                .collect();
            println!(
                "  {:<16} {keys:>4} {:>10} {plain:>16.1} {shaped:>19.1}  {}",
                enc.name(),
                conflicts(&walked, &tw),
                curve.join(" ")
            );
        }
    }
    Ok(())
}
