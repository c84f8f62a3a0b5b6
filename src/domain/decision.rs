//! Deciding an attempt's outcome from what happened (SPEC §8 precedence).
