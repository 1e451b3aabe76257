// The review UI's only script (served as a file: the Content-Security-Policy
// forbids inline script). On a document page it scrolls to the first cited
// sentence; every page works without it.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const first = document.querySelector("#document mark.cited");
  if (first) first.scrollIntoView({ block: "center" });
});
