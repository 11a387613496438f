//! Named f32 tensors in a safetensors file: the one weights format of
//! batchlab (model folders' weights and expected outputs, model exports).
//! Reading checks what the safetensors crate checks (header, offsets,
//! sizes) and that every tensor is f32; errors name the file and the tensor.

use std::collections::BTreeMap;
use std::path::Path;

use safetensors::{Dtype, SafeTensors};
use thiserror::Error;

/// One tensor: its shape and row-major data.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    /// Dims, outermost first.
    pub shape: Vec<usize>,
    /// `shape.iter().product()` floats.
    pub data: Vec<f32>,
}

impl Tensor {
    /// A tensor of `shape` holding `data` (whose length must match).
    pub fn new(shape: Vec<usize>, data: Vec<f32>) -> Tensor {
        debug_assert_eq!(shape.iter().product::<usize>(), data.len());
        Tensor { shape, data }
    }
}

/// Errors reading tensors; each names the file (and the tensor).
#[derive(Debug, Error)]
pub enum TensorsError {
    /// The file could not be read or written.
    #[error("{file}: {source}")]
    Io {
        /// File name.
        file: String,
        /// Cause.
        source: std::io::Error,
    },
    /// Not a safetensors file, or a damaged or truncated one.
    #[error("{file}: not a readable safetensors file: {reason}")]
    Format {
        /// File name.
        file: String,
        /// What the reader found.
        reason: String,
    },
    /// A tensor of another element type than f32.
    #[error("{file}: tensor `{tensor}` is {dtype}; batchlab reads f32 tensors")]
    Dtype {
        /// File name.
        file: String,
        /// Tensor name.
        tensor: String,
        /// Its dtype.
        dtype: String,
    },
    /// A tensor the reader needs is absent.
    #[error("{file}: no tensor `{tensor}` ({why})")]
    Missing {
        /// File name.
        file: String,
        /// Tensor name.
        tensor: String,
        /// What needs it.
        why: String,
    },
    /// A tensor of another shape than needed.
    #[error("{file}: tensor `{tensor}` has shape {found:?}, but {why} needs {expected:?}")]
    Shape {
        /// File name.
        file: String,
        /// Tensor name.
        tensor: String,
        /// Its shape.
        found: Vec<usize>,
        /// The shape needed.
        expected: Vec<usize>,
        /// What needs it.
        why: String,
    },
}

/// Tensors by name, from one file.
#[derive(Clone, Debug, Default)]
pub struct Tensors {
    /// The file they came from (for errors).
    pub file: String,
    /// The header's `__metadata__` (string pairs).
    pub metadata: BTreeMap<String, String>,
    map: BTreeMap<String, Tensor>,
}

impl Tensors {
    /// Reads every tensor of a safetensors file.
    pub fn read(path: &Path) -> Result<Tensors, TensorsError> {
        let file = path.display().to_string();
        let bytes = crate::io::read(path).map_err(|source| TensorsError::Io {
            file: file.clone(),
            source,
        })?;
        Self::from_bytes(&bytes, &file)
    }

    /// Parses a safetensors buffer; `file` names it in errors.
    pub fn from_bytes(bytes: &[u8], file: &str) -> Result<Tensors, TensorsError> {
        let format = |e: safetensors::SafeTensorError| TensorsError::Format {
            file: file.to_string(),
            reason: e.to_string(),
        };
        let st = SafeTensors::deserialize(bytes).map_err(format)?;
        let (_, meta) = SafeTensors::read_metadata(bytes).map_err(format)?;
        let metadata = meta
            .metadata()
            .as_ref()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        let mut map = BTreeMap::new();
        for (name, view) in st.iter() {
            if view.dtype() != Dtype::F32 {
                return Err(TensorsError::Dtype {
                    file: file.to_string(),
                    tensor: name.to_string(),
                    dtype: format!("{:?}", view.dtype()),
                });
            }
            let data = view
                .data()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            map.insert(
                name.to_string(),
                Tensor {
                    shape: view.shape().to_vec(),
                    data,
                },
            );
        }
        Ok(Tensors {
            file: file.to_string(),
            metadata,
            map,
        })
    }

    /// The tensor named `name`, if any.
    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.map.get(name)
    }

    /// The tensor named `name`, which `why` needs at `shape`. Leading dims
    /// of 1 do not count (`[1, 64]` is `[64]`, the same floats): a value's
    /// batchlab shape drops them, and so may a cell's parameter that PyTorch
    /// holds as `[1, H]` (a learned start state read as a vector).
    pub fn require(&self, name: &str, shape: &[usize], why: &str) -> Result<&Tensor, TensorsError> {
        let t = self.map.get(name).ok_or_else(|| TensorsError::Missing {
            file: self.file.clone(),
            tensor: name.to_string(),
            why: why.to_string(),
        })?;
        let bare = |s: &[usize]| s.iter().position(|&d| d != 1).map_or(0, |i| s.len() - i);
        let (a, b) = (
            &t.shape[t.shape.len() - bare(&t.shape)..],
            &shape[shape.len() - bare(shape)..],
        );
        if a != b {
            return Err(TensorsError::Shape {
                file: self.file.clone(),
                tensor: name.to_string(),
                found: t.shape.clone(),
                expected: shape.to_vec(),
                why: why.to_string(),
            });
        }
        Ok(t)
    }

    /// Names in sorted order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.map.keys().map(String::as_str)
    }

    /// Adds (or replaces) a tensor.
    pub fn insert(&mut self, name: impl Into<String>, t: Tensor) {
        self.map.insert(name.into(), t);
    }

    /// Number of tensors.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The safetensors bytes of these tensors: names and metadata sorted,
    /// so the same tensors give the same bytes. (Written here rather than
    /// by the safetensors crate, whose header keeps the metadata in hash
    /// order.)
    pub fn to_bytes(&self, metadata: &BTreeMap<String, String>) -> Vec<u8> {
        let mut header = serde_json::Map::new();
        if !metadata.is_empty() {
            header.insert(
                "__metadata__".into(),
                serde_json::Value::Object(
                    metadata
                        .iter()
                        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                        .collect(),
                ),
            );
        }
        let mut at = 0usize;
        for (name, t) in &self.map {
            let n = t.data.len() * 4;
            header.insert(
                name.clone(),
                serde_json::json!({"dtype": "F32", "shape": t.shape, "data_offsets": [at, at + n]}),
            );
            at += n;
        }
        // serde_json's map is sorted by key (insertion-ordered where a
        // dependency enables `preserve_order`: the metadata, then the sorted
        // names); either way the same tensors give the same header.
        let mut text = serde_json::to_vec(&header).unwrap_or_default();
        text.resize(text.len().next_multiple_of(8), b' ');
        let mut out = Vec::with_capacity(8 + text.len() + at);
        out.extend((text.len() as u64).to_le_bytes());
        out.extend(text);
        for t in self.map.values() {
            for x in &t.data {
                out.extend(x.to_le_bytes());
            }
        }
        out
    }

    /// Writes the tensors atomically.
    pub fn write(
        &self,
        path: &Path,
        metadata: &BTreeMap<String, String>,
    ) -> Result<(), TensorsError> {
        crate::io::write_atomic(path, &self.to_bytes(metadata)).map_err(|source| TensorsError::Io {
            file: path.display().to_string(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Tensors {
        let mut t = Tensors::default();
        t.insert(
            "a.weight",
            Tensor::new(vec![2, 3], (0..6).map(|i| i as f32).collect()),
        );
        t.insert("b", Tensor::new(vec![1], vec![-1.5]));
        t
    }

    #[test]
    fn write_read_round_trips_and_names_what_is_missing_or_misshapen() {
        let bytes = sample().to_bytes(&BTreeMap::new());
        let back = Tensors::from_bytes(&bytes, "w.safetensors").unwrap();
        assert_eq!(back.get("a.weight"), sample().get("a.weight"));
        let e = back.require("c", &[1], "role x").unwrap_err().to_string();
        assert_eq!(e, "w.safetensors: no tensor `c` (role x)");
        let e = back
            .require("a.weight", &[3, 2], "cell leaf")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`a.weight` has shape [2, 3], but cell leaf needs [3, 2]"),
            "{e}"
        );
    }

    #[test]
    fn a_start_state_of_shape_1_h_serves_a_vector_parameter_and_nothing_else() {
        let mut t = Tensors::default();
        t.insert("start", Tensor::new(vec![1, 3], vec![1.0, 2.0, 3.0]));
        assert_eq!(
            t.require("start", &[3], "cell step").unwrap().data,
            [1.0, 2.0, 3.0]
        );
        assert!(t.require("start", &[1, 1, 3], "cell step").is_ok());
        for wrong in [&[1, 2][..], &[3, 1], &[6]] {
            let e = t
                .require("start", wrong, "cell step")
                .unwrap_err()
                .to_string();
            assert!(e.contains("`start` has shape [1, 3]"), "{e}");
        }
    }

    #[test]
    fn a_truncated_file_is_an_error_naming_it() {
        let bytes = sample().to_bytes(&BTreeMap::new());
        for cut in [0, 5, 8, 20, bytes.len() - 1] {
            let e = Tensors::from_bytes(&bytes[..cut], "t.safetensors")
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with("t.safetensors: not a readable safetensors file"),
                "{cut}: {e}"
            );
        }
    }

    #[test]
    fn same_tensors_same_bytes() {
        assert_eq!(
            sample().to_bytes(&BTreeMap::new()),
            sample().to_bytes(&BTreeMap::new())
        );
    }
}
