//! The device an item's rows were measured on, and what follows from it: the
//! word the report uses ("our CPU", "our GPU") and which of the paper's
//! numbers ours are compared with (`<item>.cpu.*` or `<item>.gpu.*` ids).
//!
//! An item's device is read from the config's device of its successful rows
//! (replay and peers runs name one; other kinds' rows say where they ran in
//! their provenance): `cuda` or
//! `cuda:N` is the GPU, anything else the CPU. Rows of both make the item
//! `Mixed`: the builders do not split a row set by device, so a mixed item
//! is compared with the paper's CPU numbers and its section says so in a note.

use crate::rows::RowSet;
use crate::specs::is_cuda;

/// The device of an item's successful rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    /// Every row on the CPU (or rows that name no device).
    Cpu,
    /// Every row on a CUDA device.
    Gpu,
    /// Some rows on each.
    Mixed,
}

impl Device {
    /// The device of `rows` (successful rows only).
    pub fn of(rows: &RowSet) -> Device {
        let (mut cpu, mut gpu) = (false, false);
        for r in rows.ok() {
            let d = r.config.device().unwrap_or(&r.provenance.device);
            if is_cuda(d) {
                gpu = true;
            } else {
                cpu = true;
            }
        }
        match (cpu, gpu) {
            (true, true) => Device::Mixed,
            (false, true) => Device::Gpu,
            _ => Device::Cpu,
        }
    }

    /// Our device in prose: `CPU`, `GPU`, or `CPU and GPU`.
    pub fn word(self) -> &'static str {
        match self {
            Device::Cpu => "CPU",
            Device::Gpu => "GPU",
            Device::Mixed => "CPU and GPU",
        }
    }

    /// The paper's device ours are compared with: `CPU` or `GPU`.
    pub fn paper_word(self) -> &'static str {
        match self {
            Device::Gpu => "GPU",
            Device::Cpu | Device::Mixed => "CPU",
        }
    }

    /// The device part of the published ids: `cpu` or `gpu`.
    pub fn key(self) -> &'static str {
        match self {
            Device::Gpu => "gpu",
            Device::Cpu | Device::Mixed => "cpu",
        }
    }

    /// The caveat of a mixed row set.
    pub fn mixed_note(self) -> Option<String> {
        (self == Device::Mixed).then(|| {
            "The rows mix CPU and GPU runs (`config.device`); bests and ratios are taken over \
             both, and compared with the paper's CPU numbers. Report each device's rows \
             separately for a meaningful comparison."
                .to_string()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rows::fixtures::{replay, set};

    fn of(devices: &[&str]) -> Device {
        Device::of(&set(devices
            .iter()
            .map(|d| replay("edbatch", d, 1.0, &[]))
            .collect()))
    }

    #[test]
    fn device_of_rows() {
        assert_eq!(of(&["cpu", "cpu"]), Device::Cpu);
        assert_eq!(of(&["cuda", "cuda:1"]), Device::Gpu);
        assert_eq!(of(&["cpu", "cuda"]), Device::Mixed);
        assert_eq!(of(&[]), Device::Cpu);
        assert_eq!(Device::Gpu.key(), "gpu");
        assert_eq!(Device::Mixed.key(), "cpu");
        assert!(Device::Mixed.mixed_note().is_some() && Device::Gpu.mixed_note().is_none());
    }
}
