//! The real data sets, compiled into the binary.
//!
//! The fixtures live in the repository's `data/` folder and are embedded with
//! `include_str!` so that the tools never depend on the raw corpora (or any
//! file) at run time. They are parsed on demand; callers that need a data set
//! repeatedly should keep the parsed [`Structures`].

use crate::data::dataset::Dataset;
use crate::data::error::DataError;
use crate::data::fixtures::parse_fixture;
use crate::data::structures::Structures;

/// The fixture text of `ds`, as shipped in `data/<file_name>`.
pub fn embedded_text(ds: Dataset) -> &'static str {
    match ds {
        Dataset::SstTrain => include_str!("../../../../data/sst-train.trees"),
        Dataset::SstDev => include_str!("../../../../data/sst-dev.trees"),
        Dataset::SstTest => include_str!("../../../../data/sst-test.trees"),
        Dataset::WeiboTrain => include_str!("../../../../data/weibo-train.lattice"),
        Dataset::WeiboDev => include_str!("../../../../data/weibo-dev.lattice"),
        Dataset::WeiboTest => include_str!("../../../../data/weibo-test.lattice"),
        Dataset::WikinerDev => include_str!("../../../../data/wikiner-dev.sents"),
        Dataset::Iwslt2012 => include_str!("../../../../data/iwslt12-en-vi.pairs"),
    }
}

/// Parses the embedded fixture of `ds`. Errors name `data/<file_name>`; they
/// can only occur if a shipped fixture was edited by hand (the test suite
/// parses all of them).
pub fn load_embedded(ds: Dataset) -> Result<Structures, DataError> {
    let file = format!("data/{}", ds.file_name());
    parse_fixture(embedded_text(ds), ds.kind(), &file)
}
