//! The workload zoo as data: each workload names its roles (a role = a cell plus
//! its own parameter set, e.g. the forward and the backward LSTM of a tagger) and
//! where its input structures come from. A node's type is `<role>[h=<hidden>]`.
//!
//! Each role lists, per port of its cell, the roles allowed to feed that port.
//! Binding an argument list to ports is then unambiguous even when two ports
//! would accept the same tensor shapes (the lattice GRU's `prev` and `words`).

use crate::data::{Dataset, StructureKind};

/// One role of a workload.
#[derive(Clone, Copy, Debug)]
pub struct RoleSpec {
    /// Role name, the type name's prefix (e.g. `lstm.fwd`).
    pub role: &'static str,
    /// Cell run by nodes of this role (see `engine::cells`).
    pub cell: &'static str,
    /// Whether nodes of this role may be batched.
    pub batchable: bool,
    /// For each port of the cell, in order, the roles that may feed it.
    pub ports: &'static [&'static [&'static str]],
}

/// Where a workload's structures come from by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultData {
    /// A shipped real data set.
    Real(Dataset),
    /// Seeded synthetic structures, as in the paper that used the workload.
    Synthetic,
}

/// How one input sample unrolls into nodes: the recorder's builder for the
/// workload (the functions of `build.rs`), named here so that a workload is
/// one entry of [`WORKLOADS`] and nothing else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builder {
    /// BiLSTM tagger over a sentence; with `chars`, rare words are embedded by
    /// a character BiLSTM.
    Tagger {
        /// Rare words through the character BiLSTM.
        chars: bool,
    },
    /// LSTM language model over a sentence, a loss per step.
    LanguageModel,
    /// Encoder-decoder over a sentence pair, a loss per target word.
    Nmt,
    /// Lattice model: word cells per lexicon arc, a char cell per node.
    Lattice,
    /// A bottom-up model over a parse tree.
    Tree {
        /// How a leaf becomes a state.
        leaf: TreeLeaf,
        /// The internal role of each internal node.
        internal: TreeInternal,
        /// Which nodes get a loss.
        loss: TreeLoss,
    },
    /// Time-delay triangle over a tree's leaves (the sentence's words).
    TimeDelay {
        /// A leaf cell run on every word's embedding first, if any.
        leaf: Option<&'static str>,
        /// The combining role.
        combine: &'static str,
    },
}

impl Builder {
    /// The structure the builder consumes.
    pub fn structure(&self) -> StructureKind {
        match self {
            Builder::Tagger { .. } | Builder::LanguageModel => StructureKind::Sentences,
            Builder::Nmt => StructureKind::Pairs,
            Builder::Lattice => StructureKind::Lattices,
            Builder::Tree { .. } | Builder::TimeDelay { .. } => StructureKind::Trees,
        }
    }
}

/// How a tree model turns a leaf into a state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TreeLeaf {
    /// A word lookup fed into this leaf role.
    EmbedThenCell(&'static str),
    /// A leaf role that does its own lookups (MV-RNN).
    Cell(&'static str),
    /// The word lookup itself is the state (Tree-FC).
    Embed,
}

/// The role of a tree's internal nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TreeInternal {
    /// One role for every internal node.
    One(&'static str),
    /// Either role, drawn 50/50 per node from the trace's seeded stream
    /// (TreeLSTM-2Type).
    Coin(&'static str, &'static str),
}

/// Which tree nodes get a loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TreeLoss {
    /// Every node (sentiment at every phrase, as in SST training).
    EveryNode,
    /// The root only.
    Root,
}

/// What `--data synthetic` draws for a workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Synthetic {
    /// SST/WikiNER-like sizes: sentences of 5-40 words, trees of 2-40
    /// leaves, lattices of 5-60 nodes.
    Natural,
    /// Sentences of exactly this many words (Cavs' Fixed-LSTM: 64).
    FixedLength(u32),
    /// Complete binary trees of this many leaves (Tree-FC: 256).
    CompleteTrees(u32),
}

/// A workload: roles plus an input-structure source and the builder that
/// unrolls one sample.
#[derive(Clone, Copy, Debug)]
pub struct WorkloadSpec {
    /// CLI name, e.g. `tree-lstm`.
    pub name: &'static str,
    /// One line on what it is.
    pub description: &'static str,
    /// The paper(s) that evaluate it.
    pub paper: &'static str,
    /// How one sample unrolls (and so the structure it consumes).
    pub builder: Builder,
    /// What `--data synthetic` draws.
    pub synthetic: Synthetic,
    /// Default data when `--data` is not given.
    pub default_data: DefaultData,
    /// Its roles, in a fixed order.
    pub roles: &'static [RoleSpec],
}

impl WorkloadSpec {
    /// The role named `role`.
    pub fn role(&self, role: &str) -> Option<&RoleSpec> {
        self.roles.iter().find(|r| r.role == role)
    }

    /// Kind of structure it consumes.
    pub fn structure(&self) -> StructureKind {
        self.builder.structure()
    }
}

const fn role(
    role: &'static str,
    cell: &'static str,
    ports: &'static [&'static [&'static str]],
) -> RoleSpec {
    RoleSpec {
        role,
        cell,
        batchable: true,
        ports,
    }
}

const LOSS_SUM: RoleSpec = RoleSpec {
    role: "loss.sum",
    cell: "loss.sum",
    batchable: false,
    ports: &[&[
        "tagger.loss",
        "sentiment.loss",
        "nmt.loss",
        "ner.loss",
        "lm.loss",
    ]],
};

const TAGGER_TAIL: [RoleSpec; 3] = [
    role("tagger.mlp", "tagger.mlp", &[&["lstm.fwd"], &["lstm.bwd"]]),
    role("tagger.loss", "tagger.loss", &[&["tagger.mlp"]]),
    LOSS_SUM,
];

/// Every workload, in the order `engine workloads` lists them.
pub const WORKLOADS: &[WorkloadSpec] = &[
    WorkloadSpec {
        name: "bilstm-tagger",
        description: "bidirectional LSTM named-entity tagger: word lookups, forward and backward LSTM chains, MLP and loss per word",
        paper: "ED-Batch Table 1; VPPS BiLSTM",
        builder: Builder::Tagger { chars: false },
        synthetic: Synthetic::Natural,
        default_data: DefaultData::Real(Dataset::WikinerDev),
        roles: &[
            role("embed.word", "lookup", &[]),
            role("lstm.fwd", "lstm", &[&["embed.word"], &["lstm.fwd"]]),
            role("lstm.bwd", "lstm", &[&["embed.word"], &["lstm.bwd"]]),
            TAGGER_TAIL[0],
            TAGGER_TAIL[1],
            TAGGER_TAIL[2],
        ],
    },
    WorkloadSpec {
        name: "bilstm-tagger-char",
        description: "BiLSTM tagger whose rare words (frequency < 5) get their embedding from a character BiLSTM",
        paper: "ED-Batch Table 4 (BiLSTM-tagger-withchar); VPPS BiLSTMwChar",
        builder: Builder::Tagger { chars: true },
        synthetic: Synthetic::Natural,
        default_data: DefaultData::Real(Dataset::WikinerDev),
        roles: &[
            role("embed.word", "lookup", &[]),
            role("embed.char", "lookup", &[]),
            role(
                "lstm.char_fwd",
                "lstm",
                &[&["embed.char"], &["lstm.char_fwd"]],
            ),
            role(
                "lstm.char_bwd",
                "lstm",
                &[&["embed.char"], &["lstm.char_bwd"]],
            ),
            role(
                "tagger.char_word",
                "tagger.char_word",
                &[&["lstm.char_fwd"], &["lstm.char_bwd"]],
            ),
            role(
                "lstm.fwd",
                "lstm",
                &[&["embed.word", "tagger.char_word"], &["lstm.fwd"]],
            ),
            role(
                "lstm.bwd",
                "lstm",
                &[&["embed.word", "tagger.char_word"], &["lstm.bwd"]],
            ),
            TAGGER_TAIL[0],
            TAGGER_TAIL[1],
            TAGGER_TAIL[2],
        ],
    },
    WorkloadSpec {
        name: "lstm-nmt",
        description: "LSTM encoder-decoder for translation: source chain, target chain seeded by the encoder state, a softmax loss per target word",
        paper: "ED-Batch Table 1 (LSTM-NMT)",
        builder: Builder::Nmt,
        synthetic: Synthetic::Natural,
        default_data: DefaultData::Real(Dataset::Iwslt2012),
        roles: &[
            role("embed.src", "lookup", &[]),
            role("embed.tgt", "lookup", &[]),
            role("lstm.enc", "lstm", &[&["embed.src"], &["lstm.enc"]]),
            role(
                "lstm.dec",
                "lstm",
                &[&["embed.tgt"], &["lstm.enc", "lstm.dec"]],
            ),
            role("nmt.loss", "nmt.loss", &[&["lstm.dec"]]),
            LOSS_SUM,
        ],
    },
    WorkloadSpec {
        name: "tree-lstm",
        description: "binary N-ary TreeLSTM over parse trees, a sentiment loss at every tree node",
        paper: "ED-Batch Table 1; Cavs Tree-LSTM; VPPS Tree-LSTM",
        builder: Builder::Tree {
            leaf: TreeLeaf::EmbedThenCell("tree_lstm.leaf"),
            internal: TreeInternal::One("tree_lstm.internal"),
            loss: TreeLoss::EveryNode,
        },
        synthetic: Synthetic::Natural,
        default_data: DefaultData::Real(Dataset::SstTrain),
        roles: &[
            role("embed.word", "lookup", &[]),
            role("tree_lstm.leaf", "tree_lstm.leaf", &[&["embed.word"]]),
            role(
                "tree_lstm.internal",
                "tree_lstm.internal",
                &[
                    &["tree_lstm.leaf", "tree_lstm.internal"],
                    &["tree_lstm.leaf", "tree_lstm.internal"],
                ],
            ),
            role(
                "sentiment.loss",
                "sentiment.loss",
                &[&["tree_lstm.leaf", "tree_lstm.internal"]],
            ),
            LOSS_SUM,
        ],
    },
    WorkloadSpec {
        name: "tree-gru",
        description: "binary TreeGRU over parse trees, a sentiment loss at every tree node",
        paper: "ED-Batch Table 1 (TreeGRU)",
        builder: Builder::Tree {
            leaf: TreeLeaf::EmbedThenCell("tree_gru.leaf"),
            internal: TreeInternal::One("tree_gru.internal"),
            loss: TreeLoss::EveryNode,
        },
        synthetic: Synthetic::Natural,
        default_data: DefaultData::Real(Dataset::SstTrain),
        roles: &[
            role("embed.word", "lookup", &[]),
            role("tree_gru.leaf", "tree_gru.leaf", &[&["embed.word"]]),
            role(
                "tree_gru.internal",
                "tree_gru.internal",
                &[
                    &["tree_gru.leaf", "tree_gru.internal"],
                    &["tree_gru.leaf", "tree_gru.internal"],
                ],
            ),
            role(
                "sentiment.loss",
                "sentiment.loss",
                &[&["tree_gru.leaf", "tree_gru.internal"]],
            ),
            LOSS_SUM,
        ],
    },
    WorkloadSpec {
        name: "mv-rnn",
        description: "matrix-vector RNN: every tree node carries a vector and a matrix, a sentiment loss at every node",
        paper: "ED-Batch Table 1 (MV-RNN)",
        builder: Builder::Tree {
            leaf: TreeLeaf::Cell("mv.leaf"),
            internal: TreeInternal::One("mv.internal"),
            loss: TreeLoss::EveryNode,
        },
        synthetic: Synthetic::Natural,
        default_data: DefaultData::Real(Dataset::SstTrain),
        roles: &[
            role("mv.leaf", "mv.leaf", &[]),
            role(
                "mv.internal",
                "mv.internal",
                &[&["mv.leaf", "mv.internal"], &["mv.leaf", "mv.internal"]],
            ),
            role(
                "sentiment.loss",
                "sentiment.loss",
                &[&["mv.leaf", "mv.internal"]],
            ),
            LOSS_SUM,
        ],
    },
    WorkloadSpec {
        name: "tree-lstm-2type",
        description: "TreeLSTM with two internal cell types (own parameters), each internal node drawn 50/50 with the trace seed",
        paper: "ED-Batch Table 1 (TreeLSTM-2Type)",
        builder: Builder::Tree {
            leaf: TreeLeaf::EmbedThenCell("tree_lstm.leaf"),
            internal: TreeInternal::Coin("tree_lstm.internal_a", "tree_lstm.internal_b"),
            loss: TreeLoss::EveryNode,
        },
        synthetic: Synthetic::Natural,
        default_data: DefaultData::Real(Dataset::SstTrain),
        roles: &[
            role("embed.word", "lookup", &[]),
            role("tree_lstm.leaf", "tree_lstm.leaf", &[&["embed.word"]]),
            role(
                "tree_lstm.internal_a",
                "tree_lstm.internal",
                &[TREE2_CHILD, TREE2_CHILD],
            ),
            role(
                "tree_lstm.internal_b",
                "tree_lstm.internal",
                &[TREE2_CHILD, TREE2_CHILD],
            ),
            role("sentiment.loss", "sentiment.loss", &[TREE2_CHILD]),
            LOSS_SUM,
        ],
    },
    WorkloadSpec {
        name: "lattice-lstm",
        description: "lattice LSTM for Chinese NER: a character cell per lattice node, a word cell per lexicon arc, a tag loss per character",
        paper: "ED-Batch Table 1 (LatticeLSTM, Zhang & Yang 2018)",
        builder: Builder::Lattice,
        synthetic: Synthetic::Natural,
        default_data: DefaultData::Real(Dataset::WeiboTrain),
        roles: &[
            role("embed.char", "lookup", &[]),
            role("embed.word", "lookup", &[]),
            role(
                "lattice.word",
                "lattice_lstm.word",
                &[&["embed.word"], &["lattice.char"]],
            ),
            role(
                "lattice.char",
                "lattice_lstm.char",
                &[&["embed.char"], &["lattice.char"], &["lattice.word"]],
            ),
            role("ner.loss", "tagger.loss", &[&["lattice.char"]]),
            LOSS_SUM,
        ],
    },
    WorkloadSpec {
        name: "lattice-gru",
        description: "lattice GRU: a character cell per lattice node, a word cell per lexicon arc, a tag loss per character",
        paper: "ED-Batch Table 1 (LatticeGRU, Su et al. 2017)",
        builder: Builder::Lattice,
        synthetic: Synthetic::Natural,
        default_data: DefaultData::Real(Dataset::WeiboTrain),
        roles: &[
            role("embed.char", "lookup", &[]),
            role("embed.word", "lookup", &[]),
            role(
                "lattice.word",
                "lattice_gru.word",
                &[&["embed.word"], &["lattice.char"]],
            ),
            role(
                "lattice.char",
                "lattice_gru.char",
                &[&["embed.char"], &["lattice.char"], &["lattice.word"]],
            ),
            role("ner.loss", "tagger.loss", &[&["lattice.char"]]),
            LOSS_SUM,
        ],
    },
    WorkloadSpec {
        name: "fixed-lstm",
        description: "LSTM language model over fixed 64-step chains, a next-word loss per step",
        paper: "Cavs Fig. 8(a) (Fixed-LSTM)",
        builder: Builder::LanguageModel,
        synthetic: Synthetic::FixedLength(64),
        default_data: DefaultData::Synthetic,
        roles: &LM_ROLES,
    },
    WorkloadSpec {
        name: "var-lstm",
        description: "LSTM language model over variable-length real sentences, a next-word loss per step",
        paper: "Cavs Fig. 8(b) (Var-LSTM; sentence lengths from WikiNER instead of PTB)",
        builder: Builder::LanguageModel,
        synthetic: Synthetic::Natural,
        default_data: DefaultData::Real(Dataset::WikinerDev),
        roles: &LM_ROLES,
    },
    WorkloadSpec {
        name: "tree-fc",
        description: "Tree-FC benchmark: complete binary trees of 256 leaves, one fully connected layer per internal node, a loss at the root",
        paper: "Cavs Fig. 8(c); TF Fold",
        builder: Builder::Tree {
            leaf: TreeLeaf::Embed,
            internal: TreeInternal::One("tree_fc"),
            loss: TreeLoss::Root,
        },
        synthetic: Synthetic::CompleteTrees(256),
        default_data: DefaultData::Synthetic,
        roles: &[
            role("embed.word", "lookup", &[]),
            role(
                "tree_fc",
                "tree_fc",
                &[&["embed.word", "tree_fc"], &["embed.word", "tree_fc"]],
            ),
            role("sentiment.loss", "sentiment.loss", &[&["tree_fc"]]),
            LOSS_SUM,
        ],
    },
    WorkloadSpec {
        name: "td-rnn",
        description: "time-delay RNN: adjacent embeddings combined layer by layer (a triangle) by one reused composition, a loss at the apex",
        paper: "VPPS TD-RNN",
        builder: Builder::TimeDelay {
            leaf: None,
            combine: "td_rnn.combine",
        },
        synthetic: Synthetic::Natural,
        default_data: DefaultData::Real(Dataset::SstTrain),
        roles: &[
            role("embed.word", "lookup", &[]),
            role(
                "td_rnn.combine",
                "td_rnn.combine",
                &[
                    &["embed.word", "td_rnn.combine"],
                    &["embed.word", "td_rnn.combine"],
                ],
            ),
            role(
                "sentiment.loss",
                "sentiment.loss",
                &[&["embed.word", "td_rnn.combine"]],
            ),
            LOSS_SUM,
        ],
    },
    WorkloadSpec {
        name: "td-lstm",
        description: "TD-RNN with LSTM compositions: leaf LSTM per word, then a triangle of LSTM combines, a loss at the apex",
        paper: "VPPS TD-LSTM",
        builder: Builder::TimeDelay {
            leaf: Some("td_lstm.leaf"),
            combine: "td_lstm.combine",
        },
        synthetic: Synthetic::Natural,
        default_data: DefaultData::Real(Dataset::SstTrain),
        roles: &[
            role("embed.word", "lookup", &[]),
            role("td_lstm.leaf", "td_lstm.leaf", &[&["embed.word"]]),
            role(
                "td_lstm.combine",
                "td_lstm.combine",
                &[TD_LSTM_CHILD, TD_LSTM_CHILD],
            ),
            role("sentiment.loss", "sentiment.loss", &[TD_LSTM_CHILD]),
            LOSS_SUM,
        ],
    },
    WorkloadSpec {
        name: "rvnn",
        description: "recursive neural net over parse trees with untied leaf and internal weights, a loss at the root",
        paper: "VPPS RvNN",
        builder: Builder::Tree {
            leaf: TreeLeaf::EmbedThenCell("rvnn.leaf"),
            internal: TreeInternal::One("rvnn.internal"),
            loss: TreeLoss::Root,
        },
        synthetic: Synthetic::Natural,
        default_data: DefaultData::Real(Dataset::SstTrain),
        roles: &[
            role("embed.word", "lookup", &[]),
            role("rvnn.leaf", "rvnn.leaf", &[&["embed.word"]]),
            role("rvnn.internal", "rvnn.internal", &[RVNN_CHILD, RVNN_CHILD]),
            role("sentiment.loss", "sentiment.loss", &[RVNN_CHILD]),
            LOSS_SUM,
        ],
    },
];

const TREE2_CHILD: &[&str] = &[
    "tree_lstm.leaf",
    "tree_lstm.internal_a",
    "tree_lstm.internal_b",
];
const TD_LSTM_CHILD: &[&str] = &["td_lstm.leaf", "td_lstm.combine"];
const RVNN_CHILD: &[&str] = &["rvnn.leaf", "rvnn.internal"];
const LM_ROLES: [RoleSpec; 4] = [
    role("embed.word", "lookup", &[]),
    role("lstm.lm", "lstm", &[&["embed.word"], &["lstm.lm"]]),
    role("lm.loss", "nmt.loss", &[&["lstm.lm"]]),
    LOSS_SUM,
];

/// Looks a workload up by its CLI name.
pub fn workload(name: &str) -> Option<&'static WorkloadSpec> {
    WORKLOADS.iter().find(|w| w.name == name)
}

/// The type name of `role` at hidden size `hidden`.
pub fn type_name(role: &str, hidden: usize) -> String {
    format!("{role}[h={hidden}]")
}

/// The role prefix of a cell-level type name (`lstm.fwd[h=64]` → `lstm.fwd`).
pub fn role_of(type_name: &str) -> &str {
    type_name.split('[').next().unwrap_or(type_name)
}
