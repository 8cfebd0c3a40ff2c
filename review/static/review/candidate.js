/*
 * The candidate page. A refusal shown in the decision card ([data-stale-on-change], e.g. "cannot accept: …") is about
 * the candidate as it was when refused: once it changes (an edit, a claim: "review-changed"; a sanity check that
 * finished: "job-finished"), the accept state above says where it stands and the refusal goes.
 */
(function () {
  "use strict";

  function dropStale() {
    document.querySelectorAll("[data-stale-on-change]").forEach((element) => element.remove());
  }

  document.body.addEventListener("review-changed", dropStale);
  document.body.addEventListener("job-finished", dropStale);
})();
