//! Trace reader. Nodes are deserialized straight into the CSR arrays of a
//! [`GraphBuilder`] (a `DeserializeSeed` per node), so reading allocates no
//! per-node vectors; validation is then the builder's. Node data (version 2)
//! is collected beside it, allocated only once a node has some.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use super::{FORMAT, NodeData, Trace, TraceError, TraceMeta, VERSION};
use crate::graph::{GraphBuilder, TypeTable};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTrace {
    format: String,
    version: u64,
    workload: String,
    #[serde(default)]
    meta: TraceMeta,
    types: Vec<RawType>,
    nodes: RawNodes,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawType {
    name: String,
    #[serde(default = "default_batchable")]
    batchable: bool,
}

fn default_batchable() -> bool {
    true
}

/// Only the identifying fields, read when a full parse fails so that a file of
/// another format or version gets that error rather than a field error.
#[derive(Deserialize)]
struct Header {
    format: Option<String>,
    version: Option<u64>,
}

pub(super) fn parse(text: &str, file: &str) -> Result<Trace, TraceError> {
    let raw: RawTrace = match serde_json::from_str(text) {
        Ok(raw) => raw,
        Err(err) => {
            if let Ok(h) = serde_json::from_str::<Header>(text) {
                check_header(h.format.as_deref(), h.version, file)?;
            }
            // Another batchlab file (a YAML policy...): say what it is.
            check_header(
                crate::fieldpath::declared_format(text).as_deref(),
                None,
                file,
            )?;
            return Err(json_error(&err, text, file));
        }
    };
    check_header(Some(&raw.format), Some(raw.version), file)?;
    for (field, v) in [
        ("hidden", raw.meta.hidden),
        ("batch_size", raw.meta.batch_size),
    ] {
        if v == Some(0) {
            return Err(TraceError::ZeroSize {
                file: file.to_string(),
                field,
            });
        }
    }
    let graph_err = |source| TraceError::Graph {
        file: file.to_string(),
        source,
    };
    let mut types = TypeTable::new();
    for t in &raw.types {
        types.push(&t.name, t.batchable).map_err(graph_err)?;
    }
    let RawNodes(mut builder, data) = raw.nodes;
    if raw.version < 2
        && let Some(node) = data.iter().position(|d| !d.is_empty())
    {
        return Err(TraceError::Data {
            file: file.to_string(),
            node: node as u32,
            message: format!(
                "not part of version {} (node data needs version 2)",
                raw.version
            ),
        });
    }
    builder.replace_types(types);
    let graph = builder.finish().map_err(graph_err)?;
    if !graph.ids_topological() {
        for v in graph.nodes() {
            if let Some((position, a)) = graph.args(v).iter().enumerate().find(|(_, a)| a.0 >= v.0)
            {
                return Err(TraceError::ForwardArgument {
                    file: file.to_string(),
                    node: v.0,
                    position,
                    arg: a.0,
                });
            }
        }
    }
    Ok(Trace {
        workload: raw.workload,
        meta: raw.meta,
        graph,
        data,
    })
}

fn check_header(format: Option<&str>, version: Option<u64>, file: &str) -> Result<(), TraceError> {
    if let Some(found) = format
        && found != FORMAT
    {
        return Err(TraceError::Format {
            file: file.to_string(),
            found: found.to_string(),
        });
    }
    if let Some(found) = version
        && !(1..=u64::from(VERSION)).contains(&found)
    {
        return Err(TraceError::Version {
            file: file.to_string(),
            found,
        });
    }
    Ok(())
}

fn json_error(err: &serde_json::Error, text: &str, file: &str) -> TraceError {
    TraceError::Json {
        file: file.to_string(),
        line: err.line(),
        column: err.column(),
        message: crate::fieldpath::json_message(err, text),
    }
}

/// The `nodes` array, already in CSR form, and the nodes' data: empty when no
/// node has any, else one entry per node.
struct RawNodes(GraphBuilder, Vec<NodeData>);

impl<'de> Deserialize<'de> for RawNodes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_seq(NodesVisitor)
    }
}

struct NodesVisitor;

impl<'de> Visitor<'de> for NodesVisitor {
    type Value = RawNodes;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of nodes")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawNodes, A::Error> {
        let mut b = GraphBuilder::new();
        let mut data = Vec::new();
        let hint = seq.size_hint().unwrap_or(0);
        b.reserve(hint, hint);
        while seq
            .next_element_seed(NodeSeed(&mut b, &mut data))?
            .is_some()
        {}
        if !data.is_empty() {
            data.resize(b.len(), NodeData::default());
        }
        Ok(RawNodes(b, data))
    }
}

/// Deserializes one node object, appending it to the builder and its data,
/// if any, to the data vector (padding earlier nodes with empty data).
struct NodeSeed<'a>(&'a mut GraphBuilder, &'a mut Vec<NodeData>);

impl<'de> DeserializeSeed<'de> for NodeSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

/// Keys of a node object; the derive rejects any other key with
/// "unknown field `x`, expected one of `type`, `args`, `instance`, `data`".
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum NodeField {
    Type,
    Args,
    Instance,
    Data,
}

/// Keys of a node's `data` object.
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum DataField {
    Id,
    Label,
}

/// A node's `data`: an object only (a serde-derived struct would also take
/// an array), each key at most once.
struct DataSeed;

impl<'de> DeserializeSeed<'de> for DataSeed {
    type Value = NodeData;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<NodeData, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for DataSeed {
    type Value = NodeData;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object {\"id\": .., \"label\": ..}")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NodeData, A::Error> {
        let mut d = NodeData::default();
        while let Some(key) = map.next_key::<DataField>()? {
            match key {
                DataField::Id if d.id.is_some() => return Err(de::Error::duplicate_field("id")),
                DataField::Id => d.id = Some(map.next_value()?),
                DataField::Label if d.label.is_some() => {
                    return Err(de::Error::duplicate_field("label"));
                }
                DataField::Label => d.label = Some(map.next_value()?),
            }
        }
        Ok(d)
    }
}

impl<'de> Visitor<'de> for NodeSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(
            "a node object {\"type\": .., \"args\": [..], \"instance\": .., \"data\": {..}}",
        )
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let (b, all_data) = (self.0, self.1);
        let node = b.len();
        let mut ty: Option<u32> = None;
        let mut instance: Option<u32> = None;
        let mut data: Option<NodeData> = None;
        let mut args_seen = false;
        while let Some(key) = map.next_key::<NodeField>()? {
            match key {
                NodeField::Type if ty.is_some() => {
                    return Err(de::Error::duplicate_field("type"));
                }
                NodeField::Type => ty = Some(map.next_value()?),
                NodeField::Args if args_seen => return Err(de::Error::duplicate_field("args")),
                NodeField::Args => {
                    map.next_value_seed(ArgsSeed(b))?;
                    args_seen = true;
                }
                NodeField::Instance if instance.is_some() => {
                    return Err(de::Error::duplicate_field("instance"));
                }
                NodeField::Instance => instance = Some(map.next_value()?),
                NodeField::Data if data.is_some() => {
                    return Err(de::Error::duplicate_field("data"));
                }
                NodeField::Data => {
                    let d = map.next_value_seed(DataSeed).map_err(|e| {
                        de::Error::custom(format!("node {node}: field `data`: {}", strip_at(&e)))
                    })?;
                    if d.is_empty() {
                        return Err(de::Error::custom(format!(
                            "node {node}: field `data` is empty (give `id`, `label` or both)"
                        )));
                    }
                    data = Some(d);
                }
            }
        }
        let ty = ty.ok_or_else(|| de::Error::missing_field("type"))?;
        if !args_seen {
            return Err(de::Error::missing_field("args"));
        }
        if instance == Some(u32::MAX) {
            return Err(de::Error::custom(format!(
                "node {node}: instance {} out of range",
                u32::MAX
            )));
        }
        b.close_raw_node(ty, instance.unwrap_or(u32::MAX));
        if let Some(d) = data {
            all_data.resize(node, NodeData::default());
            all_data.push(d);
        }
        Ok(())
    }
}

/// An inner error's message without serde_json's " at line L column C",
/// which the outer error reports once.
fn strip_at(e: &impl fmt::Display) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// Deserializes an argument list straight into the builder's flat argument vector.
struct ArgsSeed<'a>(&'a mut GraphBuilder);

impl<'de> DeserializeSeed<'de> for ArgsSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for ArgsSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of node indices")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(a) = seq.next_element::<u32>()? {
            self.0.push_raw_arg(a);
        }
        Ok(())
    }
}
