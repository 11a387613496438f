//! Per-structure graph builders: how one input sample (a sentence, a sentence
//! pair, a parse tree, a lattice) unrolls into cell invocations, and, for an
//! annotated sample, which node reads which annotation:
//!
//! * trees: a leaf's lookup (`embed.word`, or the MV-RNN leaf cell) reads the
//!   leaf's word id; the loss of tree node `i` reads node `i`'s label, the
//!   root loss (and the time-delay apex) the root's label;
//! * sentences: `embed.word` of word `i` reads its word id, the tagger loss of
//!   word `i` its tag; character lookups and language-model losses have no
//!   recorded value;
//! * lattices: the `embed.char` of a node with a char arc reads the arc's
//!   char id, the `embed.word` of a word arc its word id. Node tags are not
//!   recorded: `ner.loss` has 9 classes and the Weibo tag ids run to 17.

use rand::RngExt;

use super::record::Rec;
use super::spec::{TreeInternal, TreeLeaf as Leaf, TreeLoss};
use crate::data::{Lattice, Pair, Sentence, Tree, TreeNode};
use crate::graph::NodeId;

/// An LSTM-style chain over `inputs`; `backward` runs it right to left. Returns the
/// states in position order. `init` seeds the first step's `prev` port.
fn chain(
    rec: &mut Rec,
    role: &str,
    inputs: &[NodeId],
    backward: bool,
    init: Option<NodeId>,
) -> Vec<NodeId> {
    let mut states = vec![NodeId(0); inputs.len()];
    let mut prev = init;
    let order: Box<dyn Iterator<Item = usize>> = if backward {
        Box::new((0..inputs.len()).rev())
    } else {
        Box::new(0..inputs.len())
    };
    for i in order {
        let s = match prev {
            Some(p) => rec.node(role, &[inputs[i], p]),
            None => rec.node(role, &[inputs[i]]),
        };
        states[i] = s;
        prev = Some(s);
    }
    states
}

fn lookups(rec: &mut Rec, role: &str, n: usize) -> Vec<NodeId> {
    (0..n).map(|_| rec.node(role, &[])).collect()
}

/// BiLSTM tagger; with `chars`, rare words are embedded by a character BiLSTM.
pub(super) fn tagger(rec: &mut Rec, s: &Sentence, chars: bool) {
    let mut embeds = Vec::with_capacity(s.words.len());
    for (i, w) in s.words.iter().enumerate() {
        if chars && w.rare && w.chars > 0 {
            let cs = lookups(rec, "embed.char", w.chars as usize);
            let f = chain(rec, "lstm.char_fwd", &cs, false, None);
            let b = chain(rec, "lstm.char_bwd", &cs, true, None);
            let (last, first) = (f[f.len() - 1], b[0]);
            embeds.push(rec.node("tagger.char_word", &[last, first]));
        } else {
            let e = rec.node("embed.word", &[]);
            rec.set_id(e, s.word_ids.get(i).copied());
            embeds.push(e);
        }
    }
    let f = chain(rec, "lstm.fwd", &embeds, false, None);
    let b = chain(rec, "lstm.bwd", &embeds, true, None);
    for i in 0..embeds.len() {
        let m = rec.node("tagger.mlp", &[f[i], b[i]]);
        let l = rec.loss("tagger.loss", m);
        rec.set_label(l, s.tags.get(i).copied());
    }
}

/// LSTM language model: a loss per step.
pub(super) fn language_model(rec: &mut Rec, s: &Sentence) {
    let e = lookups(rec, "embed.word", s.words.len());
    for (i, &v) in e.iter().enumerate() {
        rec.set_id(v, s.word_ids.get(i).copied());
    }
    for h in chain(rec, "lstm.lm", &e, false, None) {
        rec.loss("lm.loss", h);
    }
}

/// Encoder-decoder: the decoder's first step continues from the encoder's last state.
pub(super) fn nmt(rec: &mut Rec, p: &Pair) {
    let src = lookups(rec, "embed.src", p.src as usize);
    let enc = chain(rec, "lstm.enc", &src, false, None);
    let tgt = lookups(rec, "embed.tgt", p.tgt as usize);
    for h in chain(rec, "lstm.dec", &tgt, false, enc.last().copied()) {
        rec.loss("nmt.loss", h);
    }
}

/// A bottom-up tree model; `internal` gives the internal role per node.
pub(super) fn tree(rec: &mut Rec, t: &Tree, leaf: Leaf, internal: TreeInternal, loss: TreeLoss) {
    let mut out = Vec::with_capacity(t.nodes.len());
    let mut leaves = 0;
    for node in &t.nodes {
        let v = match *node {
            TreeNode::Leaf => {
                let word = t.word_ids.get(leaves).copied();
                leaves += 1;
                match leaf {
                    Leaf::EmbedThenCell(cell) => {
                        let e = rec.node("embed.word", &[]);
                        rec.set_id(e, word);
                        rec.node(cell, &[e])
                    }
                    Leaf::Cell(cell) => {
                        let c = rec.node(cell, &[]);
                        rec.set_id(c, word);
                        c
                    }
                    Leaf::Embed => {
                        let e = rec.node("embed.word", &[]);
                        rec.set_id(e, word);
                        e
                    }
                }
            }
            TreeNode::Internal { left, right } => {
                let role = match internal {
                    TreeInternal::One(r) => r,
                    TreeInternal::Coin(a, b) => {
                        if rec.rng.random_bool(0.5) {
                            a
                        } else {
                            b
                        }
                    }
                };
                rec.node(role, &[out[left as usize], out[right as usize]])
            }
        };
        out.push(v);
    }
    match loss {
        TreeLoss::EveryNode => {
            for (i, &v) in out.iter().enumerate() {
                let l = rec.loss("sentiment.loss", v);
                rec.set_label(l, t.labels.get(i).copied());
            }
        }
        TreeLoss::Root => {
            if let Some(&root) = out.last() {
                let l = rec.loss("sentiment.loss", root);
                rec.set_label(l, t.labels.last().copied());
            }
        }
    }
}

/// Time-delay triangle over the words (leaves) of tree `t`: layer k combines
/// adjacent states of layer k-1 until one remains; the apex's loss reads the
/// sentence label (the root's).
pub(super) fn time_delay(rec: &mut Rec, t: &Tree, leaf_cell: Option<&str>, combine: &str) {
    let mut layer: Vec<NodeId> = lookups(rec, "embed.word", t.leaves());
    for (i, &v) in layer.iter().enumerate() {
        rec.set_id(v, t.word_ids.get(i).copied());
    }
    if let Some(cell) = leaf_cell {
        layer = layer.iter().map(|&e| rec.node(cell, &[e])).collect();
    }
    while layer.len() > 1 {
        layer = layer
            .windows(2)
            .map(|w| rec.node(combine, &[w[0], w[1]]))
            .collect();
    }
    if let Some(&apex) = layer.first() {
        let l = rec.loss("sentiment.loss", apex);
        rec.set_label(l, t.labels.last().copied());
    }
}

/// Lattice model: per node, word cells for arcs ending there, then its char cell
/// (fed by the previous char cell over a char arc and by those word cells).
pub(super) fn lattice(rec: &mut Rec, l: &Lattice) {
    let n = l.nodes as usize;
    let mut chars: Vec<NodeId> = Vec::with_capacity(n);
    let mut arc = 0;
    let mut char_arcs = 0;
    for i in 0..n {
        let embed = rec.node("embed.char", &[]);
        let mut args = vec![embed];
        if l.char_arc.get(i).copied().unwrap_or(false) && i > 0 {
            rec.set_id(embed, l.char_ids.get(char_arcs).copied());
            char_arcs += 1;
            args.push(chars[i - 1]);
        }
        while arc < l.word_arcs.len() && l.word_arcs[arc].1 as usize == i {
            let from = l.word_arcs[arc].0 as usize;
            let e = rec.node("embed.word", &[]);
            rec.set_id(e, l.word_ids.get(arc).copied());
            args.push(rec.node("lattice.word", &[e, chars[from]]));
            arc += 1;
        }
        let c = rec.node("lattice.char", &args);
        rec.loss("ner.loss", c);
        chars.push(c);
    }
}
