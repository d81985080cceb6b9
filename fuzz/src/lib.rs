//! The fuzz targets of the agent's parsers and decoders (`targets`), shared by the libFuzzer
//! binaries and the workspace's corpus replay.

pub mod targets;

pub use targets::{field, instant, text};
