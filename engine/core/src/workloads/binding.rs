//! Binding a node's argument list to the ports of its cell. Arguments are listed
//! in port order; a `one` port takes exactly one, an `optional` port zero or one,
//! a `many` port any number. Which port an argument goes to is decided by its
//! producer's role (each port lists the roles it accepts), so two ports that accept
//! tensors of the same shape are never confused.

use thiserror::Error;

use super::defined::Role;
use crate::cells::{Arity, Cell, CellError};

/// Why an argument list does not fit a role's ports.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum BindError {
    /// The role's port table does not match its cell.
    #[error("role {role}: lists {listed} ports but cell {cell} has {actual}")]
    PortCount {
        /// Role name.
        role: String,
        /// Cell name.
        cell: String,
        /// Ports in the role table.
        listed: usize,
        /// Ports of the cell.
        actual: usize,
    },
    /// An argument's role is accepted by no remaining port.
    #[error("role {role}: argument #{position} of role {arg_role} fits no remaining port")]
    Unexpected {
        /// Role of the consuming node.
        role: String,
        /// Argument position.
        position: usize,
        /// Role of the producer.
        arg_role: String,
    },
    /// A `one` port got no argument.
    #[error("role {role}: port {port} needs an argument")]
    Missing {
        /// Role of the consuming node.
        role: String,
        /// Port name.
        port: String,
    },
}

/// For each port of `cell`, the positions of the arguments bound to it.
pub fn bind_ports(
    role: &Role,
    cell: &Cell,
    arg_roles: &[&str],
) -> Result<Vec<Vec<usize>>, BindError> {
    if role.ports.len() != cell.ports.len() {
        return Err(BindError::PortCount {
            role: role.role.to_string(),
            cell: cell.name.clone(),
            listed: role.ports.len(),
            actual: cell.ports.len(),
        });
    }
    let mut bound: Vec<Vec<usize>> = vec![Vec::new(); cell.ports.len()];
    let mut port = 0;
    for (position, arg_role) in arg_roles.iter().enumerate() {
        loop {
            if port >= cell.ports.len() {
                return Err(BindError::Unexpected {
                    role: role.role.to_string(),
                    position,
                    arg_role: arg_role.to_string(),
                });
            }
            let info = &cell.ports[port];
            let full = info.arity != Arity::Many && !bound[port].is_empty();
            if !full && role.ports[port].iter().any(|r| r == arg_role) {
                bound[port].push(position);
                break;
            }
            if info.arity == Arity::One && bound[port].is_empty() {
                // Arguments are in port order: a required port cannot be skipped.
                return Err(BindError::Missing {
                    role: role.role.to_string(),
                    port: info.name.clone(),
                });
            }
            port += 1;
        }
    }
    for (p, info) in cell.ports.iter().enumerate() {
        if info.arity == Arity::One && bound[p].is_empty() {
            return Err(BindError::Missing {
                role: role.role.to_string(),
                port: info.name.clone(),
            });
        }
    }
    Ok(bound)
}

/// A feeder whose cell cannot feed the port that lists it.
#[derive(Debug)]
pub struct FeederMismatch {
    /// The consuming role (its index in the list checked).
    pub role: usize,
    /// Its port.
    pub port: usize,
    /// The feeding role (its index in the list checked).
    pub feeder: usize,
    /// Why ([`Cell::check_binding`]).
    pub source: CellError,
}

/// Every role's feeders against the ports that list them: `roles[i]` is a
/// role's name, its port table (the roles feeding each port) and its cell.
/// A port takes the first outputs of each producer ([`Cell::check_binding`]),
/// so a feeder whose cell has fewer or other outputs would be read out of
/// bounds. Feeders naming no role in the list are skipped (their readers
/// report them). The first mismatch in role, port, feeder order.
pub fn check_feeders(roles: &[(&str, &[Vec<String>], &Cell)]) -> Result<(), FeederMismatch> {
    let by_name: std::collections::HashMap<&str, usize> =
        roles.iter().enumerate().map(|(i, r)| (r.0, i)).collect();
    for (i, (_, ports, cell)) in roles.iter().enumerate() {
        for (port, feeders) in ports.iter().enumerate() {
            for f in feeders {
                if let Some(&feeder) = by_name.get(f.as_str()) {
                    cell.check_binding(port, roles[feeder].2)
                        .map_err(|source| FeederMismatch {
                            role: i,
                            port,
                            feeder,
                            source,
                        })?;
                }
            }
        }
    }
    Ok(())
}
