//! WikiNER `word|TAG` sentences to word lengths, rare-word flags, word ids
//! and tag ids.
//!
//! A word is rare when its exact, case-sensitive form occurs fewer than
//! [`RARE_BELOW`] times in the converted corpus, which is how VPPS's
//! BiLSTMwChar decides which words get a character-level LSTM. Lengths count
//! Unicode scalar values. Tokens are split at the last `|` because words may
//! contain `|` but tags do not. Word ids are frequency ranks within the
//! converted file ([`Vocab`]; ED-Batch ships one WikiNER split only), tag ids
//! the index in [`WIKINER_TAGS`].

use std::collections::HashMap;

use super::vocab::Vocab;
use crate::data::error::DataError;
use crate::data::structures::{Sentence, Word};

/// Words occurring fewer times than this in the corpus are rare.
pub const RARE_BELOW: u32 = 5;

/// The tag ids: a tag's id is its index here. The CoNLL IOB2 tag set of the
/// four WikiNER entity types, nine tags, as many classes as the tagger's
/// loss cell (`tagger.loss`); the ED-Batch file uses `O` and the `I-` tags.
pub const WIKINER_TAGS: [&str; 9] = [
    "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-MISC", "I-MISC",
];

/// Converts a WikiNER file, one sentence per non-blank line of
/// space-separated `word|TAG` tokens. `file` names the input in errors.
pub fn wikiner_sentences(raw: &str, file: &str) -> Result<Vec<Sentence>, DataError> {
    let mut sentences: Vec<Vec<(&str, u32)>> = Vec::new();
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
            let tag_id = WIKINER_TAGS.iter().position(|t| *t == tag).ok_or_else(|| {
                err(format!(
                    "unknown tag {tag:?} (expected one of {})",
                    WIKINER_TAGS.join(", ")
                ))
            })?;
            // WIKINER_TAGS has 9 entries.
            words.push((word, tag_id as u32));
        }
        if !words.is_empty() {
            sentences.push(words);
        }
    }
    // Only looked up, never iterated, so the map's order cannot leak out.
    let mut freq: HashMap<&str, u32> = HashMap::new();
    for (w, _) in sentences.iter().flatten() {
        *freq.entry(w).or_insert(0) += 1;
    }
    let vocab = Vocab::by_frequency(sentences.iter().flatten().map(|(w, _)| *w));
    let mut out = Vec::with_capacity(sentences.len());
    for (s, words) in sentences.iter().enumerate() {
        let mut sentence = Sentence::default();
        for &(w, tag) in words {
            let chars = u32::try_from(w.chars().count()).map_err(|_| {
                DataError::parse(file, 0, format!("sentence {}: word too long", s + 1))
            })?;
            let rare = freq.get(w).copied().unwrap_or(0) < RARE_BELOW;
            sentence.words.push(Word { chars, rare });
            sentence.word_ids.push(vocab.id(w));
            sentence.tags.push(tag);
        }
        out.push(sentence);
    }
    Ok(out)
}
