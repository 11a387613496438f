//! The named real data sets shipped as embedded fixtures.
//!
//! Names are stable identifiers used on the command line and in configs;
//! file names are those of the fixtures in the repository's `data/` folder.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::data::error::UnknownDataset;
use crate::data::structures::StructureKind;

/// A real data set of the ED-Batch evaluation, shipped as a fixture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Dataset {
    /// Stanford Sentiment Treebank, train split.
    SstTrain,
    /// Stanford Sentiment Treebank, dev split.
    SstDev,
    /// Stanford Sentiment Treebank, test split.
    SstTest,
    /// Weibo NER lattices, train split.
    WeiboTrain,
    /// Weibo NER lattices, dev split.
    WeiboDev,
    /// Weibo NER lattices, test split.
    WeiboTest,
    /// WikiNER English, the dev file used by ED-Batch.
    WikinerDev,
    /// IWSLT English-Vietnamese tst2012 pairs.
    Iwslt2012,
}

impl Dataset {
    /// Every data set, in a fixed order (the order of `--help` listings).
    pub const ALL: [Dataset; 8] = [
        Dataset::SstTrain,
        Dataset::SstDev,
        Dataset::SstTest,
        Dataset::WeiboTrain,
        Dataset::WeiboDev,
        Dataset::WeiboTest,
        Dataset::WikinerDev,
        Dataset::Iwslt2012,
    ];

    /// The stable name, e.g. `sst-train`, `weibo-dev`, `iwslt2012`.
    pub fn name(self) -> &'static str {
        match self {
            Dataset::SstTrain => "sst-train",
            Dataset::SstDev => "sst-dev",
            Dataset::SstTest => "sst-test",
            Dataset::WeiboTrain => "weibo-train",
            Dataset::WeiboDev => "weibo-dev",
            Dataset::WeiboTest => "weibo-test",
            Dataset::WikinerDev => "wikiner-dev",
            Dataset::Iwslt2012 => "iwslt2012",
        }
    }

    /// The fixture's file name inside `data/`.
    pub fn file_name(self) -> &'static str {
        match self {
            Dataset::SstTrain => "sst-train.trees",
            Dataset::SstDev => "sst-dev.trees",
            Dataset::SstTest => "sst-test.trees",
            Dataset::WeiboTrain => "weibo-train.lattice",
            Dataset::WeiboDev => "weibo-dev.lattice",
            Dataset::WeiboTest => "weibo-test.lattice",
            Dataset::WikinerDev => "wikiner-dev.sents",
            Dataset::Iwslt2012 => "iwslt12-en-vi.pairs",
        }
    }

    /// The kind of structure it holds.
    pub fn kind(self) -> StructureKind {
        match self {
            Dataset::SstTrain | Dataset::SstDev | Dataset::SstTest => StructureKind::Trees,
            Dataset::WeiboTrain | Dataset::WeiboDev | Dataset::WeiboTest => StructureKind::Lattices,
            Dataset::WikinerDev => StructureKind::Sentences,
            Dataset::Iwslt2012 => StructureKind::Pairs,
        }
    }

    /// One line for listings: origin and the models that use it.
    pub fn description(self) -> &'static str {
        match self {
            Dataset::SstTrain => {
                "Stanford Sentiment Treebank train split, binary parse trees with labels \
                 (TreeLSTM, TreeGRU, MV-RNN, TreeLSTM-2Type)"
            }
            Dataset::SstDev => {
                "Stanford Sentiment Treebank dev split, binary parse trees with labels \
                 (TreeLSTM, TreeGRU, MV-RNN, TreeLSTM-2Type)"
            }
            Dataset::SstTest => {
                "Stanford Sentiment Treebank test split, binary parse trees with labels \
                 (TreeLSTM, TreeGRU, MV-RNN, TreeLSTM-2Type)"
            }
            Dataset::WeiboTrain => {
                "character/word lattices with tags over the Chinese Weibo NER train split \
                 (LatticeLSTM, LatticeGRU)"
            }
            Dataset::WeiboDev => {
                "character/word lattices with tags over the Chinese Weibo NER dev split \
                 (LatticeLSTM, LatticeGRU)"
            }
            Dataset::WeiboTest => {
                "character/word lattices with tags over the Chinese Weibo NER test split \
                 (LatticeLSTM, LatticeGRU)"
            }
            Dataset::WikinerDev => {
                "WikiNER English sentences: word lengths, rare-word flags, word ids and tags \
                 (BiLSTM tagger, BiLSTMwChar)"
            }
            Dataset::Iwslt2012 => {
                "IWSLT English-Vietnamese tst2012 sentence pairs: token counts (LSTM-NMT)"
            }
        }
    }
}

impl fmt::Display for Dataset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Dataset {
    type Err = UnknownDataset;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Dataset::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| UnknownDataset {
                given: s.to_owned(),
            })
    }
}

impl TryFrom<String> for Dataset {
    type Error = UnknownDataset;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Dataset> for String {
    fn from(d: Dataset) -> String {
        d.name().to_owned()
    }
}
