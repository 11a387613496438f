//! WikiNER `word|TAG` sentences to word lengths and rare-word flags.
//!
//! A word is rare when its exact, case-sensitive form occurs fewer than
//! [`RARE_BELOW`] times in the converted corpus, which is how VPPS's
//! BiLSTMwChar decides which words get a character-level LSTM. Lengths count
//! Unicode scalar values. Tokens are split at the last `|` because words may
//! contain `|` but tags do not.

use std::collections::HashMap;

use crate::data::error::DataError;
use crate::data::structures::{Sentence, Word};

/// Words occurring fewer times than this in the corpus are rare.
pub const RARE_BELOW: u32 = 5;

/// Converts a WikiNER file, one sentence per non-blank line of
/// space-separated `word|TAG` tokens. `file` names the input in errors.
pub fn wikiner_sentences(raw: &str, file: &str) -> Result<Vec<Sentence>, DataError> {
    let mut sentences: Vec<Vec<&str>> = Vec::new();
    for (i, line) in raw.lines().enumerate() {
        let mut words = Vec::new();
        for tok in line.split([' ', '\t', '\r']).filter(|t| !t.is_empty()) {
            let err = |m: String| DataError::parse(file, i + 1, format!("token {tok:?}: {m}"));
            let (word, tag) = tok
                .rsplit_once('|')
                .ok_or_else(|| err("expected 'word|TAG'".into()))?;
            if word.is_empty() {
                return Err(err("empty word".into()));
            }
            if tag.is_empty() {
                return Err(err("empty tag".into()));
            }
            words.push(word);
        }
        if !words.is_empty() {
            sentences.push(words);
        }
    }
    // Only looked up, never iterated, so the map's order cannot leak out.
    let mut freq: HashMap<&str, u32> = HashMap::new();
    for w in sentences.iter().flatten() {
        *freq.entry(w).or_insert(0) += 1;
    }
    let mut out = Vec::with_capacity(sentences.len());
    for (s, words) in sentences.iter().enumerate() {
        let mut ws = Vec::with_capacity(words.len());
        for w in words {
            let chars = u32::try_from(w.chars().count()).map_err(|_| {
                DataError::parse(file, 0, format!("sentence {}: word too long", s + 1))
            })?;
            let rare = freq.get(w).copied().unwrap_or(0) < RARE_BELOW;
            ws.push(Word { chars, rare });
        }
        out.push(Sentence { words: ws });
    }
    Ok(out)
}
