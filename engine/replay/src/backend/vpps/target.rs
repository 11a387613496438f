//! The GPU a placement is planned for: SM count and the per-SM register file
//! and shared memory that bound what the virtual processors can keep on chip.
//!
//! Numbers of the presets (per SM unless stated):
//!
//! | preset | GPU | SMs | 32-bit registers | max regs / thread | shared memory | max shared / block | NVRTC arch |
//! |---|---|---|---|---|---|---|---|
//! | `h100` | H100 SXM5 | 132 | 65,536 | 255 | 228 KB | 227 KB | `compute_90` |
//! | `h200` | H200 SXM | 132 | 65,536 | 255 | 228 KB | 227 KB | `compute_90` |
//! | `a100` | A100 SXM4 | 108 | 65,536 | 255 | 164 KB | 163 KB | `compute_80` |
//! | `titan-v` | Titan V (the paper's GPU) | 80 | 65,536 | 255 | 96 KB | 96 KB | `compute_70` |
//!
//! Sources: the register file, registers per thread and shared memory per SM
//! and per block are the CUDA C++ Programming Guide's "Technical
//! Specifications per Compute Capability" table (compute capability 9.0, 8.0,
//! 7.0); the SM counts are NVIDIA's architecture whitepapers (H100: 132 SMs in
//! the SXM5 part; A100: 108 SMs) and VPPS §IV (Titan V: 80 SMs × 256 KB of
//! register file). The driver reserves 1 KB of shared memory per block on
//! compute capability 8.0 and later (the same guide), which the budget
//! subtracts. On a machine with a GPU the CUDA executor replaces the SM count
//! and shared-memory limits by the device's own attributes.

use serde::Serialize;

/// A GPU's on-chip resources.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Target {
    /// Preset name (or the device's name when read from a GPU).
    pub name: String,
    /// Streaming multiprocessors.
    pub sms: u32,
    /// 32-bit registers per SM.
    pub regs_per_sm: u32,
    /// Most registers one thread can address.
    pub max_regs_per_thread: u32,
    /// Shared memory per SM, bytes.
    pub smem_per_sm: u32,
    /// Most shared memory one block can use (opt-in), bytes.
    pub smem_per_block: u32,
    /// Shared memory the driver reserves per block, bytes.
    pub smem_reserved_per_block: u32,
    /// NVRTC virtual architecture of the kernel (`--gpu-architecture`).
    pub arch: String,
}

impl Target {
    /// The presets' names.
    pub const PRESETS: [&'static str; 4] = ["h100", "h200", "a100", "titan-v"];

    /// A preset by name (see the module table).
    pub fn preset(name: &str) -> Option<Target> {
        let t = |name: &str, sms, smem_kb: u32, block_kb: u32, reserved, arch: &str| Target {
            name: name.to_string(),
            sms,
            regs_per_sm: 65_536,
            max_regs_per_thread: 255,
            smem_per_sm: smem_kb * 1024,
            smem_per_block: block_kb * 1024,
            smem_reserved_per_block: reserved,
            arch: arch.to_string(),
        };
        Some(match name {
            "h100" => t("h100", 132, 228, 227, 1024, "compute_90"),
            "h200" => t("h200", 132, 228, 227, 1024, "compute_90"),
            "a100" => t("a100", 108, 164, 163, 1024, "compute_80"),
            "titan-v" => t("titan-v", 80, 96, 96, 0, "compute_70"),
            _ => return None,
        })
    }

    /// The default target: an H100.
    pub fn h100() -> Target {
        Target::preset("h100").expect("a preset")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_resolve_and_unknown_names_do_not() {
        for p in Target::PRESETS {
            let t = Target::preset(p).unwrap();
            assert_eq!(t.name, p);
            assert!(t.smem_per_block <= t.smem_per_sm);
        }
        assert_eq!(Target::h100().sms, 132);
        assert!(Target::preset("v100x").is_none());
    }
}
