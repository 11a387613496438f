//! The workload zoo and the trace recorder.
//!
//! A workload is a set of roles (cells with their own parameters) plus a source
//! of input structures: sentences, sentence pairs, parse trees or lattices, real
//! (shipped fixtures) or synthetic. [`record`] unrolls a mini-batch of B samples
//! into one instance-level graph; with [`Level::Op`](crate::trace::Level::Op) every
//! cell is expanded into its primitive ops.

mod binding;
mod build;
mod defined;
mod expand;
mod record;
mod spec;

pub use binding::{BindError, FeederMismatch, bind_ports, check_feeders};
pub use defined::{Role, TypeMismatch, Workload};
pub use expand::{ArgSrc, ExpandError, OpOrigin, OpProgram, expand, to_op_level};
pub use record::{
    DataChoice, RecordError, RecordOptions, estimate, record, record_samples, record_within,
    samples_available,
};
pub use spec::{
    Builder, DefaultData, RoleSpec, Synthetic, TreeInternal, TreeLeaf, TreeLoss, WORKLOADS,
    WorkloadSpec, role_of, type_name, workload,
};

#[cfg(test)]
mod tests;
