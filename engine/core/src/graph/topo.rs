//! User lists and topological order for a CSR argument list. Kept separate from
//! the builder because both are pure functions of the argument arrays.

use super::{GraphError, NodeId};

/// Builds the reverse (users) CSR by counting sort, so each user list is in
/// increasing node order without any sort call.
pub(super) fn users_csr(n: usize, arg_start: &[u32], args: &[NodeId]) -> (Vec<u32>, Vec<NodeId>) {
    let mut start = vec![0u32; n + 1];
    for a in args {
        start[a.index() + 1] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut users = vec![NodeId(0); args.len()];
    for v in 0..n {
        for a in &args[arg_start[v] as usize..arg_start[v + 1] as usize] {
            let slot = &mut fill[a.index()];
            users[*slot as usize] = NodeId(v as u32);
            *slot += 1;
        }
    }
    (start, users)
}

/// Kahn's algorithm, FIFO, seeded with sources in id order. On a cycle, walks
/// backwards from a stuck node along stuck arguments until a node repeats, and
/// reports that cycle in dataflow order.
pub(super) fn kahn(
    n: usize,
    arg_start: &[u32],
    args: &[NodeId],
    user_start: &[u32],
    users: &[NodeId],
) -> Result<Vec<NodeId>, GraphError> {
    let mut pending: Vec<u32> = (0..n).map(|v| arg_start[v + 1] - arg_start[v]).collect();
    let mut order: Vec<NodeId> = Vec::with_capacity(n);
    order.extend(
        (0..n as u32)
            .filter(|&v| pending[v as usize] == 0)
            .map(NodeId),
    );
    let mut head = 0;
    while head < order.len() {
        let v = order[head].index();
        head += 1;
        for u in &users[user_start[v] as usize..user_start[v + 1] as usize] {
            let p = &mut pending[u.index()];
            *p -= 1;
            if *p == 0 {
                order.push(*u);
            }
        }
    }
    if order.len() == n {
        return Ok(order);
    }
    Err(GraphError::Cycle {
        nodes: find_cycle(&pending, arg_start, args),
    })
}

/// Every node left with `pending > 0` has at least one argument also left
/// pending, so following such arguments must revisit a node.
fn find_cycle(pending: &[u32], arg_start: &[u32], args: &[NodeId]) -> Vec<u32> {
    const UNSEEN: u32 = u32::MAX;
    let mut seen_at = vec![UNSEEN; pending.len()];
    let mut path: Vec<u32> = Vec::new();
    // The smallest stuck id starts the walk, so the reported cycle is deterministic.
    let mut v = pending.iter().position(|&p| p > 0).unwrap_or(0);
    while seen_at[v] == UNSEEN {
        seen_at[v] = path.len() as u32;
        path.push(v as u32);
        let next = args[arg_start[v] as usize..arg_start[v + 1] as usize]
            .iter()
            .find(|a| pending[a.index()] > 0);
        match next {
            Some(a) => v = a.index(),
            // Unreachable for a stuck node; stop rather than loop forever.
            None => break,
        }
    }
    let first = seen_at[v] as usize;
    let mut cycle: Vec<u32> = path[first.min(path.len())..].to_vec();
    // The walk followed arguments (consumer -> producer); report producer -> consumer,
    // rotated to start at the smallest id, closing the loop.
    cycle.reverse();
    if let Some(min_pos) = cycle
        .iter()
        .enumerate()
        .min_by_key(|(_, v)| **v)
        .map(|(i, _)| i)
    {
        cycle.rotate_left(min_pos);
    }
    if let Some(&head) = cycle.first() {
        cycle.push(head);
    }
    cycle
}
