//! Frequency-rank ids: how the converters turn tokens into integers without
//! shipping the tokens.
//!
//! A token's id is its rank in a reference split (the training split where
//! the corpus has one): the most frequent token gets 0, the next 1, and so
//! on; tokens of equal count are ordered by their first occurrence in the
//! reference text (reading order). A token that does not occur in the
//! reference split gets the id [`Vocab::unseen`], one past the last rank.
//! Tokens compare exactly (case-sensitive, no normalisation).

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;

/// Ranks of the tokens of a reference split.
#[derive(Debug, Clone)]
pub struct Vocab<K> {
    // Only looked up, never iterated, so the map's order cannot leak out.
    ranks: HashMap<K, u32>,
}

impl<K: Hash + Eq + Clone> Vocab<K> {
    /// Ranks `tokens` (in reading order) by descending count, ties by first
    /// occurrence.
    pub fn by_frequency(tokens: impl IntoIterator<Item = K>) -> Vocab<K> {
        // Per distinct token: (count, first position).
        let mut seen: HashMap<K, (u64, u64)> = HashMap::new();
        for (pos, t) in tokens.into_iter().enumerate() {
            seen.entry(t).or_insert((0, pos as u64)).0 += 1;
        }
        let mut order: Vec<(K, (u64, u64))> = seen.into_iter().collect();
        // First positions are distinct, so this order is total: no hash order
        // survives the sort.
        order.sort_unstable_by_key(|&(_, (count, first))| (std::cmp::Reverse(count), first));
        let ranks = order
            .into_iter()
            .enumerate()
            .map(|(rank, (k, _))| (k, u32::try_from(rank).unwrap_or(u32::MAX)))
            .collect();
        Vocab { ranks }
    }

    /// Number of distinct tokens in the reference split.
    pub fn len(&self) -> usize {
        self.ranks.len()
    }

    /// True when the reference split had no token.
    pub fn is_empty(&self) -> bool {
        self.ranks.is_empty()
    }

    /// The id of tokens absent from the reference split: [`Vocab::len`].
    pub fn unseen(&self) -> u32 {
        u32::try_from(self.ranks.len()).unwrap_or(u32::MAX)
    }

    /// The id of `token`: its rank, or [`Vocab::unseen`].
    pub fn id<Q: Hash + Eq + ?Sized>(&self, token: &Q) -> u32
    where
        K: Borrow<Q>,
    {
        self.ranks
            .get(token)
            .copied()
            .unwrap_or_else(|| self.unseen())
    }
}
