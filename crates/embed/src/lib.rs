//! The all-MiniLM-L6-v2 sentence embedder (candle BERT + tokenizers).
