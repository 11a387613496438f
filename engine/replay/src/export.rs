//! Model export: the seeded model **and** the bound program of a cell-level
//! trace in one self-describing file, so another framework can run the same
//! cells on the same weights and inputs and must reach the same loss. This is
//! what the peers of `paper-repro --only peers` (the real DyNet, PyTorch) load:
//! they re-implement no binding rule, they read which producer outputs feed
//! which port of every node. Format (versioned): `docs/model-export.md`.
//!
//! Layout of the file:
//!
//! ```text
//! bytes 0..8        magic  b"BLMODEL\0"
//! bytes 8..16       u64 little-endian: length N of the JSON header
//! bytes 16..16+N    JSON header (UTF-8, padded with spaces so the data starts 64-byte aligned)
//! bytes 16+N..      parameter data: f32 little-endian, row-major, at the header's offsets
//! ```
//!
//! The parameters are [`crate::replay::Model`]'s (seeded), the per-node lookup
//! row and label are [`Model::node_data`], and the producers per port are
//! [`Model::bindings`] resolved to node ids — exactly what the replay engine
//! gathers (a `many` port's producers are summed, input `j` of a port reads
//! output `j` of its producer).

use std::path::Path;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::cells::{Arity, Cell, CellLibrary, PrimOp, ValueKind};
use crate::replay::{self, Executor, Model, ReplayError};
use crate::sched::{AgendaPolicy, SameTypeDag, run_policy};
use crate::trace::{Level, Trace};
use crate::workloads::expand;

/// First eight bytes of an export file.
pub const MAGIC: &[u8; 8] = b"BLMODEL\0";
/// `format` field of the header.
pub const FORMAT: &str = "batchlab-model-export";
/// Format version written (and the only one read).
pub const VERSION: u32 = 1;
/// Alignment of the parameter data in the file, in bytes.
const DATA_ALIGN: usize = 64;

/// Export failures.
#[derive(Debug, Error)]
pub enum ExportError {
    /// The trace is op level: its nodes are not cell invocations.
    #[error("the trace is op level; export needs a cell-level trace (record without --level op)")]
    OpLevel,
    /// Building the model, the op expansion or the reference run failed.
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// Expanding the trace to primitive ops failed.
    #[error(transparent)]
    Expand(#[from] crate::workloads::ExpandError),
    /// The agenda schedule failed.
    #[error(transparent)]
    Policy(#[from] crate::sched::PolicyError),
    /// Reading or writing the file failed.
    #[error("{path}: {source}")]
    Io {
        /// File.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// The file is not an export, or a damaged one.
    #[error("{path}: {message}")]
    Format {
        /// File.
        path: String,
        /// What is wrong.
        message: String,
    },
}

/// One input of a port, or a parameter: name and shape.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValueSpec {
    /// Name in the cell.
    pub name: String,
    /// Shape (1 to 3 dims).
    pub shape: Vec<usize>,
}

/// A port of a cell.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortSpec {
    /// Port name.
    pub name: String,
    /// `one`, `optional` or `many`.
    pub arity: String,
    /// Its inputs, in order: input `j` reads output `j` of each producer.
    pub inputs: Vec<ValueSpec>,
}

/// A parameter and where its data is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamSpec {
    /// Name in the cell.
    pub name: String,
    /// Shape.
    pub shape: Vec<usize>,
    /// Offset of its first float in the data section (in floats).
    pub offset: usize,
    /// Number of floats.
    pub numel: usize,
    /// Offset of the reference executor's gradient of the mini-batch loss
    /// with respect to this parameter (`numel` floats), when the export was
    /// written with [`Reference::Gradients`]; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grad_offset: Option<usize>,
}

/// One primitive op of a cell.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpSpec {
    /// Name of the result.
    pub out: String,
    /// Op name (`affine`, `matmul`, `add`, ... `pick_loss`; `docs/cells.md`).
    pub op: String,
    /// Argument names (port inputs, params or earlier results).
    pub args: Vec<String>,
    /// `[start, len]` along dim 0, for `slice` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice: Option<[usize; 2]>,
    /// Shape of the result.
    pub shape: Vec<usize>,
}

/// One role of the workload: its cell at the trace's hidden size.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleSpecExport {
    /// Role name (the type name's prefix).
    pub role: String,
    /// Cell name.
    pub cell: String,
    /// Whether batching policies may batch its nodes.
    pub batchable: bool,
    /// Ports in argument order.
    pub ports: Vec<PortSpec>,
    /// Parameters in file order.
    pub params: Vec<ParamSpec>,
    /// Ops in dependency order.
    pub ops: Vec<OpSpec>,
    /// Names of the outputs, in order.
    pub outputs: Vec<String>,
}

/// One node of the trace (nodes are listed in id order, which is topological).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSpec {
    /// Role index.
    pub role: u32,
    /// Per port of the role's cell, the producer node ids bound to it (empty:
    /// zeros; several on a `many` port: summed).
    pub ports: Vec<Vec<u32>>,
    /// Raw lookup row: a `lookup` op reads row `row % rows` of its table.
    pub row: u32,
    /// Raw label: `pick_loss` over `n` logits picks `label % n`.
    pub label: u32,
}

/// The JSON header.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// Always [`FORMAT`].
    pub format: String,
    /// Always [`VERSION`].
    pub version: u32,
    /// Workload of the trace.
    pub workload: String,
    /// Hidden size.
    pub hidden: usize,
    /// Seed of the weights and of the per-node data the trace does not record.
    pub seed: u64,
    /// Instances (samples) in the mini-batch.
    pub instances: usize,
    /// Nodes of the op-level expansion (`engine record --level op`): the ops a
    /// faithful peer program creates (cell ops plus one sum per `many` port
    /// with two or more producers).
    pub op_nodes: usize,
    /// Batches of the op-level expansion under DyNet's agenda (`engine replay
    /// --executor dynet --policy agenda`).
    pub agenda_batches: u64,
    /// Those batches per op kind (`affine`, `sigmoid`, `port_sum`, ...: the
    /// op-level type name up to its shapes or parameters).
    pub agenda_by_op: std::collections::BTreeMap<String, u64>,
    /// Nodes whose outputs are summed into the mini-batch loss (the
    /// `loss.sum` nodes).
    pub loss_nodes: Vec<u32>,
    /// That loss as the reference executor computes it (null with
    /// `--no-reference`).
    pub reference_loss: Option<f64>,
    /// Floats in the data section.
    pub data_floats: usize,
    /// Roles, indexed by [`NodeSpec::role`].
    pub roles: Vec<RoleSpecExport>,
    /// Nodes in id order.
    pub nodes: Vec<NodeSpec>,
}

/// What the reference executor adds to an export.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reference {
    /// Nothing: `reference_loss` is null (fastest; no run).
    None,
    /// The mini-batch loss ([`Header::reference_loss`]).
    Loss,
    /// The loss and, after the parameters, every parameter's gradient of it
    /// (one training step's backward; [`ParamSpec::grad_offset`]), so a peer
    /// checks its gradients too.
    Gradients,
}

/// What [`export`] computes: the header and the parameter data.
pub struct Export {
    /// The header.
    pub header: Header,
    /// Parameter data, in the header's offsets.
    pub data: Vec<f32>,
}

fn arity_name(a: Arity) -> &'static str {
    match a {
        Arity::One => "one",
        Arity::Optional => "optional",
        Arity::Many => "many",
    }
}

fn role_export(
    role: &crate::workloads::Role,
    cell: &Cell,
    params: &[Vec<f32>],
    data: &mut Vec<f32>,
) -> RoleSpecExport {
    let name = |v: crate::cells::ValueId| cell.values[v.index()].name.clone();
    let mut ps = Vec::with_capacity(cell.params.len());
    for &p in &cell.params {
        let v = &cell.values[p.index()];
        debug_assert!(matches!(v.kind, ValueKind::Param));
        ps.push(ParamSpec {
            name: v.name.clone(),
            shape: v.shape.clone(),
            offset: data.len(),
            numel: v.numel(),
            grad_offset: None,
        });
        data.extend_from_slice(&params[p.index()]);
    }
    RoleSpecExport {
        role: role.role.to_string(),
        cell: cell.name.clone(),
        batchable: role.batchable,
        ports: cell
            .ports
            .iter()
            .map(|p| PortSpec {
                name: p.name.clone(),
                arity: arity_name(p.arity).to_string(),
                inputs: p
                    .inputs
                    .iter()
                    .map(|&i| ValueSpec {
                        name: name(i),
                        shape: cell.values[i.index()].shape.clone(),
                    })
                    .collect(),
            })
            .collect(),
        params: ps,
        ops: cell
            .ops
            .iter()
            .map(|op| OpSpec {
                out: name(op.out),
                op: op.kind.name().to_string(),
                args: op.args.iter().map(|&a| name(a)).collect(),
                slice: match op.kind {
                    PrimOp::Slice => op.slice.map(|(s, l)| [s, l]),
                    _ => None,
                },
                shape: cell.values[op.out.index()].shape.clone(),
            })
            .collect(),
        outputs: cell.outputs.iter().map(|&o| name(o)).collect(),
    }
}

/// Builds the export of `trace` with the model seeded by `seed` (the seed of
/// `engine replay --seed`). `reference` says what the reference executor
/// adds: the loss ([`Header::reference_loss`]) and the gradients.
pub fn export(
    trace: &Trace,
    cells: &CellLibrary,
    seed: u64,
    reference: Reference,
) -> Result<Export, ExportError> {
    if trace.meta.level == Some(Level::Op) {
        return Err(ExportError::OpLevel);
    }
    let model = replay::model(trace, cells, seed)?;
    export_model(trace, &model, cells, seed, reference)
}

/// [`export`] of an already built model (`seed`: the one it was built with).
pub fn export_model(
    trace: &Trace,
    model: &Model,
    cells: &CellLibrary,
    seed: u64,
    reference: Reference,
) -> Result<Export, ExportError> {
    let g = &trace.graph;
    let mut data = Vec::new();
    let roles: Vec<RoleSpecExport> = model
        .roles
        .iter()
        .map(|rm| role_export(&rm.role, &rm.cell, &rm.params, &mut data))
        .collect();
    let nodes: Vec<NodeSpec> = g
        .nodes()
        .map(|v| {
            let (row, label) = model.node_data(v);
            NodeSpec {
                role: model.type_role[g.node_type(v).index()] as u32,
                ports: model
                    .bindings
                    .ports(v)
                    .map(|us| us.iter().map(|u| u.0).collect())
                    .collect(),
                row,
                label,
            }
        })
        .collect();
    let loss_nodes: Vec<u32> = g
        .nodes()
        .filter(|&v| model.role_of(g, v).role.loss)
        .map(|v| v.0)
        .collect();
    let prog = expand(&model.workload, g, cells, model.hidden)?;
    let og = &prog.graph;
    let mut agenda = AgendaPolicy::fixed();
    let st = SameTypeDag::for_policy(og, &agenda);
    let (schedule, stats) = run_policy(og, &st, &mut agenda)?;
    let mut agenda_by_op = std::collections::BTreeMap::new();
    for i in 0..schedule.len() {
        let name = og.types().name(schedule.batch(i).0);
        *agenda_by_op
            .entry(op_kind(name).to_string())
            .or_insert(0u64) += 1;
    }
    let mut roles = roles;
    let reference_loss = match reference {
        Reference::None => None,
        Reference::Loss => {
            let (_, out) = replay::replay(trace, model, cells, &mut Executor::Reference)?;
            Some(
                loss_nodes
                    .iter()
                    .map(|&v| {
                        let v = crate::graph::NodeId(v);
                        let role = model.type_role[g.node_type(v).index()];
                        out.output(v, role, 0)
                            .iter()
                            .map(|&x| f64::from(x))
                            .sum::<f64>()
                    })
                    .sum(),
            )
        }
        Reference::Gradients => Some(append_gradients(
            trace, model, cells, &mut roles, &mut data,
        )?),
    };
    Ok(Export {
        header: Header {
            format: FORMAT.to_string(),
            version: VERSION,
            workload: trace.workload.clone(),
            hidden: model.hidden,
            seed,
            instances: g.num_instances(),
            op_nodes: og.len(),
            agenda_batches: stats.batches,
            agenda_by_op,
            loss_nodes,
            reference_loss,
            data_floats: data.len(),
            roles,
            nodes,
        },
        data,
    })
}

/// One reference training step: appends every parameter's gradient to
/// `data` (recording its offset in `roles`) and returns the loss.
fn append_gradients(
    trace: &Trace,
    model: &Model,
    cells: &CellLibrary,
    roles: &mut [RoleSpecExport],
    data: &mut Vec<f32>,
) -> Result<f64, ExportError> {
    use crate::device::DeviceKind;
    use crate::replay::Session;
    use crate::replay::cpu::{BackwardSchedule, TrainOptions};
    let mut ex = Executor::Reference;
    let mut session = Session::open(DeviceKind::Cpu, trace, model, cells, &ex)?;
    let run = session.train(
        trace,
        model,
        cells,
        &mut ex,
        BackwardSchedule::ReverseForward,
        &TrainOptions { lazy: true },
    )?;
    let grads = session
        .gradients(model)
        .ok_or(ReplayError::NotForTraining("reference (no gradients)"))?;
    for ((spec, rm), role_grads) in roles.iter_mut().zip(&model.roles).zip(&grads) {
        for (ps, &p) in spec.params.iter_mut().zip(&rm.cell.params) {
            let g = &role_grads[p.index()];
            // A parameter no node reached has an empty (all-zero) gradient.
            ps.grad_offset = Some(data.len());
            if g.is_empty() {
                data.resize(data.len() + ps.numel, 0.0);
            } else {
                data.extend_from_slice(g);
            }
        }
    }
    Ok(run.loss)
}

/// The op kind of an op-level type name: `affine@lstm.fwd:b_i,W_i[...]` →
/// `affine`, `loss.sum/sum[1]` → `sum`, `slice(0..8)[16]` → `slice`.
fn op_kind(type_name: &str) -> &str {
    let s = type_name.rsplit('/').next().unwrap_or(type_name);
    let end = s.find(['@', '[', '(']).unwrap_or(s.len());
    &s[..end]
}

impl Export {
    /// The file's bytes (layout in the module docs).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut json = serde_json::to_vec(&self.header).unwrap_or_default();
        let head = MAGIC.len() + 8;
        while !(head + json.len()).is_multiple_of(DATA_ALIGN) {
            json.push(b' ');
        }
        let mut out = Vec::with_capacity(head + json.len() + self.data.len() * 4);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(json.len() as u64).to_le_bytes());
        out.extend_from_slice(&json);
        for x in &self.data {
            out.extend_from_slice(&x.to_le_bytes());
        }
        out
    }

    /// Writes the file atomically.
    pub fn write(&self, path: &Path) -> Result<(), ExportError> {
        crate::io::write_atomic(path, &self.to_bytes()).map_err(|source| ExportError::Io {
            path: path.display().to_string(),
            source,
        })
    }

    /// Parses an export file's bytes (`path` names it in errors).
    pub fn from_bytes(bytes: &[u8], path: &str) -> Result<Export, ExportError> {
        let bad = |message: String| ExportError::Format {
            path: path.to_string(),
            message,
        };
        if bytes.len() < 16 || &bytes[..8] != MAGIC {
            return Err(bad(
                "not a batchlab model export (magic BLMODEL missing); write one with `engine export-model`".into(),
            ));
        }
        let n = u64::from_le_bytes(bytes[8..16].try_into().unwrap_or([0; 8])) as usize;
        let end = 16usize
            .checked_add(n)
            .filter(|&e| e <= bytes.len())
            .ok_or_else(|| bad(format!("header length {n} runs past the end of the file")))?;
        let header: Header =
            serde_json::from_slice(&bytes[16..end]).map_err(|e| bad(format!("header: {e}")))?;
        if header.format != FORMAT || header.version != VERSION {
            return Err(bad(format!(
                "format {:?} version {} is not {FORMAT:?} version {VERSION}",
                header.format, header.version
            )));
        }
        let rest = &bytes[end..];
        if rest.len() != header.data_floats * 4 {
            return Err(bad(format!(
                "data section has {} bytes, the header says {} floats",
                rest.len(),
                header.data_floats
            )));
        }
        for r in &header.roles {
            for ps in &r.params {
                for (what, off) in [("offset", Some(ps.offset)), ("grad_offset", ps.grad_offset)] {
                    let Some(off) = off else { continue };
                    if off
                        .checked_add(ps.numel)
                        .is_none_or(|e| e > header.data_floats)
                    {
                        return Err(bad(format!(
                            "role {} parameter {}: {what} {off} + {} floats runs past the {} floats of data",
                            r.role, ps.name, ps.numel, header.data_floats
                        )));
                    }
                }
            }
        }
        let data = rest
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        Ok(Export { header, data })
    }

    /// Reads an export file.
    pub fn read(path: &Path) -> Result<Export, ExportError> {
        let bytes = std::fs::read(path).map_err(|source| ExportError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Export::from_bytes(&bytes, &path.display().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::{DataChoice, RecordOptions, record, workload};

    fn trace(name: &str) -> (Trace, CellLibrary) {
        let cells = CellLibrary::builtin().unwrap();
        let t = record(
            &RecordOptions {
                workload: workload(name).unwrap(),
                data: DataChoice::Default,
                batch: 2,
                hidden: 8,
                level: Level::Cell,
                seed: 3,
            },
            &cells,
        )
        .unwrap();
        (t, cells)
    }

    #[test]
    fn round_trip_keeps_header_and_data() {
        let (t, cells) = trace("lattice-lstm");
        let e = export(&t, &cells, 5, Reference::Loss).unwrap();
        let bytes = e.to_bytes();
        let n = u64::from_le_bytes(bytes[8..16].try_into().unwrap()) as usize;
        assert_eq!((16 + n) % DATA_ALIGN, 0, "data must start aligned");
        let back = Export::from_bytes(&bytes, "x").unwrap();
        assert_eq!(back.header, e.header);
        assert_eq!(back.data, e.data);
        assert!(back.header.reference_loss.unwrap() > 0.0);
        assert_eq!(back.header.nodes.len(), t.graph.len());
    }

    #[test]
    fn gradients_follow_the_parameters_and_equal_a_reference_step() {
        let (t, cells) = trace("tree-lstm");
        let e = export(&t, &cells, 5, Reference::Gradients).unwrap();
        let plain = export(&t, &cells, 5, Reference::Loss).unwrap();
        // Same loss, parameters first and unchanged, then one gradient each.
        let (a, b) = (
            e.header.reference_loss.unwrap(),
            plain.header.reference_loss.unwrap(),
        );
        assert!(((a - b) / b).abs() < 1e-6, "{a} vs {b}");
        assert_eq!(e.data[..plain.data.len()], plain.data[..]);
        assert_eq!(e.data.len(), 2 * plain.data.len());
        let back = Export::from_bytes(&e.to_bytes(), "x").unwrap();
        let model = replay::model(&t, &cells, 5).unwrap();
        let mut nonzero = 0;
        for (r, rm) in back.header.roles.iter().zip(&model.roles) {
            for ps in &r.params {
                let g = ps.grad_offset.expect("every parameter has a gradient");
                assert!(g >= plain.data.len());
                nonzero += back.data[g..g + ps.numel].iter().any(|x| *x != 0.0) as usize;
            }
            assert_eq!(r.params.len(), rm.cell.params.len());
        }
        assert!(nonzero > 0);
        // A gradient offset past the data is refused, naming it.
        let mut bad = back.header.clone();
        bad.roles[1].params[0].grad_offset = Some(bad.data_floats);
        let broken = Export {
            header: bad,
            data: back.data.clone(),
        }
        .to_bytes();
        let err = Export::from_bytes(&broken, "m.blm")
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("m.blm") && err.contains("grad_offset"),
            "{err}"
        );
    }

    #[test]
    fn ports_list_the_bound_producers() {
        // A lattice char cell with two words ending at it has both on `words`.
        let (t, cells) = trace("lattice-lstm");
        let e = export(&t, &cells, 5, Reference::None).unwrap();
        let h = &e.header;
        let char_role = h
            .roles
            .iter()
            .position(|r| r.role == "lattice.char")
            .unwrap();
        let mut saw_many = false;
        for (i, n) in h.nodes.iter().enumerate() {
            let args: Vec<u32> = t
                .graph
                .args(crate::graph::NodeId(i as u32))
                .iter()
                .map(|a| a.0)
                .collect();
            let mut bound: Vec<u32> = n.ports.iter().flatten().copied().collect();
            bound.sort_unstable();
            let mut want = args.clone();
            want.sort_unstable();
            assert_eq!(bound, want, "node {i}: every argument bound exactly once");
            if n.role as usize == char_role && n.ports[2].len() >= 2 {
                saw_many = true;
            }
        }
        assert!(
            saw_many,
            "the fixture has a character with two words ending at it"
        );
        assert_eq!(h.loss_nodes, vec![h.nodes.len() as u32 - 1]);
    }

    #[test]
    fn op_nodes_match_the_op_level_recording() {
        let (t, cells) = trace("tree-gru");
        let e = export(&t, &cells, 5, Reference::None).unwrap();
        let op = record(
            &RecordOptions {
                workload: workload("tree-gru").unwrap(),
                data: DataChoice::Default,
                batch: 2,
                hidden: 8,
                level: Level::Op,
                seed: 3,
            },
            &cells,
        )
        .unwrap();
        assert_eq!(e.header.op_nodes, op.graph.len());
        assert!(e.header.agenda_batches > 0);
    }

    #[test]
    fn damaged_files_are_errors_naming_the_file() {
        let (t, cells) = trace("tree-lstm");
        let bytes = export(&t, &cells, 5, Reference::None).unwrap().to_bytes();
        let msg = |b: &[u8]| Export::from_bytes(b, "m.blm").err().unwrap().to_string();
        assert!(msg(b"hello").contains("m.blm: not a batchlab model export"));
        assert!(msg(&bytes[..bytes.len() - 4]).contains("data section"));
        let mut long = bytes.clone();
        long[8..16].copy_from_slice(&(1u64 << 40).to_le_bytes());
        assert!(msg(&long).contains("runs past the end"));
        let op = record(
            &RecordOptions {
                workload: workload("tree-lstm").unwrap(),
                data: DataChoice::Default,
                batch: 2,
                hidden: 8,
                level: Level::Op,
                seed: 3,
            },
            &cells,
        )
        .unwrap();
        assert!(matches!(
            export(&op, &cells, 5, Reference::None),
            Err(ExportError::OpLevel)
        ));
    }
}
