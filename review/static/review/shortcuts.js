/*
 * Keyboard shortcuts of the review pages. A page opts in with
 *   <script src="{% static 'review/shortcuts.js' %}" defer></script>
 * and marks up what the keys act on:
 *
 *   [data-shortcut-list]            a list; its [data-shortcut-item] elements (with a data-id) are what j/k select
 *   [data-shortcut-open]            inside an item: the link Enter or o follows
 *   [data-key="a"|"f"|"r"|"x"]      the control a, f, r or x clicks: the first inside the selected item, or when
 *                                   the item has none (or nothing is selected), the first on the page outside any
 *                                   item (x: the row's checkbox, ticked for a bulk decision)
 *   [data-key="n"]                  "Next": the candidate the routing rule offers (review/team_next_form.html)
 *   dialog#shortcut-help            the help that ? shows and hides (Escape closes it)
 *
 * The selection is the class "selected" plus aria-selected="true", kept across htmx swaps by data-id. Keys do
 * nothing while focus is in a field, with Ctrl, Alt or Meta held, or while another dialog is open (it has the
 * keyboard). Clicking inside an item selects it too.
 */
(function () {
  "use strict";

  const ITEMS = "[data-shortcut-list] [data-shortcut-item]";
  const ACTIONS = new Set(["a", "f", "r", "x", "n"]);
  let selectedId = null;

  function items() {
    return Array.from(document.querySelectorAll(ITEMS));
  }

  function selected() {
    return document.querySelector(ITEMS + ".selected");
  }

  function mark(item) {
    for (const old of document.querySelectorAll("[data-shortcut-item].selected")) {
      old.classList.remove("selected");
      old.removeAttribute("aria-selected");
    }
    if (item) {
      item.classList.add("selected");
      item.setAttribute("aria-selected", "true");
    }
  }

  function select(item, scroll) {
    mark(item);
    selectedId = item ? item.dataset.id || null : null;
    if (item && scroll) item.scrollIntoView({ block: "nearest" });
  }

  function move(step) {
    const all = items();
    if (!all.length) return;
    const index = all.indexOf(selected());
    const next = index < 0 ? 0 : Math.min(all.length - 1, Math.max(0, index + step));
    select(all[next], true);
  }

  function open() {
    const item = selected();
    if (!item) return;
    const link = item.matches("[data-shortcut-open]") ? item : item.querySelector("[data-shortcut-open]");
    if (link) link.click();
  }

  function act(key) {
    const selector = '[data-key="' + key + '"]';
    const item = selected();
    const target =
      (item && item.querySelector(selector)) ||
      Array.from(document.querySelectorAll(selector)).find((el) => !el.closest("[data-shortcut-item]"));
    if (target) target.click();
  }

  function helpDialog() {
    return document.getElementById("shortcut-help");
  }

  function toggleHelp() {
    const help = helpDialog();
    if (!help) return;
    if (help.open) help.close();
    else help.showModal();
  }

  function typing(el) {
    if (!(el instanceof HTMLElement)) return false;
    if (el.tagName === "INPUT") return !["checkbox", "radio"].includes(el.type); // a ticked box takes no keys
    return el.isContentEditable || /^(TEXTAREA|SELECT)$/.test(el.tagName);
  }

  function otherDialogOpen() {
    return Array.from(document.querySelectorAll("dialog[open]")).some((d) => d !== helpDialog());
  }

  document.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || event.isComposing || event.ctrlKey || event.altKey || event.metaKey) return;
    if (typing(event.target)) return;
    const help = helpDialog();
    if (event.key === "Escape") {
      if (help && help.open) {
        help.close();
        event.preventDefault();
      }
      return;
    }
    if (otherDialogOpen()) return;
    if (event.key === "?") {
      toggleHelp();
      event.preventDefault();
      return;
    }
    if (help && help.open) return;
    const key = event.key;
    if (key === "j" || key === "k") {
      move(key === "j" ? 1 : -1);
    } else if (key === "o" || key === "Enter") {
      // Enter on a focused link or button is that control's own: leave it alone.
      if (key === "Enter" && event.target.closest && event.target.closest("a, button, summary")) return;
      open();
    } else if (ACTIONS.has(key)) {
      act(key);
    } else {
      return;
    }
    event.preventDefault();
  });

  document.addEventListener("click", (event) => {
    const item = event.target.closest && event.target.closest(ITEMS);
    if (item) select(item, false);
  });

  // A swapped list (filters, paging) or row (a claim, a decision) comes back without the mark: put it back once
  // htmx has settled, since settling gives a swapped element of the same id the server's attributes again.
  document.addEventListener("htmx:afterSettle", () => {
    if (!selectedId) return;
    const item = items().find((el) => el.dataset.id === selectedId);
    if (item && !item.classList.contains("selected")) mark(item);
  });
})();
