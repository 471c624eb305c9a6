// What every page uses: the API call, building elements, tables, formats, messages to the user.

export const enc = encodeURIComponent;

export class ApiFailure extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// One call of the console's JSON API; an answer other than 2xx throws ApiFailure with the server's sentence.
export async function api(method, path, body) {
  const init = { method, headers: {} };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let answer;
  try {
    answer = await fetch(path, init);
  } catch (err) {
    throw new ApiFailure(0, `the console does not answer: ${err.message}`);
  }
  let value = null;
  try {
    value = await answer.json();
  } catch (err) {
    throw new ApiFailure(answer.status, `the console answered ${answer.status} without JSON`);
  }
  if (!answer.ok) throw new ApiFailure(answer.status, value.error || `HTTP ${answer.status}`);
  return value;
}

// h("a", {href: "#/x", class: "c"}, "text", child...): an element; null and undefined children are skipped.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

// A table: columns are [heading, row => cell] pairs; a cell may be text, a number or an element.
export function table(columns, rows, attrs = {}) {
  const head = h("tr", {}, columns.map(([title]) => h("th", {}, title)));
  const body = rows.map((row) => h("tr", {}, columns.map(([, cell]) => {
    const value = cell(row);
    return h("td", { class: typeof value === "number" ? "num" : null }, value ?? "");
  })));
  if (!rows.length) body.push(h("tr", {}, h("td", { colspan: columns.length, class: "empty" }, "none")));
  return h("table", attrs, h("thead", {}, head), h("tbody", {}, body));
}

export function section(title, ...children) {
  return h("section", {}, h("h2", {}, title), ...children);
}

export function fmtTime(ms) {
  if (!ms || ms <= 0) return "";
  const d = new Date(ms);
  const pad = (n, w = 2) => String(n).padStart(w, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

export function fmtNum(value, digits = 0) {
  if (value === null || value === undefined) return "";
  return Number(value).toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

// The value of an <input type="datetime-local"> (local time) as epoch milliseconds.
export function localMs(text) {
  return text ? new Date(text).getTime() : null;
}

export function toLocalInput(ms) {
  const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60000);
  return d.toISOString().slice(0, 19);
}

export function errorBox(err) {
  return h("div", { class: "error", role: "alert" }, err.message || String(err));
}

let toastTimer = null;
export function toast(text, kind = "ok") {
  const box = document.getElementById("toast");
  box.textContent = text;
  box.className = kind;
  box.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { box.hidden = true; }, 6000);
}

// A form whose submit runs `action(values)`; its button is disabled while it runs, a failure shows in the form.
export function form(attrs, fields, label, action) {
  const status = h("div", { class: "form-status" });
  const button = h("button", { type: "submit" }, label);
  const el = h("form", attrs, fields, h("div", { class: "actions" }, button), status);
  el.addEventListener("submit", async (event) => {
    event.preventDefault();
    status.replaceChildren();
    button.disabled = true;
    try {
      const values = Object.fromEntries(new FormData(el).entries());
      for (const box of el.querySelectorAll("input[type=checkbox]")) values[box.name] = box.checked;
      await action(values, status);
    } catch (err) {
      status.replaceChildren(errorBox(err));
    } finally {
      button.disabled = false;
    }
  });
  return el;
}

export function field(label, input) {
  return h("label", { class: "field" }, h("span", {}, label), input);
}

// A modal dialog asking to type `word` before `confirmLabel` is enabled; resolves true when confirmed.
export function confirmTyped(message, word, confirmLabel) {
  return new Promise((resolve) => {
    const input = h("input", { name: "confirm", autocomplete: "off", placeholder: word, "aria-label": "confirmation" });
    const ok = h("button", { type: "button", class: "danger", disabled: true }, confirmLabel);
    const cancel = h("button", { type: "button" }, "Cancel");
    const dialog = h("div", { class: "dialog", role: "dialog", "aria-modal": "true" },
      h("div", { class: "dialog-box" }, h("p", {}, message),
        h("p", {}, "Type ", h("code", {}, word), " to confirm."), input, h("div", { class: "actions" }, cancel, ok)));
    const close = (answer) => { dialog.remove(); resolve(answer); };
    input.addEventListener("input", () => { ok.disabled = input.value !== word; });
    ok.addEventListener("click", () => close(true));
    cancel.addEventListener("click", () => close(false));
    document.body.append(dialog);
    input.focus();
  });
}

export function link(href, text) {
  return h("a", { href }, text);
}

export function badge(text, kind = "") {
  return h("span", { class: `badge ${kind}` }, text);
}
