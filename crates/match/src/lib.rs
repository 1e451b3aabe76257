//! Trial eligibility screening. [`criteria`] holds the criteria-set format
//! and its validation; [`plain`] and [`ctgov`] read eligibility text and
//! ClinicalTrials.gov studies into it ([`forms`] tells the forms apart);
//! [`checks`] are predicates over the structured record that decide the
//! criteria they are attached to, without a model; [`decision`] holds the labels
//! (MET / NOT MET / NOT ENOUGH INFORMATION / NOT APPLICABLE, shown in
//! TrialGPT's wording), note-level pooling, trial-level eligibility and
//! TrialGPT's ranking score; [`zero_shot`] is Wornow et al.'s matcher with
//! the ACAN/ACIN/ICAN/ICIN strategies over the `evident_llm` traits;
//! [`makar`] is the MAKAR multi-agent workflow (router, augmentation,
//! critic, reasoning, matching, supervision); [`batch`] runs either over
//! many patients with every decision stored as it is made (resumable), and
//! [`report`] turns a stored run into JSON, CSV and HTML;
//! [`label_correction`] reads a fitted label correction table and applies
//! it to the model's decisions; [`threshold`] reads a fitted threshold on
//! P(MET) and decides the paper's 0/1 answers by it.

pub mod batch;
pub mod checks;
pub mod criteria;
pub mod ctgov;
pub mod decision;
pub mod exemplars;
pub mod forms;
pub mod label_correction;
pub mod makar;
pub mod plain;
pub mod report;
pub mod threshold;
pub mod zero_shot;

pub use criteria::{CriteriaError, CriteriaSet, Criterion, CriterionType, Pooling, Structured};
pub use ctgov::criteria_from_ctgov_json;
pub use decision::{
    count_labels, matching_score, pool, rank, trial_verdict, Assessment, Confidence, CriterionResult, Decision,
    DecisionFailure, Determination, Eligibility, LabelCounts, SentenceRef, TrialVerdict,
};
pub use forms::{read_criteria, CriteriaForm, TrialNames};
pub use plain::{split_criteria_text, SplitCriteria};
