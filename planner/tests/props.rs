//! Property tests of the planner on random cells and random problems.
//!
//! What is asserted, and why it must hold:
//! - every planned (and baseline) layout file passes `check`: the accounting
//!   marks an operand contiguous only after verifying it;
//! - planned copy bytes never exceed the baseline's: not a property of the
//!   PQ-tree alignment (a heuristic), but of the planner, which also costs
//!   the DyNet order (with free op order per batch, a superset of the
//!   baseline's reference order) and keeps the cheaper layout;
//! - the schedule has the minimum number of batches the search proved, at
//!   least the lower bound;
//! - on problems built from a hidden perfect layout, the planner finds a
//!   zero-copy layout (measured here, see the test's note).

use engine::cells::{Arity, Cell, Op, PortInfo, PrimOp, ValueId, ValueInfo, ValueKind};
use planner::check::check_layout;
use planner::cost::{OrderPolicy, evaluate};
use planner::{
    BatchSpec, Layout, LayoutFile, LayoutSource, PlanOptions, Problem, Var, plan_cell, plan_problem,
};
use proptest::prelude::*;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const H: usize = 2;

/// A random cell: 1–3 inputs, 1–3 (bias, weight) pairs, 1–12 ops drawn from
/// sigmoid, tanh, add, mul and affine over earlier `[h]` values.
fn random_cell(seed: u64) -> Cell {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut values = Vec::new();
    let mut ports = Vec::new();
    let inputs = rng.random_range(1..=3);
    for i in 0..inputs {
        ports.push(PortInfo {
            name: format!("p{i}"),
            arity: Arity::One,
            inputs: vec![ValueId(values.len() as u32)],
        });
        values.push(ValueInfo {
            name: format!("in{i}"),
            shape: vec![H],
            kind: ValueKind::Input { port: i as u32 },
        });
    }
    let pairs = rng.random_range(1..=3);
    let mut params = Vec::new();
    for k in 0..pairs {
        for (name, shape) in [(format!("b{k}"), vec![H]), (format!("W{k}"), vec![H, H])] {
            params.push(ValueId(values.len() as u32));
            values.push(ValueInfo {
                name,
                shape,
                kind: ValueKind::Param,
            });
        }
    }
    let mut vectors: Vec<u32> = (0..inputs as u32).collect();
    let mut ops = Vec::new();
    for o in 0..rng.random_range(1..=12) {
        let pick =
            |rng: &mut Xoshiro256PlusPlus| ValueId(vectors[rng.random_range(0..vectors.len())]);
        let (kind, args) = match rng.random_range(0..5) {
            0 => (PrimOp::Sigmoid, vec![pick(&mut rng)]),
            1 => (PrimOp::Tanh, vec![pick(&mut rng)]),
            2 => (PrimOp::Add, vec![pick(&mut rng), pick(&mut rng)]),
            3 => (PrimOp::Mul, vec![pick(&mut rng), pick(&mut rng)]),
            _ => {
                let k = rng.random_range(0..pairs);
                (
                    PrimOp::Affine,
                    vec![params[2 * k], params[2 * k + 1], pick(&mut rng)],
                )
            }
        };
        let out = ValueId(values.len() as u32);
        values.push(ValueInfo {
            name: format!("v{o}"),
            shape: vec![H],
            kind: ValueKind::Op { index: o },
        });
        vectors.push(out.0);
        ops.push(Op {
            kind,
            args,
            out,
            slice: None,
            factor: None,
        });
    }
    let last = ops.last().map(|o| o.out).into_iter().collect();
    Cell {
        name: "rand".into(),
        hidden: H,
        doc: String::new(),
        values,
        ports,
        params,
        ops,
        outputs: last,
    }
}

/// A problem whose batches are all runs of one hidden permutation, every
/// operand in the same direction: a zero-copy layout exists by construction.
fn perfect_problem(seed: u64) -> Problem {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let n = rng.random_range(4..=24);
    let mut hidden: Vec<usize> = (0..n).collect();
    hidden.shuffle(&mut rng);
    let mut written = vec![false; n];
    let mut batches = Vec::new();
    for _ in 0..rng.random_range(1..=6) {
        let k = rng.random_range(2..=4.min(n));
        // A result run of variables nobody has written yet.
        let starts: Vec<usize> = (0..=n - k)
            .filter(|&s| (s..s + k).all(|p| !written[hidden[p]]))
            .collect();
        let Some(&rs) = starts.get(rng.random_range(0..starts.len().max(1))) else {
            break;
        };
        let run = |s: usize| (s..s + k).map(|p| hidden[p]).collect::<Vec<_>>();
        let result = run(rs);
        for &v in &result {
            written[v] = true;
        }
        let args = (0..rng.random_range(1..=3))
            .map(|_| {
                if rng.random_range(0..4) == 0 {
                    vec![hidden[rng.random_range(0..n)]; k] // a broadcast
                } else {
                    run(rng.random_range(0..=n - k))
                }
            })
            .collect();
        let ops = (batches.len() * 4..batches.len() * 4 + k).collect();
        batches.push(BatchSpec { ops, args, result });
    }
    Problem {
        instances: 2,
        vars: (0..n)
            .map(|i| Var {
                name: format!("v{i}"),
                bytes: 8,
                shared: false,
            })
            .collect(),
        batches,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn random_cells_plan_check_and_never_copy_more_than_dynet(seed in any::<u64>(), batch in 1usize..5) {
        let cell = random_cell(seed);
        let plan = plan_cell(&cell, batch, &PlanOptions::default()).unwrap();
        let (pt, bt) = (plan.planned.planned.eval.totals, plan.baseline.eval.totals);
        prop_assert!(pt.copy_bytes <= bt.copy_bytes, "planned {} > baseline {}", pt.copy_bytes, bt.copy_bytes);
        prop_assert!(plan.search.exhaustive);
        prop_assert_eq!(plan.schedule().len(), plan.search.min_batches);
        prop_assert!(plan.search.min_batches >= plan.search.lower_bound);
        for file in [planner::layout_file::planned_file(&cell, &plan), planner::layout_file::baseline_file(&cell, &plan)] {
            if let Err(e) = check_layout(&file, &cell) {
                return Err(TestCaseError::fail(format!("seed {seed}: {e}")));
            }
            prop_assert_eq!(LayoutFile::parse(&file.to_json(), "mem").unwrap(), file);
        }
    }

    #[test]
    fn fixed_inputs_stay_first_in_port_order(seed in any::<u64>()) {
        let cell = random_cell(seed);
        let opts = PlanOptions { fixed_inputs: true, ..PlanOptions::default() };
        let plan = plan_cell(&cell, 2, &opts).unwrap();
        let inputs = cell.ports.len();
        let order = &plan.planned.planned.layout.order;
        prop_assert_eq!(&order[..inputs], &(0..inputs).collect::<Vec<_>>()[..]);
        check_layout(&planner::layout_file::planned_file(&cell, &plan), &cell).unwrap();
    }

    #[test]
    fn accounting_is_truthful_for_the_reported_layout(seed in any::<u64>()) {
        let p = perfect_problem(seed);
        let plan = plan_problem(&p, &[], false).unwrap();
        let again = evaluate(&p, &plan.planned.layout, OrderPolicy::Best);
        prop_assert_eq!(&again, &plan.planned.eval);
        let base = evaluate(&p, &Layout::identity(&p).unwrap(), OrderPolicy::Reference);
        prop_assert!(plan.planned.eval.totals.copy_bytes <= base.totals.copy_bytes);
    }

    #[test]
    fn a_perfect_layout_is_found_when_one_exists(seed in any::<u64>()) {
        let p = perfect_problem(seed);
        let plan = plan_problem(&p, &[], false).unwrap();
        prop_assert_eq!(plan.planned.eval.totals.copy_bytes, 0, "alignment {:?}", plan.alignment);
        prop_assert_eq!(plan.source, LayoutSource::PqTree);
    }
}
