//! Stanford Sentiment Treebank s-expressions to tree shapes.
//!
//! Raw line: `(label (label word) (label ...))`. Only the bracket structure
//! is kept. Tokens are separated by ASCII spaces/tabs only: SST words can
//! contain a no-break space (the film title "8 1/2"), which must not split
//! a leaf in two. Unary nodes are collapsed into their child (and counted);
//! nodes with more than two children are rejected, not binarised, because
//! the ED-Batch trees are already binarised and silently choosing a
//! binarisation would change the workload.

use crate::data::error::DataError;
use crate::data::structures::{Tree, TreeNode};

/// What [`sst_trees_detailed`] saw besides the trees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SstStats {
    /// Unary nodes collapsed into their only child.
    pub unary_collapsed: usize,
    /// Blank lines skipped.
    pub blank_lines: usize,
}

/// Converts SST trees, one per non-blank line. `file` names the input in
/// errors.
pub fn sst_trees(raw: &str, file: &str) -> Result<Vec<Tree>, DataError> {
    sst_trees_detailed(raw, file).map(|(t, _)| t)
}

/// Like [`sst_trees`], also returning what was collapsed or skipped.
pub fn sst_trees_detailed(raw: &str, file: &str) -> Result<(Vec<Tree>, SstStats), DataError> {
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
struct Open {
    /// Byte offset of its `(`.
    pos: usize,
    has_label: bool,
    has_word: bool,
    children: Vec<u32>,
}

fn parse_line(line: &str, unary: &mut usize) -> Result<Tree, String> {
    let col_of = |byte: usize| line[..byte].chars().count() + 1;
    let bytes = line.as_bytes();
    let mut nodes: Vec<TreeNode> = Vec::new();
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
                if open.last().is_some_and(|o| !o.has_label) {
                    return Err(format!(
                        "expected a label before '(' at column {}",
                        col_of(pos)
                    ));
                }
                open.push(Open {
                    pos,
                    has_label: false,
                    has_word: false,
                    children: Vec::new(),
                });
                pos += 1;
            }
            b')' => {
                let o = open
                    .pop()
                    .ok_or_else(|| format!("unmatched ')' at column {}", col_of(pos)))?;
                let id = close(o, &mut nodes, unary).map_err(|m| m.at(col_of))?;
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
                if !o.has_label {
                    o.has_label = true;
                } else if o.has_word || !o.children.is_empty() {
                    return Err(format!(
                        "unexpected word at column {}: a node holds one word or subtrees",
                        col_of(pos)
                    ));
                } else {
                    o.has_word = true;
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
        Some(_) => Ok(Tree { nodes }),
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

/// Turns a closed constituent into a node id (new, or its child's if unary).
fn close(o: Open, nodes: &mut Vec<TreeNode>, unary: &mut usize) -> Result<u32, NodeError> {
    let fail = |what| NodeError { pos: o.pos, what };
    let node = match (o.has_label, o.has_word, o.children.as_slice()) {
        (false, _, _) => return Err(fail("has no label")),
        (true, true, _) => TreeNode::Leaf,
        (true, false, [only]) => {
            *unary += 1;
            return Ok(*only);
        }
        (true, false, &[left, right]) => TreeNode::Internal { left, right },
        (true, false, _) => return Err(fail("has a label but no word or subtree")),
    };
    let id = u32::try_from(nodes.len()).map_err(|_| fail("makes the tree too large"))?;
    nodes.push(node);
    Ok(id)
}

fn attach(parent: &mut Open, id: u32) -> Result<(), NodeError> {
    let fail = |what| NodeError {
        pos: parent.pos,
        what,
    };
    if parent.has_word {
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
