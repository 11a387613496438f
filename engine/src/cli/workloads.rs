//! `engine workloads`.

use engine::workloads::{DefaultData, WORKLOADS};
use serde::Serialize;

/// Arguments of `engine workloads`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// One workload in `engine workloads --json`.
#[derive(Serialize)]
struct Row {
    name: &'static str,
    description: &'static str,
    paper: &'static str,
    structure: String,
    default_data: String,
    roles: Vec<RoleRow>,
}

#[derive(Serialize)]
struct RoleRow {
    role: &'static str,
    cell: &'static str,
    batchable: bool,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let rows: Vec<Row> = WORKLOADS
        .iter()
        .map(|w| Row {
            name: w.name,
            description: w.description,
            paper: w.paper,
            structure: format!("{:?}", w.structure()).to_lowercase(),
            default_data: match w.default_data {
                DefaultData::Real(d) => d.name().to_string(),
                DefaultData::Synthetic => "synthetic".to_string(),
            },
            roles: w
                .roles
                .iter()
                .map(|r| RoleRow {
                    role: r.role,
                    cell: r.cell,
                    batchable: r.batchable,
                })
                .collect(),
        })
        .collect();
    if a.json {
        return crate::cli::print_json(&rows);
    }
    for r in &rows {
        engine::outln!(
            "{:<20} {} [{}; {}]",
            r.name,
            r.description,
            r.structure,
            r.default_data
        );
        let roles: Vec<String> = r
            .roles
            .iter()
            .map(|x| {
                let mark = if x.batchable { "" } else { " (not batchable)" };
                if x.role == x.cell {
                    format!("{}{mark}", x.role)
                } else {
                    format!("{}={}{mark}", x.role, x.cell)
                }
            })
            .collect();
        engine::outln!("{:<20} roles: {}", "", roles.join(", "));
        engine::outln!("{:<20} paper: {}", "", r.paper);
    }
    Ok(())
}
