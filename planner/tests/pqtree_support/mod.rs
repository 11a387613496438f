//! Shared helpers for the PQ-tree integration tests: brute-force counting,
//! a permutation count computed from the tree's shape, and invariant checks
//! through the public read API only.

#![allow(dead_code)] // each test binary uses a different subset

use planner::pqtree::{NodeId, NodeKind, PqTree};

/// Whether the leaves of `set` occupy consecutive positions of `order`.
pub fn is_consecutive(order: &[usize], set: &[usize]) -> bool {
    if set.len() <= 1 {
        return true;
    }
    let mut pos = vec![usize::MAX; order.len()];
    for (i, &l) in order.iter().enumerate() {
        pos[l] = i;
    }
    let lo = set.iter().map(|&l| pos[l]).min().unwrap_or(0);
    let hi = set.iter().map(|&l| pos[l]).max().unwrap_or(0);
    hi - lo + 1 == set.len()
}

/// Number of permutations of `0..n` keeping every set consecutive.
pub fn brute_force_count(n: usize, sets: &[Vec<usize>]) -> u64 {
    let mut perm: Vec<usize> = (0..n).collect();
    let mut count = 0;
    loop {
        if sets.iter().all(|s| is_consecutive(&perm, s)) {
            count += 1;
        }
        if !next_permutation(&mut perm) {
            return count;
        }
    }
}

/// Lexicographic successor; false after the last permutation.
fn next_permutation(p: &mut [usize]) -> bool {
    let Some(i) = (1..p.len()).rev().find(|&i| p[i - 1] < p[i]) else {
        return false;
    };
    let j = (i..p.len()).rev().find(|&j| p[j] > p[i - 1]).unwrap_or(i);
    p.swap(i - 1, j);
    p[i..].reverse();
    true
}

/// Number of frontiers the tree represents: product of k! per P-node with
/// k children and 2 per Q-node.
pub fn represented_count(t: &PqTree) -> u128 {
    let mut total: u128 = 1;
    let mut stack = vec![t.root()];
    while let Some(x) = stack.pop() {
        let kids = t.children(x);
        match t.kind(x) {
            NodeKind::Leaf(_) => {}
            NodeKind::P => total *= (1..=kids.len() as u128).product::<u128>(),
            NodeKind::Q => total *= 2,
        }
        stack.extend(kids);
    }
    total
}

/// Checks the structural invariants visible through the read API and
/// returns the number of reachable nodes.
pub fn check_invariants(t: &PqTree) -> usize {
    let n = t.num_leaves();
    assert_eq!(t.parent(t.root()), None, "root has a parent");
    let mut seen_leaves = vec![false; n];
    let mut nodes = 0;
    let mut stack = vec![t.root()];
    while let Some(x) = stack.pop() {
        nodes += 1;
        let kids = t.children(x);
        match t.kind(x) {
            NodeKind::Leaf(l) => {
                assert!(kids.is_empty());
                assert_eq!(t.leaf_node(l), Some(x));
                assert!(!seen_leaves[l], "leaf {l} reachable twice");
                seen_leaves[l] = true;
            }
            NodeKind::P => assert!(
                kids.len() >= 2,
                "P-node with {} children in {t}",
                kids.len()
            ),
            NodeKind::Q => assert!(
                kids.len() >= 3,
                "Q-node with {} children in {t}",
                kids.len()
            ),
        }
        for &c in &kids {
            assert_eq!(t.parent(c), Some(x), "wrong parent of {c:?} in {t}");
        }
        stack.extend(kids);
    }
    assert!(seen_leaves.iter().all(|&s| s), "missing leaves in {t}");
    let mut f = t.frontier();
    f.sort_unstable();
    assert_eq!(f, (0..n).collect::<Vec<_>>());
    nodes
}

/// Canonical string of the tree built by reducing `sets` in order.
pub fn build(n: usize, sets: &[&[usize]]) -> PqTree {
    let mut t = PqTree::new(n).expect("n >= 1");
    for s in sets {
        t.reduce(s).expect("feasible in this test");
    }
    t
}

/// Leaf id helper for readability in assertions.
pub fn leaf(t: &PqTree, l: usize) -> NodeId {
    t.leaf_node(l).expect("leaf in range")
}

/// A parsed bracket-notation tree: `{..}` or `(..)` P-node, `[..]` Q-node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    Leaf(usize),
    P(Vec<Parsed>),
    Q(Vec<Parsed>),
}

/// Parses bracket notation; `<` and `>` (the oracle's full-subtree marks) are ignored.
pub fn parse(s: &str) -> Parsed {
    let tokens: Vec<char> = s.chars().filter(|c| !matches!(c, '<' | '>')).collect();
    let mut i = 0;
    let t = parse_at(&tokens, &mut i);
    assert_eq!(i, tokens.len(), "trailing input in {s:?}");
    t
}

fn parse_at(t: &[char], i: &mut usize) -> Parsed {
    while t[*i] == ' ' {
        *i += 1;
    }
    let open = t[*i];
    let close = match open {
        '{' => '}',
        '(' => ')',
        '[' => ']',
        _ => {
            let start = *i;
            while *i < t.len() && t[*i].is_ascii_digit() {
                *i += 1;
            }
            let num: String = t[start..*i].iter().collect();
            return Parsed::Leaf(num.parse().expect("leaf number"));
        }
    };
    *i += 1;
    let mut kids = Vec::new();
    loop {
        while t[*i] == ' ' {
            *i += 1;
        }
        if t[*i] == close {
            *i += 1;
            break;
        }
        kids.push(parse_at(t, i));
    }
    if open == '[' && kids.len() > 2 {
        Parsed::Q(kids)
    } else {
        Parsed::P(kids)
    }
}

/// Canonical form (same rule as `PqTree::canonical_string`) and its min leaf.
pub fn canonical(t: &Parsed) -> (String, usize) {
    match t {
        Parsed::Leaf(l) => (l.to_string(), *l),
        Parsed::P(kids) | Parsed::Q(kids) => {
            let mut c: Vec<(String, usize)> = kids.iter().map(canonical).collect();
            let is_p = matches!(t, Parsed::P(_));
            if is_p {
                c.sort_by_key(|k| k.1);
            } else if c.last().map(|k| k.1) < c.first().map(|k| k.1) {
                c.reverse();
            }
            let min = c.iter().map(|k| k.1).min().unwrap_or(usize::MAX);
            let body: Vec<String> = c.into_iter().map(|k| k.0).collect();
            let (o, cl) = if is_p { ('{', '}') } else { ('[', ']') };
            (format!("{o}{}{cl}", body.join(" ")), min)
        }
    }
}
