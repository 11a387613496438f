//! Shortest common supersequence of two strings, through their longest
//! common subsequence: SCS(a, b) = |a| + |b| − LCS(a, b).
//!
//! LCS by the bit-parallel recurrence of Allison and Dix (as refined by
//! Hyyrö): one machine word covers 64 positions of `a`, so a pair of strings
//! of length L costs O(L² / 64). With V the bit vector over `a` (all ones at
//! the start) and M_c the positions of letter c in `a`, each letter c of `b`
//! does U = V & M_c; V = (V + U) | (V − U); the zeros of V then count the
//! LCS. Since U ⊆ V, V − U = V & !U: only the addition carries across words.

/// Length of a longest common subsequence of `a` and `b` (letters < `alphabet`).
pub(crate) fn lcs(a: &[u16], b: &[u16], alphabet: usize) -> usize {
    if a.is_empty() || b.is_empty() {
        return 0;
    }
    let words = a.len().div_ceil(64);
    let mut masks = vec![0u64; alphabet * words];
    for (i, &c) in a.iter().enumerate() {
        masks[usize::from(c) * words + i / 64] |= 1 << (i % 64);
    }
    let mut v = vec![u64::MAX; words];
    for &c in b {
        let m = &masks[usize::from(c) * words..(usize::from(c) + 1) * words];
        let mut carry = 0u64;
        for (vw, &mw) in v.iter_mut().zip(m) {
            let u = *vw & mw;
            let (s1, c1) = vw.overflowing_add(u);
            let (s2, c2) = s1.overflowing_add(carry);
            carry = u64::from(c1 || c2);
            *vw = s2 | (*vw & !u);
        }
    }
    // Zeros among the first |a| bits.
    let tail = a.len() % 64;
    let mut zeros = 0usize;
    for (i, &w) in v.iter().enumerate() {
        let valid = if i + 1 == words && tail != 0 {
            (1u64 << tail) - 1
        } else {
            u64::MAX
        };
        zeros += (!w & valid).count_ones() as usize;
    }
    zeros
}

/// Length of a shortest common supersequence of `a` and `b`.
pub(crate) fn scs(a: &[u16], b: &[u16], alphabet: usize) -> usize {
    a.len() + b.len() - lcs(a, b, alphabet)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn lcs_dp(a: &[u16], b: &[u16]) -> usize {
        let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                d[i][j] = if a[i - 1] == b[j - 1] {
                    d[i - 1][j - 1] + 1
                } else {
                    d[i - 1][j].max(d[i][j - 1])
                };
            }
        }
        d[a.len()][b.len()]
    }

    #[test]
    fn crossed_pairs_need_three() {
        assert_eq!(scs(&[0, 1], &[1, 0], 2), 3);
        assert_eq!(scs(&[], &[1, 0], 2), 2);
    }

    proptest! {
        #[test]
        fn bit_parallel_lcs_equals_the_quadratic_table(
            a in proptest::collection::vec(0u16..4, 0..200),
            b in proptest::collection::vec(0u16..4, 0..200),
        ) {
            prop_assert_eq!(lcs(&a, &b, 4), lcs_dp(&a, &b));
        }
    }
}
