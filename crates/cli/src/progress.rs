//! Progress bars on stderr for the events jobs report. One [`Bars`] serves
//! every command; it draws nothing with `--json` (or when stderr is not a
//! terminal, as indicatif decides).

use std::sync::Mutex;

use evident_app::{ProgressEvent, ProgressSink};
use indicatif::{ProgressBar, ProgressStyle};

/// Turns progress events into one progress bar at a time.
pub struct Bars {
    quiet: bool,
    bar: Mutex<Option<ProgressBar>>,
}

impl Bars {
    pub fn new(quiet: bool) -> Bars {
        Bars { quiet, bar: Mutex::new(None) }
    }

    fn start(&self, template: &str) -> ProgressBar {
        let bar = if self.quiet { ProgressBar::hidden() } else { ProgressBar::new(0) };
        bar.set_style(ProgressStyle::with_template(template).expect("the template is valid").progress_chars("=> "));
        if let Some(old) = self.bar.lock().unwrap_or_else(|e| e.into_inner()).replace(bar.clone()) {
            old.finish_and_clear();
        }
        bar
    }

    /// The current bar, or a new one with `template`.
    fn current_or(&self, template: &str) -> ProgressBar {
        let current = self.bar.lock().unwrap_or_else(|e| e.into_inner()).clone();
        current.unwrap_or_else(|| self.start(template))
    }

    fn finish(&self) {
        if let Some(bar) = self.bar.lock().unwrap_or_else(|e| e.into_inner()).take() {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Bars {
    fn drop(&mut self) {
        self.finish();
    }
}

const INGEST: &str = "{prefix} {bar:30} {pos}/{len} documents {elapsed}";
const EMBED: &str = "embedding {bar:40} {pos}/{len} sections ({per_sec}, eta {eta})";
const LOAD: &str = "loading {bar:30} {pos}/{len} tables {elapsed} {msg}";
const SCREEN: &str = "{prefix} [{bar:30}] {pos}/{len} tasks {elapsed_precise} (eta {eta}) {msg}";
const STUDY: &str = "{spinner} {prefix}: {msg} {elapsed_precise}";

impl ProgressSink for Bars {
    fn report(&self, event: ProgressEvent) {
        match event {
            ProgressEvent::IngestFile { name, index, total } => {
                let bar = self.current_or(INGEST);
                bar.set_prefix(format!("[{}/{total}] {name}", index + 1));
                bar.set_position(0);
                bar.set_length(0);
            }
            ProgressEvent::IngestDocuments { done, total } => {
                let bar = self.current_or(INGEST);
                bar.set_length(total as u64);
                bar.set_position(done as u64);
            }
            ProgressEvent::EmbeddingNeeded { sections, patient } => {
                if !self.quiet {
                    let whose = patient.map(|p| format!(" of patient {p}")).unwrap_or_default();
                    eprintln!(
                        "embedding {sections} section(s){whose} first (`evident embed --all` does the whole store)"
                    );
                }
            }
            ProgressEvent::Embedding { done, total } => {
                let bar = if done == 0 { self.start(EMBED) } else { self.current_or(EMBED) };
                bar.set_length(total as u64);
                bar.set_position(done as u64);
            }
            ProgressEvent::EmbeddingFinished | ProgressEvent::ScreeningFinished | ProgressEvent::StudyFinished => {
                self.finish()
            }
            ProgressEvent::StudyStage { label, stage } => {
                let bar = self.current_or(STUDY);
                bar.set_prefix(label);
                bar.set_message(stage);
                bar.enable_steady_tick(std::time::Duration::from_millis(250));
            }
            ProgressEvent::ScreeningStarted { label } => self.start(SCREEN).set_prefix(label),
            ProgressEvent::ScreeningPlanned { total, done } => {
                let bar = self.current_or(SCREEN);
                bar.set_length(total as u64);
                bar.set_position(done as u64);
            }
            ProgressEvent::Augmenting { criterion, of } => {
                self.current_or(SCREEN).set_message(format!("augmenting criterion {criterion}/{of}"))
            }
            ProgressEvent::DatabaseTable { table, done, total } => {
                let bar = if done == 0 { self.start(LOAD) } else { self.current_or(LOAD) };
                bar.set_length(total as u64);
                bar.set_position(done as u64);
                bar.set_message(table);
                if done == total {
                    self.finish();
                }
            }
            ProgressEvent::TaskDone => {
                let bar = self.current_or(SCREEN);
                bar.set_message("");
                bar.inc(1);
            }
        }
    }
}
