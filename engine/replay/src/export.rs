//! Model export: the seeded model **and** the bound program of a cell-level
//! trace in one self-describing file, so another framework can run the same
//! cells on the same weights and inputs and must reach the same loss. This is
//! what the peers of `paper-repro --only peers` (the real DyNet, PyTorch) load:
//! they re-implement no binding rule, they read which producer outputs feed
//! which port of every node. Format (versioned): `docs/model-export.md`.
//!
//! The file is a safetensors file (batchlab's one weights format, written and
//! read by [`Tensors`]): every parameter is the f32 tensor
//! `param/<role>/<param>`, with [`Reference::Gradients`] the reference
//! executor's gradient of each is `grad/<role>/<param>`, and the JSON
//! [`Header`] (cells, nodes, bindings, reference loss) is the string under
//! the key `batchlab` of the safetensors `__metadata__`.
//!
//! The parameters are [`crate::model::Model`]'s (seeded), the per-node lookup
//! row and label are [`Model::node_data`], and the producers per port are
//! [`Model::bindings`] resolved to node ids — exactly what the replay engine
//! gathers (a `many` port's producers are summed, input `j` of a port reads
//! output `j` of its producer).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::cells::{Arity, Cell, CellLibrary, PrimOp, ValueKind};
use crate::error::ReplayError;
use crate::executor::Executor;
use crate::model::{self, Model};
use crate::modeldir::{Tensor, Tensors, TensorsError};
use crate::sched::{AgendaPolicy, SameTypeDag, run_policy};
use crate::session;
use crate::trace::{Level, Trace};
use crate::workloads::expand;

/// `format` field of the header.
pub const FORMAT: &str = "batchlab-model-export";
/// Format version written (and the only one read).
pub const VERSION: u32 = 2;
/// Key of the JSON header in the safetensors `__metadata__`.
pub const METADATA_KEY: &str = "batchlab";
/// First bytes of a version 1 export (its own container), recognised only to
/// refuse it with a message that says what to do.
const V1_MAGIC: &[u8; 8] = b"BLMODEL\0";

/// Name of the tensor holding parameter `param` of role `role`.
pub fn param_tensor(role: &str, param: &str) -> String {
    format!("param/{role}/{param}")
}

/// Name of the tensor holding the reference executor's gradient of the loss
/// with respect to parameter `param` of role `role`.
pub fn grad_tensor(role: &str, param: &str) -> String {
    format!("grad/{role}/{param}")
}

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
    /// Reading or writing the file, or a tensor the header needs, failed
    /// (the message names the file and the tensor).
    #[error(transparent)]
    Tensors(#[from] TensorsError),
    /// The trace has no loss node: a peer is checked against the export by
    /// its loss, which would read 0.
    #[error(
        "workload {0} has no loss node (a loss role, or in a model folder a scalar output nothing reads): an export is checked by its loss, which would read 0"
    )]
    NoLoss(String),
    /// The file is a safetensors file but not a (readable) export.
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

/// A parameter: its values are the tensor [`param_tensor`]`(role, name)`,
/// its reference gradient (with [`Reference::Gradients`]) the tensor
/// [`grad_tensor`]`(role, name)`, both of this shape.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamSpec {
    /// Name in the cell.
    pub name: String,
    /// Shape.
    pub shape: Vec<usize>,
}

/// One primitive op of a cell.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    /// `y = factor · x`, for `scale` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub factor: Option<f32>,
    /// Shape of the result.
    pub shape: Vec<usize>,
}

// A cell's `factor` is finite (cell validation refuses NaN; JSON has none).
impl Eq for OpSpec {}

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
    /// Parameters in the cell's order.
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

/// The JSON header (the safetensors metadata entry [`METADATA_KEY`]).
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
    /// The loss and every parameter's gradient of it (one training step's
    /// backward; the [`grad_tensor`]s), so a peer checks its gradients too.
    Gradients,
}

/// What [`export`] computes, and what [`Export::read`] gives back: the header
/// and the tensors.
#[derive(Clone, Debug)]
pub struct Export {
    /// The header.
    pub header: Header,
    /// Every parameter ([`param_tensor`]) and, with gradients, every
    /// gradient ([`grad_tensor`]).
    pub tensors: Tensors,
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
    tensors: &mut Tensors,
) -> RoleSpecExport {
    let name = |v: crate::cells::ValueId| cell.values[v.index()].name.clone();
    let role_name = role.role.to_string();
    let mut ps = Vec::with_capacity(cell.params.len());
    for &p in &cell.params {
        let v = &cell.values[p.index()];
        debug_assert!(matches!(v.kind, ValueKind::Param));
        tensors.insert(
            param_tensor(&role_name, &v.name),
            Tensor::new(v.shape.clone(), params[p.index()].clone()),
        );
        ps.push(ParamSpec {
            name: v.name.clone(),
            shape: v.shape.clone(),
        });
    }
    RoleSpecExport {
        role: role_name,
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
                factor: op.factor,
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
    let model = model::model(trace, cells, seed)?;
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
    let mut tensors = Tensors::default();
    let roles: Vec<RoleSpecExport> = model
        .roles
        .iter()
        .map(|rm| role_export(&rm.role, &rm.cell, &rm.params, &mut tensors))
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
    // An export is what a peer is checked against by its loss: without a
    // loss node its reference loss would read 0, a check that cannot fail.
    if loss_nodes.is_empty() {
        return Err(ExportError::NoLoss(model.workload.name.clone()));
    }
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
    let reference_loss = match reference {
        Reference::None => None,
        Reference::Loss => {
            let (_, out) = session::replay(trace, model, cells, &mut Executor::Reference)?;
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
        Reference::Gradients => Some(insert_gradients(trace, model, cells, &roles, &mut tensors)?),
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
            roles,
            nodes,
        },
        tensors,
    })
}

/// One reference training step: inserts every parameter's gradient into
/// `tensors` ([`grad_tensor`]) and returns the loss.
fn insert_gradients(
    trace: &Trace,
    model: &Model,
    cells: &CellLibrary,
    roles: &[RoleSpecExport],
    tensors: &mut Tensors,
) -> Result<f64, ExportError> {
    use crate::device::DeviceKind;
    use crate::run::{BackwardSchedule, TrainOptions};
    use crate::session::Session;
    let mut ex = Executor::Reference;
    let mut session = Session::open(DeviceKind::Cpu, trace, model, cells, &mut ex)?;
    let run = session.train(
        BackwardSchedule::ReverseForward,
        &TrainOptions { lazy: true },
    )?;
    let grads = session
        .gradients()
        .ok_or(ReplayError::NotForTraining("reference (no gradients)"))?;
    for ((spec, rm), role_grads) in roles.iter().zip(&model.roles).zip(&grads) {
        for (ps, &p) in spec.params.iter().zip(&rm.cell.params) {
            let g = &role_grads[p.index()];
            // A parameter no node reached has an empty (all-zero) gradient.
            let data = if g.is_empty() {
                vec![0.0; ps.shape.iter().product()]
            } else {
                g.clone()
            };
            tensors.insert(
                grad_tensor(&spec.role, &ps.name),
                Tensor::new(ps.shape.clone(), data),
            );
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
    /// The values of parameter `param` of role `role`.
    pub fn param(&self, role: &str, param: &str) -> Option<&Tensor> {
        self.tensors.get(&param_tensor(role, param))
    }

    /// The reference executor's gradient of the loss with respect to
    /// parameter `param` of role `role` (exports with
    /// [`Reference::Gradients`]).
    pub fn grad(&self, role: &str, param: &str) -> Option<&Tensor> {
        self.tensors.get(&grad_tensor(role, param))
    }

    /// Whether the export carries the reference's gradients.
    pub fn has_gradients(&self) -> bool {
        self.header
            .roles
            .iter()
            .flat_map(|r| r.params.iter().map(move |p| (r, p)))
            .any(|(r, p)| self.grad(&r.role, &p.name).is_some())
    }

    /// Floats of parameter values (gradients not counted).
    pub fn param_floats(&self) -> usize {
        let numel = |p: &ParamSpec| p.shape.iter().product::<usize>();
        self.header
            .roles
            .iter()
            .flat_map(|r| &r.params)
            .map(numel)
            .sum()
    }

    /// The safetensors metadata: the header under [`METADATA_KEY`].
    fn metadata(&self) -> BTreeMap<String, String> {
        // A header of strings, numbers and string-keyed maps always
        // serialises.
        let json = serde_json::to_string(&self.header).unwrap_or_default();
        BTreeMap::from([(METADATA_KEY.to_string(), json)])
    }

    /// The file's bytes (a safetensors file; tensors sorted by name, so the
    /// same export gives the same bytes).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.tensors.to_bytes(&self.metadata())
    }

    /// Writes the file atomically.
    pub fn write(&self, path: &Path) -> Result<(), ExportError> {
        Ok(self.tensors.write(path, &self.metadata())?)
    }

    /// Parses an export file's bytes (`path` names it in errors): a
    /// safetensors file of f32 tensors whose metadata holds a header of
    /// this [`FORMAT`] and [`VERSION`], with every parameter's tensor (and
    /// every gradient or none) at the header's shape, and no other tensor.
    pub fn from_bytes(bytes: &[u8], path: &str) -> Result<Export, ExportError> {
        let bad = |message: String| ExportError::Format {
            path: path.to_string(),
            message,
        };
        if bytes.starts_with(V1_MAGIC) {
            return Err(bad(format!(
                "a version 1 model export; this batchlab reads version {VERSION} \
                 (safetensors): write it again with `engine export-model`"
            )));
        }
        let tensors = Tensors::from_bytes(bytes, path)?;
        let json = tensors.metadata.get(METADATA_KEY).ok_or_else(|| {
            bad(format!(
                "a safetensors file without `{METADATA_KEY}` metadata: not a batchlab model \
                 export (write one with `engine export-model`)"
            ))
        })?;
        // Format and version first: another version's header may not parse
        // as this one's.
        #[derive(Deserialize)]
        struct Version {
            format: Option<String>,
            version: Option<u64>,
        }
        let v: Version = serde_json::from_str(json)
            .map_err(|e| bad(format!("metadata `{METADATA_KEY}`: {e}")))?;
        if v.format.as_deref() != Some(FORMAT) || v.version != Some(u64::from(VERSION)) {
            let shown = |x: Option<String>| x.unwrap_or_else(|| "(none)".into());
            return Err(bad(format!(
                "format {} version {} is not {FORMAT:?} version {VERSION}; write the export \
                 again with `engine export-model`",
                shown(v.format.map(|f| format!("{f:?}"))),
                shown(v.version.map(|n| n.to_string())),
            )));
        }
        let header: Header = serde_json::from_str(json)
            .map_err(|e| bad(format!("metadata `{METADATA_KEY}`: {e}")))?;
        let e = Export { header, tensors };
        e.check(&bad)?;
        Ok(e)
    }

    /// The tensors against the header: every parameter present at its
    /// shape, every gradient or none, nothing else.
    fn check(&self, bad: &dyn Fn(String) -> ExportError) -> Result<(), ExportError> {
        let gradients = self.has_gradients();
        let mut expected = std::collections::BTreeSet::new();
        for r in &self.header.roles {
            for p in &r.params {
                let why = format!("role {} parameter {}", r.role, p.name);
                let name = param_tensor(&r.role, &p.name);
                self.tensors.require(&name, &p.shape, &why)?;
                expected.insert(name);
                if gradients {
                    let name = grad_tensor(&r.role, &p.name);
                    let why = format!(
                        "the gradient of {why}; the export has other parameters' gradients"
                    );
                    self.tensors.require(&name, &p.shape, &why)?;
                    expected.insert(name);
                }
            }
        }
        if let Some(stray) = self.tensors.names().find(|n| !expected.contains(*n)) {
            return Err(bad(format!(
                "tensor `{stray}` is no parameter or gradient of the header's roles"
            )));
        }
        Ok(())
    }

    /// Reads an export file.
    pub fn read(path: &Path) -> Result<Export, ExportError> {
        let bytes = crate::io::read(path).map_err(|source| TensorsError::Io {
            file: path.display().to_string(),
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

    /// The names and tensors of `t`, in order.
    fn contents(t: &Tensors) -> Vec<(String, Tensor)> {
        t.names()
            .map(|n| (n.to_string(), t.get(n).unwrap().clone()))
            .collect()
    }

    #[test]
    fn round_trip_keeps_header_and_tensors_and_is_deterministic() {
        let (t, cells) = trace("lattice-lstm");
        let e = export(&t, &cells, 5, Reference::Loss).unwrap();
        let bytes = e.to_bytes();
        assert_eq!(
            bytes,
            export(&t, &cells, 5, Reference::Loss).unwrap().to_bytes(),
            "same inputs, same bytes"
        );
        let back = Export::from_bytes(&bytes, "x").unwrap();
        assert_eq!(back.header, e.header);
        assert_eq!(contents(&back.tensors), contents(&e.tensors));
        assert!(back.header.reference_loss.unwrap() > 0.0);
        assert_eq!(back.header.nodes.len(), t.graph.len());
        assert!(!back.has_gradients());
        // One tensor per parameter, holding the model's values.
        let model = model::model(&t, &cells, 5).unwrap();
        let mut floats = 0;
        for (r, rm) in back.header.roles.iter().zip(&model.roles) {
            for (ps, &p) in r.params.iter().zip(&rm.cell.params) {
                let v = back.param(&r.role, &ps.name).unwrap();
                assert_eq!(v.shape, ps.shape);
                assert_eq!(v.data, rm.params[p.index()]);
                floats += v.data.len();
            }
        }
        assert_eq!(
            back.tensors.len(),
            back.header
                .roles
                .iter()
                .map(|r| r.params.len())
                .sum::<usize>()
        );
        assert_eq!(back.param_floats(), floats);
    }

    #[test]
    fn gradients_are_a_tensor_per_parameter_and_equal_a_reference_step() {
        let (t, cells) = trace("tree-lstm");
        let e = export(&t, &cells, 5, Reference::Gradients).unwrap();
        let plain = export(&t, &cells, 5, Reference::Loss).unwrap();
        // Same loss, same parameters, plus one gradient each.
        let (a, b) = (
            e.header.reference_loss.unwrap(),
            plain.header.reference_loss.unwrap(),
        );
        assert!(((a - b) / b).abs() < 1e-6, "{a} vs {b}");
        assert_eq!(e.tensors.len(), 2 * plain.tensors.len());
        let back = Export::from_bytes(&e.to_bytes(), "x").unwrap();
        assert!(back.has_gradients());
        let mut nonzero = 0;
        for r in &back.header.roles {
            for ps in &r.params {
                assert_eq!(
                    back.param(&r.role, &ps.name),
                    plain.param(&r.role, &ps.name)
                );
                let g = back
                    .grad(&r.role, &ps.name)
                    .expect("every parameter has a gradient");
                assert_eq!(g.shape, ps.shape);
                nonzero += g.data.iter().any(|x| *x != 0.0) as usize;
            }
        }
        assert!(nonzero > 0);
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

    /// `bytes` (a safetensors file) with its JSON header edited by `edit`.
    fn edit_header(bytes: &[u8], edit: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let mut head: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
        edit(&mut head);
        let json = serde_json::to_vec(&head).unwrap();
        let mut out = (json.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(&json);
        out.extend_from_slice(&bytes[8 + n..]);
        out
    }

    /// `bytes` with the export header (the metadata entry) edited by `edit`.
    fn edit_export_header(bytes: &[u8], edit: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
        edit_header(bytes, |head| {
            let meta = &mut head["__metadata__"][METADATA_KEY];
            let mut h: serde_json::Value = serde_json::from_str(meta.as_str().unwrap()).unwrap();
            edit(&mut h);
            *meta = h.to_string().into();
        })
    }

    #[test]
    fn truncated_or_tampered_files_are_errors_naming_the_file() {
        let (t, cells) = trace("tree-lstm");
        let e = export(&t, &cells, 5, Reference::Gradients).unwrap();
        let bytes = e.to_bytes();
        let msg = |b: &[u8]| {
            let m = Export::from_bytes(b, "m.safetensors")
                .err()
                .unwrap()
                .to_string();
            assert!(m.starts_with("m.safetensors: "), "{m}");
            m
        };
        // Not safetensors, or cut short anywhere.
        assert!(msg(b"hello").contains("not a readable safetensors file"));
        for cut in [4, 20, bytes.len() / 2, bytes.len() - 4] {
            assert!(
                msg(&bytes[..cut]).contains("not a readable safetensors file"),
                "{cut}"
            );
        }
        let mut long = bytes.clone();
        long[..8].copy_from_slice(&(1u64 << 40).to_le_bytes());
        assert!(msg(&long).contains("not a readable safetensors file"));
        // A tensor's data running past the data section.
        let first = e.tensors.names().next().unwrap().to_string();
        let past = edit_header(&bytes, |h| {
            let end = h[&first]["data_offsets"][1].as_u64().unwrap();
            h[&first]["data_offsets"][1] = (end + 4).into();
        });
        assert!(msg(&past).contains("not a readable safetensors file"));
        // Not an export, another version, a header that does not parse.
        let plain = e.tensors.to_bytes(&BTreeMap::new());
        assert!(msg(&plain).contains("without `batchlab` metadata"));
        let v1 = edit_export_header(&bytes, |h| h["version"] = 1.into());
        assert!(msg(&v1).contains("version 1 is not \"batchlab-model-export\" version 2"));
        let mut blm = b"BLMODEL\0".to_vec();
        blm.extend_from_slice(&bytes[8..]);
        assert!(msg(&blm).contains("version 1 model export"));
        let no_nodes = edit_export_header(&bytes, |h| {
            h.as_object_mut().unwrap().remove("nodes");
        });
        assert!(msg(&no_nodes).contains("missing field `nodes`"));
        // The tensors disagree with the header.
        let role = &e.header.roles[1];
        let (r, p) = (role.role.as_str(), role.params[0].name.as_str());
        let without = |drop: &str| {
            let mut t = Tensors::default();
            for (n, x) in contents(&e.tensors) {
                if n != drop {
                    t.insert(n, x);
                }
            }
            Export {
                header: e.header.clone(),
                tensors: t,
            }
            .to_bytes()
        };
        let m = msg(&without(&param_tensor(r, p)));
        assert!(
            m.contains(&format!(
                "no tensor `param/{r}/{p}` (role {r} parameter {p})"
            )),
            "{m}"
        );
        let m = msg(&without(&grad_tensor(r, p)));
        assert!(m.contains(&format!("no tensor `grad/{r}/{p}`")), "{m}");
        let reshaped = edit_export_header(&bytes, |h| {
            h["roles"][1]["params"][0]["shape"] = serde_json::json!([1, 1, 1]);
        });
        assert!(msg(&reshaped).contains(&format!("`param/{r}/{p}` has shape")));
        let mut extra = e.clone();
        extra
            .tensors
            .insert("param/nobody/x", Tensor::new(vec![1], vec![0.0]));
        assert!(msg(&extra.to_bytes()).contains("tensor `param/nobody/x` is no parameter"));
        // Reading a file names it too.
        let dir = std::env::temp_dir().join(format!("export-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("cut.safetensors");
        std::fs::write(&f, &bytes[..bytes.len() - 1]).unwrap();
        let m = Export::read(&f).err().unwrap().to_string();
        assert!(m.starts_with(&f.display().to_string()), "{m}");
        e.write(&f).unwrap();
        assert_eq!(Export::read(&f).unwrap().tensors.len(), e.tensors.len());
        std::fs::remove_dir_all(&dir).unwrap();
        let m = Export::read(&dir.join("none.safetensors"))
            .err()
            .unwrap()
            .to_string();
        assert!(m.contains("none.safetensors"), "{m}");
    }

    #[test]
    fn op_level_traces_are_refused() {
        let (_, cells) = trace("tree-lstm");
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
