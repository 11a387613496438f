//! ED-Batch's Weibo lattice files to [`Lattice`]s.
//!
//! Raw layout: a first line with the sample count; then per sample
//! (optionally preceded by blank lines) a line with its length `L`, a line of
//! `L` tag ids, and `L` node lines `n_arcs from id from id ...`. An arc into
//! node `i` from `i - 1` is the character arc; any other arc is a word arc
//! `(from, i)`. Tag ids are kept as they are (ED-Batch's tag numbering; node
//! 0, the start, has tag 0 throughout the data). Character and word ids are
//! ED-Batch vocabulary indices; they are re-numbered as frequency ranks
//! ([`Vocab`]) among the char arcs, respectively word arcs, of a reference
//! split (the converter uses train for every split), like the other corpora.
//! Duplicate arcs (two lexicon words over the same span) produce the same
//! dependency shape, so they are merged (the first keeps its id) and counted.

use std::str::Lines;

use super::vocab::Vocab;
use crate::data::error::DataError;
use crate::data::fixtures::MAX_LATTICE_NODES;
use crate::data::structures::Lattice;

/// Frequency ranks of the raw character and word ids of a reference split.
#[derive(Debug, Clone)]
pub struct WeiboVocab {
    /// Ranks of the ids on char arcs.
    pub chars: Vocab<u64>,
    /// Ranks of the ids on word arcs.
    pub words: Vocab<u64>,
}

/// A lattice with its tags, and the raw ids of its char arcs (node order)
/// and word arcs (arc order), before ranking.
struct Raw {
    lattice: Lattice,
    char_raw: Vec<u64>,
    word_raw: Vec<u64>,
}

/// What [`weibo_lattices_detailed`] saw besides the lattices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WeiboStats {
    /// Arcs dropped because the same `(from, to)` already existed (two
    /// lexicon words, or a word and a character, over the same span).
    pub duplicate_arcs: usize,
    /// Nodes other than node 0 without a char arc.
    pub start_nodes: usize,
}

/// Converts a Weibo lattice file, with char and word ids ranked within `raw`
/// itself. `file` names the input in errors.
pub fn weibo_lattices(raw: &str, file: &str) -> Result<Vec<Lattice>, DataError> {
    weibo_lattices_detailed(raw, file).map(|(l, _)| l)
}

/// Like [`weibo_lattices`], also returning merge/start-node counts.
pub fn weibo_lattices_detailed(
    raw: &str,
    file: &str,
) -> Result<(Vec<Lattice>, WeiboStats), DataError> {
    let (parsed, stats) = parse_all(raw, file)?;
    let vocab = vocab_of(&parsed);
    Ok((rank(parsed, &vocab), stats))
}

/// Converts a Weibo lattice file with ids ranked by `vocab` (see
/// [`weibo_vocab`]).
pub fn weibo_lattices_ranked(
    raw: &str,
    file: &str,
    vocab: &WeiboVocab,
) -> Result<(Vec<Lattice>, WeiboStats), DataError> {
    let (parsed, stats) = parse_all(raw, file)?;
    Ok((rank(parsed, vocab), stats))
}

/// The char and word id ranks of a Weibo file (the train split).
pub fn weibo_vocab(raw: &str, file: &str) -> Result<WeiboVocab, DataError> {
    let (parsed, _) = parse_all(raw, file)?;
    Ok(vocab_of(&parsed))
}

fn vocab_of(parsed: &[Raw]) -> WeiboVocab {
    WeiboVocab {
        chars: Vocab::by_frequency(parsed.iter().flat_map(|r| r.char_raw.iter().copied())),
        words: Vocab::by_frequency(parsed.iter().flat_map(|r| r.word_raw.iter().copied())),
    }
}

fn rank(parsed: Vec<Raw>, vocab: &WeiboVocab) -> Vec<Lattice> {
    parsed
        .into_iter()
        .map(|r| {
            let mut l = r.lattice;
            l.char_ids = r.char_raw.iter().map(|c| vocab.chars.id(c)).collect();
            l.word_ids = r.word_raw.iter().map(|w| vocab.words.id(w)).collect();
            l
        })
        .collect()
}

fn parse_all(raw: &str, file: &str) -> Result<(Vec<Raw>, WeiboStats), DataError> {
    let mut cur = Cursor {
        lines: raw.lines(),
        no: 0,
        file,
    };
    let mut stats = WeiboStats::default();
    let (no, first) = cur
        .next_nonblank()
        .ok_or_else(|| DataError::parse(file, 0, "empty file: expected the sample count"))?;
    let count: usize = parse_num(first.trim(), "sample count").map_err(|m| cur.err_at(no, m))?;
    let mut out = Vec::new();
    for s in 0..count {
        let (no, len_line) = cur.next_nonblank().ok_or_else(|| {
            DataError::parse(
                file,
                0,
                format!("file ends after {s} samples; the first line announced {count}"),
            )
        })?;
        out.push(sample(&mut cur, no, len_line, &mut stats)?);
    }
    if let Some((no, _)) = cur.next_nonblank() {
        return Err(cur.err_at(no, format!("content after the {count} announced samples")));
    }
    Ok((out, stats))
}

struct Cursor<'a> {
    lines: Lines<'a>,
    no: usize,
    file: &'a str,
}

impl<'a> Cursor<'a> {
    fn next_line(&mut self) -> Option<(usize, &'a str)> {
        let l = self.lines.next()?;
        self.no += 1;
        Some((self.no, l))
    }

    fn next_nonblank(&mut self) -> Option<(usize, &'a str)> {
        loop {
            let (no, l) = self.next_line()?;
            if !l.trim().is_empty() {
                return Some((no, l));
            }
        }
    }

    fn err_at(&self, line: usize, m: impl Into<String>) -> DataError {
        DataError::parse(self.file, line, m)
    }
}

fn parse_num<T: std::str::FromStr>(tok: &str, what: &str) -> Result<T, String> {
    tok.parse()
        .map_err(|_| format!("expected {what} (a non-negative integer), found {tok:?}"))
}

fn sample(
    cur: &mut Cursor<'_>,
    len_no: usize,
    len_line: &str,
    stats: &mut WeiboStats,
) -> Result<Raw, DataError> {
    let nodes: u32 =
        parse_num(len_line.trim(), "sample length").map_err(|m| cur.err_at(len_no, m))?;
    if nodes == 0 || nodes > MAX_LATTICE_NODES {
        return Err(cur.err_at(
            len_no,
            format!("sample length {nodes} outside 1..={MAX_LATTICE_NODES}"),
        ));
    }
    let (tag_no, tags) = cur.next_line().ok_or_else(|| {
        cur.err_at(
            0,
            format!("file ends before the tag line of the sample at line {len_no}"),
        )
    })?;
    let n_tags = tags.split_ascii_whitespace().count();
    if n_tags != nodes as usize {
        return Err(cur.err_at(
            tag_no,
            format!("{n_tags} tags for a sample of length {nodes}"),
        ));
    }
    let tags = tags
        .split_ascii_whitespace()
        .map(|t| {
            t.parse::<u32>().map_err(|_| {
                cur.err_at(
                    tag_no,
                    format!("tag {t:?} is not a non-negative integer below 2^32"),
                )
            })
        })
        .collect::<Result<Vec<u32>, DataError>>()?;
    let mut char_arc = vec![false; nodes as usize];
    let mut word_arcs = Vec::new();
    let (mut char_raw, mut word_raw) = (Vec::new(), Vec::new());
    for i in 0..nodes {
        let (no, line) = cur.next_line().ok_or_else(|| {
            cur.err_at(
                0,
                format!("file ends at node {i} of the sample at line {len_no}"),
            )
        })?;
        let err = |m: String| cur.err_at(no, format!("node {i}: {m}"));
        let toks: Vec<&str> = line.split_ascii_whitespace().collect();
        let (n_tok, rest) = toks
            .split_first()
            .ok_or_else(|| err("blank node line".into()))?;
        let n_arcs: usize = parse_num(n_tok, "arc count").map_err(err)?;
        if rest.len() != n_arcs.saturating_mul(2) {
            return Err(err(format!(
                "{n_arcs} arcs announced but {} numbers follow (expected pairs 'from id')",
                rest.len()
            )));
        }
        let mut arcs: Vec<(u32, u64)> = Vec::with_capacity(n_arcs);
        for pair in rest.chunks_exact(2) {
            let from: u32 = parse_num(pair[0], "arc source node").map_err(err)?;
            let id = parse_num::<u64>(pair[1], "word/char id").map_err(err)?;
            if from >= i {
                return Err(err(format!(
                    "arc from node {from}: sources must precede the node"
                )));
            }
            arcs.push((from, id));
        }
        // Stable: of duplicate arcs, the first listed stays.
        arcs.sort_by_key(|&(from, _)| from);
        let before = arcs.len();
        arcs.dedup_by_key(|&mut (from, _)| from);
        stats.duplicate_arcs += before - arcs.len();
        for (from, id) in arcs {
            if from + 1 == i {
                char_arc[i as usize] = true;
                char_raw.push(id);
            } else {
                word_arcs.push((from, i));
                word_raw.push(id);
            }
        }
        if i > 0 && !char_arc[i as usize] {
            stats.start_nodes += 1;
        }
    }
    Ok(Raw {
        lattice: Lattice {
            tags,
            ..Lattice::new(nodes, char_arc, word_arcs)
        },
        char_raw,
        word_raw,
    })
}
