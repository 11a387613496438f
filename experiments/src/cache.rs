//! A compute-once cache shared by parallel runs: the first caller of a key
//! computes, concurrent callers of the same key wait for it, later callers get
//! a clone. Failures are cached as their rendered message, so a broken FSM or
//! layout fails every run that needs it once, not once per run.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, OnceLock};

/// A slot: empty until computed, then the value or the rendered error.
type Slot<V> = Arc<OnceLock<Result<Arc<V>, String>>>;

/// Values by key, each computed once.
pub struct Cache<K, V> {
    slots: Mutex<HashMap<K, Slot<V>>>,
}

impl<K: Eq + Hash, V> Default for Cache<K, V> {
    fn default() -> Self {
        Cache {
            slots: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Eq + Hash, V> Cache<K, V> {
    /// The value of `key`, computing it with `f` if no one has.
    pub fn get_or_compute<E: std::error::Error>(
        &self,
        key: K,
        f: impl FnOnce() -> Result<V, E>,
    ) -> Result<Arc<V>, String> {
        let slot = {
            // A poisoned lock only means another run panicked while holding
            // it; the map itself is still consistent.
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(slots.entry(key).or_default())
        };
        slot.get_or_init(|| f().map(Arc::new).map_err(|e| crate::error::chain(&e)))
            .clone()
    }
}
