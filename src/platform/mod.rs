//! Thin I/O layer shared by commands and actors.
