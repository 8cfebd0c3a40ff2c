/*
 * The code editor of the review pages: every textarea.code-editor becomes a CodeMirror 6 editor (the vendored
 * bundle, window.CM: line numbers, find and replace with Ctrl+F, Python and JSON modes). The textarea stays in
 * the form, out of sight and kept in step with the editor both ways, so forms post as they did; without JavaScript
 * it is the editor.
 *
 *   data-path       the file's path: its mode (.py, .json), and .py files get their syntax checked
 *   data-field      the part (reward, input, solution…): a syntax error disables Save except for input files,
 *                   which may be broken on purpose (a task about fixing them)
 *   data-highlight  "3,4": lines to highlight and scroll to (a check's lines in the checker)
 *
 * Python syntax is checked on the server (#candidate-page[data-syntax-url], ast.parse's verdict with the line) as the
 * text changes; the error shows under the editor, its line is marked, and the form's submit buttons are disabled
 * while the last check failed. "Save all" (#save-all) saves every open editor of the page as one revision. Keys
 * (outside fields): g runs the checker on the scratch workspace, d re-diagnoses: they click [data-key=g|d].
 */
(function () {
  "use strict";
  if (!window.CM) return; // the bundle did not load: the plain textareas do the work

  const { EditorView, basicSetup, EditorState, StateEffect, StateField, Decoration, keymap, indentWithTab } = CM;
  const setMarks = StateEffect.define();
  const marks = StateField.define({
    create: () => Decoration.none,
    update(value, tr) {
      value = value.map(tr.changes);
      for (const effect of tr.effects) if (effect.is(setMarks)) value = effect.value;
      return value;
    },
    provide: (field) => EditorView.decorations.from(field),
  });
  const highlightLine = Decoration.line({ class: "cm-check-line" });
  const errorLine = Decoration.line({ class: "cm-syntax-line" });

  function pathOf(textarea) {
    if (textarea.dataset.path) return textarea.dataset.path;
    const input = textarea.form && textarea.form.querySelector("input[name=path]");
    return input ? input.value : "";
  }

  function fieldOf(textarea) {
    if (textarea.dataset.field) return textarea.dataset.field;
    const input = textarea.form && textarea.form.querySelector("[name=field]");
    return input ? input.value : "";
  }

  function decorate(view, lines, decoration) {
    const ranges = [];
    for (const n of lines) {
      if (n >= 1 && n <= view.state.doc.lines) ranges.push(decoration.range(view.state.doc.line(n).from));
    }
    return Decoration.set(ranges, true);
  }

  function syntaxUrl() {
    const page = document.getElementById("candidate-page");
    return page ? page.dataset.syntaxUrl : "";
  }

  function csrf(form) {
    const input = (form || document).querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function enhance(textarea) {
    if (textarea.dataset.cm || textarea.closest("[data-no-cm]")) return;
    textarea.dataset.cm = "1";
    // Someone may already be typing in the plain textarea (the bundle runs after the swap): the editor takes over
    // their focus and selection, so what they type next lands where they meant it.
    const focused = document.activeElement === textarea;
    const selection = { anchor: textarea.selectionStart || 0, head: textarea.selectionEnd || 0 };
    const path = pathOf(textarea);
    const extensions = [basicSetup, marks, keymap.of([indentWithTab]), EditorView.lineWrapping];
    if (/\.py$/.test(path)) extensions.push(CM.python());
    else if (/\.json$/.test(path) || fieldOf(textarea) === "rubric") extensions.push(CM.json());
    let timer = null;
    const status = document.createElement("p");
    status.className = "syntax-status";
    status.setAttribute("aria-live", "polite");
    extensions.push(
      keymap.of([
        {
          key: "Mod-Enter",
          run: () => {
            if (textarea.form) textarea.form.requestSubmit();
            return true;
          },
        },
      ]),
      EditorView.updateListener.of((update) => {
        if (!update.docChanged) return;
        textarea.value = update.state.doc.toString();
        textarea.dispatchEvent(new Event("input", { bubbles: true }));
        clearTimeout(timer);
        timer = setTimeout(check, 350);
      }),
    );
    const view = new EditorView({
      state: EditorState.create({ doc: textarea.value, extensions }),
    });
    view.dom.classList.add("cm-code");
    view.dom.dataset.testid = "code-editor";
    textarea.insertAdjacentElement("afterend", view.dom);
    view.dom.insertAdjacentElement("afterend", status);
    // The textarea stays in the form, out of sight but not display:none: forms post it, and whatever fills it
    // (a script, a browser extension, a test) reaches the editor through its input event.
    textarea.classList.add("cm-source");
    textarea.tabIndex = -1;
    textarea.setAttribute("aria-hidden", "true");
    textarea.addEventListener("input", () => {
      if (textarea.value !== view.state.doc.toString()) {
        view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: textarea.value } });
      }
    });
    textarea.cmView = view;
    view.dom.cmTextarea = textarea;
    if (focused) {
      const length = view.state.doc.length;
      view.dispatch({ selection: { anchor: Math.min(selection.anchor, length), head: Math.min(selection.head, length) } });
      view.focus();
    } else if (textarea.autofocus) view.focus();

    let checked = 0;
    function check() {
      const url = syntaxUrl();
      if (!/\.py$/.test(path) || !url) return;
      const body = new URLSearchParams({ path, content: view.state.doc.toString() });
      const mine = ++checked;
      fetch(url, {
        method: "POST",
        body,
        headers: { "X-CSRFToken": csrf(textarea.form), "X-Requested-With": "fetch" },
        credentials: "same-origin",
      })
        .then((r) => r.json())
        .then((verdict) => {
          if (mine !== checked) return; // a later check is on its way
          const blocks = fieldOf(textarea) !== "input";
          const buttons = textarea.form ? textarea.form.querySelectorAll("button[type=submit]") : [];
          if (verdict.ok) {
            status.textContent = "";
            status.className = "syntax-status";
            delete textarea.dataset.syntaxError;
            view.dispatch({ effects: setMarks.of(decorate(view, highlighted(), highlightLine)) });
            buttons.forEach((b) => {
              if (b.dataset.syntaxDisabled) {
                b.disabled = false;
                delete b.dataset.syntaxDisabled;
              }
            });
          } else {
            status.textContent =
              "Python syntax error, line " + verdict.line + ", column " + verdict.column + ": " + verdict.message +
              (blocks ? " (fix it to save)" : " (an input file: you may still save it)");
            status.className = "syntax-status error";
            status.dataset.testid = "syntax-error";
            textarea.dataset.syntaxError = verdict.line;
            view.dispatch({ effects: setMarks.of(decorate(view, [verdict.line], errorLine)) });
            if (blocks) {
              buttons.forEach((b) => {
                if (!b.disabled) {
                  b.disabled = true;
                  b.dataset.syntaxDisabled = "1";
                }
              });
            }
          }
          updateSaveAll();
        })
        .catch(() => {
          status.textContent = "The syntax could not be checked (the server did not answer); saving still checks it.";
          status.className = "syntax-status muted";
        });
    }

    function highlighted() {
      return (textarea.dataset.highlight || "")
        .split(",")
        .map((n) => parseInt(n, 10))
        .filter((n) => n > 0);
    }

    const lines = highlighted();
    if (lines.length) {
      view.dispatch({ effects: setMarks.of(decorate(view, lines, highlightLine)) });
      const line = view.state.doc.line(Math.min(lines[0], view.state.doc.lines));
      view.dispatch({ selection: { anchor: line.from }, effects: EditorView.scrollIntoView(line.from, { y: "center" }) });
      view.dom.scrollIntoView({ block: "center" });
      view.focus();
    }
    check();
  }

  function enhanceAll(root) {
    (root || document).querySelectorAll("textarea.code-editor").forEach(enhance);
    updateSaveAll();
  }

  // --- Save all: every open editor of the task's parts as one revision ------------------------------------------
  function openEditors() {
    return Array.from(document.querySelectorAll(".unit.is-editing form.editor")).filter((form) =>
      form.querySelector("textarea[name=content]"),
    );
  }

  function updateSaveAll() {
    const bar = document.getElementById("save-all");
    if (!bar) return;
    const forms = openEditors();
    bar.hidden = forms.length < 2;
    const count = bar.querySelector("[data-count]");
    if (count) count.textContent = String(forms.length);
    const button = bar.querySelector("button");
    const broken = forms.some((f) => {
      const t = f.querySelector("textarea[name=content]");
      return t.dataset.syntaxError && fieldOf(t) !== "input";
    });
    if (button) {
      button.disabled = broken;
      button.title = broken ? "A Python file has a syntax error" : "";
    }
  }

  function saveAll() {
    const bar = document.getElementById("save-all");
    const forms = openEditors();
    if (!bar || forms.length === 0) return;
    const values = { field: [], path: [], content: [], csrfmiddlewaretoken: csrf(forms[0]) };
    let base = Infinity;
    for (const form of forms) {
      values.field.push(form.querySelector("[name=field]").value);
      values.path.push(form.querySelector("[name=path]").value);
      values.content.push(form.querySelector("textarea[name=content]").value);
      base = Math.min(base, parseInt(form.querySelector("[name=base_revision]").value, 10));
    }
    values.base_revision = String(base);
    const reason = bar.querySelector("input[name=reason]");
    if (reason) values.reason = reason.value;
    htmx.ajax("POST", bar.dataset.url, { values, target: "#save-all-status", swap: "innerHTML" });
  }

  document.addEventListener("click", (event) => {
    const button = event.target.closest && event.target.closest("#save-all button[data-save-all]");
    if (button) {
      event.preventDefault();
      saveAll();
    }
  });

  // --- keys ---------------------------------------------------------------------------------------------------
  function typing(el) {
    if (!(el instanceof HTMLElement)) return false;
    if (el.tagName === "INPUT") return !["checkbox", "radio"].includes(el.type);
    return el.isContentEditable || /^(TEXTAREA|SELECT)$/.test(el.tagName);
  }

  document.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || event.isComposing || event.ctrlKey || event.altKey || event.metaKey) return;
    if (typing(event.target) || document.querySelector("dialog[open]")) return;
    if (event.key !== "g" && event.key !== "d") return;
    const target = document.querySelector('[data-key="' + event.key + '"]:not([disabled])');
    if (target) {
      target.click();
      event.preventDefault();
    }
  });

  document.addEventListener("DOMContentLoaded", () => enhanceAll(document));
  if (document.readyState !== "loading") enhanceAll(document);
  document.addEventListener("htmx:load", (event) => enhanceAll(event.target));
  document.addEventListener("htmx:afterSettle", () => updateSaveAll());
})();
