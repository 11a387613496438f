//! The shapes of the benchmark inputs, optionally annotated.
//!
//! Dynamic networks only care about the *shape* of an input (which cells
//! exist and how they depend on each other) for batching; training also needs
//! the data the cells read: a word id per lookup and a gold label per loss.
//! These types keep the shapes (tree shapes, word lengths, sequence lengths,
//! lattice arcs) and, where the corpus has them, those annotations as
//! integers: labels, tags and frequency-rank ids, never the text. An
//! annotation is a vector parallel to the shape (one entry per tree node, per
//! leaf, per word...); an empty vector means "not annotated" (synthetic data,
//! v1 fixtures). Indices are `u32` to keep large corpora compact.
//!
//! Each type has a `validate` method stating its invariants; the fixture
//! parsers, the converters and the synthetic generators only ever produce
//! valid values.

use serde::{Deserialize, Serialize};

use crate::data::error::StructureError;

/// One node of a binary [`Tree`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TreeNode {
    /// A word.
    Leaf,
    /// A binary constituent; `left` and `right` index into [`Tree::nodes`].
    Internal {
        /// Index of the left child.
        left: u32,
        /// Index of the right child.
        right: u32,
    },
}

/// A binary tree stored in post-order: each node's subtrees come right
/// before it (left subtree, then right subtree, then the node), so the root
/// is the last node and every child index is smaller than its parent's.
///
/// Annotated trees (SST) also carry a label per node and a word id per leaf;
/// both vectors are empty for a structure-only tree.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Tree {
    /// The nodes in post-order.
    pub nodes: Vec<TreeNode>,
    /// Label of every node, parallel to `nodes` (SST: sentiment 0..=4), or
    /// empty.
    #[serde(default)]
    pub labels: Vec<u32>,
    /// Word id of every leaf, in leaf order (left to right, which is also the
    /// leaves' order in `nodes`), or empty. Ids are frequency ranks, see
    /// `data/README.md`.
    #[serde(default)]
    pub word_ids: Vec<u32>,
}

impl Tree {
    /// A structure-only tree.
    pub fn new(nodes: Vec<TreeNode>) -> Tree {
        Tree {
            nodes,
            ..Tree::default()
        }
    }

    /// True when the tree carries labels and word ids.
    pub fn is_annotated(&self) -> bool {
        !self.labels.is_empty() || !self.word_ids.is_empty()
    }

    /// Number of leaves.
    pub fn leaves(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| matches!(n, TreeNode::Leaf))
            .count()
    }

    /// Number of nodes (leaves and internal nodes).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when the tree has no node at all (never true for a valid tree).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Index of the root: the last node (0 for an empty tree).
    pub fn root(&self) -> u32 {
        u32::try_from(self.nodes.len().saturating_sub(1)).unwrap_or(u32::MAX)
    }

    /// Number of nodes on the longest root-to-leaf path; a single leaf has
    /// depth 1 and an empty tree depth 0. Child indices that are out of
    /// range or not smaller than their parent's count as depth 0, so this
    /// never panics on an invalid tree.
    pub fn depth(&self) -> usize {
        let mut depth = vec![0usize; self.nodes.len()];
        for (i, node) in self.nodes.iter().enumerate() {
            depth[i] = match *node {
                TreeNode::Leaf => 1,
                TreeNode::Internal { left, right } => {
                    let of = |c: u32| {
                        let c = c as usize;
                        if c < i { depth[c] } else { 0 }
                    };
                    1 + of(left).max(of(right))
                }
            };
        }
        depth.last().copied().unwrap_or(0)
    }

    /// Checks the invariants: non-empty, strict post-order (the children of
    /// an internal node are the two subtrees completed just before it), a
    /// single root, and at most `u32::MAX` nodes.
    pub fn validate(&self) -> Result<(), StructureError> {
        if self.nodes.is_empty() {
            return Err(StructureError("empty tree".into()));
        }
        if u32::try_from(self.nodes.len()).is_err() {
            return Err(StructureError("tree has more than u32::MAX nodes".into()));
        }
        // Simulates the post-order walk: completed subtrees wait on a stack
        // until their parent consumes them.
        let mut pending: Vec<u32> = Vec::new();
        for (i, node) in self.nodes.iter().enumerate() {
            if let TreeNode::Internal { left, right } = *node {
                let got_right = pending.pop();
                let got_left = pending.pop();
                if got_left != Some(left) || got_right != Some(right) {
                    return Err(StructureError(format!(
                        "node {i}: children ({left}, {right}) are not the two subtrees \
                         completed just before it (post-order expects {got_left:?}, {got_right:?})"
                    )));
                }
            }
            // Fits: the length was checked against u32::MAX above.
            pending.push(i as u32);
        }
        if pending.len() != 1 {
            return Err(StructureError(format!(
                "{} disconnected subtrees; a tree has exactly one root",
                pending.len()
            )));
        }
        if self.is_annotated() {
            annotation_len("labels", self.labels.len(), "nodes", self.nodes.len())?;
            annotation_len("word ids", self.word_ids.len(), "leaves", self.leaves())?;
        }
        Ok(())
    }
}

/// An annotation vector of an annotated structure must have one entry per
/// element it annotates (`per` names the elements, plural).
fn annotation_len(what: &str, got: usize, per: &str, want: usize) -> Result<(), StructureError> {
    if got == want {
        Ok(())
    } else {
        Err(StructureError(format!(
            "{got} {what} for {want} {per}: an annotated sample needs exactly one each"
        )))
    }
}

/// One word of a [`Sentence`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Word {
    /// Length in characters (Unicode scalar values); at least 1.
    pub chars: u32,
    /// True when the word is rare in its corpus (VPPS's BiLSTMwChar runs a
    /// character LSTM over rare words only).
    pub rare: bool,
}

/// A tagged sentence.
///
/// Annotated sentences (WikiNER) also carry a word id and a tag id per word;
/// both vectors are empty for a structure-only sentence.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Sentence {
    /// The words, in order; at least one.
    pub words: Vec<Word>,
    /// Word id of every word (a frequency rank, see `data/README.md`), or
    /// empty.
    #[serde(default)]
    pub word_ids: Vec<u32>,
    /// Tag id of every word (WikiNER: see `data/README.md` for the table), or
    /// empty.
    #[serde(default)]
    pub tags: Vec<u32>,
}

impl Sentence {
    /// A structure-only sentence.
    pub fn new(words: Vec<Word>) -> Sentence {
        Sentence {
            words,
            ..Sentence::default()
        }
    }

    /// True when the sentence carries word ids and tags.
    pub fn is_annotated(&self) -> bool {
        !self.word_ids.is_empty() || !self.tags.is_empty()
    }

    /// Checks: at least one word, every word at least one character long;
    /// when annotated, one word id and one tag per word.
    pub fn validate(&self) -> Result<(), StructureError> {
        if self.words.is_empty() {
            return Err(StructureError("empty sentence".into()));
        }
        if let Some(i) = self.words.iter().position(|w| w.chars == 0) {
            return Err(StructureError(format!(
                "word {} has zero characters",
                i + 1
            )));
        }
        if self.is_annotated() {
            annotation_len("word ids", self.word_ids.len(), "words", self.words.len())?;
            annotation_len("tags", self.tags.len(), "words", self.words.len())?;
        }
        Ok(())
    }
}

/// A translation pair, as token counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Pair {
    /// Source tokens (without `<s>`/`</s>`); at least 1.
    pub src: u32,
    /// Target tokens (without `<s>`/`</s>`); at least 1.
    pub tgt: u32,
}

impl Pair {
    /// Checks that both sides are non-empty.
    pub fn validate(&self) -> Result<(), StructureError> {
        if self.src == 0 || self.tgt == 0 {
            return Err(StructureError(format!(
                "empty side in pair (src {}, tgt {})",
                self.src, self.tgt
            )));
        }
        Ok(())
    }
}

/// A character/word lattice (LatticeLSTM, LatticeGRU).
///
/// Node `i` stands for character `i`. A recorder builds one char cell per
/// node, fed by the char cell of node `i - 1` when `char_arc[i]`, and one word
/// cell per word arc `(from, to)`, fed by the char cell at `from` and feeding
/// the char cell at `to`.
///
/// Annotated lattices (Weibo) also carry a tag id per node, a character id per
/// char arc and a word id per word arc; all three vectors are empty for a
/// structure-only lattice.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Lattice {
    /// Number of nodes; at least 1.
    pub nodes: u32,
    /// `char_arc[i]`: node `i` has an arc from node `i - 1`. Length `nodes`;
    /// `char_arc[0]` is false. A node without one starts a new chain.
    pub char_arc: Vec<bool>,
    /// Word arcs `(from, to)` with `from + 1 < to < nodes`, strictly sorted by
    /// `(to, from)` (so no duplicates).
    pub word_arcs: Vec<(u32, u32)>,
    /// Tag id of every node, or empty.
    #[serde(default)]
    pub tags: Vec<u32>,
    /// Character id (a frequency rank) of every char arc, in node order: the
    /// `k`-th entry belongs to the `k`-th node `i` with `char_arc[i]`. Empty
    /// when not annotated.
    #[serde(default)]
    pub char_ids: Vec<u32>,
    /// Word id (a frequency rank) of every word arc, parallel to `word_arcs`;
    /// empty when not annotated.
    #[serde(default)]
    pub word_ids: Vec<u32>,
}

impl Lattice {
    /// A structure-only lattice.
    pub fn new(nodes: u32, char_arc: Vec<bool>, word_arcs: Vec<(u32, u32)>) -> Lattice {
        Lattice {
            nodes,
            char_arc,
            word_arcs,
            ..Lattice::default()
        }
    }

    /// True when the lattice carries tags and ids. A valid annotated lattice
    /// has a tag per node, so the tags alone decide.
    pub fn is_annotated(&self) -> bool {
        !self.tags.is_empty() || !self.char_ids.is_empty() || !self.word_ids.is_empty()
    }

    /// Checks the invariants documented on the fields.
    pub fn validate(&self) -> Result<(), StructureError> {
        if self.nodes == 0 {
            return Err(StructureError("lattice has no nodes".into()));
        }
        if self.char_arc.len() != self.nodes as usize {
            return Err(StructureError(format!(
                "char_arc has {} entries for {} nodes",
                self.char_arc.len(),
                self.nodes
            )));
        }
        if self.char_arc[0] {
            return Err(StructureError("node 0 cannot have a char arc".into()));
        }
        let mut prev: Option<(u32, u32)> = None;
        for &(from, to) in &self.word_arcs {
            if from.checked_add(1).is_none_or(|f1| f1 >= to) || to >= self.nodes {
                return Err(StructureError(format!(
                    "word arc {from}-{to}: need from + 1 < to < {}",
                    self.nodes
                )));
            }
            if let Some((pf, pt)) = prev
                && (pt, pf) >= (to, from)
            {
                return Err(StructureError(format!(
                    "word arc {from}-{to} after {pf}-{pt}: arcs must be strictly sorted by (to, from)"
                )));
            }
            prev = Some((from, to));
        }
        if self.is_annotated() {
            annotation_len("tags", self.tags.len(), "nodes", self.nodes as usize)?;
            let arcs = self.char_arc.iter().filter(|&&c| c).count();
            annotation_len("char ids", self.char_ids.len(), "char arcs", arcs)?;
            annotation_len(
                "word ids",
                self.word_ids.len(),
                "word arcs",
                self.word_arcs.len(),
            )?;
        }
        Ok(())
    }
}

/// Which kind of structure a data set holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StructureKind {
    /// Binary trees (`.trees`).
    Trees,
    /// Tagged sentences (`.sents`).
    Sentences,
    /// Translation pairs (`.pairs`).
    Pairs,
    /// Character/word lattices (`.lattice`).
    Lattices,
}

impl StructureKind {
    /// All kinds, in declaration order.
    pub const ALL: [StructureKind; 4] = [
        StructureKind::Trees,
        StructureKind::Sentences,
        StructureKind::Pairs,
        StructureKind::Lattices,
    ];

    /// The word used in fixture headers (`# batchlab fixture v1 <name>`).
    pub fn name(self) -> &'static str {
        match self {
            StructureKind::Trees => "trees",
            StructureKind::Sentences => "sentences",
            StructureKind::Pairs => "pairs",
            StructureKind::Lattices => "lattices",
        }
    }

    /// The fixture file extension, without the dot.
    pub fn extension(self) -> &'static str {
        match self {
            StructureKind::Trees => "trees",
            StructureKind::Sentences => "sents",
            StructureKind::Pairs => "pairs",
            StructureKind::Lattices => "lattice",
        }
    }

    /// The kind whose fixture files end in `.{ext}`.
    pub fn from_extension(ext: &str) -> Option<StructureKind> {
        StructureKind::ALL
            .into_iter()
            .find(|k| k.extension() == ext)
    }
}

/// The samples of one data set, all of one kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Structures {
    /// Binary trees.
    Trees(Vec<Tree>),
    /// Tagged sentences.
    Sentences(Vec<Sentence>),
    /// Translation pairs.
    Pairs(Vec<Pair>),
    /// Lattices.
    Lattices(Vec<Lattice>),
}

impl Structures {
    /// Number of samples.
    pub fn len(&self) -> usize {
        match self {
            Structures::Trees(v) => v.len(),
            Structures::Sentences(v) => v.len(),
            Structures::Pairs(v) => v.len(),
            Structures::Lattices(v) => v.len(),
        }
    }

    /// The samples at `indices`, in that order.
    pub fn subset(&self, indices: &[usize]) -> Structures {
        fn pick<T: Clone>(v: &[T], idx: &[usize]) -> Vec<T> {
            idx.iter().filter_map(|&i| v.get(i).cloned()).collect()
        }
        match self {
            Structures::Trees(v) => Structures::Trees(pick(v, indices)),
            Structures::Sentences(v) => Structures::Sentences(pick(v, indices)),
            Structures::Pairs(v) => Structures::Pairs(pick(v, indices)),
            Structures::Lattices(v) => Structures::Lattices(pick(v, indices)),
        }
    }

    /// True when there is no sample.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The kind of the samples.
    pub fn kind(&self) -> StructureKind {
        match self {
            Structures::Trees(_) => StructureKind::Trees,
            Structures::Sentences(_) => StructureKind::Sentences,
            Structures::Pairs(_) => StructureKind::Pairs,
            Structures::Lattices(_) => StructureKind::Lattices,
        }
    }

    /// True when the first sample carries annotations (labels, tags, ids);
    /// [`Structures::validate`] checks that all samples agree. Pairs are never
    /// annotated.
    pub fn is_annotated(&self) -> bool {
        self.sample_annotated(0)
    }

    /// Whether sample `i` carries annotations (false when out of range).
    fn sample_annotated(&self, i: usize) -> bool {
        match self {
            Structures::Trees(v) => v.get(i).is_some_and(Tree::is_annotated),
            Structures::Sentences(v) => v.get(i).is_some_and(Sentence::is_annotated),
            Structures::Pairs(_) => false,
            Structures::Lattices(v) => v.get(i).is_some_and(Lattice::is_annotated),
        }
    }

    /// Validates every sample, and that either every sample or none is
    /// annotated; the error names the 0-based sample index.
    pub fn validate(&self) -> Result<(), StructureError> {
        fn all<T>(
            items: &[T],
            check: impl Fn(&T) -> Result<(), StructureError>,
        ) -> Result<(), StructureError> {
            for (i, item) in items.iter().enumerate() {
                check(item).map_err(|e| StructureError(format!("sample {i}: {}", e.0)))?;
            }
            Ok(())
        }
        match self {
            Structures::Trees(v) => all(v, Tree::validate),
            Structures::Sentences(v) => all(v, Sentence::validate),
            Structures::Pairs(v) => all(v, Pair::validate),
            Structures::Lattices(v) => all(v, Lattice::validate),
        }?;
        let first = self.is_annotated();
        if let Some(i) = (1..self.len()).find(|&i| self.sample_annotated(i) != first) {
            let (a, b) = if first {
                ("is", "is not")
            } else {
                ("is not", "is")
            };
            return Err(StructureError(format!(
                "sample {i}: sample 0 {a} annotated but this one {b}; \
                 annotations come with every sample or none"
            )));
        }
        Ok(())
    }
}
