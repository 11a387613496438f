//! safetensors bytes → `Tensors::from_bytes`; what it accepts must write
//! back (`to_bytes`) to bytes it reads again as the same tensors.
#![no_main]

use engine_core::modeldir::Tensors;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let t = match Tensors::from_bytes(data, "weights.safetensors") {
        Ok(t) => t,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    for name in t.names() {
        let x = t.get(name).expect("a listed name");
        let _ = t
            .require(name, &x.shape, "the fuzzer")
            .expect("its own shape");
        let _ = t
            .require(name, &[x.data.len() + 1], "the fuzzer")
            .map_err(|e| e.to_string());
    }
    let bytes = t.to_bytes(&t.metadata);
    let back = Tensors::from_bytes(&bytes, "again.safetensors").expect("written bytes read back");
    assert_eq!(back.metadata, t.metadata);
    assert!(back.names().eq(t.names()));
    for name in t.names() {
        let (a, b) = (t.get(name).unwrap(), back.get(name).unwrap());
        assert_eq!(a.shape, b.shape, "{name}");
        assert!(
            a.data
                .iter()
                .map(|x| x.to_bits())
                .eq(b.data.iter().map(|x| x.to_bits()))
        );
    }
});
