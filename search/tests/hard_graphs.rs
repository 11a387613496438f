//! Policy search on hard graphs (issue 16): the trainer never returns a
//! policy worse than the best heuristic and improves on its prior; the
//! optimiser is deterministic whatever the thread count; certified bounds
//! never exceed the optimum and, with the best-known schedule, meet the
//! proved optimum on graphs small enough for the exact search.

use std::time::Duration;

use engine::cells::CellLibrary;
use engine::graph::Graph;
use engine::sched::{
    Encoding, Exploration, FsmPolicy, HEURISTICS, SameTypeDag, heuristic, run_policy,
    validate_schedule,
};
use engine::trace::{Level, Trace};
use engine::workloads::{self, DataChoice, RecordOptions};
use proptest::prelude::*;
use search::bound::{BoundConfig, certify};
use search::export::policy_file;
use search::optimal::{OptimalConfig, optimal};
use search::optimise::{OptimiseConfig, optimise};
use search::synth::{DagParams, random_dag};
use search::trainer::{Teacher, TrainConfig, default_hyperparameters, train, train_with};

fn record(name: &str, batch: usize, seed: u64) -> Trace {
    workloads::record(
        &RecordOptions {
            workload: workloads::workload(name).unwrap(),
            data: DataChoice::Default,
            batch,
            hidden: 16,
            level: Level::Cell,
            seed,
        },
        &CellLibrary::builtin().unwrap(),
    )
    .unwrap()
}

fn best_heuristic(g: &Graph, st: &SameTypeDag) -> u64 {
    HEURISTICS
        .iter()
        .map(|h| {
            run_policy(g, st, heuristic(h).unwrap().as_mut())
                .unwrap()
                .1
                .batches
        })
        .min()
        .unwrap()
}

/// Trains, exports, and replays the policy file as the runtime would:
/// returns (runtime batches, reported batches).
fn trained_fsm(trace: &Trace, cfg: &TrainConfig, teacher: Option<&Teacher>) -> (u64, u64) {
    let g = &trace.graph;
    let st = SameTypeDag::new(g);
    let t = train_with(g, &st, cfg, teacher, &mut |_, _| {});
    let file = policy_file(&t, trace, "t.json", &cfg.hyper, cfg.seed);
    let text = file.to_yaml().unwrap();
    let back = engine::sched::PolicyFile::from_yaml(&text, "t.yaml").unwrap();
    let mut fsm = FsmPolicy::new(back).unwrap();
    let (s, stats) = run_policy(g, &st, &mut fsm).unwrap();
    validate_schedule(g, &s).unwrap();
    (stats.batches, t.report.best_batches)
}

fn cfg(encoding: Encoding, exploration: Exploration, episodes: u32) -> TrainConfig {
    let mut hyper = default_hyperparameters();
    hyper.exploration = exploration;
    hyper.max_episodes = episodes;
    hyper.rollout_every = 10;
    TrainConfig {
        encoding,
        hyper,
        seed: 3,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn trained_policy_is_never_worse_than_the_best_heuristic(
        seed in 0u64..10_000,
        types in 2usize..5,
        window in 2usize..12,
        enc in 0usize..Encoding::ALL.len(),
        step in any::<bool>(),
    ) {
        let trace = random_dag(&DagParams {
            nodes: 80,
            types,
            window,
            max_args: 2,
            instances: 2,
            seed,
        })
        .unwrap();
        let exploration = if step { Exploration::Step } else { Exploration::Key };
        let c = cfg(Encoding::ALL[enc], exploration, 40);
        let (runtime, reported) = trained_fsm(&trace, &c, None);
        prop_assert_eq!(runtime, reported, "the file replays what training reported");
        let st = SameTypeDag::new(&trace.graph);
        prop_assert!(runtime <= best_heuristic(&trace.graph, &st));
    }
}

#[test]
fn step_scheme_worse_than_typewise_hands_back_typewise_as_fallback() {
    // The regression behind issue 16: on a random 5-type DAG the reference
    // scheme's sort-cond FSM (the distilled prior) runs more batches than
    // typewise itself; the policy returned must not.
    let trace = random_dag(&DagParams {
        nodes: 600,
        ..DagParams::default()
    })
    .unwrap();
    let g = &trace.graph;
    let st = SameTypeDag::new(g);
    let c = cfg(Encoding::SortCond, Exploration::Step, 20);
    let t = train(g, &st, &c, &mut |_, _| {});
    let tw = run_policy(g, &st, &mut engine::sched::TypewisePolicy)
        .unwrap()
        .1
        .batches;
    assert!(t.report.learned_batches > tw, "the case this test pins");
    assert_eq!(t.report.fallback.as_deref(), Some("typewise"));
    assert_eq!(t.report.best_batches, tw);
    let (runtime, _) = trained_fsm(&trace, &c, None);
    assert_eq!(runtime, tw);
}

#[test]
fn key_exploration_improves_on_its_prior_after_episode_zero() {
    let trace = record("lattice-lstm", 8, 2);
    let g = &trace.graph;
    let st = SameTypeDag::new(g);
    let c = cfg(Encoding::SortCrit, Exploration::Key, 300);
    let t = train(g, &st, &c, &mut |_, _| {});
    let r = &t.report;
    assert_eq!(r.rollouts[0].episode, 0);
    assert_eq!(r.rollouts[0].best, r.prior_batches);
    assert!(r.best_batches < r.prior_batches, "{r:?}");
    assert!(r.best_episode > 0);
    // The curve is the incumbent's: it never goes up.
    assert!(r.rollouts.windows(2).all(|w| w[1].best <= w[0].best));
}

#[test]
fn a_teacher_schedule_distils_into_an_fsm_that_matches_it() {
    let trace = record("tree-lstm-2type", 8, 4);
    let g = &trace.graph;
    let st = SameTypeDag::new(g);
    let o = optimise(
        g,
        &st,
        &OptimiseConfig {
            budget: Duration::from_secs(60),
            max_width: 256,
            target: 0,
            ..OptimiseConfig::default()
        },
        &mut |_, _| {},
    )
    .unwrap();
    let teacher = Teacher {
        types: o.schedule.batches().map(|b| b.0).collect(),
        source: "test".into(),
        bound: None,
    };
    let c = cfg(Encoding::SortCritRatio, Exploration::Key, 20);
    let (runtime, reported) = trained_fsm(&trace, &c, Some(&teacher));
    assert_eq!(runtime, reported);
    assert!(
        o.batches < o.heuristic_batches,
        "a teacher better than typewise"
    );
    assert_eq!(runtime, o.batches);
}

#[test]
fn optimiser_gives_the_same_schedule_whatever_the_thread_count() {
    let trace = random_dag(&DagParams {
        nodes: 400,
        ..DagParams::default()
    })
    .unwrap();
    let g = &trace.graph;
    let st = SameTypeDag::new(g);
    let cfg = OptimiseConfig {
        budget: Duration::from_secs(300),
        max_width: 64,
        target: 0,
        ..OptimiseConfig::default()
    };
    let run = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| optimise(g, &st, &cfg, &mut |_, _| {}).unwrap())
    };
    let (one, three) = (run(1), run(3));
    assert_eq!(one.schedule, three.schedule);
    assert_eq!(one.passes.len(), three.passes.len());
    assert!(one.batches < one.heuristic_batches);
    validate_schedule(g, &one.schedule).unwrap();
}

#[test]
fn bound_and_best_known_meet_the_proved_optimum_on_small_graphs() {
    let mut graphs: Vec<Graph> = Vec::new();
    for (w, b, s) in [
        ("tree-lstm-2type", 2, 2),
        ("tree-lstm-2type", 3, 3),
        ("tree-lstm-2type", 3, 6),
        ("tree-lstm-2type", 2, 4),
        ("lattice-lstm", 2, 1),
        ("lattice-gru", 2, 1),
        ("rvnn", 1, 3),
    ] {
        graphs.push(record(w, b, s).graph);
    }
    graphs.push(
        random_dag(&DagParams {
            nodes: 48,
            types: 3,
            window: 6,
            ..DagParams::default()
        })
        .unwrap()
        .graph,
    );
    let mut above_a3 = 0;
    for g in &graphs {
        let opt = optimal(
            g,
            &OptimalConfig {
                max_nodes: 256,
                ..OptimalConfig::default()
            },
        )
        .unwrap();
        assert!(opt.proved);
        let b = certify(g, &BoundConfig::default());
        assert_eq!(b.bound, opt.batches, "certified bound = proved optimum");
        assert!(b.a3 <= b.bound);
        above_a3 += usize::from(b.a3 < b.bound);
        let st = SameTypeDag::new(g);
        let o = optimise(
            g,
            &st,
            &OptimiseConfig {
                target: b.bound,
                ..OptimiseConfig::default()
            },
            &mut |_, _| {},
        )
        .unwrap();
        assert_eq!(o.batches, opt.batches, "best-known = proved optimum");
    }
    assert!(above_a3 > 0, "some graph whose optimum is above A.3");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The group bounds alone (no whole-graph search) never exceed the optimum.
    #[test]
    fn group_bounds_never_exceed_the_optimum(
        seed in 0u64..100_000,
        types in 2usize..4,
        window in 1usize..6,
        instances in 1usize..4,
    ) {
        let g = random_dag(&DagParams {
            nodes: 36,
            types,
            window,
            max_args: 2,
            instances,
            seed,
        })
        .unwrap()
        .graph;
        let opt = optimal(&g, &OptimalConfig::default()).unwrap();
        prop_assert!(opt.proved);
        let b = certify(&g, &BoundConfig { whole_graph: false, ..BoundConfig::default() });
        prop_assert!(b.bound <= opt.batches, "bound {} > optimum {}", b.bound, opt.batches);
    }
}
