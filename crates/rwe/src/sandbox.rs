//! The R sandbox (bubblewrap).
