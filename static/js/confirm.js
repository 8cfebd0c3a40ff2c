// A form with data-confirm asks before it is sent: "Cancel this run?" (plain forms; htmx ones use hx-confirm).
// Without JavaScript the form is sent as it is.
document.addEventListener("submit", (event) => {
  const question = event.target.dataset && event.target.dataset.confirm;
  if (question && !window.confirm(question)) event.preventDefault();
});
