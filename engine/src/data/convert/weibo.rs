//! ED-Batch's Weibo lattice files to [`Lattice`]s.
//!
//! Raw layout: a first line with the sample count; then per sample
//! (optionally preceded by blank lines) a line with its length `L`, a line of
//! `L` tag ids, and `L` node lines `n_arcs from id from id ...`. An arc into
//! node `i` from `i - 1` is the character arc; any other arc is a word arc
//! `(from, i)`. Tag and word/char ids are checked to be numbers and dropped.
//! Duplicate arcs (two lexicon words over the same span) produce the same
//! dependency shape, so they are merged and counted.

use std::str::Lines;

use crate::data::error::DataError;
use crate::data::fixtures::MAX_LATTICE_NODES;
use crate::data::structures::Lattice;

/// What [`weibo_lattices_detailed`] saw besides the lattices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WeiboStats {
    /// Arcs dropped because the same `(from, to)` already existed (two
    /// lexicon words, or a word and a character, over the same span).
    pub duplicate_arcs: usize,
    /// Nodes other than node 0 without a char arc.
    pub start_nodes: usize,
}

/// Converts a Weibo lattice file. `file` names the input in errors.
pub fn weibo_lattices(raw: &str, file: &str) -> Result<Vec<Lattice>, DataError> {
    weibo_lattices_detailed(raw, file).map(|(l, _)| l)
}

/// Like [`weibo_lattices`], also returning merge/start-node counts.
pub fn weibo_lattices_detailed(
    raw: &str,
    file: &str,
) -> Result<(Vec<Lattice>, WeiboStats), DataError> {
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
) -> Result<Lattice, DataError> {
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
    if let Some(bad) = tags
        .split_ascii_whitespace()
        .find(|t| t.parse::<u64>().is_err())
    {
        return Err(cur.err_at(tag_no, format!("tag {bad:?} is not a non-negative integer")));
    }
    let mut char_arc = vec![false; nodes as usize];
    let mut word_arcs = Vec::new();
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
        let mut froms: Vec<u32> = Vec::with_capacity(n_arcs);
        for pair in rest.chunks_exact(2) {
            let from: u32 = parse_num(pair[0], "arc source node").map_err(err)?;
            parse_num::<u64>(pair[1], "word/char id").map_err(err)?;
            if from >= i {
                return Err(err(format!(
                    "arc from node {from}: sources must precede the node"
                )));
            }
            froms.push(from);
        }
        froms.sort_unstable();
        let before = froms.len();
        froms.dedup();
        stats.duplicate_arcs += before - froms.len();
        for from in froms {
            if from + 1 == i {
                char_arc[i as usize] = true;
            } else {
                word_arcs.push((from, i));
            }
        }
        if i > 0 && !char_arc[i as usize] {
            stats.start_nodes += 1;
        }
    }
    Ok(Lattice {
        nodes,
        char_arc,
        word_arcs,
    })
}
