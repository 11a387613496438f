//! Criterion benches of the policy search's hot paths (figures in
//! docs/benchmarks.md, "Policy search"): environment steps, FSM decisions,
//! the remaining bound, the optimiser. Training time per workload, end to
//! end with CPU time, is `search bench`'s.
//!
//! - `env_step`: one full episode of lattice-lstm (batch 32, hidden 64, record
//!   seed 7) with a seeded random policy; throughput in node executions.
//! - `same_type_dag`: building the same-type DAG (the transitive reduction
//!   per type) of that lattice-lstm trace and of tree-lstm's, on the calling
//!   thread (what a one-thread replay pays per run) and on rayon's pool.
//! - `fsm_decision`: on tree-lstm-2type, whose trained sort policy covers its
//!   trace (on the other workloads typewise already reaches the best rollout
//!   at episode 0, so the kept table is empty and every decision would be a
//!   fallback): `choose()` alone on the frontier of every decision of an
//!   episode (snapshots), then one episode driven by the FSM and the same
//!   episode replaying the recorded choices (their difference is the decision
//!   cost again, but within the noise of the steps).
//! - `remaining_bound`: a lattice-lstm episode (typewise) with and without
//!   the remaining-bound tracker following it (the per-step cost of the
//!   sort-crit encodings and of the bound-shaped reward).
//! - `optimise`: one beam pass of width 64 on lattice-lstm (batch 32) and on
//!   a random DAG of 3000 nodes; `certify`: the certified bound of
//!   tree-lstm-2type and of lattice-lstm (batch 32).

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use engine::cells::CellLibrary;
use engine::graph::{NodeId, TypeId};
use engine::sched::{
    BatchPolicy, Choice, Encoding, Frontier, FsmPolicy, RemainingBound, SameTypeDag,
};
use engine::trace::{Level, Trace};
use engine::workloads::{self, DataChoice, RecordOptions};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use search::bound::{BoundConfig, certify};
use search::export::policy_file;
use search::optimise::{OptimiseConfig, optimise};
use search::synth::{DagParams, random_dag};
use search::trainer::{TrainConfig, default_hyperparameters, train};

fn record(name: &str) -> Trace {
    workloads::record(
        &RecordOptions {
            workload: workloads::workload(name).expect("built-in workload"),
            data: DataChoice::Default,
            batch: 32,
            hidden: 64,
            level: Level::Cell,
            seed: 7,
        },
        &CellLibrary::builtin().expect("built-in cells"),
    )
    .expect("recording a built-in workload")
}

fn env_step(c: &mut Criterion) {
    let trace = record("lattice-lstm");
    let g = &trace.graph;
    let st = SameTypeDag::new(g);
    let mut f = Frontier::new(g, &st);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let mut ready: Vec<TypeId> = Vec::new();
    let mut out: Vec<NodeId> = Vec::new();
    let mut group = c.benchmark_group("env_step");
    group.throughput(Throughput::Elements(g.len() as u64));
    group.bench_function("lattice_lstm_b32_random_episode", |b| {
        b.iter(|| {
            f.reset();
            while !f.is_done() {
                ready.clear();
                ready.extend(f.ready_types());
                let t = ready[rng.random_range(0..ready.len())];
                out.clear();
                f.step(t, &mut out);
            }
            black_box(f.batches())
        })
    });
    group.finish();
}

fn fsm_decision(c: &mut Criterion) {
    let trace = record("tree-lstm-2type");
    let g = &trace.graph;
    let st = SameTypeDag::new(g);
    let cfg = TrainConfig {
        encoding: Encoding::Sort,
        hyper: default_hyperparameters(),
        seed: 1,
    };
    let trained = train(g, &st, &cfg, &mut |_, _| {});
    let file = policy_file(&trained, &trace, "bench", &cfg.hyper, 1);
    let mut fsm = FsmPolicy::new(file).expect("exported policy reads back");
    fsm.prepare(g).expect("policy fits its training trace");
    let mut f = Frontier::new(g, &st);
    let mut out: Vec<NodeId> = Vec::new();
    let mut choices = Vec::new();
    // The frontier at every decision, to time choose() alone on real states.
    let mut states = Vec::new();
    while !f.is_done() {
        states.push(f.clone());
        let (Choice::All(t) | Choice::AtDepth(t, _)) = fsm.choose(&f);
        choices.push(t);
        out.clear();
        f.step(t, &mut out);
    }
    let mut group = c.benchmark_group("fsm_decision");
    group.throughput(Throughput::Elements(choices.len() as u64));
    group.bench_function("tree_lstm_2type_b32_choose_only", |b| {
        b.iter(|| {
            for s in &states {
                black_box(fsm.choose(s));
            }
        })
    });
    group.bench_function("tree_lstm_2type_b32_fsm_episode", |b| {
        b.iter(|| {
            f.reset();
            while !f.is_done() {
                let (Choice::All(t) | Choice::AtDepth(t, _)) = fsm.choose(&f);
                out.clear();
                f.step(t, &mut out);
            }
            black_box(f.batches())
        })
    });
    group.bench_function("tree_lstm_2type_b32_replayed_episode", |b| {
        b.iter(|| {
            f.reset();
            for &t in &choices {
                out.clear();
                f.step(t, &mut out);
            }
            black_box(f.batches())
        })
    });
    group.finish();
}

fn remaining_bound(c: &mut Criterion) {
    let trace = record("lattice-lstm");
    let g = &trace.graph;
    let st = SameTypeDag::new(g);
    let mut f = Frontier::new(g, &st);
    let mut out: Vec<NodeId> = Vec::new();
    let mut choices = Vec::new();
    while !f.is_done() {
        let t = engine::sched::typewise_choice(&f);
        choices.push(t);
        out.clear();
        f.step(t, &mut out);
    }
    let mut group = c.benchmark_group("remaining_bound");
    group.throughput(Throughput::Elements(g.len() as u64));
    group.bench_function("lattice_lstm_b32_episode_without", |b| {
        b.iter(|| {
            f.reset();
            for &t in &choices {
                out.clear();
                f.step(t, &mut out);
            }
            black_box(f.batches())
        })
    });
    let mut rb = RemainingBound::new(&Frontier::new(g, &st));
    group.bench_function("lattice_lstm_b32_episode_with", |b| {
        b.iter(|| {
            f.reset();
            rb.reset(&f);
            for &t in &choices {
                out.clear();
                f.step(t, &mut out);
                rb.after_step(&f, t, &out);
            }
            black_box(rb.bound())
        })
    });
    group.finish();
}

fn optimise_and_certify(c: &mut Criterion) {
    let lattice = record("lattice-lstm");
    let two = record("tree-lstm-2type");
    let dag = random_dag(&DagParams::default()).expect("default DAG parameters are valid");
    let mut group = c.benchmark_group("optimise");
    group.sample_size(10);
    let pass = OptimiseConfig {
        budget: std::time::Duration::from_secs(600),
        max_width: 64,
        target: 0,
        ..OptimiseConfig::default()
    };
    for (name, t) in [
        ("lattice_lstm_b32_to_width_64", &lattice),
        ("random_dag_3000_to_width_64", &dag),
    ] {
        let st = SameTypeDag::new(&t.graph);
        group.bench_function(name, |b| {
            b.iter(|| black_box(optimise(&t.graph, &st, &pass, &mut |_, _| {}).map(|r| r.batches)))
        });
    }
    group.finish();
    let mut group = c.benchmark_group("certify");
    group.sample_size(10);
    for (name, t) in [
        ("tree_lstm_2type_b32", &two),
        ("lattice_lstm_b32", &lattice),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| black_box(certify(&t.graph, &BoundConfig::default()).bound))
        });
    }
    group.finish();
}

fn same_type_dag(c: &mut Criterion) {
    let mut group = c.benchmark_group("same_type_dag");
    for name in ["lattice-lstm", "tree-lstm"] {
        let t = record(name);
        group.throughput(Throughput::Elements(t.graph.len() as u64));
        let id = name.replace('-', "_");
        group.bench_function(format!("{id}_b32_sequential"), |b| {
            b.iter(|| black_box(SameTypeDag::sequential(&t.graph).num_edges()))
        });
        group.bench_function(format!("{id}_b32_parallel"), |b| {
            b.iter(|| black_box(SameTypeDag::new(&t.graph).num_edges()))
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    same_type_dag,
    remaining_bound,
    optimise_and_certify,
    env_step,
    fsm_decision
);
criterion_main!(benches);
