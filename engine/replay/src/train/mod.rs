//! Training: optimisers, checkpoints, and the loop of `engine train` over a
//! data set's mini-batches (forward and backward by any executor through
//! [`crate::session::Session::train`]).

pub mod checkpoint;
pub mod optim;
pub mod run;
