//! The model layer. Workflows talk to models only through the traits here;
//! providers translate the canonical request for one kind of backend.

mod embed;

pub use embed::{EmbedError, Embedder};
