//! A workload as the replay sees it: its roles, each with its cell, its port
//! feeders and whether it is a loss. The zoo's [`WorkloadSpec`]s convert to
//! it; a model folder (`crate::modeldir`, recorded from PyTorch) defines
//! one at run time. Everything that reads a recorded trace (the replay,
//! the op-level expansion, the memory estimate) goes through this type, so
//! an imported model runs wherever a built-in one does.

use super::spec::{RoleSpec, WorkloadSpec, role_of, type_name};

/// One role: a cell with its own parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Role {
    /// Role name (the zoo's type-name prefix, or a model folder's role).
    pub role: String,
    /// The cell its nodes run.
    pub cell: String,
    /// Whether its nodes may share a batch.
    pub batchable: bool,
    /// Whether its nodes' outputs are summed into the training loss (the
    /// zoo's `loss.sum`; a model folder's scalar sinks).
    pub loss: bool,
    /// Per port of the cell, the roles that may feed it.
    pub ports: Vec<Vec<String>>,
    /// The trace type of this role in a model folder (`None` in the zoo,
    /// whose types are `<role>[h=<hidden>]`).
    pub type_name: Option<String>,
}

impl From<&RoleSpec> for Role {
    fn from(r: &RoleSpec) -> Role {
        Role {
            role: r.role.to_string(),
            cell: r.cell.to_string(),
            batchable: r.batchable,
            loss: r.role == "loss.sum",
            ports: r
                .ports
                .iter()
                .map(|p| p.iter().map(|s| s.to_string()).collect())
                .collect(),
            type_name: None,
        }
    }
}

/// A workload: its name and roles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    /// The name traces carry in `workload`.
    pub name: String,
    /// Roles in a fixed order (role indices are positions here).
    pub roles: Vec<Role>,
    /// Defined by a model folder rather than the zoo.
    pub imported: bool,
}

impl From<&WorkloadSpec> for Workload {
    fn from(w: &WorkloadSpec) -> Workload {
        Workload {
            name: w.name.to_string(),
            roles: w.roles.iter().map(Role::from).collect(),
            imported: false,
        }
    }
}

/// Why a trace type is not a role of a workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TypeMismatch {
    /// No role has this type.
    Unknown,
    /// A zoo role, but at another hidden size.
    Hidden,
}

impl Workload {
    /// The role named `role`.
    pub fn role(&self, role: &str) -> Option<&Role> {
        self.roles.iter().find(|r| r.role == role)
    }

    /// The index of the role whose nodes have type `name`: a zoo role
    /// `<role>[h=<hidden>]`, or the model folder role declaring `name`.
    pub fn type_role(&self, name: &str, hidden: usize) -> Result<usize, TypeMismatch> {
        if self.imported {
            return self
                .roles
                .iter()
                .position(|r| r.type_name.as_deref() == Some(name))
                .ok_or(TypeMismatch::Unknown);
        }
        let role = role_of(name);
        let i = self
            .roles
            .iter()
            .position(|r| r.role == role)
            .ok_or(TypeMismatch::Unknown)?;
        if name == type_name(role, hidden) {
            Ok(i)
        } else {
            Err(TypeMismatch::Hidden)
        }
    }

    /// [`Workload::type_role`] where the hidden size is not checked (a type
    /// at another size maps to its role): what sizing estimates use.
    pub fn type_role_any(&self, name: &str) -> Option<usize> {
        if self.imported {
            return self
                .roles
                .iter()
                .position(|r| r.type_name.as_deref() == Some(name));
        }
        let role = role_of(name);
        self.roles.iter().position(|r| r.role == role)
    }
}
