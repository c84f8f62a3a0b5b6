//! Library half of the provider wrapper binaries.
