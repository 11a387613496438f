//! A validated cell at a concrete hidden size: the form every other stage uses.
//!
//! All names are resolved to [`ValueId`]s and all shapes are numbers, so the
//! recorder, planner and executors never re-parse or re-check anything. Values
//! are numbered inputs first (port order), then params (file order), then op
//! results (op order); that numbering is stable for a given file and `h`.

use super::error::CellError;
use super::ops::PrimOp;
use super::shape::show_shape;
use super::spec::Arity;

/// Index into [`Cell::values`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

impl ValueId {
    /// The index as `usize`.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Where a value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueKind {
    /// An input of port number `port` (gathered from producer nodes).
    Input {
        /// Index into [`Cell::ports`].
        port: u32,
    },
    /// A trainable parameter (shared by every node of the cell).
    Param,
    /// The result of op number `index`.
    Op {
        /// Index into [`Cell::ops`].
        index: u32,
    },
}

/// One named tensor of a cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueInfo {
    /// Name from the file.
    pub name: String,
    /// Concrete shape (1 to 3 dims).
    pub shape: Vec<usize>,
    /// Origin.
    pub kind: ValueKind,
}

impl ValueInfo {
    /// Number of elements.
    pub fn numel(&self) -> usize {
        // Validation rejected every shape whose product overflows.
        self.shape.iter().product()
    }
}

/// A port of a concrete cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    /// Port name.
    pub name: String,
    /// How many producers feed it.
    pub arity: Arity,
    /// Its input values, bound in order to a producer's first outputs.
    pub inputs: Vec<ValueId>,
}

/// One primitive op of a concrete cell.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    /// The primitive.
    pub kind: PrimOp,
    /// Operands.
    pub args: Vec<ValueId>,
    /// Result.
    pub out: ValueId,
    /// `(start, len)` rows for [`PrimOp::Slice`], `None` otherwise.
    pub slice: Option<(usize, usize)>,
    /// The constant `c` of [`PrimOp::Scale`] (`y = c · x`), finite; `None`
    /// for every other op.
    pub factor: Option<f32>,
}

// `factor` is finite (validation refuses NaN), so `==` is an equivalence.
impl Eq for Op {}

/// A validated cell instantiated at hidden size `hidden`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    /// Cell name.
    pub name: String,
    /// The `h` it was instantiated at.
    pub hidden: usize,
    /// Doc text from the file.
    pub doc: String,
    /// All values: inputs, then params, then op results.
    pub values: Vec<ValueInfo>,
    /// Ports in argument order.
    pub ports: Vec<PortInfo>,
    /// Param values in file order.
    pub params: Vec<ValueId>,
    /// Ops in dependency order (every arg is defined before its op).
    pub ops: Vec<Op>,
    /// Output values in file order.
    pub outputs: Vec<ValueId>,
}

impl Cell {
    /// The value `id`. Panics if `id` is not from this cell.
    pub fn value(&self, id: ValueId) -> &ValueInfo {
        &self.values[id.index()]
    }

    /// Shapes of the outputs, in order.
    pub fn output_shapes(&self) -> Vec<&[usize]> {
        self.outputs
            .iter()
            .map(|&id| self.value(id).shape.as_slice())
            .collect()
    }

    /// DyNet-style op signature used as the node type at `--level op`: two ops
    /// batch together iff their signatures are equal.
    ///
    /// Format: `<op>[<arg shapes joined by ';', dims joined by 'x'>]`; when the op
    /// reads parameters, `<op>@<role>:<param names joined by ','>[...]`, e.g.
    /// `affine@lstm.fwd:b_i,W_i,U_i[64;64x64;64;64x64;64]` or `sigmoid[64]`.
    /// `role` distinguishes parameter sets (forward vs backward LSTM); an empty
    /// role is replaced by the cell name so that two cells whose params merely
    /// share names never batch together by accident. A slice adds its row range,
    /// `slice(<start>..<end>)[...]`, because slices at different offsets are
    /// different kernels; a scale adds its factor, `scale(<factor>)[...]`
    /// (Rust's shortest round-trip form of the f32, so distinct factors give
    /// distinct signatures and equal ones the same bytes).
    ///
    /// Panics if `op >= self.ops.len()`.
    pub fn op_signature(&self, op: usize, role: &str) -> String {
        let op = &self.ops[op];
        let shapes: Vec<String> = op
            .args
            .iter()
            .map(|&a| {
                let dims: Vec<String> = self.value(a).shape.iter().map(usize::to_string).collect();
                dims.join("x")
            })
            .collect();
        let params: Vec<&str> = op
            .args
            .iter()
            .filter(|&&a| self.value(a).kind == ValueKind::Param)
            .map(|&a| self.value(a).name.as_str())
            .collect();
        let mut sig = op.kind.name().to_owned();
        if let Some((start, len)) = op.slice {
            sig.push_str(&format!("({start}..{})", start + len));
        }
        if let Some(c) = op.factor {
            sig.push_str(&format!("({c:?})"));
        }
        if !params.is_empty() {
            let role = if role.is_empty() { &self.name } else { role };
            sig.push_str(&format!("@{role}:{}", params.join(",")));
        }
        sig.push_str(&format!("[{}]", shapes.join(";")));
        sig
    }

    /// Can a node of `producer` feed port `port` of `self`? A port with `k` inputs
    /// binds to the first `k` outputs of the producer, whose shapes must match.
    pub fn check_binding(&self, port: usize, producer: &Cell) -> Result<(), CellError> {
        let Some(p) = self.ports.get(port) else {
            return Err(CellError::BadPort {
                cell: self.name.clone(),
                port,
                count: self.ports.len(),
            });
        };
        let fail = |reason: String| CellError::Binding {
            consumer: self.name.clone(),
            port: p.name.clone(),
            producer: producer.name.clone(),
            reason,
        };
        if producer.outputs.len() < p.inputs.len() {
            let names: Vec<&str> = p
                .inputs
                .iter()
                .map(|&i| self.value(i).name.as_str())
                .collect();
            return Err(fail(format!(
                "the port needs {} values ({}) but `{}` has only {} output(s)",
                p.inputs.len(),
                names.join(", "),
                producer.name,
                producer.outputs.len()
            )));
        }
        for (slot, (&input, &output)) in p.inputs.iter().zip(&producer.outputs).enumerate() {
            let (want, got) = (self.value(input), producer.value(output));
            if want.shape != got.shape {
                return Err(fail(format!(
                    "input {} `{}` has shape {} but output {} `{}` has shape {}",
                    slot + 1,
                    want.name,
                    show_shape(&want.shape),
                    slot + 1,
                    got.name,
                    show_shape(&got.shape)
                )));
            }
        }
        Ok(())
    }

    /// Bytes of all parameters as f32.
    pub fn param_bytes(&self) -> usize {
        // Validation checked that this sum does not overflow.
        self.params.iter().map(|&p| self.value(p).numel() * 4).sum()
    }
}
