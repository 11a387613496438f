//! Primitive op rules: names, argument counts and shape inference.

use engine_core::cells::{PrimOp, ShapeError};

#[test]
fn names_round_trip_and_match_serde() {
    for op in PrimOp::ALL {
        assert_eq!(PrimOp::from_name(op.name()), Some(op));
    }
    assert_eq!(PrimOp::from_name("oneminus"), None);
    assert_eq!(PrimOp::OneMinus.name(), "one_minus");
    assert_eq!(PrimOp::PickLoss.name(), "pick_loss");
}

#[test]
fn matmul_rules() {
    assert_eq!(
        PrimOp::Matmul.infer_shape(&[&[3, 4], &[4]], None),
        Ok(vec![3])
    );
    assert_eq!(
        PrimOp::Matmul.infer_shape(&[&[3, 8], &[8, 4]], None),
        Ok(vec![3, 4])
    );
    assert!(PrimOp::Matmul.infer_shape(&[&[3, 4], &[5]], None).is_err());
    assert!(PrimOp::Matmul.infer_shape(&[&[4], &[4]], None).is_err());
}

#[test]
fn affine_checks_every_pair() {
    let ok = PrimOp::Affine.infer_shape(&[&[3], &[3, 4], &[4], &[3, 2], &[2]], None);
    assert_eq!(ok, Ok(vec![3]));
    let bad = PrimOp::Affine.infer_shape(&[&[3], &[3, 4], &[4], &[3, 2], &[4]], None);
    match bad {
        Err(ShapeError::Mismatch(text)) => assert!(text.contains("arg 4"), "{text}"),
        other => panic!("expected a mismatch naming arg 4, got {other:?}"),
    }
}

#[test]
fn arg_counts() {
    assert!(PrimOp::Affine.arg_count().accepts(3));
    assert!(!PrimOp::Affine.arg_count().accepts(4));
    assert!(!PrimOp::Affine.arg_count().accepts(1));
    assert!(PrimOp::Sum.arg_count().accepts(1));
    assert!(!PrimOp::Mean.arg_count().accepts(1));
    assert!(!PrimOp::Tanh.arg_count().accepts(2));
}

#[test]
fn concat_slice_lookup_loss() {
    assert_eq!(
        PrimOp::Concat.infer_shape(&[&[2, 5], &[3, 5]], None),
        Ok(vec![5, 5])
    );
    assert!(
        PrimOp::Concat
            .infer_shape(&[&[2, 5], &[3, 4]], None)
            .is_err()
    );
    assert!(PrimOp::Concat.infer_shape(&[&[2, 5], &[2]], None).is_err());
    assert_eq!(
        PrimOp::Slice.infer_shape(&[&[8, 2]], Some((4, 4))),
        Ok(vec![4, 2])
    );
    assert_eq!(
        PrimOp::Slice.infer_shape(&[&[8]], Some((5, 4))),
        Err(ShapeError::SliceRange {
            start: 5,
            len: 4,
            dim: 8
        })
    );
    assert_eq!(
        PrimOp::Lookup.infer_shape(&[&[1000, 4, 4]], None),
        Ok(vec![4, 4])
    );
    assert!(PrimOp::Lookup.infer_shape(&[&[1000]], None).is_err());
    assert_eq!(PrimOp::PickLoss.infer_shape(&[&[9]], None), Ok(vec![1]));
    assert!(PrimOp::Softmax.infer_shape(&[&[9, 2]], None).is_err());
}

#[test]
fn elementwise_classification() {
    assert!(PrimOp::OneMinus.is_elementwise());
    assert!(PrimOp::Mean.is_elementwise());
    assert!(!PrimOp::Affine.is_elementwise());
    assert!(!PrimOp::Softmax.is_elementwise());
    assert!(!PrimOp::Concat.is_elementwise());
}

#[test]
fn scale_and_exp_are_named_unary_elementwise_ops() {
    assert_eq!(PrimOp::from_name("scale"), Some(PrimOp::Scale));
    assert_eq!(PrimOp::from_name("exp"), Some(PrimOp::Exp));
    for op in [PrimOp::Scale, PrimOp::Exp] {
        assert!(op.is_elementwise());
        assert!(op.arg_count().accepts(1) && !op.arg_count().accepts(2));
        assert_eq!(op.infer_shape(&[&[4, 3]], None), Ok(vec![4, 3]));
    }
}
