// The review UI's only script (served as a file: the Content-Security-Policy
// forbids inline script). On a document page it scrolls to the first cited
// sentence; on a job's page it follows the job's server-sent events and
// reloads the page when the job is over. Every page works without it.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const first = document.querySelector("#document mark.cited");
  if (first) first.scrollIntoView({ block: "center" });

  const job = document.querySelector("#job[data-job]");
  if (job && (job.dataset.state === "queued" || job.dataset.state === "running") && window.EventSource) {
    const source = new EventSource("/api/jobs/" + encodeURIComponent(job.dataset.job) + "/events");
    const show = (e) => {
      const j = JSON.parse(e.data);
      const bar = document.getElementById("job-progress");
      if (bar && j.progress_total) { bar.max = Math.max(j.progress_total, 1); bar.value = j.progress_done; }
      const message = document.getElementById("job-message");
      if (message) message.textContent = j.message;
      const state = document.getElementById("job-state");
      if (state) { state.textContent = j.state; state.className = "state " + j.state; }
      return j;
    };
    source.addEventListener("progress", show);
    source.addEventListener("end", (e) => { show(e); source.close(); window.location.reload(); });
  }
});
