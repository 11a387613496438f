//! Errors of the PQ-tree API.

use thiserror::Error;

/// Why a PQ-tree could not be built or a constraint could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PqError {
    /// The constraint cannot be added: no permutation allowed by the tree
    /// keeps this set consecutive. The tree is unchanged.
    #[error("constraint is infeasible: its leaves cannot be made consecutive")]
    Infeasible,
    /// A leaf number in the constraint is not below the number of leaves.
    #[error("leaf {leaf} in the constraint is out of range (the tree has {num_leaves} leaves)")]
    LeafOutOfRange {
        /// The offending leaf number.
        leaf: usize,
        /// Number of leaves of the tree.
        num_leaves: usize,
    },
    /// A leaf number appears more than once in the constraint.
    #[error("leaf {leaf} appears more than once in the constraint")]
    DuplicateLeaf {
        /// The repeated leaf number.
        leaf: usize,
    },
    /// A tree was requested over zero leaves.
    #[error("a PQ-tree needs at least one leaf")]
    NoLeaves,
    /// A tree was requested over more leaves than the compact arena ids allow.
    #[error("a PQ-tree supports at most {max} leaves, {requested} were requested")]
    TooManyLeaves {
        /// Requested number of leaves.
        requested: usize,
        /// Largest supported number of leaves.
        max: usize,
    },
}
