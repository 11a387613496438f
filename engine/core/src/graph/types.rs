//! Interned op types (signatures). Two nodes may share a batch only if they have the
//! same type, so the type is the unit every policy reasons about. Types are stored in
//! insertion order (that order is the trace's `types` list); the name index is only
//! used for look-ups, never iterated, so output order never depends on hashing.

use std::collections::HashMap;

use super::{GraphError, TypeId};

/// One op type: its signature name and whether its nodes may be batched together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpType {
    /// Signature, e.g. `tree_lstm.leaf[h=64]` or `sigmoid[64]`.
    pub name: String,
    /// A non-batchable type runs one node per batch.
    pub batchable: bool,
}

/// The interned type set of a graph.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TypeTable {
    types: Vec<OpType>,
    index: HashMap<String, TypeId>,
}

impl TypeTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Returns the id of `name`, adding it if new. Re-interning with a different
    /// `batchable` flag is an error: one signature cannot be both.
    pub fn intern(&mut self, name: &str, batchable: bool) -> Result<TypeId, GraphError> {
        if let Some(&id) = self.index.get(name) {
            if self.types[id.index()].batchable != batchable {
                return Err(GraphError::ConflictingBatchable {
                    name: name.to_string(),
                });
            }
            return Ok(id);
        }
        self.push(name, batchable)
    }

    /// Appends a new type; a name seen before is a [`GraphError::DuplicateType`]
    /// (the trace reader uses this: a file listing a name twice is malformed).
    pub fn push(&mut self, name: &str, batchable: bool) -> Result<TypeId, GraphError> {
        if let Some(&first) = self.index.get(name) {
            return Err(GraphError::DuplicateType {
                name: name.to_string(),
                first: first.0,
                second: self.types.len() as u32,
            });
        }
        let id = TypeId(u32::try_from(self.types.len()).map_err(|_| GraphError::TooLarge)?);
        self.types.push(OpType {
            name: name.to_string(),
            batchable,
        });
        self.index.insert(name.to_string(), id);
        Ok(id)
    }

    /// Looks a type up by name.
    pub fn get(&self, name: &str) -> Option<TypeId> {
        self.index.get(name).copied()
    }

    /// The type with id `id`. Panics if `id` did not come from this table.
    pub fn op(&self, id: TypeId) -> &OpType {
        &self.types[id.index()]
    }

    /// The signature name of `id`.
    pub fn name(&self, id: TypeId) -> &str {
        &self.types[id.index()].name
    }

    /// Whether nodes of `id` may be batched together.
    pub fn batchable(&self, id: TypeId) -> bool {
        self.types[id.index()].batchable
    }

    /// Number of types.
    pub fn len(&self) -> usize {
        self.types.len()
    }

    /// True when no type has been interned.
    pub fn is_empty(&self) -> bool {
        self.types.is_empty()
    }

    /// Types in id order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (TypeId, &OpType)> {
        self.types
            .iter()
            .enumerate()
            .map(|(i, t)| (TypeId(i as u32), t))
    }
}
