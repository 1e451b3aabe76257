//! What model calls cost: a [`Price`] per million prompt and completion
//! tokens, and the `[llm.prices]` table that maps a model to its price.
//! The recorder (crate `evident-recorder`) multiplies it out per call.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Prices in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub prompt_usd_per_million: f64,
    pub completion_usd_per_million: f64,
}

impl Price {
    pub fn cost_usd(&self, prompt_tokens: u32, completion_tokens: u32) -> f64 {
        (prompt_tokens as f64 * self.prompt_usd_per_million
            + completion_tokens as f64 * self.completion_usd_per_million)
            / 1_000_000.0
    }
}

/// Model id (or configured name) → price.
pub type PriceTable = BTreeMap<String, Price>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_is_tokens_times_price_per_million() {
        let price = Price { prompt_usd_per_million: 2.5, completion_usd_per_million: 10.0 };
        // 2000 * 2.5 / 1e6 + 300 * 10 / 1e6 = 0.005 + 0.003
        assert!((price.cost_usd(2000, 300) - 0.008).abs() < 1e-15);
    }
}
