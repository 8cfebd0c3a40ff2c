// A message that announces started work ("Started batch #3 …") names that work in data-started ("batch-3"); the
// page part that shows the work says data-finished="batch-3" once it has finished. The message goes then: on load
// when the work was done before the page came, or after the htmx swap that shows it finished.
function dropFinishedAnnouncements() {
  document.querySelectorAll("[data-started]").forEach((announcement) => {
    const key = announcement.dataset.started;
    if (document.querySelector(`[data-finished="${CSS.escape(key)}"]`)) announcement.remove();
  });
  document.querySelectorAll("ul.messages:not(:has(li))").forEach((list) => list.remove());
}
document.addEventListener("DOMContentLoaded", dropFinishedAnnouncements);
document.addEventListener("htmx:afterSettle", dropFinishedAnnouncements);
