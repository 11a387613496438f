//! Cells: the static vertex functions of a dynamic network.
//!
//! A cell is Cavs' vertex function F (cavs.txt §3.1, Fig. 4) and ED-Batch's
//! static subgraph (ed-batch.txt §3, §5, Table 2): a small graph of primitive
//! ops with named inputs grouped into ports, parameters and outputs, written
//! once in terms of the hidden size `h`. Cells are data (YAML files, see
//! docs/cells.md) so that the same definition drives the recorder (node types
//! and bindings), the planner (op-level layout) and every executor, and so a
//! user can add a model without writing Rust.
//!
//! Flow: [`CellLibrary`] parses files into [`CellSpec`]s (format only), and
//! [`CellLibrary::instantiate`] validates a spec at a concrete `h` into a
//! [`Cell`] whose names are resolved to [`ValueId`]s and shapes are numbers.

mod cell;
mod error;
mod instantiate;
mod library;
mod ops;
mod shape;
mod spec;

pub use cell::{Cell, Op, PortInfo, ValueId, ValueInfo, ValueKind};
pub use error::{CellError, Site};
pub use library::CellLibrary;
pub use ops::{ArgCount, LAYER_NORM_EPS, PrimOp, ShapeError};
pub use shape::{DimExpr, DimText};
pub use spec::{Arity, CellSpec, OpSpec, PortSpec, ValueSpec};
