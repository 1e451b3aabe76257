//! How jobs report progress: they send [`ProgressEvent`]s to a
//! [`ProgressSink`] and never draw anything themselves. The CLI turns the
//! events into progress bars; a server would turn them into messages to
//! its clients; tests and batch callers pass [`Silent`].

/// Something a long job has just done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProgressEvent {
    /// Ingestion started reading file `index` (0-based) of `total`.
    IngestFile { name: String, index: usize, total: usize },
    /// Ingestion wrote `done` of the file's `total` documents.
    IngestDocuments { done: usize, total: usize },
    /// A search or screening must first embed `sections` sections that have
    /// no vectors yet (of `patient`, when it is one patient's).
    EmbeddingNeeded { sections: usize, patient: Option<String> },
    /// `done` of `total` sections embedded.
    Embedding { done: usize, total: usize },
    /// The embedding pass ended.
    EmbeddingFinished,
    /// A screening (one trial, or one evaluated pair) started; `label`
    /// names it, e.g. `T2DM-EXAMPLE (1/2)`.
    ScreeningStarted { label: String },
    /// The screening has `total` tasks, `done` of them stored by earlier runs.
    ScreeningPlanned { total: usize, done: usize },
    /// MAKAR is augmenting criterion `criterion` of `of`.
    Augmenting { criterion: usize, of: usize },
    /// One more screening task is stored.
    TaskDone,
    /// The screening ended (finished or stopped).
    ScreeningFinished,
    /// A database load finished table `done` (1-based) of `total`,
    /// `table` (e.g. `mimiciv_hosp.labevents`); `done` 0 is the start.
    DatabaseTable { table: String, done: usize, total: usize },
    /// A study run reached `stage` (the agent, the cohort judge, or read
    /// back from its bundle); `label` names the task, its strategy and,
    /// in an evaluation, the run and the task's place, e.g.
    /// `age-baseline-mortality (typed-read, run 1 of 3, task 1 of 5)`.
    StudyStage { label: String, stage: String },
    /// The study run ended (finished, read back, or stopped).
    StudyFinished,
}

/// Receives progress events. Jobs may call it from several threads.
pub trait ProgressSink: Sync {
    fn report(&self, event: ProgressEvent);
}

impl<F: Fn(ProgressEvent) + Sync> ProgressSink for F {
    fn report(&self, event: ProgressEvent) {
        self(event)
    }
}

/// Discards every event.
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl ProgressSink for Silent {
    fn report(&self, _event: ProgressEvent) {}
}

/// Adapts a sink to the ingest crate's progress callbacks.
pub(crate) struct IngestProgress<'a>(pub &'a dyn ProgressSink);

impl evident_ingest::Progress for IngestProgress<'_> {
    fn start_unit(&self, unit: &evident_ingest::Unit, index: usize, total: usize) {
        let name = unit.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        self.0.report(ProgressEvent::IngestFile { name, index, total });
    }
    fn documents_written(&self, done: usize, total: usize) {
        self.0.report(ProgressEvent::IngestDocuments { done, total });
    }
}

/// Adapts a sink to the screening batch's progress callback.
pub(crate) fn screening_event(progress: evident_match::batch::Progress) -> ProgressEvent {
    use evident_match::batch::Progress;
    match progress {
        Progress::Planned { total, done } => ProgressEvent::ScreeningPlanned { total, done },
        Progress::Augmenting { criterion, of } => ProgressEvent::Augmenting { criterion, of },
        Progress::TaskDone => ProgressEvent::TaskDone,
    }
}
