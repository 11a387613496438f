//! Stanford Sentiment Treebank s-expressions to annotated trees.
//!
//! Raw line: `(label (label word) (label ...))`. The bracket structure, every
//! node's sentiment label (0..=4) and every leaf's word *id* are kept; the
//! words themselves are not. A word's id is its frequency rank in a reference
//! split ([`Vocab`]): the converter ranks dev and test by the train split.
//! Tokens are separated by ASCII spaces/tabs only: SST words can contain a
//! no-break space (the film title "8 1/2"), which must not split a leaf in
//! two. Unary nodes are collapsed into their child (and counted), which keeps
//! the child's label; nodes with more than two children are rejected, not
//! binarised, because the ED-Batch trees are already binarised and silently
//! choosing a binarisation would change the workload.

use std::borrow::Borrow;
use std::hash::Hash;

use super::vocab::Vocab;
use crate::data::error::DataError;
use crate::data::structures::{Tree, TreeNode};

/// SST sentiment classes: labels are `0..SST_CLASSES` (very negative to very
/// positive).
pub const SST_CLASSES: u32 = 5;

/// What [`sst_trees_detailed`] saw besides the trees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SstStats {
    /// Unary nodes collapsed into their only child.
    pub unary_collapsed: usize,
    /// Blank lines skipped.
    pub blank_lines: usize,
}

/// Converts SST trees, one per non-blank line, with word ids ranked within
/// `raw` itself. `file` names the input in errors.
pub fn sst_trees(raw: &str, file: &str) -> Result<Vec<Tree>, DataError> {
    sst_trees_detailed(raw, file).map(|(t, _)| t)
}

/// Like [`sst_trees`], also returning what was collapsed or skipped.
pub fn sst_trees_detailed(raw: &str, file: &str) -> Result<(Vec<Tree>, SstStats), DataError> {
    let (parsed, stats) = parse_all(raw, file)?;
    let vocab = Vocab::by_frequency(parsed.iter().flat_map(|(_, w)| w.iter().copied()));
    Ok((assign_ids(parsed, &vocab), stats))
}

/// Converts SST trees with word ids taken from `vocab` (see [`sst_vocab`]).
pub fn sst_trees_ranked(
    raw: &str,
    file: &str,
    vocab: &Vocab<String>,
) -> Result<(Vec<Tree>, SstStats), DataError> {
    let (parsed, stats) = parse_all(raw, file)?;
    Ok((assign_ids(parsed, vocab), stats))
}

/// The word ranks of an SST file (the train split), for [`sst_trees_ranked`].
pub fn sst_vocab(raw: &str, file: &str) -> Result<Vocab<String>, DataError> {
    let (parsed, _) = parse_all(raw, file)?;
    Ok(Vocab::by_frequency(
        parsed
            .iter()
            .flat_map(|(_, w)| w.iter().map(|w| w.to_string())),
    ))
}

fn assign_ids<K: Borrow<str> + Hash + Eq + Clone>(
    parsed: Parsed<'_>,
    vocab: &Vocab<K>,
) -> Vec<Tree> {
    parsed
        .into_iter()
        .map(|(mut t, words)| {
            t.word_ids = words.iter().map(|w| vocab.id(*w)).collect();
            t
        })
        .collect()
}

/// Every tree with its labels, and its words in leaf order.
type Parsed<'a> = Vec<(Tree, Vec<&'a str>)>;

fn parse_all<'a>(raw: &'a str, file: &str) -> Result<(Parsed<'a>, SstStats), DataError> {
    let mut stats = SstStats::default();
    let mut trees = Vec::new();
    for (i, line) in raw.lines().enumerate() {
        if line.bytes().all(is_sep) {
            stats.blank_lines += 1;
            continue;
        }
        let tree = parse_line(line, &mut stats.unary_collapsed)
            .map_err(|m| DataError::parse(file, i + 1, m))?;
        trees.push(tree);
    }
    Ok((trees, stats))
}

fn is_sep(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r')
}

/// An open constituent.
struct Open<'a> {
    /// Byte offset of its `(`.
    pos: usize,
    label: Option<u32>,
    word: Option<&'a str>,
    children: Vec<u32>,
}

/// The tree being built: nodes and labels in post-order, words in leaf order.
#[derive(Default)]
struct Building<'a> {
    tree: Tree,
    words: Vec<&'a str>,
}

fn parse_line<'a>(line: &'a str, unary: &mut usize) -> Result<(Tree, Vec<&'a str>), String> {
    let col_of = |byte: usize| line[..byte].chars().count() + 1;
    let bytes = line.as_bytes();
    let mut built = Building::default();
    let mut open: Vec<Open> = Vec::new();
    let mut root: Option<u32> = None;
    let mut pos = 0;
    while pos < bytes.len() {
        let b = bytes[pos];
        if is_sep(b) {
            pos += 1;
            continue;
        }
        if root.is_some() {
            return Err(format!(
                "trailing characters after the tree at column {}",
                col_of(pos)
            ));
        }
        match b {
            b'(' => {
                if open.last().is_some_and(|o| o.label.is_none()) {
                    return Err(format!(
                        "expected a label before '(' at column {}",
                        col_of(pos)
                    ));
                }
                open.push(Open {
                    pos,
                    label: None,
                    word: None,
                    children: Vec::new(),
                });
                pos += 1;
            }
            b')' => {
                let o = open
                    .pop()
                    .ok_or_else(|| format!("unmatched ')' at column {}", col_of(pos)))?;
                let id = close(o, &mut built, unary).map_err(|m| m.at(col_of))?;
                match open.last_mut() {
                    Some(parent) => attach(parent, id).map_err(|m| m.at(col_of))?,
                    None => root = Some(id),
                }
                pos += 1;
            }
            _ => {
                // An atom: a label or a word. Splitting at ASCII bytes keeps
                // multi-byte UTF-8 sequences whole.
                let end = bytes[pos..]
                    .iter()
                    .position(|&c| is_sep(c) || c == b'(' || c == b')')
                    .map_or(bytes.len(), |n| pos + n);
                let o = open
                    .last_mut()
                    .ok_or_else(|| format!("expected '(' at column {}", col_of(pos)))?;
                let atom = &line[pos..end];
                if o.label.is_none() {
                    o.label = Some(
                        atom.parse::<u32>()
                            .ok()
                            .filter(|l| {
                                *l < SST_CLASSES && atom.bytes().all(|c| c.is_ascii_digit())
                            })
                            .ok_or_else(|| {
                                format!(
                                    "label {atom:?} at column {} is not a sentiment class 0..={}",
                                    col_of(pos),
                                    SST_CLASSES - 1
                                )
                            })?,
                    );
                } else if o.word.is_some() || !o.children.is_empty() {
                    return Err(format!(
                        "unexpected word at column {}: a node holds one word or subtrees",
                        col_of(pos)
                    ));
                } else {
                    o.word = Some(atom);
                }
                pos = end;
            }
        }
    }
    if let Some(o) = open.last() {
        return Err(format!(
            "expected ')' at end of line to close the node opened at column {}",
            col_of(o.pos)
        ));
    }
    match root {
        Some(_) => Ok((built.tree, built.words)),
        None => Err("no tree on this line".into()),
    }
}

/// A problem with the node whose `(` is at byte `pos`; `at` renders it once
/// the column is needed, so the happy path never counts characters.
struct NodeError {
    pos: usize,
    what: &'static str,
}

impl NodeError {
    fn at(self, col_of: impl Fn(usize) -> usize) -> String {
        format!("node opened at column {} {}", col_of(self.pos), self.what)
    }
}

/// Turns a closed constituent into a node id (new, or its child's if unary:
/// the child keeps its own label).
fn close<'a>(o: Open<'a>, b: &mut Building<'a>, unary: &mut usize) -> Result<u32, NodeError> {
    let fail = |what| NodeError { pos: o.pos, what };
    let Some(label) = o.label else {
        return Err(fail("has no label"));
    };
    let node = match (o.word, o.children.as_slice()) {
        (Some(w), _) => {
            b.words.push(w);
            TreeNode::Leaf
        }
        (None, [only]) => {
            *unary += 1;
            return Ok(*only);
        }
        (None, &[left, right]) => TreeNode::Internal { left, right },
        (None, _) => return Err(fail("has a label but no word or subtree")),
    };
    let id = u32::try_from(b.tree.nodes.len()).map_err(|_| fail("makes the tree too large"))?;
    b.tree.nodes.push(node);
    b.tree.labels.push(label);
    Ok(id)
}

fn attach(parent: &mut Open, id: u32) -> Result<(), NodeError> {
    let fail = |what| NodeError {
        pos: parent.pos,
        what,
    };
    if parent.word.is_some() {
        return Err(fail(
            "has a word followed by a subtree: a node holds one word or subtrees",
        ));
    }
    if parent.children.len() == 2 {
        return Err(fail("has more than two children; trees must be binarised"));
    }
    parent.children.push(id);
    Ok(())
}
