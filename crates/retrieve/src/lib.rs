//! Retrieval over sections: BM25, dense and hybrid.
