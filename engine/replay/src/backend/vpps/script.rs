//! The VPPS script, format version 1: what the host writes before every
//! mini-batch and the persistent kernel (and the CPU emulator) interprets.
//! Every field is a little-endian 32-bit word (the paper's 4-byte units).
//! `docs/vpps.md` documents it with examples.
//!
//! ```text
//! header   [MAGIC "VPPS", VERSION 1, vps, barriers, grad_shift, data_at, words, 0]
//! streams  vps + 1 prefix offsets (in words, from the first stream), then
//!          every processor's instruction stream, each ending with END
//! data     row tables, gather lists, lookup ids and labels (referenced by
//!          word index from `data_at`)
//! ```
//!
//! An instruction is a preamble word `opcode | sub << 8 | words << 16`
//! (`words` counts the whole instruction) and operands. An *operand word*
//! is `space << 30 | offset`: space 0 is a forward value at `offset` in each
//! row's record (`pool[row_table[r] + offset]`), 1 its gradient
//! (`pool[row_table[r] + grad_shift + offset]`), 2 an absolute pool address
//! (parameters and parameter gradients: the same for every row). Offsets
//! are in floats, so the pool is limited to 2³⁰ floats (4 GiB).
//! Instructions working on rows carry their range `r0 .. r1` of the current
//! batch (set by `BATCH`).

use serde::Serialize;
use thiserror::Error;

/// `"VPPS"` read as a little-endian word.
pub const MAGIC: u32 = u32::from_le_bytes(*b"VPPS");
/// The format version this module writes and reads.
pub const VERSION: u32 = 1;
/// Words of the header.
pub const HEADER: usize = 8;
/// Largest offset an operand word holds.
pub const MAX_OFFSET: u32 = (1 << 30) - 1;

/// The instruction set, declared once: each opcode's doc, name and code.
/// The constants of [`op`], the kernel's `OP_*` table (`op::ALL`, in
/// `kernel.rs`) and the table of `docs/vpps.md` (checked by a test) derive
/// from it.
macro_rules! instruction_set {
    ($( $(#[doc = $doc:expr])* $name:ident = $code:expr; )*) => {
        /// Opcodes.
        pub mod op {
            $( $(#[doc = $doc])* pub const $name: u32 = $code; )*
            /// Every opcode, name and code, in the order declared.
            pub const ALL: &[(&str, u32)] = &[$((stringify!($name), $code)),*];
        }
    };
}

instruction_set! {
    /// End of a processor's stream.
    END = 0x01;
    /// Grid-wide barrier `n` (monotonic).
    BAR = 0x02;
    /// Select the row table of the batch.
    BATCH = 0x03;
    /// Sum of per-row source lists into `dst` (cell entry; backward's
    /// output-gradient gather).
    GATHER = 0x04;
    /// Elementwise map, one operand.
    MAP1 = 0x05;
    /// Elementwise map, two operands.
    MAP2 = 0x06;
    /// Scaled n-ary sum.
    SUMN = 0x07;
    /// Embedding row by per-row id.
    LOOKUP = 0x08;
    /// Softmax of each row.
    SOFTMAX = 0x09;
    /// `−log softmax(x)[label]` of each row.
    PICKLOSS = 0x0A;
    /// Product against a resident matrix (every owner of its rows).
    RPROD = 0x0B;
    /// Per-row product of DRAM operands.
    GPROD = 0x0C;
    /// Vector–Jacobian map.
    DMAP = 0x10;
    /// A resident product's backward: weight/bias gradients, partial `Wᵀdy`.
    RPRODB = 0x11;
    /// Sum of the partials into an input gradient.
    REDUCE = 0x12;
    /// Embedding-table gradient.
    DLOOKUP = 0x13;
    /// Softmax backward.
    DSOFTMAX = 0x14;
    /// Pick-loss backward.
    DPICKLOSS = 0x15;
}

/// An operand word's space.
pub mod space {
    /// A forward value in each row's record.
    pub const FWD: u32 = 0;
    /// A gradient in each row's gradient record.
    pub const GRAD: u32 = 1;
    /// An absolute pool address.
    pub const ABS: u32 = 2;
}

/// A decoded instruction (operands are operand words, tables data indices).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum Ins {
    End,
    Bar {
        n: u32,
    },
    Batch {
        table: u32,
        k: u32,
    },
    Gather {
        r0: u32,
        r1: u32,
        len: u32,
        dst: u32,
        csr: u32,
        init: f32,
    },
    Map1 {
        f: u32,
        r0: u32,
        r1: u32,
        len: u32,
        dst: u32,
        a: u32,
    },
    Map2 {
        f: u32,
        r0: u32,
        r1: u32,
        len: u32,
        dst: u32,
        a: u32,
        b: u32,
    },
    SumN {
        r0: u32,
        r1: u32,
        len: u32,
        dst: u32,
        scale: f32,
        args: Vec<u32>,
    },
    Lookup {
        r0: u32,
        r1: u32,
        len: u32,
        dst: u32,
        table: u32,
        rows: u32,
        ids: u32,
    },
    Softmax {
        r0: u32,
        r1: u32,
        len: u32,
        dst: u32,
        a: u32,
    },
    PickLoss {
        r0: u32,
        r1: u32,
        width: u32,
        dst: u32,
        a: u32,
        labels: u32,
    },
    RProd {
        mat: u32,
        acc: bool,
        r0: u32,
        r1: u32,
        dst: u32,
        xs: Vec<u32>,
    },
    GProd {
        ta: bool,
        tb: bool,
        acc: bool,
        r0: u32,
        r1: u32,
        m: u32,
        n: u32,
        p: u32,
        c: u32,
        a: u32,
        b: u32,
    },
    DMap {
        kind: u32,
        r0: u32,
        r1: u32,
        len: u32,
        dx: u32,
        dy: u32,
        aux: u32,
        scale: f32,
    },
    RProdB {
        mat: u32,
        pi: u32,
        r0: u32,
        r1: u32,
        dy: u32,
        partial: u32,
        xs: Vec<u32>,
    },
    Reduce {
        r0: u32,
        r1: u32,
        c0: u32,
        kc: u32,
        w: u32,
        col: u32,
        len: u32,
        parts: u32,
        partial: u32,
        dst: u32,
    },
    DLookup {
        r0: u32,
        r1: u32,
        len: u32,
        dy: u32,
        dtable: u32,
        rows: u32,
        ids: u32,
    },
    DSoftmax {
        r0: u32,
        r1: u32,
        len: u32,
        dx: u32,
        dy: u32,
        y: u32,
    },
    DPickLoss {
        r0: u32,
        r1: u32,
        width: u32,
        dx: u32,
        dy: u32,
        x: u32,
        labels: u32,
    },
}

/// A malformed script.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ScriptError {
    /// Not a script, or another version.
    #[error("not a VPPS script of format version {VERSION} (magic {magic:#x}, version {version})")]
    Header {
        /// The first word.
        magic: u32,
        /// The second word.
        version: u32,
    },
    /// The words end inside something.
    #[error("the script is truncated at word {0}")]
    Truncated(usize),
    /// An unknown opcode.
    #[error("processor {vp}: unknown opcode {opcode:#x} at word {at}")]
    Opcode {
        /// The processor.
        vp: u32,
        /// The opcode.
        opcode: u32,
        /// Where.
        at: usize,
    },
    /// A preamble whose length disagrees with its operands.
    #[error("processor {vp}: instruction at word {at} says {said} words, its operands take {took}")]
    Length {
        /// The processor.
        vp: u32,
        /// Where.
        at: usize,
        /// The preamble's count.
        said: u32,
        /// The operands' count.
        took: u32,
    },
}

fn flag(b: bool, bit: u32) -> u32 {
    u32::from(b) << bit
}

impl Ins {
    /// Appends the instruction's words to `out`.
    pub fn encode(&self, out: &mut Vec<u32>) {
        // The preamble's word count is known once the operands are out:
        // write them straight into `out` (no vector per instruction: this
        // is the host's per-mini-batch hot path) and patch it.
        let at = out.len();
        out.push(0);
        let (code, sub): (u32, u32) = match self {
            Ins::End => (op::END, 0),
            Ins::Bar { n } => {
                out.push(*n);
                (op::BAR, 0)
            }
            Ins::Batch { table, k } => {
                out.extend_from_slice(&[*table, *k]);
                (op::BATCH, 0)
            }
            Ins::Gather {
                r0,
                r1,
                len,
                dst,
                csr,
                init,
            } => {
                out.extend_from_slice(&[*r0, *r1, *len, *dst, *csr, init.to_bits()]);
                (op::GATHER, 0)
            }
            Ins::Map1 {
                f,
                r0,
                r1,
                len,
                dst,
                a,
            } => {
                out.extend_from_slice(&[*r0, *r1, *len, *dst, *a]);
                (op::MAP1, *f)
            }
            Ins::Map2 {
                f,
                r0,
                r1,
                len,
                dst,
                a,
                b,
            } => {
                out.extend_from_slice(&[*r0, *r1, *len, *dst, *a, *b]);
                (op::MAP2, *f)
            }
            Ins::SumN {
                r0,
                r1,
                len,
                dst,
                scale,
                args,
            } => {
                out.extend_from_slice(&[*r0, *r1, *len, *dst, scale.to_bits(), args.len() as u32]);
                out.extend(args);
                (op::SUMN, 0)
            }
            Ins::Lookup {
                r0,
                r1,
                len,
                dst,
                table,
                rows,
                ids,
            } => {
                out.extend_from_slice(&[*r0, *r1, *len, *dst, *table, *rows, *ids]);
                (op::LOOKUP, 0)
            }
            Ins::Softmax {
                r0,
                r1,
                len,
                dst,
                a,
            } => {
                out.extend_from_slice(&[*r0, *r1, *len, *dst, *a]);
                (op::SOFTMAX, 0)
            }
            Ins::PickLoss {
                r0,
                r1,
                width,
                dst,
                a,
                labels,
            } => {
                out.extend_from_slice(&[*r0, *r1, *width, *dst, *a, *labels]);
                (op::PICKLOSS, 0)
            }
            Ins::RProd {
                mat,
                acc,
                r0,
                r1,
                dst,
                xs,
            } => {
                out.extend_from_slice(&[*mat, *r0, *r1, *dst, xs.len() as u32]);
                out.extend(xs);
                (op::RPROD, flag(*acc, 0))
            }
            Ins::GProd {
                ta,
                tb,
                acc,
                r0,
                r1,
                m,
                n,
                p,
                c,
                a,
                b,
            } => {
                out.extend_from_slice(&[*r0, *r1, *m, *n, *p, *c, *a, *b]);
                (op::GPROD, flag(*ta, 0) | flag(*tb, 1) | flag(*acc, 2))
            }
            Ins::DMap {
                kind,
                r0,
                r1,
                len,
                dx,
                dy,
                aux,
                scale,
            } => {
                out.extend_from_slice(&[*r0, *r1, *len, *dx, *dy, *aux, scale.to_bits()]);
                (op::DMAP, *kind)
            }
            Ins::RProdB {
                mat,
                pi,
                r0,
                r1,
                dy,
                partial,
                xs,
            } => {
                out.extend_from_slice(&[*mat, *pi, *r0, *r1, *dy, *partial, xs.len() as u32]);
                out.extend(xs);
                (op::RPRODB, 0)
            }
            Ins::Reduce {
                r0,
                r1,
                c0,
                kc,
                w,
                col,
                len,
                parts,
                partial,
                dst,
            } => {
                out.extend_from_slice(&[
                    *r0, *r1, *c0, *kc, *w, *col, *len, *parts, *partial, *dst,
                ]);
                (op::REDUCE, 0)
            }
            Ins::DLookup {
                r0,
                r1,
                len,
                dy,
                dtable,
                rows,
                ids,
            } => {
                out.extend_from_slice(&[*r0, *r1, *len, *dy, *dtable, *rows, *ids]);
                (op::DLOOKUP, 0)
            }
            Ins::DSoftmax {
                r0,
                r1,
                len,
                dx,
                dy,
                y,
            } => {
                out.extend_from_slice(&[*r0, *r1, *len, *dx, *dy, *y]);
                (op::DSOFTMAX, 0)
            }
            Ins::DPickLoss {
                r0,
                r1,
                width,
                dx,
                dy,
                x,
                labels,
            } => {
                out.extend_from_slice(&[*r0, *r1, *width, *dx, *dy, *x, *labels]);
                (op::DPICKLOSS, 0)
            }
        };
        out[at] = code | sub << 8 | ((out.len() - at) as u32) << 16;
    }

    /// Decodes the instruction at `words[at..]` of processor `vp`'s stream;
    /// returns it and its length in words.
    pub fn decode(words: &[u32], at: usize, vp: u32) -> Result<(Ins, usize), ScriptError> {
        let pre = *words.get(at).ok_or(ScriptError::Truncated(at))?;
        let (code, sub, said) = (pre & 0xFF, (pre >> 8) & 0xFF, pre >> 16);
        let w = |i: usize| -> Result<u32, ScriptError> {
            words
                .get(at + 1 + i)
                .copied()
                .ok_or(ScriptError::Truncated(at + 1 + i))
        };
        let list = |from: usize, n: u32| -> Result<Vec<u32>, ScriptError> {
            (0..n as usize).map(|i| w(from + i)).collect()
        };
        let f = |i: usize| w(i).map(f32::from_bits);
        let ins = match code {
            op::END => Ins::End,
            op::BAR => Ins::Bar { n: w(0)? },
            op::BATCH => Ins::Batch {
                table: w(0)?,
                k: w(1)?,
            },
            op::GATHER => Ins::Gather {
                r0: w(0)?,
                r1: w(1)?,
                len: w(2)?,
                dst: w(3)?,
                csr: w(4)?,
                init: f(5)?,
            },
            op::MAP1 => Ins::Map1 {
                f: sub,
                r0: w(0)?,
                r1: w(1)?,
                len: w(2)?,
                dst: w(3)?,
                a: w(4)?,
            },
            op::MAP2 => Ins::Map2 {
                f: sub,
                r0: w(0)?,
                r1: w(1)?,
                len: w(2)?,
                dst: w(3)?,
                a: w(4)?,
                b: w(5)?,
            },
            op::SUMN => Ins::SumN {
                r0: w(0)?,
                r1: w(1)?,
                len: w(2)?,
                dst: w(3)?,
                scale: f(4)?,
                args: list(6, w(5)?)?,
            },
            op::LOOKUP => Ins::Lookup {
                r0: w(0)?,
                r1: w(1)?,
                len: w(2)?,
                dst: w(3)?,
                table: w(4)?,
                rows: w(5)?,
                ids: w(6)?,
            },
            op::SOFTMAX => Ins::Softmax {
                r0: w(0)?,
                r1: w(1)?,
                len: w(2)?,
                dst: w(3)?,
                a: w(4)?,
            },
            op::PICKLOSS => Ins::PickLoss {
                r0: w(0)?,
                r1: w(1)?,
                width: w(2)?,
                dst: w(3)?,
                a: w(4)?,
                labels: w(5)?,
            },
            op::RPROD => Ins::RProd {
                mat: w(0)?,
                acc: sub & 1 != 0,
                r0: w(1)?,
                r1: w(2)?,
                dst: w(3)?,
                xs: list(5, w(4)?)?,
            },
            op::GPROD => Ins::GProd {
                ta: sub & 1 != 0,
                tb: sub & 2 != 0,
                acc: sub & 4 != 0,
                r0: w(0)?,
                r1: w(1)?,
                m: w(2)?,
                n: w(3)?,
                p: w(4)?,
                c: w(5)?,
                a: w(6)?,
                b: w(7)?,
            },
            op::DMAP => Ins::DMap {
                kind: sub,
                r0: w(0)?,
                r1: w(1)?,
                len: w(2)?,
                dx: w(3)?,
                dy: w(4)?,
                aux: w(5)?,
                scale: f(6)?,
            },
            op::RPRODB => Ins::RProdB {
                mat: w(0)?,
                pi: w(1)?,
                r0: w(2)?,
                r1: w(3)?,
                dy: w(4)?,
                partial: w(5)?,
                xs: list(7, w(6)?)?,
            },
            op::REDUCE => Ins::Reduce {
                r0: w(0)?,
                r1: w(1)?,
                c0: w(2)?,
                kc: w(3)?,
                w: w(4)?,
                col: w(5)?,
                len: w(6)?,
                parts: w(7)?,
                partial: w(8)?,
                dst: w(9)?,
            },
            op::DLOOKUP => Ins::DLookup {
                r0: w(0)?,
                r1: w(1)?,
                len: w(2)?,
                dy: w(3)?,
                dtable: w(4)?,
                rows: w(5)?,
                ids: w(6)?,
            },
            op::DSOFTMAX => Ins::DSoftmax {
                r0: w(0)?,
                r1: w(1)?,
                len: w(2)?,
                dx: w(3)?,
                dy: w(4)?,
                y: w(5)?,
            },
            op::DPICKLOSS => Ins::DPickLoss {
                r0: w(0)?,
                r1: w(1)?,
                width: w(2)?,
                dx: w(3)?,
                dy: w(4)?,
                x: w(5)?,
                labels: w(6)?,
            },
            opcode => return Err(ScriptError::Opcode { vp, opcode, at }),
        };
        let mut probe = Vec::new();
        ins.encode(&mut probe);
        if probe.len() as u32 != said {
            return Err(ScriptError::Length {
                vp,
                at,
                said,
                took: probe.len() as u32,
            });
        }
        Ok((ins, said as usize))
    }
}

/// An operand word.
pub fn operand(space: u32, offset: u32) -> u32 {
    debug_assert!(offset <= MAX_OFFSET);
    space << 30 | offset
}

/// A script: per-processor streams and the shared data section.
#[derive(Clone, Debug, PartialEq)]
pub struct Script {
    /// Virtual processors.
    pub vps: u32,
    /// Grid barriers every processor passes.
    pub barriers: u32,
    /// Floats between a node's forward record and its gradient record.
    pub grad_shift: u32,
    /// Every processor's instruction words (each ends with `END`).
    pub streams: Vec<Vec<u32>>,
    /// Row tables, gather lists, ids and labels.
    pub data: Vec<u32>,
}

impl Script {
    /// The script as the words the kernel reads.
    pub fn to_words(&self) -> Vec<u32> {
        let mut w = Vec::new();
        self.to_words_into(&mut w);
        w
    }

    /// [`Script::to_words`] into `w` (cleared first), so that a caller that
    /// uploads a script per mini-batch reuses one buffer instead of faulting
    /// in a fresh one each time.
    pub fn to_words_into(&self, w: &mut Vec<u32>) {
        let body: usize = self.streams.iter().map(Vec::len).sum();
        let data_at = HEADER + self.vps as usize + 1 + body;
        let total = data_at + self.data.len();
        w.clear();
        w.reserve(total);
        w.extend([
            MAGIC,
            VERSION,
            self.vps,
            self.barriers,
            self.grad_shift,
            data_at as u32,
            total as u32,
            0,
        ]);
        let mut at = 0u32;
        w.push(0);
        for s in &self.streams {
            at += s.len() as u32;
            w.push(at);
        }
        for s in &self.streams {
            w.extend(s);
        }
        w.extend(&self.data);
    }

    /// Reads words written by [`Script::to_words`], checking every
    /// instruction decodes.
    pub fn from_words(w: &[u32]) -> Result<Script, ScriptError> {
        if w.len() < HEADER || w[0] != MAGIC || w[1] != VERSION {
            return Err(ScriptError::Header {
                magic: w.first().copied().unwrap_or(0),
                version: w.get(1).copied().unwrap_or(0),
            });
        }
        let (vps, data_at, total) = (w[2] as usize, w[5] as usize, w[6] as usize);
        if total != w.len() || data_at > total || HEADER + vps + 1 > data_at {
            return Err(ScriptError::Truncated(w.len().min(total)));
        }
        let offs = &w[HEADER..HEADER + vps + 1];
        let base = HEADER + vps + 1;
        let mut streams = Vec::with_capacity(vps);
        for v in 0..vps {
            let (a, b) = (base + offs[v] as usize, base + offs[v + 1] as usize);
            if a > b || b > data_at {
                return Err(ScriptError::Truncated(b));
            }
            let s = w[a..b].to_vec();
            let mut at = 0;
            while at < s.len() {
                let (_, n) = Ins::decode(&s, at, v as u32)?;
                at += n;
            }
            streams.push(s);
        }
        Ok(Script {
            vps: vps as u32,
            barriers: w[3],
            grad_shift: w[4],
            streams,
            data: w[data_at..].to_vec(),
        })
    }

    /// Processor `vp`'s instructions, decoded.
    pub fn decode_stream(&self, vp: u32) -> Result<Vec<Ins>, ScriptError> {
        let s = &self.streams[vp as usize];
        let mut out = Vec::new();
        let mut at = 0;
        while at < s.len() {
            let (ins, n) = Ins::decode(s, at, vp)?;
            out.push(ins);
            at += n;
        }
        Ok(out)
    }

    /// Bytes of the whole script.
    pub fn bytes(&self) -> usize {
        4 * (HEADER
            + self.vps as usize
            + 1
            + self.streams.iter().map(Vec::len).sum::<usize>()
            + self.data.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_kind() -> Vec<Ins> {
        vec![
            Ins::Bar { n: 3 },
            Ins::Batch { table: 7, k: 2 },
            Ins::Gather {
                r0: 0,
                r1: 2,
                len: 8,
                dst: operand(space::FWD, 4),
                csr: 9,
                init: 1.0,
            },
            Ins::Map1 {
                f: 2,
                r0: 0,
                r1: 1,
                len: 8,
                dst: 1,
                a: 2,
            },
            Ins::Map2 {
                f: 1,
                r0: 0,
                r1: 1,
                len: 8,
                dst: 1,
                a: 2,
                b: operand(space::ABS, 12),
            },
            Ins::SumN {
                r0: 0,
                r1: 1,
                len: 4,
                dst: 0,
                scale: 0.5,
                args: vec![1, 2, 3],
            },
            Ins::Lookup {
                r0: 0,
                r1: 2,
                len: 4,
                dst: 0,
                table: operand(space::ABS, 0),
                rows: 10,
                ids: 3,
            },
            Ins::Softmax {
                r0: 0,
                r1: 2,
                len: 5,
                dst: 0,
                a: 5,
            },
            Ins::PickLoss {
                r0: 0,
                r1: 2,
                width: 5,
                dst: 0,
                a: 5,
                labels: 4,
            },
            Ins::RProd {
                mat: 300,
                acc: true,
                r0: 0,
                r1: 4,
                dst: 0,
                xs: vec![1, 2],
            },
            Ins::GProd {
                ta: true,
                tb: false,
                acc: true,
                r0: 0,
                r1: 1,
                m: 2,
                n: 3,
                p: 4,
                c: 0,
                a: 1,
                b: 2,
            },
            Ins::DMap {
                kind: 3,
                r0: 0,
                r1: 1,
                len: 8,
                dx: operand(space::GRAD, 1),
                dy: operand(space::GRAD, 9),
                aux: 9,
                scale: -1.0,
            },
            Ins::RProdB {
                mat: 1,
                pi: 17,
                r0: 0,
                r1: 3,
                dy: 0,
                partial: 100,
                xs: vec![4],
            },
            Ins::Reduce {
                r0: 1,
                r1: 2,
                c0: 0,
                kc: 3,
                w: 64,
                col: 32,
                len: 32,
                parts: 9,
                partial: 100,
                dst: 5,
            },
            Ins::DLookup {
                r0: 0,
                r1: 1,
                len: 4,
                dy: 0,
                dtable: 1,
                rows: 10,
                ids: 2,
            },
            Ins::DSoftmax {
                r0: 0,
                r1: 1,
                len: 4,
                dx: 0,
                dy: 1,
                y: 2,
            },
            Ins::DPickLoss {
                r0: 0,
                r1: 1,
                width: 5,
                dx: 0,
                dy: 1,
                x: 2,
                labels: 3,
            },
            Ins::End,
        ]
    }

    #[test]
    fn every_instruction_round_trips_through_words() {
        let mut words = Vec::new();
        for i in every_kind() {
            i.encode(&mut words);
        }
        let s = Script {
            vps: 2,
            barriers: 4,
            grad_shift: 99,
            streams: vec![words.clone(), vec![op::END | 1 << 16]],
            data: vec![1, 2, 3],
        };
        let w = s.to_words();
        assert_eq!(w.len() * 4, s.bytes());
        let back = Script::from_words(&w).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.decode_stream(0).unwrap(), every_kind());
    }

    #[test]
    fn bad_words_are_typed_errors() {
        assert!(matches!(
            Script::from_words(&[1, 2, 3]),
            Err(ScriptError::Header { .. })
        ));
        let stream = vec![0x7F | 1 << 16];
        assert!(matches!(
            Ins::decode(&stream, 0, 0),
            Err(ScriptError::Opcode { opcode: 0x7F, .. })
        ));
        // A preamble claiming more words than the operands take.
        let stream = vec![op::BAR | 5 << 16, 0];
        assert!(matches!(
            Ins::decode(&stream, 0, 0),
            Err(ScriptError::Length {
                said: 5,
                took: 2,
                ..
            })
        ));
        assert!(matches!(
            Ins::decode(&[op::BAR | 2 << 16], 0, 0),
            Err(ScriptError::Truncated(1))
        ));
    }

    /// The docs' opcode table was kept by hand beside the constants: it must
    /// name every opcode with its code, and no other.
    #[test]
    fn the_docs_table_lists_the_instruction_set() {
        let docs = include_str!("../../../../../docs/vpps.md");
        let mut listed: Vec<(String, u32)> = docs
            .lines()
            .filter_map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                let name = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
                let code = u32::from_str_radix(cells.get(2)?.strip_prefix("0x")?, 16).ok()?;
                Some((name.to_string(), code))
            })
            .collect();
        listed.sort_by_key(|x| x.1);
        let mut all: Vec<(String, u32)> =
            op::ALL.iter().map(|&(n, c)| (n.to_string(), c)).collect();
        all.sort_by_key(|x| x.1);
        assert_eq!(listed, all);
    }
}
