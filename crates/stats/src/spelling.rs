//! The text spellings of the option enums ([`Ties`](crate::survival::Ties),
//! [`ConfType`](crate::survival::ConfType),
//! [`MatchOrder`](crate::propensity::MatchOrder),
//! [`Estimand`](crate::propensity::Estimand),
//! [`OutcomeModel`](crate::propensity::OutcomeModel)): each parses from its
//! spelling (`FromStr`) and prints as it (`Display`), so that a front end can
//! take options straight into the library's types without a mirror enum.

/// A word that is not one of an option's spellings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {option} `{given}`; expected one of: {}", expected.join(", "))]
pub struct UnknownSpelling {
    pub option: &'static str,
    pub given: String,
    pub expected: Vec<&'static str>,
}

/// An option enum with one fixed spelling per value.
pub trait Spelled: Sized + Copy + PartialEq + 'static {
    /// What the option is, for messages (`ties method`).
    const OPTION: &'static str;
    /// Every value with its spelling, in the order a help text lists them.
    const SPELLINGS: &'static [(&'static str, Self)];

    /// The spelling of this value.
    fn spelling(self) -> &'static str {
        Self::SPELLINGS.iter().find(|(_, v)| *v == self).map(|(s, _)| *s).expect("every value has a spelling")
    }

    /// The value spelled `text` (exactly, case-sensitive).
    fn from_spelling(text: &str) -> Result<Self, UnknownSpelling> {
        Self::SPELLINGS.iter().find(|(s, _)| *s == text).map(|(_, v)| *v).ok_or_else(|| UnknownSpelling {
            option: Self::OPTION,
            given: text.to_string(),
            expected: Self::SPELLINGS.iter().map(|(s, _)| *s).collect(),
        })
    }
}

/// Implements [`Spelled`], `FromStr` and `Display` for an option enum.
macro_rules! spelled {
    ($ty:ty, $option:literal, [$($spelling:literal => $value:expr),+ $(,)?]) => {
        impl $crate::spelling::Spelled for $ty {
            const OPTION: &'static str = $option;
            const SPELLINGS: &'static [(&'static str, Self)] = &[$(($spelling, $value)),+];
        }

        impl std::str::FromStr for $ty {
            type Err = $crate::spelling::UnknownSpelling;

            fn from_str(text: &str) -> std::result::Result<Self, Self::Err> {
                <$ty as $crate::spelling::Spelled>::from_spelling(text)
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str($crate::spelling::Spelled::spelling(*self))
            }
        }
    };
}
pub(crate) use spelled;

#[cfg(test)]
mod tests {
    use super::Spelled;
    use crate::propensity::{Estimand, MatchOrder, OutcomeModel};
    use crate::survival::{ConfType, Ties};

    #[test]
    fn every_spelling_parses_back_to_its_value_and_prints_as_itself() {
        fn check<T: Spelled + std::str::FromStr + std::fmt::Display + std::fmt::Debug>(expected: &[&str]) {
            let spellings: Vec<&str> = T::SPELLINGS.iter().map(|(s, _)| *s).collect();
            assert_eq!(spellings, expected);
            for (text, value) in T::SPELLINGS {
                assert!(text.parse::<T>().ok() == Some(*value), "{text}");
                assert_eq!(value.to_string(), *text);
            }
        }
        check::<Ties>(&["efron", "breslow"]);
        check::<ConfType>(&["log", "log-log"]);
        check::<MatchOrder>(&["largest", "smallest", "data"]);
        check::<Estimand>(&["ate", "att"]);
        check::<OutcomeModel>(&["logistic", "linear"]);
    }

    #[test]
    fn an_unknown_spelling_lists_the_known_ones() {
        let e = "Efron".parse::<Ties>().unwrap_err();
        assert_eq!(e.to_string(), "unknown ties method `Efron`; expected one of: efron, breslow");
    }
}
