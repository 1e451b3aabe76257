//! MAKAR (Multi-Agent Knowledge Augmentation and Reasoning; seed paper 000,
//! section III, Appendix C and Algorithm 1 in C-D) over the `evident_llm`
//! traits. Two modules:
//!
//! - augmentation ([`augment`]): the router self-probes whether a criterion
//!   is detailed enough; if not it picks one of the *enabled* augmentation
//!   agents (self-augment always; retrieval with a [`KnowledgeSource`];
//!   online search with an [`OnlineSearch`] endpoint); a critic accepts or
//!   rejects the augmented criterion in a bounded loop, with feedback kept.
//!   Criteria are not patient data, so this side may use a separate model
//!   (the paper's GPT-Aug); its requests are marked as carrying no patient
//!   text. The result, an [`Augmentation`], is stored per trial and reused
//!   for every patient.
//! - reasoning ([`reason`]): the reasoning agent analyses each concept of the
//!   criterion against the record, the matching agent decides, and the
//!   supervision agent approves or corrects the decision.
//!
//! [`Variant`] selects the whole workflow or one of the paper's ablations,
//! in two flavours. The paper's exact prompts and 0/1 answers ([`paper`]:
//! `makar`, `makar-aug` with the zero-shot prompt C-A on the augmented
//! criteria, `makar-reason`, and C-A alone as `makar-zero-shot`), and
//! Evident's richer workflow described above (`makar-evident`,
//! `makar-evident-aug` with Evident's ICAN matcher, `makar-evident-reason`),
//! whose decisions use Evident's four labels with rationale, cited evidence
//! and confidence. Both use the same polarity as the zero-shot matcher: for
//! an exclusion, MET means the patient has the excluding condition.

pub mod augment;
pub mod knowledge;
pub mod online;
pub mod paper;
pub mod reason;

use std::path::Path;

use evident_llm::{Prompts, RepairPolicy, StructuredModel};
use serde::{Deserialize, Serialize};

pub use augment::{Augmentation, CriticRound, RoundJudge, Route};
pub use evident_store::KnowledgeHit;
pub use knowledge::{IndexReport, KnowledgeSource, LocalKnowledgeBase, Passage};
pub use online::OnlineSearch;
pub use reason::{MakarResult, MakarTrace, Reasoning, ReasoningConcept, SupervisionVerdict};

use crate::criteria::CriteriaSet;
use crate::zero_shot::MATCH_PROMPTS;

/// MAKAR's templates (Appendix C, adapted to JSON answers and four labels).
pub const MAKAR_PROMPTS: &[(&str, &str)] = &[
    ("makar_criteria_system.prompt.md", include_str!("../../prompts/makar_criteria_system.prompt.md")),
    ("makar_router.prompt.md", include_str!("../../prompts/makar_router.prompt.md")),
    ("makar_augment.prompt.md", include_str!("../../prompts/makar_augment.prompt.md")),
    ("makar_critic.prompt.md", include_str!("../../prompts/makar_critic.prompt.md")),
    ("makar_system.prompt.md", include_str!("../../prompts/makar_system.prompt.md")),
    ("makar_record.prompt.md", include_str!("../../prompts/makar_record.prompt.md")),
    ("makar_reasoning.prompt.md", include_str!("../../prompts/makar_reasoning.prompt.md")),
    ("makar_matching.prompt.md", include_str!("../../prompts/makar_matching.prompt.md")),
    ("makar_supervision.prompt.md", include_str!("../../prompts/makar_supervision.prompt.md")),
];

/// MAKAR's templates, the zero-shot matcher's (MAKAR-Aug uses them) and the
/// model layer's repair prompt, with an optional directory whose files
/// override them by name.
pub fn makar_prompts(override_dir: Option<&Path>) -> Prompts {
    let mut all: Vec<(&'static str, &'static str)> = MAKAR_PROMPTS.to_vec();
    all.extend_from_slice(paper::PAPER_PROMPTS);
    all.extend_from_slice(MATCH_PROMPTS);
    all.extend_from_slice(evident_llm::prompts::BUILTIN_PROMPTS);
    Prompts::new(&all, override_dir)
}

/// The whole workflow or one of the paper's ablations (Table II), either
/// exactly as the paper gives them ([`paper`]: `makar`, `makar-aug`,
/// `makar-reason`, `makar-zero-shot`) or Evident's richer workflow (four
/// labels, rationale, cited evidence, confidence, the router's "detailed
/// enough" exit, a critic with feedback: `makar-evident`,
/// `makar-evident-aug`, `makar-evident-reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    /// Evident's workflow: augmentation, then reasoning, matching and supervision.
    Full,
    /// Evident's MAKAR-Aug: augmentation, then Evident's zero-shot ICAN matching.
    Aug,
    /// Evident's MAKAR-Reason: reasoning, matching and supervision on the original criteria.
    Reason,
    /// The paper's MAKAR (Appendix C-C, Algorithm 1).
    Paper,
    /// The paper's MAKAR-Aug: augmentation, then the zero-shot prompt C-A.
    PaperAug,
    /// The paper's MAKAR-Reason: reasoning, matching and supervision on the original criteria.
    PaperReason,
    /// The paper's zero-shot prompt (C-A) on the original criteria.
    PaperZeroShot,
}

impl Variant {
    pub const ALL: [Variant; 7] = [
        Variant::Paper,
        Variant::PaperAug,
        Variant::PaperReason,
        Variant::PaperZeroShot,
        Variant::Full,
        Variant::Aug,
        Variant::Reason,
    ];

    /// The strategy names of `evident match --strategy`.
    pub fn as_str(self) -> &'static str {
        match self {
            Variant::Paper => "makar",
            Variant::PaperAug => "makar-aug",
            Variant::PaperReason => "makar-reason",
            Variant::PaperZeroShot => "makar-zero-shot",
            Variant::Full => "makar-evident",
            Variant::Aug => "makar-evident-aug",
            Variant::Reason => "makar-evident-reason",
        }
    }

    pub fn parse(text: &str) -> Option<Variant> {
        Variant::ALL.into_iter().find(|v| v.as_str().eq_ignore_ascii_case(text.trim()))
    }

    /// Whether this variant augments criteria (the Reason and zero-shot ones do not).
    pub fn augments(self) -> bool {
        !matches!(self, Variant::Reason | Variant::PaperReason | Variant::PaperZeroShot)
    }

    /// Whether this is one of the paper's exact strategies.
    pub fn paper(self) -> bool {
        matches!(self, Variant::Paper | Variant::PaperAug | Variant::PaperReason | Variant::PaperZeroShot)
    }
}

#[derive(Debug, Clone)]
pub struct MakarConfig {
    pub variant: Variant,
    pub repair: RepairPolicy,
    /// Critic rounds at most per criterion (each round is one augmentation
    /// and one check); at least 1 is used.
    pub max_critic_rounds: u32,
    /// Passages the retrieval agent takes from the knowledge source.
    pub knowledge_top_k: usize,
    /// Results the online search agent takes from the endpoint.
    pub online_top_k: usize,
    /// Answer budgets, in tokens.
    pub max_tokens_router: u32,
    pub max_tokens_augment: u32,
    pub max_tokens_critic: u32,
    pub max_tokens_reasoning: u32,
    pub max_tokens_matching: u32,
    pub max_tokens_supervision: u32,
    /// Worked examples for the paper's matching agent (C-C5) and zero-shot
    /// prompt (C-A); `None`: none. Only [`MakarMatcher::match_criterion_for`]
    /// knows the patient, so only it shows them.
    pub exemplars: Option<crate::exemplars::Exemplars>,
    /// Ask the model for log-probabilities at the 0/1 answer of the paper's
    /// zero-shot prompt and record P(MET) in the trace (Evident's lever,
    /// not the paper's; [`crate::threshold`]). Changes the requests, so it
    /// is part of a run's definition.
    pub probabilities: bool,
}

impl Default for MakarConfig {
    fn default() -> Self {
        MakarConfig {
            variant: Variant::Full,
            repair: RepairPolicy::default(),
            max_critic_rounds: 3,
            knowledge_top_k: 4,
            online_top_k: 4,
            max_tokens_router: 160,
            max_tokens_augment: 700,
            max_tokens_critic: 300,
            max_tokens_reasoning: 900,
            max_tokens_matching: 512,
            max_tokens_supervision: 400,
            exemplars: None,
            probabilities: false,
        }
    }
}

/// The MAKAR workflow for one trial's criteria. Holds no per-patient state:
/// one matcher can serve many threads (`&self` everywhere).
pub struct MakarMatcher<'a> {
    match_model: StructuredModel<'a>,
    augment_model: StructuredModel<'a>,
    knowledge: Option<&'a dyn KnowledgeSource>,
    online: Option<&'a OnlineSearch>,
    prompts: Prompts,
    config: MakarConfig,
    prompt_override_dir: Option<std::path::PathBuf>,
}

impl<'a> MakarMatcher<'a> {
    /// `match_model` sees patient records (reasoning, matching, supervision
    /// and MAKAR-Aug's zero-shot matching); `augment_model` sees only
    /// criteria (router, augmentation agents, critic) and may be the same
    /// model or a stronger remote one. Each model's pipeline failures go to
    /// its own log (a `RecordingModel` records them in its run).
    pub fn new(
        match_model: impl Into<StructuredModel<'a>>,
        augment_model: impl Into<StructuredModel<'a>>,
        config: MakarConfig,
        prompt_override_dir: Option<&Path>,
    ) -> Self {
        MakarMatcher {
            match_model: match_model.into(),
            augment_model: augment_model.into(),
            knowledge: None,
            online: None,
            prompts: makar_prompts(prompt_override_dir),
            config,
            prompt_override_dir: prompt_override_dir.map(Path::to_path_buf),
        }
    }

    /// Enables the retrieval agent over `knowledge`.
    pub fn with_knowledge(mut self, knowledge: &'a dyn KnowledgeSource) -> Self {
        self.knowledge = Some(knowledge);
        self
    }

    /// Enables the online search agent through `online`'s endpoint.
    pub fn with_online_search(mut self, online: &'a OnlineSearch) -> Self {
        self.online = Some(online);
        self
    }

    pub fn config(&self) -> &MakarConfig {
        &self.config
    }

    pub fn prompts(&self) -> &Prompts {
        &self.prompts
    }

    /// The augmentation agents the router may choose from, in the order the
    /// router prompt lists them.
    pub fn enabled_routes(&self) -> Vec<Route> {
        let mut routes = Vec::new();
        if self.knowledge.is_some() {
            routes.push(Route::Retrieval);
        }
        if self.online.is_some() {
            routes.push(Route::OnlineSearch);
        }
        routes.push(Route::SelfAugment);
        routes
    }

    /// A copy of `set` in which every criterion with an augmentation shows
    /// the augmented text when the critic accepted it, and its original text
    /// otherwise (`refined` is set to the augmentation or cleared: MAKAR
    /// starts from the original criterion, as in the paper, so a set's own
    /// refined definition is not mixed in). Criteria without an augmentation
    /// are left as they are. Running the zero-shot matcher on the result is
    /// MAKAR-Aug.
    pub fn apply(&self, set: &CriteriaSet, augmentations: &[Augmentation]) -> CriteriaSet {
        apply_augmentations(set, augmentations)
    }

    /// The key augmentations are stored under for `augmenting_model`: the
    /// model id for Evident's workflow, with " (paper prompts)" appended for
    /// the paper's, so the two augmentations of a criterion never mix.
    pub fn augmentation_key(&self, augmenting_model: &str) -> String {
        if self.config.variant.paper() {
            format!("{augmenting_model} (paper prompts)")
        } else {
            augmenting_model.to_string()
        }
    }
}

/// [`MakarMatcher::apply`] without a matcher.
pub fn apply_augmentations(set: &CriteriaSet, augmentations: &[Augmentation]) -> CriteriaSet {
    let mut out = set.clone();
    for c in &mut out.criteria {
        if let Some(a) = augmentations.iter().find(|a| a.criterion_id == c.id) {
            c.refined = a.accepted_text().map(str::to_string);
        }
    }
    out
}
