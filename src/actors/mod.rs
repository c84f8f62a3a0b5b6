//! The ractor supervision tree that executes `run`.
